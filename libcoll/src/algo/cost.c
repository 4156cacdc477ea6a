/* Cost model: predicted time of each algorithm from alpha (seconds per step), beta
 * (seconds per byte sent by the busiest rank) and gamma (seconds per byte reduced), and
 * the choice of the cheapest. Pure functions of values all ranks share, so every rank
 * picks the same algorithm.
 *
 *   S = count * elem_size, n ranks, nseg = segments per pipelined piece, D = tree depth
 *   ring all-reduce    2(n-1)*nseg steps, 2(n-1)/n S bytes, (n-1)/n S reduced
 *   tree all-reduce    ~2 nseg + 2 D + 1 steps (nseg + 1 for n = 2, nseg + 3 for n = 3:
 *                      chains, no node waits for a second child), ~2 S bytes (S for
 *                      n = 2), ~S reduced
 *   hd all-reduce      2 log2 p (+2 folding) steps, 2(p-1)/p S (+S folding), (p-1)/p S
 *                      (+S folding) reduced, p = largest power of two <= n; up to
 *                      ALGO_HD_WHOLE_MAX_BYTES log2 p (+2) steps, log2 p S (+S) sent and
 *                      reduced (whole-buffer exchanges)
 *   master all-reduce  n*nseg steps, 2(n-1) S through rank 0, (n-1) S reduced
 *   The CPUs that reduce are the ones that move the bytes (shm: memcpy into and out of
 *   the FIFO; tcp over loopback: the kernel's copies), so a rank pays bytes beta plus
 *   reduced gamma, one after the other; pipelining (ring, tree) overlaps one rank's work
 *   with its peers' and costs one segment of fill. hd is not pipelined: a step's
 *   reduction waits for the peer's whole message, so it also pays its first message's
 *   bytes once more as fill (measured: 2 ranks, 4-64 MiB, hd 0-15% behind ring). The
 *   two-rank tree is counted with S reduced per rank although each rank reduces only its
 *   half: each reduction sits on the chain's path (the root reduces a segment before it
 *   sends it down), which measured about as costly. The earlier overlap model,
 *   max(bytes beta, reduced gamma), made that tree (about half the ring's steps) win at
 *   every size; measured on shm it was 15-35% slower than ring from 4 MiB up (numbers
 *   and commands: bench/algorithms/calibrate.md).
 *
 *   broadcast: chain (ring) (nseg + n - 2) steps of one segment; binomial (tree, hd)
 *   ceil(log2 n) steps of S; direct (master) (n-1) S from the root.
 *
 *   reduce: chain (ring) (nseg + n - 2) steps of one segment plus its reduction;
 *   binomial (tree, hd) ceil(log2 n) steps of S sent and S reduced.
 *   all_gather: ring 1 + (n-1) nseg steps of one segment; Bruck (hd) ceil(log2 n) steps,
 *   (n-1) S sent, plus two copies of n S. reduce_scatter: ring (n-1) nseg steps, (n-1) S
 *   sent and reduced (S = one block); recursive halving (hd, powers of two) log2 n
 *   steps, the same bytes, not pipelined. all_to_all: pairwise n-1 steps, (n-1) S sent.
 *   barrier: a one-byte all-reduce.
 *
 *   arena all-reduce (one host, shared memory; onehost/arena.c): (R + 1) barriers of n
 *   arrivals for R = S / slot rounds, (n-1)/n S copied in and out (each counted as half
 *   of beta's two copies), S read and reduced. algo_select never returns it: only the
 *   layers above know whether the ranks share a host; algo_arena_preferred decides, by rule.
 *
 *   Several nodes (sched_params_t.topo): alpha and beta are the costs inside a node,
 *   inter_alpha and inter_beta through a node's link to the others (0: the same). The
 *   flat algorithms pay the inter-node constants for every step and byte, as before the
 *   node map (a pipeline runs at its slowest link); the rank-order ring pays inter_beta
 *   times the most of its links that leave one node (1 when each node's ranks are
 *   consecutive, k with k ranks per node placed round-robin: they share the node's link).
 *   ring_nodes  the ring's formula with one link leaving each node
 *   two_level   2(k-1) nseg steps alpha, 2(k-1)/k S beta, (k-1)/k S reduced inside the
 *               nodes (phases 1 and 3), plus 2(N-1) nseg' steps inter_alpha,
 *               2(N-1)/N S/k bytes per ring times k rings sharing the node's link
 *               inter_beta, (N-1)/N S/k reduced across (phase 2); unequal nodes: ring_nodes
 *   leaders     the sum of its phases' predictions: reduce over the largest node's k
 *               ranks (binomial, or chain from ALGO_LEADERS_TREE_MIN_BYTES) and
 *               broadcast back (binomial or chain) at the intra-node constants, the
 *               all-reduce among the N leaders (hd, or the double binary tree) at the
 *               inter-node ones
 *   algo_select offers ring_nodes, two_level and leaders only with several nodes, so on one node
 *   every choice is what it was before them.
 *
 * Master is never chosen by algo_select (it is a teaching baseline; force it with
 * COLL_ALGO=master). */
