/* The schedule executor: runs one rank's schedule (algo/) for one call over the links it
 * is given (transports, their counters, scratch), and keeps the schedules it built. The
 * host path and the CUDA path each own their links and pass them in; the executor knows
 * nothing of the communicator above it. exec.c runs, exec_cache.c builds and keeps the
 * schedules, exec_deps.c finds their hazards. */
#ifndef COLL_EXEC_EXEC_H
#define COLL_EXEC_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/schedule.h"
#include "base/base.h"
#include "base/call.h"
#include "base/fp_agree.h"
#include "transport/transport.h"

/* Schedules kept per executor: DDP repeats a handful of bucket sizes. */
#define EXEC_CACHE_SIZE 8
/* The executor's window (see exec.c): steps ahead of the oldest unfinished one, and how
 * far back (in ops) hazards are tracked. */
#define EXEC_STEPS_AHEAD 8
#define EXEC_LOOKBACK 256

/* Per peer, the transport's monotonic counters as last seen and what we posted. */
typedef struct {
  uint64_t sends_posted;
  uint64_t recvs_posted;
  uint64_t sends_done;
  uint64_t recvs_done;
} exec_peer_t;

/* What a run moves data over. On device links (the CUDA path's cuda_ipc connections) the
 * buffers and scratch are device memory, local copies and reductions run as kernels on
 * `stream`, and the owner sizes the scratch beforehand (exec_scratch_needed); host links
 * grow their scratch here. */
typedef struct {
  transport_set_t *transports;
  exec_peer_t *peers; /* nranks */
  void *scratch;
  size_t scratch_bytes;
  bool device;
  void *stream; /* device links: the stream local operations run on */
} exec_links_t;

typedef struct {
  bool valid;
  coll_kind_t kind;
  size_t count;
  coll_dtype_t dtype;
  int root;
  coll_algo_t algo;
  size_t segment_bytes;
  size_t *vcounts; /* all_to_allv: a copy of the call's 4 * nranks counts (part of the key) */
  bool in_place;   /* hazards differ when INPUT and OUTPUT are one buffer */
  uint64_t last_use;
  sched_t sched;
  uint32_t *op_step;   /* step index of each op */
  uint8_t *state;      /* per op: OP_IDLE, OP_POSTED, OP_DONE (reset every run) */
  uint64_t *seq;       /* per posted op: its index in the peer's send or receive order */
  uint32_t *dep_start; /* nops + 1: op i waits for deps[dep_start[i] .. dep_start[i+1]) */
  uint32_t *deps;
} exec_cache_entry_t;

typedef struct {
  coll_base_t *base;
  const algo_cost_t *cost; /* the agreed constants (a forced algorithm's fallback) */
  uint8_t *chan_blocked;   /* 2 * nranks: per peer, send and receive channel (scan scratch) */
  exec_cache_entry_t cache[EXEC_CACHE_SIZE];
  uint64_t use_clock;
  fpa_t fpa; /* the agreement on the call's fingerprint (fp_agree.h) */
} exec_t;

coll_status_t exec_init(exec_t *x, coll_base_t *base, const algo_cost_t *cost);
void exec_free(exec_t *x);
/* Run one call (nranks > 1, count > 0, host or device buffers as links says) to
 * completion on the calling thread. A collective's fingerprint was started by the
 * caller (base_begin_call); the executor agrees on it with the others. Errors mark the
 * communicator failed (failure_conclude). */
coll_status_t exec_run(exec_t *x, exec_links_t *links, const coll_call_t *call);
/* Bytes of scratch call's schedule needs (built and cached now). */
coll_status_t exec_scratch_needed(exec_t *x, const coll_call_t *call, size_t *bytes);
/* Host links over `transports` (peers allocated here); exec_links_free frees the peers
 * and host scratch, not the transports. */
coll_status_t exec_links_init(exec_links_t *links, transport_set_t *transports, int nranks);
void exec_links_free(exec_links_t *links);

/* ---- exec_cache.c ---- */
/* The cached schedule for call, built on a miss (least recently used entry evicted). */
coll_status_t exec_cache_get(exec_t *x, const coll_call_t *call, exec_cache_entry_t **out);
void exec_cache_clear(exec_t *x);

/* ---- exec_alltoallv.c ---- */
/* all_to_allv over several ranks, in place of exec_run: two runs, the first checks the
 * counts against the senders' (every rank fails with COLL_ERR_MISMATCH naming both ranks
 * if one differs), the second moves the data. */
coll_status_t exec_alltoallv_run(exec_t *x, exec_links_t *links, const coll_call_t *call);
/* all_to_allv on one rank: its own block, if its two counts agree. */
coll_status_t exec_alltoallv_one_rank(const coll_call_t *call);

/* ---- exec_deps.c ---- */
/* Fill e->deps for e->sched (op_step must be set). */
coll_status_t exec_deps_build(exec_cache_entry_t *e, bool in_place);

#endif
