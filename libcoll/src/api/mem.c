/* coll_mem_alloc / coll_mem_free: the argument checks and the communicator's state
 * (rule 6 of coll.h) around the windows of onehost/window.c. A shared window's set-up
 * talks to the store, which asynchronous calls may be using on a failure's path, so the
 * request queue is quieted first. */
#include <stdint.h>

#include "api/api.h"
#include "common/error.h"

coll_status_t coll_mem_alloc(coll_comm_t *comm, size_t bytes, void **ptr) {
  if (ptr != NULL) *ptr = NULL;
  coll_status_t st = comm_check(comm, "coll_mem_alloc");
  if (st == COLL_OK) st = base_check_usable(&comm->base, "coll_mem_alloc");
  if (st != COLL_OK) return st;
  if (ptr == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_mem_alloc: ptr is NULL",
                      comm->base.rank);
  if (bytes == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_mem_alloc: bytes is 0",
                      comm->base.rank);
  if (bytes > SIZE_MAX / 2)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_mem_alloc: %zu bytes is too large",
                      comm->base.rank, bytes);
  if (window_shares(&comm->base, comm->arena)) {
    st = progress_quiet(comm, "coll_mem_alloc");
    if (st != COLL_OK) return st;
  }
  st = window_alloc(&comm->windows, &comm->base, comm->arena, bytes, ptr);
  if (st == COLL_OK) coll_error_clear();
  return st;
}

coll_status_t coll_mem_free(coll_comm_t *comm, void *ptr) {
  coll_status_t st = comm_check(comm, "coll_mem_free");
  if (st != COLL_OK) return st;
  /* Rule 6 of coll.h: refused after an abort (destroy releases the windows); a failed
   * communicator still frees, which needs no peer. */
  if (base_aborted(&comm->base)) return base_check_usable(&comm->base, "coll_mem_free");
  if (ptr == NULL) { /* like free(NULL): nothing to do, so nothing to agree on */
    coll_error_clear();
    return COLL_OK;
  }
  st = window_free(comm->windows, &comm->base, ptr);
  if (st == COLL_OK) coll_error_clear();
  return st;
}
