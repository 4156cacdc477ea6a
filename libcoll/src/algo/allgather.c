/* All-gather schedules: INPUT holds this rank's count elements, OUTPUT n blocks of
 * count, block b from rank b. In-place as in NCCL (INPUT is OUTPUT's own block) works:
 * INPUT is only read before anything writes OUTPUT's other blocks.
 *
 * ring (COLL_ALGO_RING): copy INPUT to block r, then n-1 rounds around r -> r+1; in
 *   round s rank r sends block (r - s) and receives block (r - s - 1), each round cut
 *   into segments that are pipelined. bytes sent: (n-1) S; steps: 1 + (n-1) nseg.
 * Bruck (COLL_ALGO_HD): log-step for any n, in SCRATCH (n blocks) rotated so that this
 *   rank's block is first: in round k (dist = 2^k) send the first min(dist, n - dist)
 *   blocks to r - dist and receive as many from r + dist after them; then rotate into
 *   OUTPUT. steps: ceil(log2 n) + 2; bytes sent: (n-1) S. */
#include "algo/algo_internal.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

coll_status_t algo_ring_allgather(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  size_t c = p->count;
  coll_status_t st = sched_begin_step(s);
  if (st == COLL_OK)
    st = sched_local_copy(s, SCHED_BUF_OUTPUT, (size_t)r * c, SCHED_BUF_INPUT, 0, c);
  size_t nseg = algo_div_up(c, algo_segment_elems(p));
  for (int round = 0; round < n - 1 && st == COLL_OK; round++) {
    size_t sb = (size_t)mod(r - round, n) * c, rb = (size_t)mod(r - round - 1, n) * c;
    for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
      size_t off = algo_part_start(c, nseg, j), len = algo_part_len(c, nseg, j);
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, next, SCHED_BUF_OUTPUT, sb + off, len);
      if (st == COLL_OK) st = sched_recv_copy(s, prev, SCHED_BUF_OUTPUT, rb + off, len);
    }
  }
  return st;
}

coll_status_t algo_bruck_allgather(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  size_t c = p->count, seg = algo_segment_elems(p);
  s->scratch_count = (size_t)n * c;
  coll_status_t st = sched_begin_step(s);
  if (st == COLL_OK) st = sched_local_copy(s, SCHED_BUF_SCRATCH, 0, SCHED_BUF_INPUT, 0, c);
  for (int dist = 1; dist < n && st == COLL_OK; dist *= 2) {
    size_t m = (size_t)(dist < n - dist ? dist : n - dist) * c;
    st = sched_begin_step(s);
    for (size_t off = 0; off < m && st == COLL_OK; off += seg) {
      size_t len = m - off < seg ? m - off : seg;
      st = sched_send(s, mod(r - dist, n), SCHED_BUF_SCRATCH, off, len);
      if (st == COLL_OK)
        st = sched_recv_copy(s, mod(r + dist, n), SCHED_BUF_SCRATCH, (size_t)dist * c + off, len);
    }
  }
  /* SCRATCH block i holds rank (r + i) mod n's block. */
  size_t head = (size_t)(n - r) * c;
  if (st == COLL_OK) st = sched_begin_step(s);
  if (st == COLL_OK)
    st = sched_local_copy(s, SCHED_BUF_OUTPUT, (size_t)r * c, SCHED_BUF_SCRATCH, 0, head);
  if (st == COLL_OK && r > 0)
    st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, SCHED_BUF_SCRATCH, head, (size_t)r * c);
  return st;
}
