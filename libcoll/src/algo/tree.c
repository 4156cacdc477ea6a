/* Double binary tree all-reduce: two binary trees over the same ranks, each carrying
 * half of the buffer; a rank that is a leaf in one tree is an inner node in the other, so
 * every rank's links carry about the same load. In each tree, segments are reduced up to
 * the root and broadcast back down, pipelined, all ranks in lock-step.
 *
 *   tree 0 on positions (= ranks), n = 14:        tree 1: position p is rank
 *                 0                                  n-1-p (n even) or (p+1) mod n
 *                 |                                  (n odd): the odd positions,
 *                 8                                  the leaves of tree 0, become
 *             /       \                              inner nodes.
 *           4           12
 *         /   \        /  \
 *        2     6     10    13     a node p with lowest set bit l has children
 *       / \   / \   /  \          p - l/2 and p + l/2 (or p + l/4, p + l/8 ... when
 *      1   3 5   7 9   11         p + l/2 >= n); position 0 has the one child 2^k.
 *
 *   per-step rule (D = the deepest depth, node at depth d, s = 0/1 its side under its
 *   parent, j = segment):
 *     reduce:    at time 2(j + D - d) + s the node sends segment j to its parent, which
 *                folds it in (first child: OUTPUT = INPUT op recv; second: OUTPUT op recv);
 *                a leaf sends from INPUT, an inner node its OUTPUT.
 *     broadcast: at time 2(j + D + d) the node sends segment j to its children, which
 *                receive it into OUTPUT.
 *   Matching ops are at the same time on both sides, so all ranks move in lock-step and
 *   the schedule cannot deadlock; at any one time a node's ops touch different segments
 *   (no hazards); the root finishes segment j at 2(j + D) - 1, before it sends it down.
 *
 *   steps: about 2 nseg + 4 D time slots (D ~ log2 n); a rank has nothing to do in many
 *   of them and skips those, so the critical path is about 2 nseg + 2 D + 1 steps (n = 2
 *   and 3 are chains: about nseg + D + 1; what the cost model counts). bytes sent per rank: S/2 per tree for the
 *   parent plus S/2 per child, about 2 S in total for an inner node of one tree (which
 *   is a leaf in the other); the root of each tree computes each element once. */
#include "algo/algo_internal.h"

/* ---- the shape, on positions ---- */

static int lowbit(int p) { return p & -p; }

static void children_of(int pos, int n, int child[2]) {
  child[0] = child[1] = -1;
  if (pos == 0) {
    if (n > 1) {
      int c = 1;
      while (c * 2 <= n - 1) c *= 2;
      child[0] = c;
    }
    return;
  }
  int l = lowbit(pos);
  if (l == 1) return;
  child[0] = pos - l / 2;
  int d = l / 2;
  while (d > 0 && pos + d >= n) d /= 2;
  if (d > 0) child[1] = pos + d;
}

/* Walk down from the root (the tree is ordered like a search tree: left subtree below,
 * right subtree above a node) to find pos's parent, side and depth. */
static void locate(int pos, int n, int *parent, int *side, int *depth) {
  int cur = 0, d = 0;
  *parent = -1;
  *side = 0;
  while (cur != pos) {
    int child[2];
    children_of(cur, n, child);
    int next = (pos < cur || child[1] < 0) ? child[0] : child[1];
    if (child[1] >= 0 && pos >= child[1]) next = child[1];
    if (next < 0) break; /* unreachable: every position is in the tree */
    *parent = cur;
    *side = next == child[1] && child[1] >= 0;
    cur = next;
    d++;
  }
  *depth = d;
}

static int to_rank(int pos, int n, int tree) {
  if (tree == 0) return pos;
  return n % 2 == 0 ? n - 1 - pos : (pos + 1) % n;
}

static int to_pos(int rank, int n, int tree) {
  if (tree == 0) return rank;
  return n % 2 == 0 ? n - 1 - rank : (rank - 1 + n) % n;
}

void algo_dbtree_node(int n, int tree, int rank, algo_tree_node_t *node) {
  int pos = to_pos(rank, n, tree), parent, side, child[2];
  locate(pos, n, &parent, &side, &node->depth);
  children_of(pos, n, child);
  node->parent = parent < 0 ? -1 : to_rank(parent, n, tree);
  for (int k = 0; k < 2; k++) node->child[k] = child[k] < 0 ? -1 : to_rank(child[k], n, tree);
}

