/* Tagged point to point's entry points (coll_send_tagged, coll_recv_tagged and their
 * _async forms): argument checks, then the communicator's tagged engine (core/tagged.c),
 * which runs outside the request queue. Inside a group a blocking call is posted at once
 * and waited for at the outermost coll_group_end. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "common/error.h"
#include "core/tagged.h"

enum { WHO_MAX = 96 }; /* "rank 12345: coll_recv_tagged_async" */

static coll_status_t tagged_call(coll_comm_t *comm, const char *what, bool send, const void *buf,
                                 size_t count, coll_dtype_t dtype, int peer, int tag, int *source,
                                 coll_request_t **request, bool async) {
  if (async && request != NULL) *request = NULL;
  coll_status_t st = comm_check(comm, what);
  if (st == COLL_OK) st = base_check_usable(&comm->base, what);
  if (st != COLL_OK) return st;
  char who[WHO_MAX];
  snprintf(who, sizeof who, "rank %d: %s", comm->base.rank, what);
  if (async && request == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: request is NULL", who);
  size_t esz = coll_dtype_size(dtype);
  if (esz == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", who, (int)dtype);
  bool any = !send && peer == COLL_ANY_SOURCE;
  if (!any && (peer < 0 || peer >= comm->base.nranks))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: peer %d is outside [0, %d)%s", who, peer,
                      comm->base.nranks, send ? "" : " and not COLL_ANY_SOURCE");
  if (peer == comm->base.rank)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: peer %d is this rank (no self transfers)",
                      who, peer);
  if (tag < 0) return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: tag %d is negative", who, tag);
  if (count > 0 && buf == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: buf is NULL with count %zu", who, count);
  if (count > (SIZE_MAX / 4) / esz)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: count %zu overflows the size", who, count);
  size_t bytes = count * esz;
  if (bytes > 0) st = cuda_refuse_device(&comm->cuda, who, buf);
  if (st != COLL_OK) return st;
  if (comm->tagged == NULL) /* one rank: every peer was refused above */
    return coll_error(COLL_ERR_INTERNAL, "%s: no tagged point-to-point engine", who);

  coll_request_t *req = NULL;
  if (async) {
    req = calloc(1, sizeof *req);
    if (req == NULL) return coll_error(COLL_ERR_NO_MEMORY, "%s: out of memory for a request", who);
  }
  tagged_op_t *op;
  st = tagged_post(comm->tagged, what, send, (void *)(uintptr_t)buf, bytes, peer, tag, source, &op);
  if (st != COLL_OK) {
    free(req);
    return st;
  }
  if (async) {
    req->comm = comm;
    req->tagged = op;
    *request = req;
    coll_error_clear();
    return COLL_OK;
  }
  if (comm->group_depth > 0) {
    tagged_group_add(comm->tagged, op);
    coll_error_clear();
    return COLL_OK;
  }
  return tagged_wait(comm->tagged, op);
}

coll_status_t coll_send_tagged(const void *buf, size_t count, coll_dtype_t dtype, int peer, int tag,
                               coll_comm_t *comm) {
  return tagged_call(comm, "coll_send_tagged", true, buf, count, dtype, peer, tag, NULL, NULL,
                     false);
}

coll_status_t coll_send_tagged_async(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                     int tag, coll_comm_t *comm, coll_request_t **request) {
  return tagged_call(comm, "coll_send_tagged_async", true, buf, count, dtype, peer, tag, NULL,
                     request, true);
}

coll_status_t coll_recv_tagged(void *buf, size_t count, coll_dtype_t dtype, int peer, int tag,
                               coll_comm_t *comm, int *source) {
  return tagged_call(comm, "coll_recv_tagged", false, buf, count, dtype, peer, tag, source, NULL,
                     false);
}

coll_status_t coll_recv_tagged_async(void *buf, size_t count, coll_dtype_t dtype, int peer, int tag,
                                     coll_comm_t *comm, int *source, coll_request_t **request) {
  return tagged_call(comm, "coll_recv_tagged_async", false, buf, count, dtype, peer, tag, source,
                     request, true);
}
