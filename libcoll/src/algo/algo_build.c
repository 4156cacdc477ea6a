/* algo_build(): validates a schedule request and dispatches it to the algorithm file
 * that implements (collective, algorithm). Above the algorithm files, which build on
 * schedule.c's primitives. */
#include <stdbool.h>
#include <stdint.h>

#include "algo/algo_internal.h"
#include "common/error.h"

typedef coll_status_t (*builder_fn)(const sched_params_t *p, sched_t *s);

/* Which builder implements (collective, algo). Broadcast: RING is a pipelined chain,
 * TREE and HD a binomial tree (recursive doubling is a binomial tree), MASTER the root
 * sending to every rank directly. */
static const builder_fn builders[COLL_KIND_COUNT][COLL_ALGO_COUNT] = {
    [COLL_KIND_ALL_REDUCE] =
        {
            [COLL_ALGO_RING] = algo_ring_allreduce,
            [COLL_ALGO_TREE] = algo_tree_allreduce,
            [COLL_ALGO_HD] = algo_halving_doubling_allreduce,
            [COLL_ALGO_MASTER] = algo_master_allreduce,
            [COLL_ALGO_RING_NODES] = algo_ring_nodes_allreduce,
            [COLL_ALGO_TWO_LEVEL] = algo_two_level_allreduce,
            [COLL_ALGO_LEADERS] = algo_leaders_allreduce,
        },
    [COLL_KIND_BROADCAST] =
        {
            [COLL_ALGO_RING] = algo_chain_broadcast,
            [COLL_ALGO_TREE] = algo_binomial_broadcast,
            [COLL_ALGO_HD] = algo_binomial_broadcast,
            [COLL_ALGO_MASTER] = algo_direct_broadcast,
        },
    /* The newer collectives: reduce is a pipelined
     * chain (ring) or a binomial tree (tree, hd); all_gather a ring or Bruck's
     * log-step algorithm (hd); reduce_scatter a ring or recursive halving (hd, powers
     * of two); all_to_all pairwise exchange;
     * barrier a one-byte all-reduce (reduce.c, allgather.c, reduce_scatter.c, alltoall.c).
     * Missing pairs fall back to the cost model. */
    [COLL_KIND_REDUCE] =
        {
            [COLL_ALGO_RING] = algo_chain_reduce,
            [COLL_ALGO_TREE] = algo_binomial_reduce,
            [COLL_ALGO_HD] = algo_binomial_reduce,
        },
    [COLL_KIND_ALL_GATHER] =
        {
            [COLL_ALGO_RING] = algo_ring_allgather,
            [COLL_ALGO_HD] = algo_bruck_allgather,
        },
    [COLL_KIND_REDUCE_SCATTER] = {[COLL_ALGO_RING] = algo_ring_reduce_scatter,
                                  [COLL_ALGO_HD] = algo_halving_reduce_scatter},
    [COLL_KIND_ALL_TO_ALL] = {[COLL_ALGO_RING] = algo_pairwise_alltoall},
    [COLL_KIND_BARRIER] =
        {
            [COLL_ALGO_RING] = algo_ring_allreduce,
            [COLL_ALGO_TREE] = algo_tree_allreduce,
            [COLL_ALGO_HD] = algo_halving_doubling_allreduce,
            [COLL_ALGO_MASTER] = algo_master_allreduce,
            [COLL_ALGO_RING_NODES] = algo_ring_nodes_allreduce,
            [COLL_ALGO_TWO_LEVEL] = algo_two_level_allreduce,
            [COLL_ALGO_LEADERS] = algo_leaders_allreduce,
        },
    /* gather and scatter (gather.c): the root exchanging with every rank directly
     * (master) or a binomial tree (tree, hd); all_to_allv pairwise exchange (alltoallv.c). */
    [COLL_KIND_GATHER] =
        {
            [COLL_ALGO_TREE] = algo_binomial_gather,
            [COLL_ALGO_HD] = algo_binomial_gather,
            [COLL_ALGO_MASTER] = algo_direct_gather,
        },
    [COLL_KIND_SCATTER] =
        {
            [COLL_ALGO_TREE] = algo_binomial_scatter,
            [COLL_ALGO_HD] = algo_binomial_scatter,
            [COLL_ALGO_MASTER] = algo_direct_scatter,
        },
    [COLL_KIND_ALL_TO_ALLV] = {[COLL_ALGO_RING] = algo_pairwise_alltoallv},
};

