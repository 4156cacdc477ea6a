/* Schedules: what an algorithm produces. A schedule is the list of steps one rank runs
 * for one collective call: sends to peers, receives that copy or reduce into a buffer,
 * and local copies, on element ranges of the user's buffers. Algorithms are pure
 * functions from (collective, count, type, rank, nranks, root) to a schedule; the
 * executor runs it over transports, the simulator runs all ranks' schedules in one
 * process (tests, coll-sim, cost model).
 *
 * Semantics (the contract between algorithms, executor and simulator):
 *  1. Steps run in order. The ops of one step may run concurrently and in any order; a
 *     step is finished when all its ops are. (An executor may start later steps early
 *     only where that cannot change the result: per-peer order kept, no memory hazard.)
 *  2. Between two ranks, the k-th SEND from a to b is matched with the k-th RECV_* of b
 *     from a, and both have the same element count. Nothing else identifies a message.
 *  3. Offsets and counts are in elements of the call's dtype. Buffers are named, not
 *     pointed to: INPUT (the caller's send buffer, read-only), OUTPUT (the caller's
 *     receive buffer) and SCRATCH (scratch_count elements owned by the executor).
 *     In-place calls pass the same pointer for INPUT and OUTPUT; schedules must give the
 *     same result then (never write OUTPUT where INPUT is read later).
 *  4. RECV_REDUCE: buf[offset..] = src_buf[src_offset..] OP received. RECV_COPY:
 *     buf[offset..] = received. SEND: send buf[offset..offset+count). LOCAL_COPY:
 *     buf[offset..] = src_buf[src_offset..]. LOCAL_REDUCE: buf[offset..] =
 *     buf[offset..] OP src_buf[src_offset..].
 *  5. For COLL_AVG the schedule sums; the executor divides OUTPUT by nranks at the end.
 *  6. All ranks must end with bit-identical OUTPUT: every element's final value is
 *     computed once, by one rank, and then copied.
 *  7. (Reading of 2.) When one step holds several messages between the same two ranks,
 *     "k-th" is in op order: both sides list them in the same order and the executor
 *     posts each peer's sends and receives in op order.
 *  8. Broadcast: the root reads INPUT and does not write its OUTPUT; the other ranks
 *     receive into OUTPUT and forward from there (coll_broadcast passes its one buffer as
 *     both). A LOCAL_COPY whose source and destination are the same memory (in-place
 *     with one rank) is a no-op (memmove).
 *  9. The built-in algorithms keep ranks in lock-step (a message's send and receive sit
 *     at the same position in both ranks' sequences of time slots) and never put more
 *     than segment_bytes in one message; the simulator (sim/sim.h) checks pairing, hazards and
 *     deadlock-freedom with rendezvous sends. */
#ifndef COLL_ALGO_SCHEDULE_H
#define COLL_ALGO_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/topo.h"
#include "coll.h"

typedef enum {
  SCHED_SEND = 0,
  SCHED_RECV_COPY,
  SCHED_RECV_REDUCE,
  SCHED_LOCAL_COPY,
  SCHED_LOCAL_REDUCE,
} sched_op_kind_t;

typedef enum { SCHED_BUF_INPUT = 0, SCHED_BUF_OUTPUT, SCHED_BUF_SCRATCH } sched_buf_t;

/* The collectives. `count` is per rank as in NCCL: all_gather's INPUT holds count
 * elements and its OUTPUT nranks * count (rank r's block at r * count); reduce_scatter's
 * INPUT nranks * count and OUTPUT count (rank r gets block r); all_to_all's INPUT and
 * OUTPUT nranks * count (block p of INPUT goes to rank p, block p of OUTPUT came from
 * it). reduce: OUTPUT is written at the root only. barrier: a one-byte all-reduce. P2P
 * (send, receive and groups of them) is built by the executor (exec/exec_cache.c), not
 * by algo_build. gather: INPUT count, OUTPUT nranks * count at the root only (rank r's
 * block at r * count); scatter: INPUT nranks * count read at the root only, OUTPUT
 * count (block r). all_to_allv: count is nranks (the length of each count array) and
 * the per-peer layout is sched_params_t.vcounts (this rank's own arrays; INPUT and
 * OUTPUT extend to the furthest block, sched_vcounts_extent). */
