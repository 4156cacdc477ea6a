/* COLL_TRACE: a per-rank Chrome/Perfetto trace (Trace Event JSON) of what a rank really
 * did: collectives, schedule steps, transfers, local copies and reductions, waits, and
 * user spans (coll_trace_span_begin/end). Off unless COLL_TRACE names a file. A service:
 * the paths describe what they do in small records (trace_op_t, trace_coll_t); the
 * trace knows nothing of the executor or the communicator. */
#ifndef COLL_TRACE_TRACE_H
#define COLL_TRACE_TRACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/schedule.h"
#include "coll.h"
#include "common/clock.h"

typedef struct trace trace_t;

/* One operation of a collective as the trace records it: a transfer with `peer` or a
 * local copy or reduction (kind: sched_op_kind_t), on element ranges of the call's
 * buffers. `phase` names a step of a path without a schedule ("copy in", "reduce",
 * "copy out" of the arena); NULL for schedule ops. */
typedef struct {
  uint8_t kind;
  uint8_t buf, src_buf; /* sched_buf_t */
  int peer;             /* transfers; -1 for local ops */
  uint32_t step;
  size_t offset, count, src_offset; /* elements */
  const char *phase;
} trace_op_t;

/* A finished collective: what it was and which path or algorithm ran it ("ring",
 * "arena", "window", ...). */
typedef struct {
  coll_kind_t kind;
  coll_dtype_t dtype;
  coll_op_t op;
  int root;
  size_t count, elem_size;
  const char *path;
  size_t nsteps, nops;
} trace_coll_t;

/* Read COLL_TRACE and, when set, open this rank's file (FILE.json ->
 * FILE[.<communicator>].rank<r>.json) into *out (NULL when off). key_prefix names the
 * communicator. */
coll_status_t trace_open(trace_t **out, int rank, int nranks, const char *key_prefix);
/* Flush the buffered events, close the JSON and free *t (NULL is fine). */
void trace_close(trace_t **t);
/* The progress thread's track is named "progress thread", others "caller thread". */
void trace_set_progress_thread(trace_t *t, pthread_t thread);

/* The hooks' bodies; call them through the inline wrappers below, which cost one
 * predictable branch when tracing is off (t == NULL). */
void trace_coll_begin_(trace_t *t, size_t nops, size_t nsteps, size_t elem_size);
void trace_coll_end_(trace_t *t, const trace_coll_t *c, coll_status_t status);
void trace_op_start_(trace_t *t, size_t op_index);
void trace_op_done_(trace_t *t, size_t op_index, const trace_op_t *op);
void trace_wait_begin_(trace_t *t);
void trace_wait_end_(trace_t *t);
void trace_request_wait_(trace_t *t, int64_t t0);
/* A user span begins (begin true) or ends on the calling thread. */
void trace_span(trace_t *t, const char *name, bool begin);

#define TRACE_ON(t) __builtin_expect((t) != NULL, 0)

/* A collective of nops operations in nsteps steps on elements of elem_size bytes
 * starts, and ends. */
static inline void trace_coll_begin(trace_t *t, size_t nops, size_t nsteps, size_t elem_size) {
  if (TRACE_ON(t)) trace_coll_begin_(t, nops, nsteps, elem_size);
}
static inline void trace_coll_end(trace_t *t, const trace_coll_t *c, coll_status_t status) {
  if (TRACE_ON(t)) trace_coll_end_(t, c, status);
}
/* Op i of the running collective is started (posted, or run when local) and done. */
static inline void trace_op_start(trace_t *t, size_t i) {
  if (TRACE_ON(t)) trace_op_start_(t, i);
}
static inline void trace_op_done(trace_t *t, size_t i, const trace_op_t *op) {
  if (TRACE_ON(t)) trace_op_done_(t, i, op);
}
/* The running path sleeps (transport_set_wait, a futex). */
static inline void trace_wait_begin(trace_t *t) {
  if (TRACE_ON(t)) trace_wait_begin_(t);
}
static inline void trace_wait_end(trace_t *t) {
  if (TRACE_ON(t)) trace_wait_end_(t);
}

/* A caller blocks in coll_request_wait: t0 = trace_request_wait_start(t) before,
 * trace_request_wait_done(t, t0) after (a slice "request wait" on its thread). The
 * progress thread may be tracing its own waits meanwhile, hence the caller keeps t0. */
static inline int64_t trace_request_wait_start(trace_t *t) {
  return TRACE_ON(t) ? coll_now_ns() : 0;
}
static inline void trace_request_wait_done(trace_t *t, int64_t t0) {
  if (TRACE_ON(t) && t0 != 0) trace_request_wait_(t, t0);
}

#endif