#include <math.h>
#include <stddef.h>

#include "algo/algo_internal.h"

/* Defaults for this machine kind (2 vCPU Zen 2), measured with bench/algorithms/calibrate.sh
 * (bench/calibrate under collrun -n 2, median of 3 runs per transport, each run after
 * waiting for a mostly idle machine) during a quiet spell of the shared machine (load
 * average below 1; under load 5-9 single runs came out up to 2x slower, the ratios
 * between the constants about the same; see bench/algorithms/calibrate.md):
 *  - alpha: ring all-reduce of one float per rank (2 steps), median of 201 calls, / 2
 *  - gamma: dst[i] = a[i] + b[i] over 16 MiB float buffers, seconds per byte of dst
 *  - beta: 64 MiB ring all-reduce, t = steps alpha + S beta + S/2 gamma solved for beta
 *    (S bytes sent per rank; for shm that is the sender's copy into the FIFO and the
 *    receiver's copy out, for tcp the kernel's two copies)
 * Runs (alpha us, 1/beta GB/s, 1/gamma GB/s): shm 0.91 4.63 4.38, 0.97 4.79 3.96,
 * 0.64 4.96 4.24; tcp 10.4 1.96 4.04, 10.7 2.58 4.43, 11.1 2.21 3.92. */
const algo_cost_t algo_cost_shm_default = {
    .alpha = 0.91e-6, .beta = 1.0 / 4.78e9, .gamma = 1.0 / 4.24e9};
const algo_cost_t algo_cost_tcp_default = {
    .alpha = 10.7e-6, .beta = 1.0 / 2.21e9, .gamma = 1.0 / 4.03e9};

/* The arena's default slot (onehost/arena_setup.c), and the smallest all-reduce it takes
 * with two ranks and with more (measured, see algo_arena_preferred). */
#define ARENA_MODEL_SLOT_BYTES (1024.0 * 1024.0)
#define ARENA_MIN_BYTES_2 ((size_t)16 << 20)
#define ARENA_MIN_BYTES_3 ((size_t)64 << 10)

static double log2_ceil(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return (double)k;
}

static double pipelined(double steps, double bytes, double reduced, double seg_bytes,
                        const algo_cost_t *c) {
  return steps * c->alpha + bytes * c->beta + reduced * c->gamma + seg_bytes * (c->beta + c->gamma);
}

/* The constants between nodes (the intra-node ones where none are given). */
static algo_cost_t inter_cost(const algo_cost_t *c) {
  algo_cost_t x = *c;
  if (c->inter_alpha > 0) x.alpha = c->inter_alpha;
  if (c->inter_beta > 0) x.beta = c->inter_beta;
  x.inter_alpha = x.inter_beta = 0;
  return x;
}

static double ring_cost(const sched_params_t *p, const algo_cost_t *c, double beta) {
  int n = p->nranks;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = (double)algo_segment_elems(p) * esize;
  double chunk = ceil((double)p->count / n) * esize;
  double nseg = fmax(1.0, ceil(chunk / seg));
  algo_cost_t x = *c;
  x.beta = beta;
  return pipelined(2.0 * (n - 1) * nseg, 2.0 * (n - 1) / n * S, (double)(n - 1) / n * S,
                   fmin(seg, chunk), &x);
}

