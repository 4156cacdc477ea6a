/* Gather and scatter schedules from any root. gather: every rank's INPUT (count elements)
 * lands in the root's OUTPUT, rank r's block at r * count; scatter is its mirror: block r
 * of the root's INPUT goes to rank r's OUTPUT. Only the root touches the n-block buffer
 * (gather's OUTPUT, scatter's INPUT). Ranks are renumbered from the root: v = (rank -
 * root) mod n, the root is v = 0; block u below means rank (u + root) mod n's block.
 *
 * direct (COLL_ALGO_MASTER): in step j every rank sends segment j of its block to the
 *   root, which receives all n-1 of them together (scatter: the root sends segment j of
 *   every block). steps: nseg; bytes: (n-1) S into (out of) the root, S per other rank.
 *
 * binomial tree (COLL_ALGO_TREE and COLL_ALGO_HD), gather:
 *     round 0: v1 -> v0, v3 -> v2, v5 -> v4, ...   round 1: v2 -> v0, v6 -> v4, ...
 *     round 2: v4 -> v0, ...
 *   in round k (mask = 2^k) a rank whose lowest set bit is mask sends the blocks of its
 *   subtree, u in [v, v + min(mask, n - v)), to v - mask. A rank with children collects
 *   its subtree in SCRATCH (own block first, block u at (u - v) * S); the root receives
 *   straight into OUTPUT. Every transfer of blocks [a, b) is cut where u reaches n - root
 *   (there the real ranks wrap to 0), so the root's pieces are contiguous; both sides cut
 *   alike, and into segments. Scatter runs the rounds backwards (the root sends each
 *   child its subtree; a rank with children keeps its subtree in SCRATCH and copies its
 *   own block to OUTPUT at the end).
 *   steps: ceil(log2 n); bytes: (n-1) S into (out of) the root, a subtree of m ranks
 *   moves m S once. */
#include "algo/algo_internal.h"

static int vrank(const sched_params_t *p) { return (p->rank - p->root + p->nranks) % p->nranks; }
static int real_rank(const sched_params_t *p, int v) { return (v + p->root) % p->nranks; }

/* Blocks in rank v's subtree of the binomial tree (all n at the root). */
static int subtree(int n, int v) {
  if (v == 0) return n;
  int low = v & -v;
  return low < n - v ? low : n - v;
}

/* Where this rank keeps block u (counted from the root) of the tree's transfers: the
 * root in its n-block buffer at the real rank's position, a rank with children in
 * SCRATCH, a leaf in its one-block buffer. */
typedef struct {
  sched_buf_t buf;
  int base_v; /* SCRATCH / one-block buffer: block u at (u - base_v) * count */
  bool real;  /* the root's n-block buffer: block u at real_rank(u) * count */
} holder_t;

static size_t holder_offset(const sched_params_t *p, const holder_t *h, int u) {
  return h->real ? (size_t)real_rank(p, u) * p->count : (size_t)(u - h->base_v) * p->count;
}

/* Send (or receive) blocks [a, b) to (from) peer: pieces cut at the wrap, then segments. */
static coll_status_t move_blocks(sched_t *s, const sched_params_t *p, int peer, bool send,
                                 const holder_t *h, int a, int b) {
  int wrap = p->nranks - p->root;
  size_t seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  while (a < b && st == COLL_OK) {
    int end = a < wrap && wrap < b ? wrap : b;
    size_t base = holder_offset(p, h, a), len = (size_t)(end - a) * p->count;
    for (size_t off = 0; off < len && st == COLL_OK; off += seg) {
      size_t m = len - off < seg ? len - off : seg;
      st = send ? sched_send(s, peer, h->buf, base + off, m)
                : sched_recv_copy(s, peer, h->buf, base + off, m);
    }
    a = end;
  }
  return st;
}

