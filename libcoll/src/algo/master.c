/* Master all-reduce: every rank sends everything to rank 0, rank 0 reduces, then sends
 * the result back to every rank. This is DataParallel's "master GPU" pattern, kept as a
 * teaching baseline: all traffic goes through rank 0.
 *
 *        r1 ---\                    /---> r1
 *        r2 ----> r0 (reduce) ---------> r2
 *        r3 ---/                    \---> r3
 *
 *   per-step rule (S cut into nseg segments of <= segment_bytes; time slots):
 *     at time j + k - 1  rank k (1..n-1) sends segment j; rank 0 folds it into OUTPUT
 *                        (OUTPUT = INPUT op recv for k = 1, OUTPUT op recv after)
 *     at time j + n - 1  rank 0 sends the finished segment j to every rank (n-1 sends),
 *                        which receive it into OUTPUT
 *   A wavefront: at one time rank 0 folds segment j from rank 1, j-1 from rank 2, ...
 *   so it receives from every rank at once but each segment's folds stay in rank order
 *   (one reduce per segment at a time, rule 1 of schedule.h), and ranks move in
 *   lock-step. The result of a segment goes back while later segments still arrive.
 *
 *   worked table, n = 3, 2 segments:   time 0: r1 -> r0 seg 0
 *                                      time 1: r1 -> r0 seg 1, r2 -> r0 seg 0
 *                                      time 2: r2 -> r0 seg 1, r0 -> r1, r2 seg 0
 *                                      time 3: r0 -> r1, r2 seg 1
 *
 *   bytes sent: rank 0 (n-1) S, every other rank S; rank 0's link carries 2 (n-1) S,
 *   which is why this pattern does not scale. Steps: nseg + n - 1 on rank 0. */
#include "algo/algo_internal.h"

coll_status_t algo_master_allreduce(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  coll_status_t st = COLL_OK;
  if (n == 1) {
    st = sched_begin_step(s);
    if (st == COLL_OK) st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, SCHED_BUF_INPUT, 0, p->count);
    return st;
  }
  size_t seg = algo_segment_elems(p);
  size_t nseg = algo_div_up(p->count, seg);
  algo_plan_t plan = {0};
  for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
    size_t off = j * seg, len = p->count - off < seg ? p->count - off : seg;
    size_t back = j + (size_t)n - 1;
    if (r == 0) {
      for (int k = 1; k < n && st == COLL_OK; k++) {
        sched_buf_t src = k == 1 ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT;
        st = algo_plan_add(&plan, j + (size_t)k - 1,
                           algo_op_recv_reduce(k, SCHED_BUF_OUTPUT, off, src, off, len));
      }
      for (int k = 1; k < n && st == COLL_OK; k++)
        st = algo_plan_add(&plan, back, algo_op_send(k, SCHED_BUF_OUTPUT, off, len));
    } else {
      st = algo_plan_add(&plan, j + (size_t)r - 1, algo_op_send(0, SCHED_BUF_INPUT, off, len));
      if (st == COLL_OK)
        st = algo_plan_add(&plan, back, algo_op_recv_copy(0, SCHED_BUF_OUTPUT, off, len));
    }
  }
  if (st != COLL_OK) {
    algo_plan_free(&plan);
    return st;
  }
  return algo_plan_emit(&plan, s);
}