static double two_level_cost(const sched_params_t *p, const algo_cost_t *c) {
  const algo_topo_t *t = p->topo;
  int k = t->max_local, N = t->nnodes;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = (double)algo_segment_elems(p) * esize;
  double t_in = 0, t_out = 0;
  if (k > 1) {
    double part = ceil((double)p->count / k) * esize;
    double nseg = fmax(1.0, ceil(part / seg));
    t_in = pipelined(2.0 * (k - 1) * nseg, 2.0 * (k - 1) / k * S, (double)(k - 1) / k * S,
                     fmin(seg, part), c);
  }
  if (N > 1) {
    algo_cost_t x = inter_cost(c);
    double part = ceil((double)p->count / k) * esize;
    double chunk = ceil(part / esize / N) * esize;
    double nseg = fmax(1.0, ceil(chunk / seg));
    /* k rings share the node's link: it carries k times one ring's bytes */
    x.beta *= k;
    t_out = pipelined(2.0 * (N - 1) * nseg, 2.0 * (N - 1) / N * part, (double)(N - 1) / N * part,
                      fmin(seg, chunk), &x);
  }
  return t_in + t_out;
}

static double allreduce_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c);
static double broadcast_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c);
static double reduce_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c);

/* leaders.c's three phases (k ranks in the largest node, N nodes). */
static double leaders_cost(const sched_params_t *p, const algo_cost_t *c) {
  const algo_topo_t *t = p->topo;
  int k = t != NULL ? t->max_local : p->nranks, N = t != NULL ? t->nnodes : 1;
  bool tree = algo_leaders_tree_form(p);
  sched_params_t q = *p;
  q.topo = NULL;
  q.root = 0;
  double total = 0;
  if (k > 1) {
    q.nranks = k;
    q.collective = COLL_KIND_REDUCE;
    total += reduce_cost(tree ? COLL_ALGO_RING : COLL_ALGO_TREE, &q, c);
    q.collective = COLL_KIND_BROADCAST;
    total += broadcast_cost(tree ? COLL_ALGO_RING : COLL_ALGO_TREE, &q, c);
  }
  if (N > 1) {
    algo_cost_t x = inter_cost(c);
    q.nranks = N;
    q.collective = COLL_KIND_ALL_REDUCE;
    total += allreduce_cost(tree ? COLL_ALGO_TREE : COLL_ALGO_HD, &q, &x);
  }
  return total;
}

/* Several nodes: the flat algorithms at the inter-node constants, the node-aware ones
 * by their phases. */
static double allreduce_cost_nodes(coll_algo_t algo, const sched_params_t *p,
                                   const algo_cost_t *c) {
  algo_cost_t x = inter_cost(c);
  switch (algo_effective(algo, p)) {
    case COLL_ALGO_RING:
      return ring_cost(p, &x, x.beta * (p->topo->ring_out > 1 ? p->topo->ring_out : 1));
    case COLL_ALGO_RING_NODES:
      return ring_cost(p, &x, x.beta);
    case COLL_ALGO_TWO_LEVEL:
      return two_level_cost(p, c);
    case COLL_ALGO_LEADERS:
      return leaders_cost(p, c);
    case COLL_ALGO_ARENA:
      return INFINITY; /* one host only */
    default: {
      sched_params_t flat = *p;
      flat.topo = NULL;
      return allreduce_cost(algo, &flat, &x);
    }
  }
}

