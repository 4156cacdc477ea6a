/* Point to point (coll_send, coll_recv) and groups. A group records calls between
 * coll_group_start and the outermost coll_group_end; the end runs them in order, each run
 * of consecutive sends and receives as one P2P call whose transfers are all posted in
 * one step (exec/exec.c), so a ring of exchanges cannot deadlock the way blocking sends
 * would. Collectives in a group run where they were recorded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "common/error.h"

coll_status_t group_record(coll_comm_t *comm, const prepared_call_t *pc) {
  if (comm->group_n == comm->group_cap) {
    size_t cap = comm->group_cap ? comm->group_cap * 2 : 16;
    prepared_call_t *p = realloc(comm->group_calls, cap * sizeof *p);
    if (p == NULL) return coll_error(COLL_ERR_NO_MEMORY, "group: out of memory for %zu calls", cap);
    comm->group_calls = p;
    comm->group_cap = cap;
  }
  comm->group_calls[comm->group_n++] = *pc;
  return COLL_OK;
}

coll_status_t api_check_p2p(coll_comm_t *comm, const char *what, const void *buf, size_t count,
                            coll_dtype_t dtype, int peer, bool any_source, coll_request_t **request,
                            bool async, char who[API_WHO_MAX], size_t *bytes) {
  if (async && request != NULL) *request = NULL;
  coll_status_t st = comm_check(comm, what);
  if (st == COLL_OK) st = base_check_usable(&comm->base, what);
  if (st != COLL_OK) return st;
  /* Argument errors name the rank and the call (docs/usage.md), like every later error. */
  snprintf(who, API_WHO_MAX, "rank %d: %s", comm->base.rank, what);
  if (async && request == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: request is NULL", who);
  size_t esz = coll_dtype_size(dtype);
  if (esz == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", who, (int)dtype);
  bool any = any_source && peer == COLL_ANY_SOURCE;
  if (!any && (peer < 0 || peer >= comm->base.nranks))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: peer %d is outside [0, %d)%s", who, peer,
                      comm->base.nranks, any_source ? " and not COLL_ANY_SOURCE" : "");
  if (peer == comm->base.rank)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: peer %d is this rank (no self transfers)",
                      who, peer);
  if (count > 0 && buf == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: buf is NULL with count %zu", who, count);
  if (count > (SIZE_MAX / 4) / esz)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: count %zu overflows the size", who, count);
  *bytes = count * esz;
  return *bytes > 0 ? cuda_refuse_device(&comm->cuda, who, buf) : COLL_OK;
}

static coll_status_t p2p(coll_comm_t *comm, const char *what, bool send, const void *buf,
                         size_t count, coll_dtype_t dtype, int peer, coll_request_t **request,
                         bool async) {
  char who[API_WHO_MAX];
  size_t bytes = 0;
  coll_status_t st =
      api_check_p2p(comm, what, buf, count, dtype, peer, false, request, async, who, &bytes);
  if (st != COLL_OK) return st;
  prepared_call_t pc = {
      .call = {.kind = COLL_KIND_P2P,
               .count = bytes,
               .dtype = COLL_UINT8,
               .algo = COLL_ALGO_RING,
               .root = peer,
               .one = {.send = send, .peer = peer, .buf = (void *)(uintptr_t)buf, .bytes = bytes}},
      .where = {.device = -1}};
  if (bytes == 0 && comm->group_depth > 0 && !async) return COLL_OK; /* nothing to pair */
  return api_submit(comm, what, &pc, async ? request : NULL);
}

coll_status_t coll_send(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                        coll_comm_t *comm) {
  return p2p(comm, "coll_send", true, buf, count, dtype, peer, NULL, false);
}

coll_status_t coll_recv(void *buf, size_t count, coll_dtype_t dtype, int peer, coll_comm_t *comm) {
  return p2p(comm, "coll_recv", false, buf, count, dtype, peer, NULL, false);
}

coll_status_t coll_send_async(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                              coll_comm_t *comm, coll_request_t **request) {
  return p2p(comm, "coll_send_async", true, buf, count, dtype, peer, request, true);
}

coll_status_t coll_recv_async(void *buf, size_t count, coll_dtype_t dtype, int peer,
                              coll_comm_t *comm, coll_request_t **request) {
  return p2p(comm, "coll_recv_async", false, buf, count, dtype, peer, request, true);
}

/* Rule 6 of coll.h: after coll_comm_abort a group neither opens nor closes. A failed
 * communicator still opens one; coll_group_end then returns the failure. */
static coll_status_t refuse_if_aborted(coll_comm_t *comm, const char *what) {
  coll_status_t st = comm_check(comm, what);
  if (st == COLL_OK && base_aborted(&comm->base)) st = base_check_usable(&comm->base, what);
  return st;
}

coll_status_t coll_group_start(coll_comm_t *comm) {
  coll_status_t st = refuse_if_aborted(comm, "coll_group_start");
  if (st != COLL_OK) return st;
  comm->group_depth++;
  coll_error_clear();
  return COLL_OK;
}

/* Run the P2P calls [first, end) of the group as one. */
static coll_status_t run_p2p(coll_comm_t *comm, size_t first, size_t end) {
  size_t n = end - first, total = 0;
  coll_p2p_t *ops = malloc(n * sizeof *ops);
  if (ops == NULL) return coll_error(COLL_ERR_NO_MEMORY, "group: out of memory for %zu ops", n);
  for (size_t i = 0; i < n; i++) {
    ops[i] = comm->group_calls[first + i].call.one;
    total += ops[i].bytes;
  }
  prepared_call_t pc = {.call = {.kind = COLL_KIND_P2P,
                                 .count = total,
                                 .dtype = COLL_UINT8,
                                 .algo = COLL_ALGO_RING,
                                 .p2p = ops,
                                 .np2p = n},
                        .where = {.device = -1}};
  coll_status_t st = progress_run_blocking(comm, &pc);
  free(ops);
  return st;
}

coll_status_t coll_group_end(coll_comm_t *comm) {
  coll_status_t st = refuse_if_aborted(comm, "coll_group_end");
  if (st != COLL_OK) return st;
  if (comm->group_depth == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_group_end: no group is open (coll_group_start first)",
                      comm->base.rank);
  if (--comm->group_depth > 0) {
    coll_error_clear();
    return COLL_OK;
  }
  st =
      base_check_usable(&comm->base, "coll_group_end"); /* failed: the recorded calls are dropped */
  size_t i = 0;
  while (i < comm->group_n && st == COLL_OK) {
    if (comm->group_calls[i].call.kind != COLL_KIND_P2P) {
      st = progress_run_blocking(comm, &comm->group_calls[i]);
      i++;
      continue;
    }
    size_t end = i;
    while (end < comm->group_n && comm->group_calls[end].call.kind == COLL_KIND_P2P) end++;
    st = run_p2p(comm, i, end);
    i = end;
  }
  comm->group_n = 0;
  /* Tagged calls of the group were posted when called; they finish here. */
  char first[BASE_MESSAGE_MAX] = "";
  if (st != COLL_OK) snprintf(first, sizeof first, "%s", coll_last_error());
  coll_status_t tagged_st = tagged_group_wait(comm->tagged);
  if (st != COLL_OK)
    coll_error(st, "%s", first);
  else
    st = tagged_st;
  if (st == COLL_OK) coll_error_clear();
  return st;
}
