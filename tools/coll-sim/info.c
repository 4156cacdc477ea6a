/* coll-sim: the rule, step count and bytes per rank each algorithm's file promises (the
 * comments at the top of libcoll/src/algo/<algo>.c), written as formulas in n ranks and
 * S bytes so that coll-sim --explain can set them beside the counted numbers. */
#include "info.h"

#include <stdbool.h>

#include "algo/algo_internal.h"

static const algo_info_t allreduce_info[COLL_ALGO_COUNT] = {
    [COLL_ALGO_RING] =
        {
            .title = "ring all-reduce (reduce-scatter, then all-gather, around r -> r+1)",
            .rule = "reduce-scatter step i (i = 0..n-2): rank j sends chunk j-i to rank j+1 "
                    "and receives and reduces chunk j-i-1 from rank j-1; all-gather step i: "
                    "rank j sends chunk j+1-i and receives chunk j-i (chunks mod n)",
            .steps_formula = "2 (n-1) x nseg",
            .bytes_formula = "every rank sends 2 (n-1)/n x S",
            .file = "libcoll/src/algo/ring.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_TREE] =
        {
            .title = "double binary tree all-reduce (two trees, each carries half the buffer)",
            .rule = "in each tree, segments are reduced up to the root (a node sends segment "
                    "j to its parent at time 2(j + D - depth) + side) and broadcast back down "
                    "(at time 2(j + D + depth)); a leaf of tree 0 is an inner node of tree 1",
            .steps_formula = "about 2 nseg + 4 D (D = tree depth ~ log2 n)",
            .bytes_formula = "per tree: S/2 to the parent plus S/2 to each child; about 2 S "
                             "for an inner node, S/2 for a leaf",
            .file = "libcoll/src/algo/tree.c",
            .layout = LAYOUT_TREE,
        },
    [COLL_ALGO_HD] =
        {
            .title = "recursive halving-doubling all-reduce (Rabenseifner)",
            .rule = "halving at mask = p/2..1: partner = newrank XOR mask, keep half of the "
                    "range in play, send the other half and reduce what comes back; doubling "
                    "at mask = 1..p/2: exchange the blocks held so far (p = largest power of "
                    "two <= n; the first 2(n-p) ranks fold in pairs first)",
            .steps_formula = "2 log2 p (+ 2 when n is not a power of two)",
            .bytes_formula = "2 (p-1)/p x S per rank (+ S for ranks that fold or unfold)",
            .file = "libcoll/src/algo/halving_doubling.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_MASTER] =
        {
            .title = "master all-reduce (gather to rank 0, reduce, send back: DataParallel)",
            .rule = "every rank sends each segment to rank 0, which reduces them one at a "
                    "time; then rank 0 sends the result segment to every rank",
            .steps_formula = "n x nseg",
            .bytes_formula = "rank 0 sends (n-1) x S, every other rank S; rank 0's link "
                             "carries 2 (n-1) x S",
            .file = "libcoll/src/algo/master.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_RING_NODES] =
        {
            .title = "ring all-reduce in node order (--hosts: each node's ranks, node by node)",
            .rule = "the ring's rule over positions: position i is the i-th rank of the node "
                    "map's list (node 0's ranks in rank order, then node 1's, ...); one link "
                    "leaves each node and one enters it, whatever the placement",
            .steps_formula = "2 (n-1) x nseg",
            .bytes_formula = "every rank sends 2 (n-1)/n x S",
            .file = "libcoll/src/algo/nodes.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_TWO_LEVEL] =
        {
            .title = "two-level all-reduce (reduce-scatter in the node, all-reduce across "
                     "nodes, all-gather in the node)",
            .rule = "N nodes of k ranks: local rank l ends phase 1 (ring reduce-scatter of k "
                    "parts inside its node) with part l, all-reduces part l with the local "
                    "rank l of every node (a ring of N, k rings in parallel), then the node's "
                    "ring all-gathers the k parts (unequal nodes: ring_nodes)",
            .steps_formula = "2 (k-1) x nseg inside + 2 (N-1) x nseg' across",
            .bytes_formula = "every rank sends 2 (k-1)/k x S inside its node and "
                             "2 (N-1)/N x S/k to other nodes",
            .file = "libcoll/src/algo/nodes.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_LEADERS] =
        {
            .title = "leaders all-reduce (reduce to each node's lowest rank, all-reduce "
                     "among them, broadcast in the node)",
            .rule = "below 64 KiB: binomial reduce in the node, halving-doubling among the "
                    "leaders, binomial broadcast; from 64 KiB: pipelined chain reduce, "
                    "double binary tree among the leaders, chain broadcast (NCCL's tree "
                    "shape); only the leaders send between nodes",
            .steps_formula = "small: 2 ceil(log2 k) + hd's steps for N leaders",
            .bytes_formula = "leaders: hd's (or the tree's) bytes for N ranks on S; inside "
                             "a node the reduce's and the broadcast's",
            .file = "libcoll/src/algo/leaders.c",
            .layout = LAYOUT_CIRCLE,
        },
};

static const algo_info_t broadcast_info[COLL_ALGO_COUNT] = {
    [COLL_ALGO_RING] =
        {
            .title = "chain broadcast (pipelined: root -> root+1 -> ...)",
            .rule = "at time t rank v (counted from the root) receives segment t-v+1 from "
                    "v-1 and forwards segment t-v to v+1",
            .steps_formula = "nseg + n - 2",
            .bytes_formula = "every rank but the last sends S",
            .file = "libcoll/src/algo/broadcast.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_TREE] =
        {
            .title = "binomial tree broadcast",
            .rule = "in round k (mask = 2^k) every rank v < mask that has the data sends all "
                    "of it to v + mask (v counted from the root)",
            .steps_formula = "ceil(log2 n)",
            .bytes_formula = "S per child: the root sends ceil(log2 n) x S, leaves nothing",
            .file = "libcoll/src/algo/broadcast.c",
            .layout = LAYOUT_CIRCLE,
        },
    [COLL_ALGO_MASTER] =
        {
            .title = "direct broadcast (the root sends to every rank itself)",
            .rule = "in step j the root sends segment j to every other rank",
            .steps_formula = "nseg",
            .bytes_formula = "the root sends (n-1) x S, the others nothing",
            .file = "libcoll/src/algo/broadcast.c",
            .layout = LAYOUT_CIRCLE,
        },
};

/* gather.c and alltoallv.c: [0] direct, [1] binomial; scatter the same, mirrored. */
static const algo_info_t gather_info[2] = {
    {
        .title = "direct gather (every rank sends its block to the root)",
        .rule = "in step j every rank sends segment j of its block to the root, which "
                "receives them all at once",
        .steps_formula = "nseg",
        .bytes_formula = "every rank but the root sends S; the root receives (n-1) x S",
        .file = "libcoll/src/algo/gather.c",
        .layout = LAYOUT_CIRCLE,
    },
    {
        .title = "binomial tree gather",
        .rule = "in round k (mask = 2^k) a rank v whose lowest set bit is mask sends the "
                "blocks of its subtree [v, v + min(mask, n - v)) to v - mask (v counted from "
                "the root)",
        .steps_formula = "ceil(log2 n)",
        .bytes_formula = "rank v sends its subtree's blocks once: min(lowbit v, n - v) x S",
        .file = "libcoll/src/algo/gather.c",
        .layout = LAYOUT_CIRCLE,
    },
};
static const algo_info_t scatter_info[2] = {
    {
        .title = "direct scatter (the root sends every rank its block)",
        .rule = "in step j the root sends segment j of block r to every rank r",
        .steps_formula = "nseg",
        .bytes_formula = "the root sends (n-1) x S, the others nothing",
        .file = "libcoll/src/algo/gather.c",
        .layout = LAYOUT_CIRCLE,
    },
    {
        .title = "binomial tree scatter (gather's rounds backwards)",
        .rule = "in round k (mask = 2^k, highest first) a rank v that holds its subtree "
                "and has a child v + mask sends it that child's subtree (v counted from the "
                "root)",
        .steps_formula = "ceil(log2 n), + 1 for the copy out of SCRATCH",
        .bytes_formula = "rank v sends its subtree's blocks but its own: (min(lowbit v, n - v) "
                         "- 1) x S; the root (n-1) x S",
        .file = "libcoll/src/algo/gather.c",
        .layout = LAYOUT_CIRCLE,
    },
};
static const algo_info_t alltoallv_info = {
    .title = "pairwise all_to_allv (per-peer counts)",
    .rule =
        "in round k = 1..n-1 rank r sends its block for r + k and receives the block of "
        "r - k (each transfer cut into segments by its own count)",
    .steps_formula = "rounds 0..n-1 that move data (0: own block)",
    .bytes_formula = "rank r sends the sum of its counts to the other ranks",
    .file = "libcoll/src/algo/alltoallv.c",
    .layout = LAYOUT_CIRCLE,
};

const algo_info_t *info_get(coll_kind_t kind, coll_algo_t algo) {
  if ((unsigned)algo >= COLL_ALGO_COUNT || algo == COLL_ALGO_AUTO) return NULL;
  bool tree = algo == COLL_ALGO_TREE || algo == COLL_ALGO_HD;
  if (kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER) {
    if (!tree && algo != COLL_ALGO_MASTER) return NULL;
    return kind == COLL_KIND_GATHER ? &gather_info[tree] : &scatter_info[tree];
  }
  if (kind == COLL_KIND_ALL_TO_ALLV) return algo == COLL_ALGO_RING ? &alltoallv_info : NULL;
  if (kind == COLL_KIND_BROADCAST) {
    /* hd builds the binomial tree too (recursive doubling is one). */
    return &broadcast_info[algo == COLL_ALGO_HD ? COLL_ALGO_TREE : algo];
  }
  return kind == COLL_KIND_ALL_REDUCE ? &allreduce_info[algo] : NULL;
}

static size_t pow2_below(int n) {
  size_t pw = 1;
  while (pw * 2 <= (size_t)n) pw *= 2;
  return pw;
}

static size_t log2_ceil(int n) {
  size_t k = 0;
  while (((size_t)1 << k) < (size_t)n) k++;
  return k;
}

static sched_params_t params_of(const trace_t *t) {
  const sim_request_t *q = &t->req;
  return (sched_params_t){.collective = q->collective,
                          .count = q->count,
                          .dtype = q->dtype,
                          .nranks = q->nranks,
                          .root = q->root,
                          .segment_bytes = q->segment_bytes,
                          .topo = q->topo};
}

size_t info_nseg(const trace_t *t) {
  sched_params_t p = params_of(t);
  size_t seg = algo_segment_elems(&p), n = (size_t)p.nranks;
  if (p.count == 0) return 0;
  if (p.collective == COLL_KIND_ALL_REDUCE) {
    if (t->req.algo == COLL_ALGO_RING || t->req.algo == COLL_ALGO_RING_NODES)
      return algo_div_up(algo_div_up(p.count, n), seg);
    if (t->req.algo == COLL_ALGO_TWO_LEVEL) { /* the node's parts (phases 1 and 3) */
      size_t k = p.topo != NULL ? (size_t)p.topo->max_local : n;
      return algo_div_up(algo_div_up(p.count, k), seg);
    }
    if (t->req.algo == COLL_ALGO_TREE) return algo_div_up(algo_part_len(p.count, 2, 0), seg);
    if (t->req.algo == COLL_ALGO_HD) return 1;
  } else if (t->req.algo == COLL_ALGO_TREE || t->req.algo == COLL_ALGO_HD) {
    return 1;
  }
  return algo_div_up(p.count, seg);
}

/* Blocks in rank v's subtree of the binomial tree (gather.c). */
static int subtree(int n, int v) {
  if (v == 0) return n;
  int low = v & -v;
  return low < n - v ? low : n - v;
}

/* gather, scatter, all_to_allv: the steps promised (see info_expected_steps). */
static long new_kind_steps(const trace_t *t, long nseg) {
  int n = t->req.nranks;
  if (t->req.collective == COLL_KIND_ALL_TO_ALLV) {
    /* Round k (k = 0: the own blocks) counts when some rank moves data in it. */
    long rounds = 0;
    for (int k = 0; k < n; k++) {
      bool moves = false;
      for (int r = 0; r < n && !moves; r++)
        moves = trace_alltoallv_count(&t->req, r, (r + k) % n) > 0;
      rounds += moves;
    }
    return rounds;
  }
  if (n == 1) return 1;
  if (t->req.algo == COLL_ALGO_MASTER) return nseg;
  long k = (long)log2_ceil(n);
  bool inner = false; /* a rank other than the root with children copies out at the end */
  for (int v = 1; v < n; v++) inner |= subtree(n, v) > 1;
  return t->req.collective == COLL_KIND_SCATTER && inner ? k + 1 : k;
}

/* gather, scatter, all_to_allv: the bytes promised (see info_expected_bytes). */
static void new_kind_bytes(const trace_t *t, double *out) {
  int n = t->req.nranks, root = t->req.root;
  double S = (double)t->req.count * (double)t->esize;
  for (int r = 0; r < n; r++) {
    int v = (r - root + n) % n;
    if (t->req.collective == COLL_KIND_ALL_TO_ALLV) {
      for (int p = 0; p < n; p++)
        if (p != r) out[r] += (double)trace_alltoallv_count(&t->req, r, p) * (double)t->esize;
    } else if (t->req.algo == COLL_ALGO_MASTER) {
      out[r] =
          t->req.collective == COLL_KIND_GATHER ? (v == 0 ? 0 : S) : (v == 0 ? (n - 1) * S : 0);
    } else {
      out[r] = t->req.collective == COLL_KIND_GATHER ? (v == 0 ? 0 : subtree(n, v) * S)
                                                     : (subtree(n, v) - 1) * S;
    }
  }
}

long info_expected_steps(const trace_t *t) {
  int n = t->req.nranks;
  long nseg = (long)info_nseg(t);
  if (t->req.count == 0) return 0;
  if (t->req.collective == COLL_KIND_GATHER || t->req.collective == COLL_KIND_SCATTER ||
      t->req.collective == COLL_KIND_ALL_TO_ALLV)
    return new_kind_steps(t, nseg);
  if (t->req.collective == COLL_KIND_BROADCAST) {
    if (n == 1) return 0;
    switch (t->req.algo) {
      case COLL_ALGO_RING:
        return nseg + n - 2;
      case COLL_ALGO_TREE:
      case COLL_ALGO_HD:
        return (long)log2_ceil(n);
      default:
        return nseg;
    }
  }
  if (n == 1) return 1; /* one local copy */
  switch (t->req.algo) {
    case COLL_ALGO_RING:
    case COLL_ALGO_RING_NODES:
      return 2L * (n - 1) * nseg;
    case COLL_ALGO_TWO_LEVEL: {
      const algo_topo_t *m = t->req.topo;
      if (m == NULL || !algo_topo_uniform(m)) return 2L * (n - 1) * nseg;
      sched_params_t p = params_of(t);
      size_t part = algo_div_up(t->req.count, (size_t)m->max_local);
      long across = (long)algo_div_up(algo_div_up(part, (size_t)m->nnodes), algo_segment_elems(&p));
      return 2L * (m->max_local - 1) * nseg + (m->nnodes > 1 ? 2L * (m->nnodes - 1) * across : 0);
    }
    case COLL_ALGO_HD: {
      size_t pw = pow2_below(n);
      return 2L * (long)log2_ceil((int)pw) + (pw != (size_t)n ? 2 : 0);
    }
    case COLL_ALGO_MASTER:
      return (long)n * nseg;
    default:
      return -1;
  }
}

/* Bytes rank r of n sends in the hd or tree all-reduce of S bytes. */
static double flat_bytes(const trace_t *t, coll_algo_t algo, int n, int r, double S) {
  if (n < 2) return 0;
  if (algo == COLL_ALGO_HD) {
    size_t pw = pow2_below(n);
    int rem = n - (int)pw;
    double hd = 2.0 * (double)(pw - 1) / (double)pw * S;
    if (r < 2 * rem) return r % 2 == 0 ? S : hd + S;
    return hd;
  }
  double sum = 0;
  for (int tree = 0; tree < 2; tree++) {
    double half = (double)algo_part_len(t->req.count, 2, (size_t)tree) * (double)t->esize;
    algo_tree_node_t node;
    algo_dbtree_node(n, tree, r, &node);
    int links = (node.parent >= 0) + (node.child[0] >= 0) + (node.child[1] >= 0);
    sum += links * half;
  }
  return sum;
}

/* leaders.c: reduce to local 0 (binomial or chain: every rank but the leader sends S),
 * the leaders' all-reduce (hd or tree), the broadcast (binomial: S per child; chain: S
 * from every rank but the last). */
static double leaders_bytes(const trace_t *t, int r, double S) {
  const algo_topo_t *m = t->req.topo;
  int n = t->req.nranks, node = m ? m->node_of[r] : 0, l = m ? m->local_of[r] : r;
  int k = m ? algo_topo_local_count(m, node) : n, N = m ? m->nnodes : 1;
  sched_params_t p = params_of(t);
  bool tree = algo_leaders_tree_form(&p);
  double bytes = l > 0 ? S : 0;
  if (l == 0) bytes += flat_bytes(t, tree ? COLL_ALGO_TREE : COLL_ALGO_HD, N, node, S);
  if (tree) return bytes + (l < k - 1 ? S : 0);
  for (int mask = 1; mask < k; mask <<= 1)
    if (l < mask && l + mask < k) bytes += S;
  return bytes;
}

void info_expected_bytes(const trace_t *t, double *out) {
  int n = t->req.nranks, root = t->req.root;
  double S = (double)t->req.count * (double)t->esize;
  for (int r = 0; r < n; r++) out[r] = 0;
  if (n == 1 || t->req.count == 0) return;
  if (t->req.collective == COLL_KIND_GATHER || t->req.collective == COLL_KIND_SCATTER ||
      t->req.collective == COLL_KIND_ALL_TO_ALLV) {
    new_kind_bytes(t, out);
    return;
  }
  for (int r = 0; r < n; r++) {
    if (t->req.collective == COLL_KIND_BROADCAST) {
      int v = (r - root + n) % n;
      if (t->req.algo == COLL_ALGO_RING) {
        out[r] = v < n - 1 ? S : 0;
      } else if (t->req.algo == COLL_ALGO_MASTER) {
        out[r] = v == 0 ? (double)(n - 1) * S : 0;
      } else {
        int children = 0;
        for (int mask = 1; mask < n; mask <<= 1)
          if (v < mask && v + mask < n) children++;
        out[r] = children * S;
      }
      continue;
    }
    switch (t->req.algo) {
      case COLL_ALGO_RING:
      case COLL_ALGO_RING_NODES:
        out[r] = 2.0 * (n - 1) / n * S;
        break;
      case COLL_ALGO_TWO_LEVEL: {
        const algo_topo_t *m = t->req.topo;
        if (m == NULL || !algo_topo_uniform(m)) {
          out[r] = 2.0 * (n - 1) / n * S;
          break;
        }
        double k = m->max_local, N = m->nnodes;
        out[r] = 2.0 * (k - 1) / k * S + 2.0 * (N - 1) / N * S / k;
        break;
      }
      case COLL_ALGO_MASTER:
        out[r] = r == 0 ? (double)(n - 1) * S : S;
        break;
      case COLL_ALGO_HD:
      case COLL_ALGO_TREE:
        out[r] = flat_bytes(t, t->req.algo, n, r, S);
        break;
      case COLL_ALGO_LEADERS:
        out[r] = leaders_bytes(t, r, S);
        break;
      default:
        break;
    }
  }
}
