/* Ring all-reduce: a reduce-scatter then an all-gather around the ring r -> r+1, one
 * chunk per rank, each chunk cut into segments that are pipelined.
 *
 *   vocabulary: the buffer of S bytes is cut into n chunks (one per rank, sizes differ by
 *   at most one element); each chunk into `nseg` segments (<= segment_bytes each).
 *
 *        +-----+  chunk  +-----+
 *        | r0  | ------> | r1  |        step s of the reduce-scatter, rank r:
 *        +-----+         +-----+          send    chunk (r - s)     to   r + 1
 *           ^               |             recv+op chunk (r - s - 1) from r - 1
 *           |               v           step s of the all-gather, rank r:
 *        +-----+         +-----+          send    chunk (r + 1 - s) to   r + 1
 *        | r3  | <------ | r2  |          recv    chunk (r - s)     from r - 1
 *        +-----+         +-----+        (s = 0 .. n-2, chunk numbers mod n)
 *
 *   worked table, n = 3, chunks A B C (numbers = ranks whose data is summed in):
 *     start        r0: A0 B0 C0      r1: A1 B1 C1      r2: A2 B2 C2
 *     RS step 0    r0 gets C2 -> C02 r1 gets A0 -> A01 r2 gets B1 -> B12
 *     RS step 1    r0 gets B12->B012 r1 gets C02->C012 r2 gets A01->A012
 *     (rank r now owns chunk r+1, computed once; the all-gather copies it around)
 *     AG step 0    r0 gets A012      r1 gets B012      r2 gets C012
 *     AG step 1    r0 gets C012      r1 gets A012      r2 gets B012
 *
 *   Each step above becomes nseg schedule steps, one segment each: send one segment,
 *   receive one segment. Segment j of chunk c at step s only needs segment j of step
 *   s-1, so the neighbours keep the pipeline full.
 *
 *   bytes sent per rank: 2 (n-1) / n * S (uneven chunks: within one element per step);
 *   steps: 2 (n-1) * nseg. Reduce: the first received segment is combined with INPUT and
 *   written to OUTPUT (one pass, no copy), later steps read what earlier ones wrote. */
#include "algo/algo_internal.h"

/* Segment j of chunk c of [base, base + count): [*off, *off + *len). */
static void segment(size_t base, size_t count, int n, size_t nseg, int c, size_t j, size_t *off,
                    size_t *len) {
  size_t cstart = algo_part_start(count, (size_t)n, (size_t)c);
  size_t clen = algo_part_len(count, (size_t)n, (size_t)c);
  *off = base + cstart + algo_part_start(clen, nseg, j);
  *len = algo_part_len(clen, nseg, j);
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

size_t algo_ring_nseg(const sched_params_t *p, size_t count, int n) {
  size_t max_chunk = algo_div_up(count, (size_t)n);
  return algo_div_up(max_chunk, algo_segment_elems(p));
}

/* The ring above over positions 0..n-1 of `ring` (rank ring[i] at position i; NULL: rank
 * i), this rank at position pos, on [base, base + count) of the buffers. A rank reads a
 * chunk from `src` the first time it touches it (INPUT for a whole all-reduce; OUTPUT
 * when an earlier phase left partial results there) and writes OUTPUT. */
coll_status_t algo_ring_allreduce_among(sched_t *s, const int *ring, int n, int pos, size_t base,
                                        size_t count, sched_buf_t src, size_t nseg) {
  int next = ring ? ring[mod(pos + 1, n)] : mod(pos + 1, n);
  int prev = ring ? ring[mod(pos - 1, n)] : mod(pos - 1, n);
  coll_status_t st = COLL_OK;
  /* Reduce-scatter. In step 0 a rank sends its own data (src); afterwards it forwards
   * the partial result it wrote into OUTPUT one step earlier. */
  for (int step = 0; step < n - 1 && st == COLL_OK; step++) {
    int send_chunk = mod(pos - step, n), recv_chunk = mod(pos - step - 1, n);
    sched_buf_t send_buf = step == 0 ? src : SCHED_BUF_OUTPUT;
    for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
      size_t soff, slen, roff, rlen;
      segment(base, count, n, nseg, send_chunk, j, &soff, &slen);
      segment(base, count, n, nseg, recv_chunk, j, &roff, &rlen);
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, next, send_buf, soff, slen);
      if (st == COLL_OK) st = sched_recv_reduce(s, prev, SCHED_BUF_OUTPUT, roff, src, roff, rlen);
    }
  }
  /* All-gather of the reduced chunks, straight into OUTPUT. */
  for (int step = 0; step < n - 1 && st == COLL_OK; step++) {
    int send_chunk = mod(pos + 1 - step, n), recv_chunk = mod(pos - step, n);
    for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
      size_t soff, slen, roff, rlen;
      segment(base, count, n, nseg, send_chunk, j, &soff, &slen);
      segment(base, count, n, nseg, recv_chunk, j, &roff, &rlen);
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, next, SCHED_BUF_OUTPUT, soff, slen);
      if (st == COLL_OK) st = sched_recv_copy(s, prev, SCHED_BUF_OUTPUT, roff, rlen);
    }
  }
  return st;
}

coll_status_t algo_ring_allreduce(const sched_params_t *p, sched_t *s) {
  return algo_ring_allreduce_among(s, NULL, p->nranks, p->rank, 0, p->count, SCHED_BUF_INPUT,
                                   algo_ring_nseg(p, p->count, p->nranks));
}
