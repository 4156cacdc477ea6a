/* Node-aware all-reduces, built on the node map (topo.h): a ring that visits the ranks
 * node by node (ring_nodes), and the two-level all-reduce (two_level).
 *
 * ring_nodes. The ring of ring.c, but position i of the ring is the i-th rank of the
 *   node map's list (node 0's ranks in rank order, then node 1's, ...) instead of rank i.
 *   The ring then leaves and enters each node once per pass whatever the placement: with
 *   round-robin placement (rank r on host r % H) the rank-order ring crosses nodes on
 *   every one of its n links, this one on H of them.
 *
 *      node 0: r0 r2      ring: r0 -> r2 -> r1 -> r3 -> r0    (ranks 0..3, hosts r % 2)
 *      node 1: r1 r3            two links cross (r2 -> r1, r3 -> r0), not four
 *
 *   steps and bytes: those of the ring, 2 (n-1) nseg steps, 2 (n-1)/n S per rank; per
 *   step, one message leaves each node.
 *
 * two_level. N nodes of k ranks each (equal counts required; otherwise ring_nodes is
 *   built instead, algo_effective says so). Local rank l of node m:
 *
 *     phase 1  reduce-scatter inside the node, a ring over the k local ranks: the buffer
 *              cut into k parts, local rank l ends with part l summed over its node
 *              (step s: send part l-s-1 to local l+1, receive part l-s-2 from local l-1
 *              and reduce, s = 0..k-2, parts mod k)
 *     phase 2  all-reduce of part l across the nodes: ring.c's ring among the N ranks of
 *              local index l (one per node, node order); the k rings run in parallel,
 *              each on its own 1/k of the buffer
 *     phase 3  all-gather inside the node: step s: send part l-s to local l+1, receive
 *              part l-s-1 from local l-1, s = 0..k-2
 *
 *        node 0            node 1
 *     [l0]-[l1]         [l0]-[l1]      phase 1 and 3: rings inside each node
 *       |    \___________/ |   |
 *       |     ____________/    |       phase 2: l0 with l0, l1 with l1, across nodes
 *       |____/                 |
 *
 *   bytes per rank: 2 (k-1)/k S inside the node, 2 (N-1)/N S/k between nodes (the node
 *   sends 2 (N-1)/N S in all, as the ring does, but over k parallel rings);
 *   steps: 2 (k-1) nseg inside, 2 (N-1) nseg' between (nseg' for chunks of S/(kN)).
 *   Every element's final value is computed once, in phase 2 by one rank, then copied.
 *
 *   With k = 1 phase 2 is the ring of all ranks; with N = 1 phases 1 and 3 are the ring
 *   of the node. */
#include <stdlib.h>

#include "algo/algo_internal.h"
#include "common/error.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* This rank's position in the node-ordered list. */
static int node_position(const algo_topo_t *t, int rank) {
  return t->node_start[t->node_of[rank]] + t->local_of[rank];
}

coll_status_t algo_ring_nodes_allreduce(const sched_params_t *p, sched_t *s) {
  const algo_topo_t *t = p->topo;
  if (t == NULL) return algo_ring_allreduce(p, s);
  return algo_ring_allreduce_among(s, t->node_ranks, p->nranks, node_position(t, p->rank), 0,
                                   p->count, SCHED_BUF_INPUT,
                                   algo_ring_nseg(p, p->count, p->nranks));
}

/* Segment j of part c of the k parts of [0, count). */
static void part_segment(size_t count, int k, size_t nseg, int c, size_t j, size_t *off,
                         size_t *len) {
  size_t pstart = algo_part_start(count, (size_t)k, (size_t)c);
  size_t plen = algo_part_len(count, (size_t)k, (size_t)c);
  *off = pstart + algo_part_start(plen, nseg, j);
  *len = algo_part_len(plen, nseg, j);
}

/* Phase 1: the ring reduce-scatter over the node's k ranks (local: their ranks, this one
 * at l); part l of OUTPUT ends as the node's sum. */
