/* All-to-all with per-peer counts and displacements (all_to_allv): this rank sends
 * sendcounts[p] elements from INPUT + sdispls[p] to rank p and receives recvcounts[p]
 * elements from rank p at OUTPUT + rdispls[p] (sched_params_t.vcounts, SCHED_V_*).
 *
 * pairwise exchange (COLL_ALGO_RING), as alltoall.c: copy the own block, then in round
 *   k = 1 .. n-1 send to r + k and receive from r - k. A transfer is cut into segments
 *   computed from its own count alone, so sender and receiver cut it alike when their
 *   counts agree (the executor checks that they do before any data moves:
 *   exec/exec_alltoallv.c). Zero counts give no op.
 *   steps: n; bytes sent: the sum of sendcounts[p], p != r. */
#include "algo/algo_internal.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Segment length for one transfer of `count` elements. */
static size_t transfer_segment(const sched_params_t *p, size_t count) {
  sched_params_t one = *p;
  one.count = count;
  return algo_segment_elems(&one);
}

coll_status_t algo_pairwise_alltoallv(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  const size_t *v = p->vcounts;
  size_t own_send = sched_v(v, n, SCHED_V_SENDCOUNTS, r),
         own_recv = sched_v(v, n, SCHED_V_RECVCOUNTS, r);
  coll_status_t st = sched_begin_step(s);
  /* Counts that differ make the call fail (the executor's check); copy what fits. */
  if (st == COLL_OK)
    st = sched_local_copy(s, SCHED_BUF_OUTPUT, sched_v(v, n, SCHED_V_RDISPLS, r), SCHED_BUF_INPUT,
                          sched_v(v, n, SCHED_V_SDISPLS, r),
                          own_send < own_recv ? own_send : own_recv);
  for (int k = 1; k < n && st == COLL_OK; k++) {
    int to = mod(r + k, n), from = mod(r - k, n);
    size_t sc = sched_v(v, n, SCHED_V_SENDCOUNTS, to), sd = sched_v(v, n, SCHED_V_SDISPLS, to);
    size_t rc = sched_v(v, n, SCHED_V_RECVCOUNTS, from), rd = sched_v(v, n, SCHED_V_RDISPLS, from);
    size_t sseg = transfer_segment(p, sc), rseg = transfer_segment(p, rc);
    st = sched_begin_step(s);
    for (size_t so = 0, ro = 0; (so < sc || ro < rc) && st == COLL_OK;) {
      if (so < sc) {
        size_t len = sc - so < sseg ? sc - so : sseg;
        st = sched_send(s, to, SCHED_BUF_INPUT, sd + so, len);
        so += len;
      }
      if (ro < rc && st == COLL_OK) {
        size_t len = rc - ro < rseg ? rc - ro : rseg;
        st = sched_recv_copy(s, from, SCHED_BUF_OUTPUT, rd + ro, len);
        ro += len;
      }
    }
  }
  return st;
}
