/* Recursive halving-doubling all-reduce (Rabenseifner; COLL_ALGO_HD, spelt "hd" in
 * COLL_ALGO): a reduce-scatter by recursive halving, then an all-gather by recursive
 * doubling, among p = 2^k ranks; with n not a power of two the first 2(n-p) ranks pair up
 * and fold first.
 *
 *   p = 4 (newranks 0..3), the buffer cut into p blocks B0..B3:
 *     halving, mask 2:  0 <-> 2, 1 <-> 3   lower newrank keeps blocks 0-1 of its range,
 *                                          sends the upper half, reduces what it gets
 *     halving, mask 1:  0 <-> 1, 2 <-> 3   (then newrank i holds block i, reduced once)
 *     doubling, mask 1: 0 <-> 1, 2 <-> 3   exchange the blocks each holds
 *     doubling, mask 2: 0 <-> 2, 1 <-> 3   (then everyone holds everything)
 *   per-step rule: at level mask, partner = newrank XOR mask; the range in play is the
 *   2*mask blocks starting at newrank rounded down to a multiple of 2*mask.
 *
 *   non-power of two, n = 6, p = 4, rem = 2: ranks 0 and 2 (even, < 2 rem) send their
 *   whole buffer to ranks 1 and 3 first (fold), sit out, and get the result back at the
 *   end (unfold). Newranks: 1 -> 0, 3 -> 1, 4 -> 2, 5 -> 3.
 *
 *   steps: 2 log2(p) (+ 2 when folding); bytes sent per rank: 2 (p-1)/p * S, plus S
 *   for the folding pairs (each side sends S once). Best for small and medium S: few
 *   steps, and unlike ring the number of steps grows only with log2 n.
 *
 *   Up to ALGO_HD_WHOLE_MAX_BYTES the newranks skip the halving and exchange whole
 *   buffers instead (recursive doubling, whole_exchanges): log2(p) steps of S each.
 *   There a step's latency costs more than the bytes; at 2 ranks it is one message
 *   each way instead of two in a row (tcp loopback, 8 B: see bench/results/README.md). */
#include "algo/algo_internal.h"

/* Whole-range ops are cut into segment-sized messages within one step; both sides cut a
 * range the same way, so the k-th messages match. A reduction reads src_buf from src_lo
 * on (the same offsets as buf when src_lo == lo). */
static coll_status_t range_ops_from(sched_t *s, const sched_params_t *p, int peer,
                                    sched_op_kind_t kind, sched_buf_t buf, size_t lo, size_t hi,
                                    sched_buf_t src_buf, size_t src_lo) {
  size_t seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  for (size_t off = lo; off < hi && st == COLL_OK; off += seg) {
    size_t len = hi - off < seg ? hi - off : seg;
    if (kind == SCHED_SEND)
      st = sched_send(s, peer, buf, off, len);
    else if (kind == SCHED_RECV_COPY)
      st = sched_recv_copy(s, peer, buf, off, len);
    else
      st = sched_recv_reduce(s, peer, buf, off, src_buf, src_lo + (off - lo), len);
  }
  return st;
}

static coll_status_t range_ops(sched_t *s, const sched_params_t *p, int peer, sched_op_kind_t kind,
                               sched_buf_t buf, sched_buf_t src_buf, size_t lo, size_t hi) {
  return range_ops_from(s, p, peer, kind, buf, lo, hi, src_buf, lo);
}

/* Small buffers: at each level exchange the whole vector with the partner and reduce,
 * log2 p steps of S (one step at 2 ranks, against halving-doubling's two). Every element
 * is reduced as lower newrank's value OP higher's at every level, so all ranks compute
 * the same bits (schedule.h rule 6; float min of -0 and +0, or NaN payloads, depend on
 * the operand order). The lower side reduces as it receives; the higher one receives
 * into SCRATCH and reduces there in a local step. Results go to two SCRATCH halves in
 * turn, never to OUTPUT before the end (in place, OUTPUT is INPUT), then one copy. */
static coll_status_t whole_exchanges(sched_t *s, const sched_params_t *p, int nr, int pw, int rem,
                                     sched_buf_t cur) {
  size_t count = p->count, cur_off = 0;
  coll_status_t st = COLL_OK;
  s->scratch_count = 2 * count;
  for (int mask = 1, half = 0; mask < pw && st == COLL_OK; mask *= 2, half ^= 1) {
    int pnr = nr ^ mask, peer = pnr < rem ? 2 * pnr + 1 : pnr + rem;
    size_t dst_off = (size_t)half * count;
    st = sched_begin_step(s);
    if (st == COLL_OK) st = range_ops(s, p, peer, SCHED_SEND, cur, cur, cur_off, cur_off + count);
    if (nr < pnr) { /* dst = mine OP theirs */
      if (st == COLL_OK)
        st = range_ops_from(s, p, peer, SCHED_RECV_REDUCE, SCHED_BUF_SCRATCH, dst_off,
                            dst_off + count, cur, cur_off);
    } else { /* dst = theirs OP mine */
      if (st == COLL_OK)
        st = range_ops(s, p, peer, SCHED_RECV_COPY, SCHED_BUF_SCRATCH, SCHED_BUF_SCRATCH, dst_off,
                       dst_off + count);
      if (st == COLL_OK) st = sched_begin_step(s);
      if (st == COLL_OK)
        st = sched_local_reduce(s, SCHED_BUF_SCRATCH, dst_off, cur, cur_off, count);
    }
    cur = SCHED_BUF_SCRATCH;
    cur_off = dst_off;
  }
  if (st == COLL_OK) st = sched_begin_step(s);
  if (st == COLL_OK) st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, cur, cur_off, count);
  return st;
}