static double allreduce_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  if (algo_topo_nodes(p->topo) > 1) return allreduce_cost_nodes(algo, p, c);
  int n = p->nranks;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = (double)algo_segment_elems(p) * esize;
  switch (algo) {
    case COLL_ALGO_RING:
    case COLL_ALGO_RING_NODES: /* one node: the same ring */
    case COLL_ALGO_TWO_LEVEL:
      return ring_cost(p, c, c->beta);
    case COLL_ALGO_LEADERS:
      return leaders_cost(p, c);
    case COLL_ALGO_TREE: {
      double half = ceil((double)p->count / 2) * esize;
      double nseg = fmax(1.0, ceil(half / seg));
      double D = (double)algo_dbtree_depth(n);
      double steps = n == 2 ? nseg + 1.0 : n == 3 ? nseg + 3.0 : 2.0 * nseg + 2.0 * D + 1.0;
      return pipelined(steps, (n == 2 ? 1.0 : 2.0) * S, S, fmin(seg, half), c);
    }
    case COLL_ALGO_HD: {
      int pw = 1;
      while (pw * 2 <= n) pw *= 2;
      int fold = pw != n, whole = algo_hd_whole_exchange(p);
      double levels = log2_ceil(pw), folded = fold ? S : 0.0;
      double steps = (whole ? levels : 2.0 * levels) + (fold ? 2.0 : 0.0);
      double bytes = (whole ? levels * S : 2.0 * (pw - 1) / pw * S) + folded;
      /* whole buffers: the copy out counted as one more S reduced */
      double reduced = (whole ? (levels + 1.0) * S : (double)(pw - 1) / pw * S) + folded;
      /* the first message, see above */
      double fill = (whole || fold ? S : S / 2.0) * c->beta;
      return steps * c->alpha + bytes * c->beta + reduced * c->gamma + fill;
    }
    case COLL_ALGO_MASTER: {
      double nseg = fmax(1.0, ceil(S / seg));
      return n * nseg * c->alpha + 2.0 * (n - 1) * S * c->beta + (n - 1) * S * c->gamma;
    }
    case COLL_ALGO_ARENA: {
      double rounds = fmax(1.0, ceil(S / ARENA_MODEL_SLOT_BYTES));
      return (rounds + 1.0) * n * c->alpha + (double)(n - 1) / n * S * c->beta + S * c->gamma;
    }
    default:
      return INFINITY;
  }
}

static double broadcast_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  int n = p->nranks;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = fmin((double)algo_segment_elems(p) * esize, S);
  double nseg = seg > 0 ? fmax(1.0, ceil(S / seg)) : 1.0;
  switch (algo) {
    case COLL_ALGO_RING:
      return (nseg + n - 2) * (c->alpha + seg * c->beta);
    case COLL_ALGO_TREE:
    case COLL_ALGO_HD:
      return log2_ceil(n) * (c->alpha + S * c->beta);
    case COLL_ALGO_MASTER:
      return nseg * c->alpha + (n - 1) * S * c->beta;
    default:
      return INFINITY;
  }
}

static double reduce_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  int n = p->nranks;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = fmin((double)algo_segment_elems(p) * esize, S);
  double nseg = seg > 0 ? fmax(1.0, ceil(S / seg)) : 1.0;
  switch (algo) {
    case COLL_ALGO_RING:
      return (nseg + n - 2) * (c->alpha + seg * (c->beta + c->gamma)) + seg * c->gamma;
    case COLL_ALGO_TREE:
    case COLL_ALGO_HD:
      return log2_ceil(n) * (c->alpha + S * (c->beta + c->gamma));
    default:
      return INFINITY;
  }
}

/* all_gather, reduce_scatter and all_to_all: S is one rank's block. */
static double block_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  int n = p->nranks;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = fmin((double)algo_segment_elems(p) * esize, S);
  double nseg = seg > 0 ? fmax(1.0, ceil(S / seg)) : 1.0;
  if (p->collective == COLL_KIND_ALL_GATHER && algo == COLL_ALGO_RING)
    return (1.0 + (n - 1) * nseg) * c->alpha + (n - 1) * S * c->beta;
  if (p->collective == COLL_KIND_ALL_GATHER && algo == COLL_ALGO_HD)
    return log2_ceil(n) * c->alpha + (n - 1) * S * c->beta + 2.0 * n * S * c->gamma;
  if (p->collective == COLL_KIND_REDUCE_SCATTER && algo == COLL_ALGO_RING)
    return (n - 1) * nseg * c->alpha + (n - 1) * S * (c->beta + c->gamma) + seg * c->gamma;
  if (p->collective == COLL_KIND_REDUCE_SCATTER && algo == COLL_ALGO_HD)
    return (n & (n - 1)) ? INFINITY /* powers of two only */
                         : log2_ceil(n) * c->alpha + (n - 1) * S * (c->beta + c->gamma);
  if (p->collective == COLL_KIND_ALL_TO_ALL && algo == COLL_ALGO_RING)
    return (n - 1) * (c->alpha + S * c->beta);
  return INFINITY;
}

/* gather and scatter: the root's link carries (n-1) S either way; direct posts n-1
 * messages per segment, the binomial tree ceil(log2 n) rounds of whole subtrees plus a
 * copy through SCRATCH. */
