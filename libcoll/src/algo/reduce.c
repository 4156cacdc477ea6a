/* Reduce-to-root schedules. Ranks are renumbered relative to the root, v = (rank - root)
 * mod n. A rank accumulates its partial result in OUTPUT at the root and in SCRATCH
 * (count elements) elsewhere; only the root's OUTPUT is written.
 *
 * chain (COLL_ALGO_RING), pipelined: v(n-1) -> v(n-2) -> ... -> v0. With d = n-1-v the
 *   distance from the tail, rank d sends segment j at time j + d and receives it from
 *   its successor (fold into INPUT) at time j + d - 1. steps: nseg + n - 2.
 * binomial tree (COLL_ALGO_TREE, COLL_ALGO_HD): the broadcast tree run backwards, rounds
 *   with mask = 2^k from the highest down: v in [mask, 2 mask) sends its partial sum to
 *   v - mask, which folds it in. steps: ceil(log2 n), S bytes per message. */
#include <stdbool.h>

#include "algo/algo_internal.h"

static int vrank(const sched_params_t *p) { return (p->rank - p->root + p->nranks) % p->nranks; }
static int real_rank(const sched_params_t *p, int v) { return (v + p->root) % p->nranks; }

coll_status_t algo_chain_reduce(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p);
  size_t seg = algo_segment_elems(p);
  size_t nseg = algo_div_up(p->count, seg);
  size_t d = (size_t)(n - 1 - v);
  sched_buf_t acc = v == 0 ? SCHED_BUF_OUTPUT : SCHED_BUF_SCRATCH;
  if (v != 0 && d > 0) s->scratch_count = p->count;
  algo_plan_t plan = {0};
  coll_status_t st = COLL_OK;
  for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
    size_t off = j * seg, len = p->count - off < seg ? p->count - off : seg;
    if (v > 0)
      st = algo_plan_add(&plan, j + d,
                         algo_op_send(real_rank(p, v - 1), d == 0 ? SCHED_BUF_INPUT : acc, off, len));
    if (st == COLL_OK && d > 0)
      st = algo_plan_add(&plan, j + d - 1,
                         algo_op_recv_reduce(real_rank(p, v + 1), acc, off, SCHED_BUF_INPUT, off, len));
  }
  if (st != COLL_OK) {
    algo_plan_free(&plan);
    return st;
  }
  return algo_plan_emit(&plan, s);
}

/* Ops of all of [0, count), cut into segments, to or from one peer. */
static coll_status_t whole_buffer(sched_t *s, const sched_params_t *p, int peer, bool send,
                                  sched_buf_t buf, sched_buf_t src) {
  size_t seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  for (size_t off = 0; off < p->count && st == COLL_OK; off += seg) {
    size_t len = p->count - off < seg ? p->count - off : seg;
    st = send ? sched_send(s, peer, buf, off, len)
              : sched_recv_reduce(s, peer, buf, off, src, off, len);
  }
  return st;
}

coll_status_t algo_binomial_reduce(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p);
  int top = 1;
  while (top * 2 < n) top *= 2;
  sched_buf_t acc = v == 0 ? SCHED_BUF_OUTPUT : SCHED_BUF_SCRATCH;
  bool have_acc = false;
  coll_status_t st = COLL_OK;
  for (int mask = top; mask >= 1 && st == COLL_OK; mask >>= 1) {
    if (v < mask && v + mask < n) {
      st = sched_begin_step(s);
      /* The first partial sum folds into INPUT; later ones into the accumulator. */
      if (st == COLL_OK)
        st = whole_buffer(s, p, real_rank(p, v + mask), false, acc,
                          have_acc ? acc : SCHED_BUF_INPUT);
      have_acc = true;
    } else if (v >= mask && v < 2 * mask) {
      st = sched_begin_step(s);
      if (st == COLL_OK)
        st = whole_buffer(s, p, real_rank(p, v - mask), true, have_acc ? acc : SCHED_BUF_INPUT,
                          SCHED_BUF_INPUT);
    }
  }
  if (v != 0 && have_acc) s->scratch_count = p->count;
  return st;
}
