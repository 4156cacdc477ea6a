/* coll_all_to_allv: the per-peer counts and displacements are checked (lengths, NULL
 * buffers, overlap) and copied at the call, then the call takes the common path
 * (prepare.c); the counts' agreement with the senders' is checked by the executor
 * (exec/exec_alltoallv.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/error.h"

/* The arguments of a call, before anything is copied; *extent_* as sched_vcounts_extent. */
static coll_status_t check_layout(const coll_comm_t *comm, const char *what, const void *sendbuf,
                                  const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                  const size_t *recvcounts, const size_t *rdispls,
                                  coll_dtype_t dtype, const size_t *v) {
  int rank = comm->base.rank, n = comm->base.nranks;
  const char *null_arg = sendcounts == NULL   ? "sendcounts"
                         : sdispls == NULL    ? "sdispls"
                         : recvcounts == NULL ? "recvcounts"
                         : rdispls == NULL    ? "rdispls"
                                              : NULL;
  if (null_arg != NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: %s is NULL (it needs %d entries)",
                      rank, what, null_arg, n);
  size_t esz = coll_dtype_size(dtype);
  if (esz == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: unknown dtype %d", rank, what,
                      (int)dtype);
  size_t in_count, out_count;
  if (!sched_vcounts_extent(v, n, &in_count, &out_count) || in_count > SIZE_MAX / 4 / esz ||
      out_count > SIZE_MAX / 4 / esz)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: a count plus its displacement overflows the size of %s", rank,
                      what, coll_dtype_name(dtype));
  if ((in_count > 0 && sendbuf == NULL) || (out_count > 0 && recvbuf == NULL))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: %s is NULL with %zu elements to %s",
                      rank, what, in_count > 0 && sendbuf == NULL ? "sendbuf" : "recvbuf",
                      in_count > 0 && sendbuf == NULL ? in_count : out_count,
                      in_count > 0 && sendbuf == NULL ? "send" : "receive");
  uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;
  if (in_count > 0 && out_count > 0 && s < r + out_count * esz && r < s + in_count * esz)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: sendbuf (%zu elements used) and recvbuf (%zu) overlap; "
                      "all_to_allv has no in-place form",
                      rank, what, in_count, out_count);
  return COLL_OK;
}

static coll_status_t all_to_allv(const char *what, const void *sendbuf, const size_t *sendcounts,
                                 const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                 const size_t *rdispls, coll_dtype_t dtype, coll_comm_t *comm,
                                 coll_request_t **request, bool async) {
  if (async && request != NULL) *request = NULL;
  coll_status_t st = comm_check(comm, what);
  if (st == COLL_OK) st = base_check_usable(&comm->base, what);
  if (st != COLL_OK) return st;
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "rank %d: %s: all_to_allv is not allowed inside a group (call it outside)",
                      comm->base.rank, what);
  int n = comm->base.nranks;
  size_t *v = malloc(4 * (size_t)n * sizeof *v);
  if (v == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "rank %d: %s: out of memory for %d counts",
                      comm->base.rank, what, n);
  const size_t *parts[4] = {
      [SCHED_V_SENDCOUNTS] = sendcounts,
      [SCHED_V_SDISPLS] = sdispls,
      [SCHED_V_RECVCOUNTS] = recvcounts,
      [SCHED_V_RDISPLS] = rdispls,
  };
  for (int k = 0; k < 4; k++)
    if (parts[k] != NULL) memcpy(v + (size_t)k * (size_t)n, parts[k], (size_t)n * sizeof *v);
  st = check_layout(comm, what, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype,
                    v);
  if (st != COLL_OK) {
    free(v);
    return st;
  }
  coll_call_t call = {.kind = COLL_KIND_ALL_TO_ALLV,
                      .sendbuf = sendbuf,
                      .recvbuf = recvbuf,
                      .count = (size_t)n,
                      .dtype = dtype,
                      .op = COLL_SUM,
                      .vcounts = v,
                      .owned = async ? v : NULL};
  st = api_run(comm, what, call, request, async);
  /* An accepted _async call's request owns the copy now (core/request.c frees it). */
  if (!async || st != COLL_OK) free(v);
  return st;
}

coll_status_t coll_all_to_allv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               coll_dtype_t dtype, coll_comm_t *comm) {
  return all_to_allv("coll_all_to_allv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                     dtype, comm, NULL, false);
}

coll_status_t coll_all_to_allv_async(const void *sendbuf, const size_t *sendcounts,
                                     const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                     const size_t *rdispls, coll_dtype_t dtype, coll_comm_t *comm,
                                     coll_request_t **request) {
  return all_to_allv("coll_all_to_allv_async", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                     rdispls, dtype, comm, request, true);
}
