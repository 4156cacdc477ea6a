/* Broadcast schedules from any root. The root's data is read from INPUT; every other
 * rank receives into OUTPUT (and forwards from there). The root's OUTPUT is not written:
 * coll_broadcast passes the user's one buffer as both INPUT and OUTPUT.
 * Ranks are renumbered relative to the root: v = (rank - root) mod n, the root is v = 0.
 *
 * chain (COLL_ALGO_RING), pipelined by segments:
 *     v0 --> v1 --> v2 --> ... --> v(n-1)
 *   at time t, rank v receives segment t-v+1 from v-1 and sends segment t-v to v+1
 *   (one step: receive one segment while forwarding the previous one).
 *   steps: nseg + n - 2; bytes sent: S by every rank but the last.
 *
 * binomial tree (COLL_ALGO_TREE and COLL_ALGO_HD):
 *     round 0: v0 -> v1; round 1: v0 -> v2, v1 -> v3; round 2: v0..v3 -> v4..v7; ...
 *   in round k (mask = 2^k) ranks v < mask send to v + mask. Not pipelined: each round
 *   moves all S bytes (large messages are cut into segment-sized sends in one step).
 *   steps: ceil(log2 n); bytes sent: S per child, the root sends ceil(log2 n) * S.
 *
 * direct (COLL_ALGO_MASTER): the root sends all S bytes to each rank itself, segment by
 *   segment: (n-1) * S bytes from the root, the pattern of a parameter server. */
#include "algo/algo_internal.h"

static int vrank(const sched_params_t *p) { return (p->rank - p->root + p->nranks) % p->nranks; }
static int real_rank(const sched_params_t *p, int v) { return (v + p->root) % p->nranks; }

coll_status_t algo_chain_broadcast(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p);
  size_t seg = algo_segment_elems(p);
  size_t nseg = algo_div_up(p->count, seg);
  coll_status_t st = COLL_OK;
  if (n == 1) return COLL_OK;
  /* Rank v is busy from time v-1 (first receive) to time nseg-1+v (last send). */
  size_t first = v == 0 ? 0 : (size_t)v - 1, last = nseg - 1 + (size_t)v;
  for (size_t t = first; t <= last && st == COLL_OK; t++) {
    st = sched_begin_step(s);
    /* Send segment t - v to v + 1 (from INPUT at the root). */
    if (st == COLL_OK && v + 1 < n && t >= (size_t)v && t - (size_t)v < nseg) {
      size_t j = t - (size_t)v, off = j * seg;
      size_t len = p->count - off < seg ? p->count - off : seg;
      st =
          sched_send(s, real_rank(p, v + 1), v == 0 ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT, off, len);
    }
    /* Receive segment t - v + 1 from v - 1. */
    if (st == COLL_OK && v > 0 && t + 1 >= (size_t)v && t + 1 - (size_t)v < nseg) {
      size_t j = t + 1 - (size_t)v, off = j * seg;
      size_t len = p->count - off < seg ? p->count - off : seg;
      st = sched_recv_copy(s, real_rank(p, v - 1), SCHED_BUF_OUTPUT, off, len);
    }
  }
  return st;
}

/* Ops of all of [0, count), cut into segments, to or from one peer. */
static coll_status_t whole_buffer(sched_t *s, const sched_params_t *p, int peer, int send,
                                  sched_buf_t buf) {
  size_t seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  for (size_t off = 0; off < p->count && st == COLL_OK; off += seg) {
    size_t len = p->count - off < seg ? p->count - off : seg;
    st = send ? sched_send(s, peer, buf, off, len) : sched_recv_copy(s, peer, buf, off, len);
  }
  return st;
}

coll_status_t algo_binomial_broadcast(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p);
  coll_status_t st = COLL_OK;
  for (int mask = 1; mask < n && st == COLL_OK; mask <<= 1) {
    st = sched_begin_step(s);
    if (st != COLL_OK) break;
    if (v < mask && v + mask < n)
      st = whole_buffer(s, p, real_rank(p, v + mask), 1,
                        v == 0 ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT);
    else if (v >= mask && v < 2 * mask)
      st = whole_buffer(s, p, real_rank(p, v - mask), 0, SCHED_BUF_OUTPUT);
  }
  return st;
}

coll_status_t algo_direct_broadcast(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p);
  size_t seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  for (size_t off = 0; off < p->count && st == COLL_OK; off += seg) {
    size_t len = p->count - off < seg ? p->count - off : seg;
    st = sched_begin_step(s);
    if (v == 0)
      for (int k = 1; k < n && st == COLL_OK; k++)
        st = sched_send(s, real_rank(p, k), SCHED_BUF_INPUT, off, len);
    else if (st == COLL_OK)
      st = sched_recv_copy(s, p->root, SCHED_BUF_OUTPUT, off, len);
  }
  return st;
}