coll_status_t algo_direct_gather(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  size_t c = p->count, seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  for (size_t off = 0; off < c && st == COLL_OK; off += seg) {
    size_t len = c - off < seg ? c - off : seg;
    st = sched_begin_step(s);
    if (st == COLL_OK && r != p->root) {
      st = sched_send(s, p->root, SCHED_BUF_INPUT, off, len);
      continue;
    }
    if (st == COLL_OK && off == 0)
      st = sched_local_copy(s, SCHED_BUF_OUTPUT, (size_t)r * c, SCHED_BUF_INPUT, 0, c);
    for (int q = 0; q < n && st == COLL_OK; q++)
      if (q != r) st = sched_recv_copy(s, q, SCHED_BUF_OUTPUT, (size_t)q * c + off, len);
  }
  return st;
}

coll_status_t algo_direct_scatter(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, r = p->rank;
  size_t c = p->count, seg = algo_segment_elems(p);
  coll_status_t st = COLL_OK;
  for (size_t off = 0; off < c && st == COLL_OK; off += seg) {
    size_t len = c - off < seg ? c - off : seg;
    st = sched_begin_step(s);
    if (st == COLL_OK && r != p->root) {
      st = sched_recv_copy(s, p->root, SCHED_BUF_OUTPUT, off, len);
      continue;
    }
    if (st == COLL_OK && off == 0)
      st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, SCHED_BUF_INPUT, (size_t)r * c, c);
    for (int q = 0; q < n && st == COLL_OK; q++)
      if (q != r) st = sched_send(s, q, SCHED_BUF_INPUT, (size_t)q * c + off, len);
  }
  return st;
}

coll_status_t algo_binomial_gather(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p), size = subtree(n, v);
  size_t c = p->count;
  holder_t h = {.buf = SCHED_BUF_INPUT, .base_v = v};
  if (v == 0) h = (holder_t){.buf = SCHED_BUF_OUTPUT, .real = true};
  if (v != 0 && size > 1) {
    h.buf = SCHED_BUF_SCRATCH;
    s->scratch_count = (size_t)size * c;
  }
  coll_status_t st = sched_begin_step(s);
  /* Own block first, beside round 0's receive (another block). */
  if (st == COLL_OK && h.buf != SCHED_BUF_INPUT)
    st = sched_local_copy(s, h.buf, holder_offset(p, &h, v), SCHED_BUF_INPUT, 0, c);
  for (int mask = 1; mask < n && st == COLL_OK; mask <<= 1) {
    if (mask > 1) st = sched_begin_step(s);
    if (st != COLL_OK) break;
    if (v != 0 && (v & -v) == mask) {
      st = move_blocks(s, p, real_rank(p, v - mask), true, &h, v, v + size);
      break; /* done once the subtree went up */
    }
    int child = v + mask;
    if (child < n)
      st = move_blocks(s, p, real_rank(p, child), false, &h, child, child + subtree(n, child));
  }
  return st;
}

coll_status_t algo_binomial_scatter(const sched_params_t *p, sched_t *s) {
  int n = p->nranks, v = vrank(p), size = subtree(n, v);
  size_t c = p->count;
  int top = 1;
  while (top < n) top <<= 1;
  holder_t h = {.buf = SCHED_BUF_OUTPUT, .base_v = v};
  if (v == 0) h = (holder_t){.buf = SCHED_BUF_INPUT, .real = true};
  if (v != 0 && size > 1) {
    h.buf = SCHED_BUF_SCRATCH;
    s->scratch_count = (size_t)size * c;
  }
  coll_status_t st = sched_begin_step(s);
  if (st == COLL_OK && v == 0)
    st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, SCHED_BUF_INPUT, holder_offset(p, &h, 0), c);
  bool first = true;
  for (int mask = top >> 1; mask >= 1 && st == COLL_OK; mask >>= 1) {
    if (!first) st = sched_begin_step(s);
    first = false;
    if (st != COLL_OK) break;
    int low = v & -v;
    if (v != 0 && low == mask) {
      st = move_blocks(s, p, real_rank(p, v - mask), false, &h, v, v + size);
    } else if ((v == 0 || low > mask) && v + mask < n) {
      int child = v + mask;
      st = move_blocks(s, p, real_rank(p, child), true, &h, child, child + subtree(n, child));
    }
  }
  if (st == COLL_OK && h.buf == SCHED_BUF_SCRATCH) {
    st = sched_begin_step(s);
    if (st == COLL_OK) st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, SCHED_BUF_SCRATCH, 0, c);
  }
  return st;
}