coll_status_t algo_halving_doubling_allreduce(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  coll_status_t st = COLL_OK;
  int pw = 1;
  while (pw * 2 <= n) pw *= 2;
  int rem = n - pw;
  size_t count = p->count, blocks = (size_t)pw;
  /* Fold: even ranks below 2 rem hand their data to the next odd rank. */
  int nr; /* newrank, -1 for ranks that sit out */
  sched_buf_t cur = SCHED_BUF_INPUT;
  if (r < 2 * rem) {
    st = sched_begin_step(s);
    if (r % 2 == 0) {
      if (st == COLL_OK) st = range_ops(s, p, r + 1, SCHED_SEND, SCHED_BUF_INPUT, 0, 0, count);
      nr = -1;
    } else {
      if (st == COLL_OK)
        st = range_ops(s, p, r - 1, SCHED_RECV_REDUCE, SCHED_BUF_OUTPUT, SCHED_BUF_INPUT, 0, count);
      cur = SCHED_BUF_OUTPUT;
      nr = r / 2;
    }
  } else {
    nr = r - rem;
  }
  if (nr >= 0 && algo_hd_whole_exchange(p)) {
    st = whole_exchanges(s, p, nr, pw, rem, cur);
  } else if (nr >= 0) {
    /* Recursive halving: keep half of the range in play, send the other half. */
    for (int mask = pw / 2; mask >= 1 && st == COLL_OK; mask /= 2) {
      int pnr = nr ^ mask, peer = pnr < rem ? 2 * pnr + 1 : pnr + rem;
      size_t base = (size_t)(nr & ~(2 * mask - 1));
      size_t lower = base, upper = base + (size_t)mask;
      size_t keep_lo = (nr & mask) ? upper : lower, give_lo = (nr & mask) ? lower : upper;
      size_t keep_hi = keep_lo + (size_t)mask, give_hi = give_lo + (size_t)mask;
      st = sched_begin_step(s);
      if (st == COLL_OK)
        st = range_ops(s, p, peer, SCHED_SEND, cur, cur, algo_part_start(count, blocks, give_lo),
                       algo_part_start(count, blocks, give_hi));
      if (st == COLL_OK)
        st = range_ops(s, p, peer, SCHED_RECV_REDUCE, SCHED_BUF_OUTPUT, cur,
                       algo_part_start(count, blocks, keep_lo),
                       algo_part_start(count, blocks, keep_hi));
      cur = SCHED_BUF_OUTPUT;
    }
    /* Recursive doubling: exchange the ranges held so far. */
    for (int mask = 1; mask < pw && st == COLL_OK; mask *= 2) {
      int pnr = nr ^ mask, peer = pnr < rem ? 2 * pnr + 1 : pnr + rem;
      size_t mine = (size_t)(nr & ~(mask - 1)), theirs = (size_t)(pnr & ~(mask - 1));
      st = sched_begin_step(s);
      if (st == COLL_OK)
        st = range_ops(s, p, peer, SCHED_SEND, SCHED_BUF_OUTPUT, SCHED_BUF_OUTPUT,
                       algo_part_start(count, blocks, mine),
                       algo_part_start(count, blocks, mine + (size_t)mask));
      if (st == COLL_OK)
        st = range_ops(s, p, peer, SCHED_RECV_COPY, SCHED_BUF_OUTPUT, SCHED_BUF_OUTPUT,
                       algo_part_start(count, blocks, theirs),
                       algo_part_start(count, blocks, theirs + (size_t)mask));
    }
  }
  /* Unfold: the folded ranks get the result back. */
  if (r < 2 * rem && st == COLL_OK) {
    st = sched_begin_step(s);
    if (st == COLL_OK)
      st = r % 2 == 0
               ? range_ops(s, p, r + 1, SCHED_RECV_COPY, SCHED_BUF_OUTPUT, SCHED_BUF_OUTPUT, 0,
                           count)
               : range_ops(s, p, r - 1, SCHED_SEND, SCHED_BUF_OUTPUT, SCHED_BUF_OUTPUT, 0, count);
  }
  return st;
}
