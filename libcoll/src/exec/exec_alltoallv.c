/* all_to_allv's count check. Each rank knows only its own row of the count matrix (what
 * it sends) and its own column (what it expects), so it cannot see a difference alone.
 * The call therefore runs two schedules under the fingerprint agreement (exec.c):
 *   1. the counts: every rank sends sendcounts[p] to rank p (one uint64 each, as an
 *      all_to_allv of 8 bytes per peer in the call's type); the agreement on this run
 *      catches a rank that called something else;
 *   2. the data: each rank compares what its senders said with its recvcounts and puts
 *      the lowest differing sender, with both counts, in its fingerprint, so the second
 *      agreement fails on every rank with COLL_ERR_MISMATCH naming both ranks. A rank
 *      that found a difference differs from its ring predecessor, so it reads no data
 *      before the agreement tells it to stop (exec.c's receives wait for round 0). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "exec/exec.h"

enum { COUNT_BYTES = sizeof(uint64_t) };

coll_status_t exec_alltoallv_run(exec_t *x, exec_links_t *links, const coll_call_t *call) {
  coll_base_t *base = x->base;
  int n = base->nranks;
  size_t esz = coll_dtype_size(call->dtype), per = COUNT_BYTES / esz; /* elements per count */
  uint64_t *mine = malloc((size_t)n * sizeof *mine), *theirs = calloc((size_t)n, sizeof *theirs);
  size_t *unit = malloc(4 * (size_t)n * sizeof *unit);
  coll_status_t st = COLL_OK;
  if (mine == NULL || theirs == NULL || unit == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "rank %d: all_to_allv: out of memory for %d counts",
                    base->rank, n);
    goto out;
  }
  for (int p = 0; p < n; p++) {
    mine[p] = sched_v(call->vcounts, n, SCHED_V_SENDCOUNTS, p);
    unit[SCHED_V_SENDCOUNTS * n + p] = unit[SCHED_V_RECVCOUNTS * n + p] = per;
    unit[SCHED_V_SDISPLS * n + p] = unit[SCHED_V_RDISPLS * n + p] = (size_t)p * per;
  }
  coll_call_t counts = *call;
  counts.sendbuf = mine;
  counts.recvbuf = theirs;
  counts.vcounts = unit;
  counts.owned = NULL;
  st = exec_run(x, links, &counts);
  if (st != COLL_OK) goto out;
  /* The lowest sender whose count differs from ours (our own too: a local mistake). */
  exec_fp_t *fp = &base->fp_out;
  for (int p = 0; p < n; p++) {
    uint64_t expected = sched_v(call->vcounts, n, SCHED_V_RECVCOUNTS, p);
    if (theirs[p] != expected) {
      fp->counts_bad_to = (uint32_t)base->rank + 1;
      fp->counts_bad_from = p;
      fp->counts_sent = theirs[p];
      fp->counts_expected = expected;
      break;
    }
  }
  st = exec_run(x, links, call);
out:
  free(mine);
  free(theirs);
  free(unit);
  return st;
}

coll_status_t exec_alltoallv_one_rank(const coll_call_t *call) {
  size_t sc = sched_v(call->vcounts, 1, SCHED_V_SENDCOUNTS, 0);
  size_t rc = sched_v(call->vcounts, 1, SCHED_V_RECVCOUNTS, 0);
  if (sc != rc)
    return coll_error(COLL_ERR_MISMATCH,
                      "rank 0: all_to_allv: rank 0 sends %zu to rank 0, which expects %zu", sc, rc);
  size_t esz = coll_dtype_size(call->dtype);
  if (sc > 0)
    memmove((char *)call->recvbuf + sched_v(call->vcounts, 1, SCHED_V_RDISPLS, 0) * esz,
            (const char *)call->sendbuf + sched_v(call->vcounts, 1, SCHED_V_SDISPLS, 0) * esz,
            sc * esz);
  return COLL_OK;
}