typedef enum {
  COLL_KIND_ALL_REDUCE = 0,
  COLL_KIND_BROADCAST,
  COLL_KIND_REDUCE,
  COLL_KIND_ALL_GATHER,
  COLL_KIND_REDUCE_SCATTER,
  COLL_KIND_ALL_TO_ALL,
  COLL_KIND_BARRIER,
  COLL_KIND_P2P,
  COLL_KIND_GATHER,
  COLL_KIND_SCATTER,
  COLL_KIND_ALL_TO_ALLV,
  COLL_KIND_COUNT
} coll_kind_t;

/* The collectives with a root whose choice the ranks must agree on. */
static inline bool coll_kind_rooted(coll_kind_t kind) {
  return kind == COLL_KIND_BROADCAST || kind == COLL_KIND_REDUCE || kind == COLL_KIND_GATHER ||
         kind == COLL_KIND_SCATTER;
}

/* all_to_allv's per-peer layout: 4 * nranks counts in one array, in this order
 * (v[SCHED_V_SENDCOUNTS * nranks + p] is what this rank sends to rank p). */
enum { SCHED_V_SENDCOUNTS = 0, SCHED_V_SDISPLS, SCHED_V_RECVCOUNTS, SCHED_V_RDISPLS };
static inline size_t sched_v(const size_t *v, int nranks, int which, int peer) {
  return v[(size_t)which * (size_t)nranks + (size_t)peer];
}
/* Elements of INPUT and OUTPUT an all_to_allv layout reaches (blocks of count 0 reach
 * nothing, whatever their displacement); false if a block's end overflows. */
bool sched_vcounts_extent(const size_t *v, int nranks, size_t *in_count, size_t *out_count);

/* The collectives whose result combines the ranks' data with the call's operation (the
 * barrier's one-byte all-reduce is not one of them: it always sums). */
static inline bool coll_kind_reduces(coll_kind_t kind) {
  return kind == COLL_KIND_ALL_REDUCE || kind == COLL_KIND_REDUCE ||
         kind == COLL_KIND_REDUCE_SCATTER;
}
/* Whether this rank's output of the call is a reduction, so that COLL_AVG divides it:
 * every rank's for all_reduce and reduce_scatter, the root's only for reduce. */
static inline bool coll_kind_output_averaged(coll_kind_t kind, int root, int rank) {
  return kind == COLL_KIND_ALL_REDUCE || kind == COLL_KIND_REDUCE_SCATTER ||
         (kind == COLL_KIND_REDUCE && root == rank);
}

/* "all_reduce", "all_gather", ...; "unknown" for other values. */
const char *sched_kind_name(coll_kind_t kind);
/* Elements of INPUT and OUTPUT for a call of `count` per rank over nranks. */
void sched_buffer_counts(coll_kind_t kind, size_t count, int nranks, size_t *in_count,
                         size_t *out_count);

typedef struct {
  uint8_t kind;      /* sched_op_kind_t */
  uint8_t buf;       /* sched_buf_t: destination (RECV_*, LOCAL_*) or source (SEND) */
  uint8_t src_buf;   /* sched_buf_t: local operand of RECV_REDUCE / LOCAL_* */
  int32_t peer;      /* SEND / RECV_*: the other rank; -1 for local ops */
  size_t offset;     /* elements into buf */
  size_t src_offset; /* elements into src_buf */
  size_t count;      /* elements */
} sched_op_t;

typedef struct {
  uint32_t first_op; /* index into sched_t.ops */
  uint32_t nops;
} sched_step_t;

typedef struct {
  coll_kind_t collective;
  coll_algo_t algo;
  int rank;
  int nranks;
  size_t count;
  size_t in_count;  /* elements of INPUT (sched_buffer_counts) */
  size_t out_count; /* elements of OUTPUT */
  size_t elem_size;
  sched_step_t *steps;
  size_t nsteps;
  size_t steps_cap;
  sched_op_t *ops;
  size_t nops;
  size_t ops_cap;
  size_t scratch_count; /* elements of SCRATCH the schedule uses */
} sched_t;

