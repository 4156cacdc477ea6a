/* Helpers shared by the algorithm files (not part of the schedule.h contract): element
 * sizes, balanced splits, segment sizes, a time-ordered op plan, and the per-algorithm
 * builders that algo_build() dispatches to. */
#ifndef COLL_ALGO_ALGO_INTERNAL_H
#define COLL_ALGO_ALGO_INTERNAL_H

#include <stddef.h>

#include "algo/schedule.h"

/* Default pipelining unit: fits L2 (512 KiB/core here) so a reduce stays in cache. */
#define ALGO_DEFAULT_SEGMENT_BYTES ((size_t)512 * 1024)

/* At most this many segments over the whole buffer (see algo_segment_elems). */
#define ALGO_MAX_SEGMENTS ((size_t)1 << 16)

/* Bytes of one element of dtype; 0 for an unknown dtype. */
size_t algo_elem_size(coll_dtype_t dtype);

/* hd all-reduce of at most this many bytes exchanges whole buffers (recursive doubling:
 * log2 p steps instead of halving-doubling's 2 log2 p), see halving_doubling.c. */
#define ALGO_HD_WHOLE_MAX_BYTES ((size_t)8192)
static inline int algo_hd_whole_exchange(const sched_params_t *p) {
  return p->count * algo_elem_size(p->dtype) <= ALGO_HD_WHOLE_MAX_BYTES;
}

/* Elements per segment for p (p->segment_bytes or the default), at least 1, and large
 * enough that the buffer has at most ALGO_MAX_SEGMENTS segments. */
size_t algo_segment_elems(const sched_params_t *p);

/* Start of part i when [0, count) is cut into `parts` nearly equal contiguous parts (the
 * first count % parts parts are one element longer). part_start(count, parts, parts) ==
 * count. */
static inline size_t algo_part_start(size_t count, size_t parts, size_t i) {
  size_t rem = count % parts;
  return count / parts * i + (i < rem ? i : rem);
}

static inline size_t algo_part_len(size_t count, size_t parts, size_t i) {
  return algo_part_start(count, parts, i + 1) - algo_part_start(count, parts, i);
}

static inline size_t algo_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* A plan: ops tagged with a global time slot, turned into steps (one per distinct time,
 * in time order, ops of one time in the order added). Used by algorithms written as
 * "at time t rank r does ...", which keeps all ranks in lock-step: an op matched at time
 * t on one side is at time t on the other, so the schedule cannot deadlock. */
typedef struct {
  size_t time;
  size_t seq;
  sched_op_t op;
} algo_timed_op_t;

typedef struct {
  algo_timed_op_t *ops;
  size_t nops;
  size_t cap;
} algo_plan_t;

coll_status_t algo_plan_add(algo_plan_t *plan, size_t time, sched_op_t op);
/* Append the plan's ops to s as steps; frees the plan's memory. */
coll_status_t algo_plan_emit(algo_plan_t *plan, sched_t *s);
void algo_plan_free(algo_plan_t *plan);

/* Op constructors for plans. */
sched_op_t algo_op_send(int peer, sched_buf_t buf, size_t offset, size_t count);
sched_op_t algo_op_recv_copy(int peer, sched_buf_t buf, size_t offset, size_t count);
sched_op_t algo_op_recv_reduce(int peer, sched_buf_t buf, size_t offset, sched_buf_t src_buf,
                               size_t src_offset, size_t count);

/* The builders; s is initialised, p validated, count > 0. The builders of the
 * collectives that reduce (all_reduce, barrier, reduce, reduce_scatter) are called with
 * nranks >= 2 only: algo_build does the one-rank copy itself. */
coll_status_t algo_ring_allreduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_tree_allreduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_halving_doubling_allreduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_master_allreduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_chain_broadcast(const sched_params_t *p, sched_t *s);
coll_status_t algo_binomial_broadcast(const sched_params_t *p, sched_t *s);
coll_status_t algo_direct_broadcast(const sched_params_t *p, sched_t *s);
coll_status_t algo_chain_reduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_binomial_reduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_ring_allgather(const sched_params_t *p, sched_t *s);
coll_status_t algo_bruck_allgather(const sched_params_t *p, sched_t *s);
coll_status_t algo_ring_reduce_scatter(const sched_params_t *p, sched_t *s);
coll_status_t algo_halving_reduce_scatter(const sched_params_t *p, sched_t *s);
coll_status_t algo_pairwise_alltoall(const sched_params_t *p, sched_t *s);
coll_status_t algo_direct_gather(const sched_params_t *p, sched_t *s);
coll_status_t algo_binomial_gather(const sched_params_t *p, sched_t *s);
coll_status_t algo_direct_scatter(const sched_params_t *p, sched_t *s);
coll_status_t algo_binomial_scatter(const sched_params_t *p, sched_t *s);
coll_status_t algo_pairwise_alltoallv(const sched_params_t *p, sched_t *s);

/* The ring all-reduce (ring.c) over a given order of ranks on a range of the buffers,
 * for the node-aware algorithms: see ring.c. algo_ring_nseg: segments per chunk when
 * `count` elements are cut into n chunks. */
size_t algo_ring_nseg(const sched_params_t *p, size_t count, int n);
coll_status_t algo_ring_allreduce_among(sched_t *s, const int *ring, int n, int pos, size_t base,
                                        size_t count, sched_buf_t src, size_t nseg);
coll_status_t algo_ring_nodes_allreduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_two_level_allreduce(const sched_params_t *p, sched_t *s);
coll_status_t algo_leaders_allreduce(const sched_params_t *p, sched_t *s);
/* leaders (leaders.c) takes the chain / double binary tree / chain form from this size
 * up, the binomial / halving-doubling / binomial one below. */
#define ALGO_LEADERS_TREE_MIN_BYTES ((size_t)64 << 10)
bool algo_leaders_tree_form(const sched_params_t *p);

/* Double binary tree shape (tree.c), exported for the cost model and tests: for tree
 * t (0 or 1) of n ranks, rank's parent (-1 at the root), its children (-1 where absent)
 * and its depth. */
typedef struct {
  int parent;
  int child[2];
  int depth;
} algo_tree_node_t;
void algo_dbtree_node(int n, int tree, int rank, algo_tree_node_t *node);
int algo_dbtree_depth(int n); /* the deepest node's depth (same for both trees) */

#endif