static double rooted_block_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  int n = p->nranks;
  double esize = (double)algo_elem_size(p->dtype);
  double S = (double)p->count * esize;
  double seg = fmin((double)algo_segment_elems(p) * esize, S);
  double nseg = seg > 0 ? fmax(1.0, ceil(S / seg)) : 1.0;
  if (algo == COLL_ALGO_MASTER) return nseg * (n - 1) * c->alpha + (n - 1) * S * c->beta;
  if (algo == COLL_ALGO_TREE || algo == COLL_ALGO_HD)
    return log2_ceil(n) * nseg * c->alpha + (n - 1) * S * c->beta + S * c->gamma;
  return INFINITY;
}

/* all_to_allv: pairwise rounds; S is what this rank sends (its own layout, for the INFO
 * line: there is one algorithm, so every rank chooses it). */
static double alltoallv_cost(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  if (algo != COLL_ALGO_RING) return INFINITY;
  int n = p->nranks;
  double sent = 0;
  for (int q = 0; p->vcounts != NULL && q < n; q++)
    if (q != p->rank) sent += (double)sched_v(p->vcounts, n, SCHED_V_SENDCOUNTS, q);
  return (n - 1) * c->alpha + sent * (double)algo_elem_size(p->dtype) * c->beta;
}

double algo_predict(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  if (p == NULL || c == NULL || p->nranks < 1 || algo_elem_size(p->dtype) == 0) return INFINITY;
  if (p->count == 0) return 0.0;
  if (p->nranks == 1) /* one local copy */
    return (double)p->count * (double)algo_elem_size(p->dtype) * c->gamma;
  if (p->collective == COLL_KIND_ALL_REDUCE || p->collective == COLL_KIND_BARRIER)
    return allreduce_cost(algo, p, c);
  /* the other collectives are flat: on several nodes every link counts as between nodes */
  algo_cost_t x = algo_topo_nodes(p->topo) > 1 ? inter_cost(c) : *c;
  c = &x;
  if (p->collective == COLL_KIND_BROADCAST) return broadcast_cost(algo, p, c);
  if (p->collective == COLL_KIND_ALL_REDUCE || p->collective == COLL_KIND_BARRIER)
    return allreduce_cost(algo, p, c);
  if (p->collective == COLL_KIND_REDUCE) return reduce_cost(algo, p, c);
  if (p->collective == COLL_KIND_GATHER || p->collective == COLL_KIND_SCATTER)
    return rooted_block_cost(algo, p, c);
  if (p->collective == COLL_KIND_ALL_TO_ALLV) return alltoallv_cost(algo, p, c);
  return block_cost(algo, p, c);
}

/* The additive model above cannot see what decides here: with more ranks than cores the
 * time is the bytes all ranks move together (the arena moves about 4.5 S per rank at 4
 * ranks, the FIFO ring 6.75 S), and the arena's rounds stay in cache. So the rule is the
 * measurement's (bench/algorithms/arena_compare.sh, docs/algorithms.md "Arena"; 2 cores): from
 * 64 KiB with 3 or more ranks (1.1-2.5x the cost model's other choice at 64 KiB-64 MiB
 * on 3 and 4 ranks), from 16 MiB with 2 (even with the ring at 16 MiB, about 1.1x at
 * 64 MiB; from 64 KiB to 4 MiB halving-doubling or the ring is as fast or faster). */
size_t algo_arena_min_bytes(int nranks) {
  return nranks < 2 ? 0 : nranks == 2 ? ARENA_MIN_BYTES_2 : ARENA_MIN_BYTES_3;
}

bool algo_arena_preferred(const sched_params_t *p, const algo_cost_t *c) {
  (void)c;
  if (p == NULL || p->collective != COLL_KIND_ALL_REDUCE || p->nranks < 2) return false;
  double bytes = (double)p->count * (double)algo_elem_size(p->dtype);
  return bytes >= (double)algo_arena_min_bytes(p->nranks);
}

/* The small-message path reads (n-1) S per rank where the ring moves 2 (n-1)/n S, but
 * in one step instead of 2 (n-1) with a fingerprint round trip before them. Measured
 * (2 ranks, shm, blocking, alternating runs; docs/architecture.md, "Small messages"):
 * SMALL_MAX_BYTES_2 at two ranks; with more ranks each reads n-1 peers. */