/* With one rank, every collective that reduces (and the barrier's one-byte all-reduce)
 * is OUTPUT = INPUT whatever the algorithm: one local copy, built here once rather than
 * by each builder. The library never asks for it (core/dispatch.c and cuda/cuda_path.c
 * copy before any schedule is built); the simulator, the tests and coll-sim do. */
static bool one_rank_is_a_copy(const sched_params_t *p) {
  return p->nranks == 1 && (coll_kind_reduces(p->collective) || p->collective == COLL_KIND_BARRIER);
}

static coll_status_t one_rank_copy(const sched_params_t *p, sched_t *s) {
  coll_status_t st = sched_begin_step(s);
  if (st == COLL_OK) st = sched_local_copy(s, SCHED_BUF_OUTPUT, 0, SCHED_BUF_INPUT, 0, p->count);
  return st;
}

static coll_status_t validate(coll_algo_t algo, const sched_params_t *p, const sched_t *s) {
  if (p == NULL || s == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: NULL params or schedule");
  if ((unsigned)p->collective >= COLL_KIND_COUNT)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: unknown collective %d",
                      (int)p->collective);
  if ((unsigned)algo >= COLL_ALGO_COUNT || algo == COLL_ALGO_AUTO)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "algo_build: algorithm %d is not a concrete algorithm (AUTO must be "
                      "resolved with algo_select first)",
                      (int)algo);
  if (algo_elem_size(p->dtype) == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: unknown dtype %d", (int)p->dtype);
  if (p->nranks < 1 || p->rank < 0 || p->rank >= p->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: rank %d of %d ranks is invalid",
                      p->rank, p->nranks);
  if (coll_kind_rooted(p->collective) && (p->root < 0 || p->root >= p->nranks))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: root %d of %d ranks", p->root,
                      p->nranks);
  if (p->count > SIZE_MAX / 16 / algo_elem_size(p->dtype) / (size_t)p->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: count %zu is too large", p->count);
  if (p->topo != NULL && (p->topo->nranks != p->nranks || p->topo->nnodes < 1))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "algo_build: the node map is of %d ranks, the call of %d", p->topo->nranks,
                      p->nranks);
  size_t in_count, out_count;
  if (p->collective == COLL_KIND_ALL_TO_ALLV &&
      (p->vcounts == NULL || p->count != (size_t)p->nranks ||
       !sched_vcounts_extent(p->vcounts, p->nranks, &in_count, &out_count) ||
       in_count > SIZE_MAX / 16 / algo_elem_size(p->dtype) ||
       out_count > SIZE_MAX / 16 / algo_elem_size(p->dtype)))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "algo_build: all_to_allv needs nranks (%d) counts and displacements that "
                      "fit in memory (count %zu)",
                      p->nranks, p->count);
  return COLL_OK;
}

coll_algo_t algo_effective(coll_algo_t algo, const sched_params_t *p) {
  if (algo == COLL_ALGO_TWO_LEVEL && p != NULL && !algo_topo_uniform(p->topo))
    return COLL_ALGO_RING_NODES;
  return algo;
}

coll_status_t algo_build(coll_algo_t algo, const sched_params_t *p, sched_t *s) {
  coll_status_t st = validate(algo, p, s);
  if (st != COLL_OK) return st;
  sched_init(s, p, algo);
  builder_fn fn = builders[p->collective][algo];
  if (fn == NULL)
    return coll_error(COLL_ERR_UNSUPPORTED, "algorithm %d does not implement collective %d",
                      (int)algo, (int)p->collective);
  if (p->count > 0) {
    st = one_rank_is_a_copy(p) ? one_rank_copy(p, s) : fn(p, s);
    if (st != COLL_OK) {
      sched_free(s);
      return st;
    }
  }
  sched_finish(s);
  return COLL_OK;
}