/* What an algorithm is asked for. */
typedef struct {
  coll_kind_t collective;
  size_t count; /* elements */
  coll_dtype_t dtype;
  int rank;
  int nranks;
  int root;              /* broadcast, reduce, gather, scatter */
  size_t segment_bytes;  /* pipelining unit; 0: the algorithm's default */
  const size_t *vcounts; /* all_to_allv: this rank's 4 * nranks counts (SCHED_V_*) */
  /* Which ranks share a node (topo.h), for the node-aware algorithms and the cost model;
   * NULL: unknown, taken as every rank on one node. */
  const algo_topo_t *topo;
} sched_params_t;

/* Building (used by the algorithm files). */
void sched_init(sched_t *s, const sched_params_t *p, coll_algo_t algo);
void sched_free(sched_t *s);
void sched_reset(sched_t *s);
/* Open a new step; ops added after it belong to it. */
coll_status_t sched_begin_step(sched_t *s);
coll_status_t sched_send(sched_t *s, int peer, sched_buf_t buf, size_t offset, size_t count);
coll_status_t sched_recv_copy(sched_t *s, int peer, sched_buf_t buf, size_t offset, size_t count);
coll_status_t sched_recv_reduce(sched_t *s, int peer, sched_buf_t buf, size_t offset,
                                sched_buf_t src_buf, size_t src_offset, size_t count);
coll_status_t sched_local_copy(sched_t *s, sched_buf_t buf, size_t offset, sched_buf_t src_buf,
                               size_t src_offset, size_t count);
coll_status_t sched_local_reduce(sched_t *s, sched_buf_t buf, size_t offset, sched_buf_t src_buf,
                                 size_t src_offset, size_t count);
/* Drop empty steps and zero-count ops (count 0 calls produce an empty schedule). */
void sched_finish(sched_t *s);

/* Bytes this rank sends in the schedule. */
size_t sched_bytes_sent(const sched_t *s);

/* ---- the algorithms ---- */
/* Build the schedule of `algo` (not AUTO) for p into s (initialised by the call).
 * COLL_ERR_UNSUPPORTED if the algorithm does not implement p->collective. */
coll_status_t algo_build(coll_algo_t algo, const sched_params_t *p, sched_t *s);
/* The algorithm algo_build really builds for p: two_level needs the same number of ranks
 * on every node and builds ring_nodes otherwise (its sched_t.algo says so too). */
coll_algo_t algo_effective(coll_algo_t algo, const sched_params_t *p);

/* Cost-model constants (seconds per message, seconds per byte, seconds per reduced
 * byte) for the transport the ranks use; all ranks use rank 0's values. */
typedef struct {
  double alpha;
  double beta;
  double gamma;
  /* Between nodes (sched_params_t.topo with several nodes): seconds per message and per
   * byte through a node's link to the others; 0: alpha and beta. alpha, beta: inside a
   * node. */
  double inter_alpha;
  double inter_beta;
} algo_cost_t;

/* Measured defaults for this machine kind (documented in docs/architecture.md). */
extern const algo_cost_t algo_cost_shm_default;
extern const algo_cost_t algo_cost_tcp_default;

/* Predicted seconds of `algo` for p under cost c. */
double algo_predict(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c);
/* The cheapest algorithm for p under cost c (depends only on values all ranks share). */
coll_algo_t algo_select(const sched_params_t *p, const algo_cost_t *c);
/* Whether the arena all-reduce (COLL_ALGO_ARENA, onehost/arena.h) beats algo_select's
 * choice for p, for a communicator that has an arena; algo_select never returns it,
 * since only the layers above know whether the ranks share one host. */
bool algo_arena_preferred(const sched_params_t *p, const algo_cost_t *c);
/* The smallest all-reduce (bytes) for which algo_arena_preferred says yes at nranks
 * ranks (a measured rule; 0 below 2 ranks: never). */
size_t algo_arena_min_bytes(int nranks);
/* The largest all-reduce (bytes) that the arena's small-message path (onehost/small.c:
 * one step, every rank reads every other's lines) should take at nranks ranks: the
 * default of COLL_SMALL_BYTES, measured (cost.c). */
size_t algo_small_max_bytes(int nranks);
/* The same for a broadcast (smaller at 2 ranks, measured in cost.c); COLL_SMALL_BYTES
 * still bounds it. */
size_t algo_small_broadcast_max_bytes(int nranks);

#endif
