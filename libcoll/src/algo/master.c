/* Master all-reduce: every rank sends everything to rank 0, rank 0 reduces, then sends
 * the result back to every rank. This is DataParallel's "master GPU" pattern, kept as a
 * teaching baseline: all traffic goes through rank 0.
 *
 *        r1 ---\                    /---> r1
 *        r2 ----> r0 (reduce) ---------> r2
 *        r3 ---/                    \---> r3
 *
 *   per segment j (S cut into nseg segments of <= segment_bytes):
 *     time j*(n-1) + k-1   rank k sends segment j, rank 0 folds it into OUTPUT
 *                          (OUTPUT = INPUT op recv for k = 1, then OUTPUT op recv)
 *     gather done; then at time G + j rank 0 sends segment j to every rank (one step,
 *     n-1 sends), each rank receives it into OUTPUT.
 *   rank 0 receives from one rank at a time: the reduces into one segment must not run
 *   concurrently (rule 1 of schedule.h), and this keeps the schedule in lock-step.
 *
 *   bytes sent: rank 0 (n-1) * S, every other rank S; rank 0's link carries 2 (n-1) S,
 *   which is why this pattern does not scale. Steps: nseg * n on rank 0. */
#include "algo/algo_internal.h"

coll_status_t algo_master_allreduce(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  coll_status_t st = COLL_OK;
  size_t seg = algo_segment_elems(p);
  size_t nseg = algo_div_up(p->count, seg);
  for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
    size_t off = j * seg, len = p->count - off < seg ? p->count - off : seg;
    if (r == 0) {
      for (int k = 1; k < n && st == COLL_OK; k++) {
        st = sched_begin_step(s);
        sched_buf_t src = k == 1 ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT;
        if (st == COLL_OK) st = sched_recv_reduce(s, k, SCHED_BUF_OUTPUT, off, src, off, len);
      }
    } else {
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, 0, SCHED_BUF_INPUT, off, len);
    }
  }
  for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
    size_t off = j * seg, len = p->count - off < seg ? p->count - off : seg;
    st = sched_begin_step(s);
    if (r == 0) {
      for (int k = 1; k < n && st == COLL_OK; k++)
        st = sched_send(s, k, SCHED_BUF_OUTPUT, off, len);
    } else if (st == COLL_OK) {
      st = sched_recv_copy(s, 0, SCHED_BUF_OUTPUT, off, len);
    }
  }
  return st;
}