/* O(log n), since every rank's builder asks (a walk over all positions made building
 * n ranks' schedules n^2 log n: 26 s for coll-sim at 16,384 ranks). A node p with lowest
 * set bit l has a complete left subtree of depth log2(l) below it, and its right subtree
 * is no deeper (its child p + d, d <= l/2, has lowest bit d); so the deepest node lies
 * under the root's one child 2^k (the largest power of two <= n - 1), at depth 1 + k.
 * tests/algo/test_sim_scale.c compares this with the walk up to 2000 ranks. */
int algo_dbtree_depth(int n) {
  if (n < 2) return 0;
  int k = 0;
  while ((2 << k) <= n - 1) k++;
  return 1 + k;
}

/* ---- the schedule ---- */

typedef struct {
  size_t base, len; /* this tree's half of the buffer */
  size_t nseg;
} half_t;

static void seg_range(const half_t *h, size_t j, size_t *off, size_t *len) {
  *off = h->base + algo_part_start(h->len, h->nseg, j);
  *len = algo_part_len(h->len, h->nseg, j);
}

static coll_status_t plan_tree(algo_plan_t *plan, const sched_params_t *p, int tree,
                               const half_t *h, size_t D) {
  int n = p->nranks, pos = to_pos(p->rank, n, tree);
  int parent, side, depth, child[2];
  locate(pos, n, &parent, &side, &depth);
  children_of(pos, n, child);
  size_t d = (size_t)depth;
  int nchild = (child[0] >= 0) + (child[1] >= 0);
  coll_status_t st = COLL_OK;
  for (size_t j = 0; j < h->nseg && st == COLL_OK; j++) {
    size_t off, len;
    seg_range(h, j, &off, &len);
    /* Reduce: fold in each child's segment at the child's send time. */
    for (int k = 0; k < 2 && st == COLL_OK; k++) {
      if (child[k] < 0) continue;
      size_t t = 2 * (j + D - (d + 1)) + (size_t)k;
      sched_buf_t src = k == 0 ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT;
      st = algo_plan_add(
          plan, t,
          algo_op_recv_reduce(to_rank(child[k], n, tree), SCHED_BUF_OUTPUT, off, src, off, len));
    }
    if (st == COLL_OK && parent >= 0) {
      size_t t = 2 * (j + D - d) + (size_t)side;
      sched_buf_t src = nchild > 0 ? SCHED_BUF_OUTPUT : SCHED_BUF_INPUT;
      st = algo_plan_add(plan, t, algo_op_send(to_rank(parent, n, tree), src, off, len));
    }
    /* Broadcast: receive from the parent, then pass on to the children. */
    if (st == COLL_OK && parent >= 0)
      st = algo_plan_add(plan, 2 * (j + D + d - 1),
                         algo_op_recv_copy(to_rank(parent, n, tree), SCHED_BUF_OUTPUT, off, len));
    for (int k = 0; k < 2 && st == COLL_OK; k++)
      if (child[k] >= 0)
        st = algo_plan_add(plan, 2 * (j + D + d),
                           algo_op_send(to_rank(child[k], n, tree), SCHED_BUF_OUTPUT, off, len));
  }
  return st;
}

coll_status_t algo_tree_allreduce(const sched_params_t *p, sched_t *s) {
  int n = p->nranks;
  coll_status_t st = COLL_OK;
  size_t seg = algo_segment_elems(p);
  size_t D = (size_t)algo_dbtree_depth(n);
  algo_plan_t plan = {0};
  /* Tree 0's ops are added first, so where two ranks exchange in both trees at one time
   * both sides list those messages in the same order (rule 2 of schedule.h). */
  for (int tree = 0; tree < 2 && st == COLL_OK; tree++) {
    half_t h = {.base = algo_part_start(p->count, 2, (size_t)tree),
                .len = algo_part_len(p->count, 2, (size_t)tree)};
    h.nseg = algo_div_up(algo_part_len(p->count, 2, 0), seg);
    if (h.len > 0) st = plan_tree(&plan, p, tree, &h, D);
  }
  if (st != COLL_OK) {
    algo_plan_free(&plan);
    return st;
  }
  return algo_plan_emit(&plan, s);
}
