/* Reduce-scatter schedule: INPUT holds n blocks of count, rank r ends with the reduction
 * of every rank's block r in OUTPUT (count elements).
 *
 * ring (COLL_ALGO_RING): the first half of the ring all-reduce, shifted so that rank r
 *   finishes block r. In round s rank r sends block (r - s - 1) (its own INPUT in round
 *   0, afterwards the partial sum it formed in SCRATCH one round earlier) to r + 1 and
 *   receives block (r - s - 2) from r - 1, folding in its INPUT; the last round folds
 *   block r straight into OUTPUT. Segments are pipelined. bytes sent: (n-1) S; steps:
 *   (n-1) nseg. In-place as in NCCL (OUTPUT is INPUT's block r) works: block r of INPUT
 *   is read only by the op that writes it.
 * recursive halving (COLL_ALGO_HD, n a power of two only): in the round with mask m
 *   (n/2, n/4, .., 1) rank r and r ^ m split the blocks they still hold: each sends the
 *   half the other keeps and folds the other's copy of its own half into SCRATCH (the last
 *   round into OUTPUT). steps: log2 n; bytes sent: (n-1) S, like the ring. */
#include <stdbool.h>

#include "algo/algo_internal.h"
#include "common/error.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

coll_status_t algo_ring_reduce_scatter(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  size_t c = p->count;
  coll_status_t st = COLL_OK;
  if (n > 2) s->scratch_count = (size_t)n * c;
  size_t nseg = algo_div_up(c, algo_segment_elems(p));
  for (int round = 0; round < n - 1 && st == COLL_OK; round++) {
    size_t sb = (size_t)mod(r - round - 1, n) * c, rb = (size_t)mod(r - round - 2, n) * c;
    sched_buf_t src = round == 0 ? SCHED_BUF_INPUT : SCHED_BUF_SCRATCH;
    bool last = round == n - 2;
    for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
      size_t off = algo_part_start(c, nseg, j), len = algo_part_len(c, nseg, j);
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, next, src, sb + off, len);
      if (st == COLL_OK)
        st = last ? sched_recv_reduce(s, prev, SCHED_BUF_OUTPUT, off, SCHED_BUF_INPUT, rb + off, len)
                  : sched_recv_reduce(s, prev, SCHED_BUF_SCRATCH, rb + off, SCHED_BUF_INPUT,
                                      rb + off, len);
    }
  }
  return st;
}

coll_status_t algo_halving_reduce_scatter(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  if (n & (n - 1))
    return coll_error(COLL_ERR_UNSUPPORTED, "recursive halving needs a power-of-two rank count");
  size_t c = p->count, seg = algo_segment_elems(p);
  s->scratch_count = (size_t)n * c;
  size_t lo = 0, hi = (size_t)n; /* blocks this rank still holds */
  sched_buf_t src = SCHED_BUF_INPUT;
  coll_status_t st = COLL_OK;
  for (int mask = n / 2; mask >= 1 && st == COLL_OK; mask /= 2) {
    int partner = r ^ mask;
    size_t mid = lo + (hi - lo) / 2;
    bool keep_low = (r & mask) == 0;
    size_t klo = keep_low ? lo : mid, khi = keep_low ? mid : hi;
    size_t slo = keep_low ? mid : lo, shi = keep_low ? hi : mid;
    bool last = mask == 1;
    st = sched_begin_step(s);
    for (size_t off = 0; off < (shi - slo) * c && st == COLL_OK; off += seg) {
      size_t len = (shi - slo) * c - off < seg ? (shi - slo) * c - off : seg;
      st = sched_send(s, partner, src, slo * c + off, len);
      if (st != COLL_OK) break;
      size_t at = klo * c + off;
      st = last ? sched_recv_reduce(s, partner, SCHED_BUF_OUTPUT, off, src, at, len)
                : sched_recv_reduce(s, partner, SCHED_BUF_SCRATCH, at, src, at, len);
    }
    lo = klo;
    hi = khi;
    src = SCHED_BUF_SCRATCH;
  }
  return st;
}