static coll_status_t node_reduce_scatter(const sched_params_t *p, sched_t *s, const int *local,
                                         int k, int l) {
  size_t nseg = algo_ring_nseg(p, p->count, k);
  int next = local[mod(l + 1, k)], prev = local[mod(l - 1, k)];
  coll_status_t st = COLL_OK;
  for (int step = 0; step < k - 1 && st == COLL_OK; step++) {
    int send_part = mod(l - step - 1, k), recv_part = mod(l - step - 2, k);
    sched_buf_t send_buf = step == 0 ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT;
    for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
      size_t soff, slen, roff, rlen;
      part_segment(p->count, k, nseg, send_part, j, &soff, &slen);
      part_segment(p->count, k, nseg, recv_part, j, &roff, &rlen);
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, next, send_buf, soff, slen);
      if (st == COLL_OK)
        st = sched_recv_reduce(s, prev, SCHED_BUF_OUTPUT, roff, SCHED_BUF_INPUT, roff, rlen);
    }
  }
  return st;
}

/* Phase 3: the ring all-gather of the k parts inside the node. */
static coll_status_t node_all_gather(const sched_params_t *p, sched_t *s, const int *local, int k,
                                     int l) {
  size_t nseg = algo_ring_nseg(p, p->count, k);
  int next = local[mod(l + 1, k)], prev = local[mod(l - 1, k)];
  coll_status_t st = COLL_OK;
  for (int step = 0; step < k - 1 && st == COLL_OK; step++) {
    int send_part = mod(l - step, k), recv_part = mod(l - step - 1, k);
    for (size_t j = 0; j < nseg && st == COLL_OK; j++) {
      size_t soff, slen, roff, rlen;
      part_segment(p->count, k, nseg, send_part, j, &soff, &slen);
      part_segment(p->count, k, nseg, recv_part, j, &roff, &rlen);
      st = sched_begin_step(s);
      if (st == COLL_OK) st = sched_send(s, next, SCHED_BUF_OUTPUT, soff, slen);
      if (st == COLL_OK) st = sched_recv_copy(s, prev, SCHED_BUF_OUTPUT, roff, rlen);
    }
  }
  return st;
}

coll_status_t algo_two_level_allreduce(const sched_params_t *p, sched_t *s) {
  const algo_topo_t *t = p->topo;
  if (algo_effective(COLL_ALGO_TWO_LEVEL, p) != COLL_ALGO_TWO_LEVEL) {
    s->algo = COLL_ALGO_RING_NODES;
    return algo_ring_nodes_allreduce(p, s);
  }
  if (t == NULL) return algo_ring_allreduce(p, s); /* one node: phases 1 and 3 are its ring */
  int r = p->rank, k = t->max_local, N = t->nnodes;
  int m = t->node_of[r], l = t->local_of[r];
  const int *local = &t->node_ranks[t->node_start[m]];
  coll_status_t st = k > 1 ? node_reduce_scatter(p, s, local, k, l) : COLL_OK;
  if (st == COLL_OK && N > 1) {
    int *cross = malloc((size_t)N * sizeof *cross);
    if (cross == NULL) return coll_error(COLL_ERR_NO_MEMORY, "two_level: out of memory");
    for (int i = 0; i < N; i++) cross[i] = algo_topo_rank(t, i, l);
    /* every ring cut alike (from the largest part), so the k rings keep in step */
    size_t nseg = algo_ring_nseg(p, algo_div_up(p->count, (size_t)k), N);
    size_t pstart = algo_part_start(p->count, (size_t)k, (size_t)l);
    size_t plen = algo_part_len(p->count, (size_t)k, (size_t)l);
    st = algo_ring_allreduce_among(s, cross, N, m, pstart, plen,
                                   k > 1 ? SCHED_BUF_OUTPUT : SCHED_BUF_INPUT, nseg);
    free(cross);
  }
  if (st == COLL_OK && k > 1) st = node_all_gather(p, s, local, k, l);
  return st;
}
