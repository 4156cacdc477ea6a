/* Tagged point to point's entry points (coll_send_tagged, coll_recv_tagged and their
 * _async forms): argument checks, then the communicator's tagged engine (tagged/tagged.c),
 * which runs outside the request queue. Inside a group a blocking call is posted at once
 * and waited for at the outermost coll_group_end. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "common/error.h"
#include "tagged/tagged.h"

static coll_status_t tagged_call(coll_comm_t *comm, const char *what, bool send, const void *buf,
                                 size_t count, coll_dtype_t dtype, int peer, int tag, int *source,
                                 coll_request_t **request, bool async) {
  char who[API_WHO_MAX];
  size_t bytes = 0;
  coll_status_t st =
      api_check_p2p(comm, what, buf, count, dtype, peer, !send, request, async, who, &bytes);
  if (st != COLL_OK) return st;
  if (tag < 0) return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: tag %d is negative", who, tag);
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