#define SMALL_MAX_BYTES_2 ((size_t)4 << 10)
#define SMALL_MAX_BYTES_N ((size_t)32 << 10)

size_t algo_small_max_bytes(int nranks) {
  if (nranks < 2) return 0;
  return nranks == 2 ? SMALL_MAX_BYTES_2 : SMALL_MAX_BYTES_N;
}

/* Broadcast on the same path: the non-roots copy S out of the root's lines. Measured at 2
 * ranks (blocking, alternating): 8-512 B 0.62-0.91 us against the chain's 1.07-1.11, 4 KiB
 * 2.32 against 1.28; at 4 ranks on 2 CPUs it wins at 4 KiB too (16.9 against 21.4). */
#define SMALL_BROADCAST_MAX_BYTES_2 ((size_t)1 << 10)

size_t algo_small_broadcast_max_bytes(int nranks) {
  return nranks == 2 ? SMALL_BROADCAST_MAX_BYTES_2 : algo_small_max_bytes(nranks);
}

coll_algo_t algo_select(const sched_params_t *p, const algo_cost_t *c) {
  /* In order of preference on equal cost. */
  static const coll_algo_t allreduce_candidates[] = {COLL_ALGO_RING, COLL_ALGO_HD, COLL_ALGO_TREE};
  static const coll_algo_t broadcast_candidates[] = {COLL_ALGO_RING, COLL_ALGO_TREE};
  const coll_algo_t *cand = allreduce_candidates;
  size_t ncand = sizeof allreduce_candidates / sizeof allreduce_candidates[0];
  static const coll_algo_t reduce_candidates[] = {COLL_ALGO_RING, COLL_ALGO_TREE};
  static const coll_algo_t allgather_candidates[] = {COLL_ALGO_RING, COLL_ALGO_HD};
  static const coll_algo_t ring_only[] = {COLL_ALGO_RING};
  static const coll_algo_t rooted_block_candidates[] = {COLL_ALGO_MASTER, COLL_ALGO_TREE};
  if (p != NULL && p->collective == COLL_KIND_BROADCAST) {
    cand = broadcast_candidates;
    ncand = sizeof broadcast_candidates / sizeof broadcast_candidates[0];
  } else if (p != NULL && p->collective == COLL_KIND_REDUCE) {
    cand = reduce_candidates;
    ncand = 2;
  } else if (p != NULL && p->collective == COLL_KIND_ALL_GATHER) {
    cand = allgather_candidates;
    ncand = 2;
  } else if (p != NULL && p->collective == COLL_KIND_REDUCE_SCATTER) {
    cand = allgather_candidates; /* ring, recursive halving (hd) */
    ncand = 2;
  } else if (p != NULL &&
             (p->collective == COLL_KIND_ALL_TO_ALL || p->collective == COLL_KIND_ALL_TO_ALLV)) {
    cand = ring_only;
    ncand = 1;
  } else if (p != NULL &&
             (p->collective == COLL_KIND_GATHER || p->collective == COLL_KIND_SCATTER)) {
    cand = rooted_block_candidates;
    ncand = 2;
  }
  coll_algo_t best = cand[0];
  double best_t = algo_predict(best, p, c);
  for (size_t i = 1; i < ncand; i++) {
    double t = algo_predict(cand[i], p, c);
    if (t < best_t) best = cand[i], best_t = t;
  }
  /* The node-aware all-reduces, after the others (equal cost keeps the flat choice), and
   * only where there are nodes to be aware of: one node chooses as it did before them. */
  static const coll_algo_t node_candidates[] = {COLL_ALGO_RING_NODES, COLL_ALGO_TWO_LEVEL,
                                                COLL_ALGO_LEADERS};
  if (p != NULL && cand == allreduce_candidates && algo_topo_nodes(p->topo) > 1)
    for (size_t i = 0; i < 3; i++) {
      if (algo_effective(node_candidates[i], p) != node_candidates[i]) continue;
      double t = algo_predict(node_candidates[i], p, c);
      if (t < best_t) best = node_candidates[i], best_t = t;
    }
  return best;
}
