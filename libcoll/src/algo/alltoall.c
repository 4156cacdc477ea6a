/* All-to-all schedule: block p of INPUT (count elements) goes to rank p, block p of
 * OUTPUT comes from rank p.
 *
 * pairwise exchange (COLL_ALGO_RING): copy the own block, then in round k = 1 .. n-1
 *   send to r + k and receive from r - k, so every rank talks to one peer each way per
 *   round (no incast). Large blocks are cut into segments within the round.
 *   steps: n; bytes sent: (n-1) S. */
#include "algo/algo_internal.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

coll_status_t algo_pairwise_alltoall(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  size_t c = p->count, seg = algo_segment_elems(p);
  coll_status_t st = sched_begin_step(s);
  if (st == COLL_OK)
    st = sched_local_copy(s, SCHED_BUF_OUTPUT, (size_t)r * c, SCHED_BUF_INPUT, (size_t)r * c, c);
  for (int k = 1; k < n && st == COLL_OK; k++) {
    int to = mod(r + k, n), from = mod(r - k, n);
    st = sched_begin_step(s);
    for (size_t off = 0; off < c && st == COLL_OK; off += seg) {
      size_t len = c - off < seg ? c - off : seg;
      st = sched_send(s, to, SCHED_BUF_INPUT, (size_t)to * c + off, len);
      if (st == COLL_OK) st = sched_recv_copy(s, from, SCHED_BUF_OUTPUT, (size_t)from * c + off, len);
    }
  }
  return st;
}
