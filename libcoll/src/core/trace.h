/* COLL_TRACE: a per-rank Chrome/Perfetto trace (Trace Event JSON) of what the executor
 * really did: collectives, schedule steps, transfers, local copies and reductions, waits,
 * and user spans (coll_trace_span_begin/end). Off unless COLL_TRACE names a file. */
#ifndef COLL_CORE_TRACE_H
#define COLL_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "core/comm.h"

typedef struct trace trace_t;

/* The "algo" a trace gives the zero-copy window path (window_run.c): a path chosen by
 * where the buffers lie, not an algorithm COLL_ALGO can force, so past the enum's end. */
#define TRACE_ALGO_WINDOW ((coll_algo_t)COLL_ALGO_COUNT)

/* Read COLL_TRACE and, when set, open this rank's file (FILE.json -> FILE.rank<r>.json)
 * into comm->trace. Called once the key prefix is agreed. */
coll_status_t trace_open(coll_comm_t *comm);
/* Flush the buffered events, close the JSON and free comm->trace (NULL is fine). */
void trace_close(coll_comm_t *comm);

/* The hooks' bodies; call them through the inline wrappers below, which cost one
 * predictable branch when tracing is off. */
void trace_coll_begin_(trace_t *t, const exec_call_t *call, const exec_cache_entry_t *e);
void trace_coll_end_(trace_t *t, const exec_call_t *call, const exec_cache_entry_t *e,
                     coll_status_t status);
void trace_op_start_(trace_t *t, size_t op_index);
void trace_op_done_(trace_t *t, const exec_cache_entry_t *e, size_t op_index);
void trace_wait_begin_(trace_t *t);
void trace_wait_end_(trace_t *t);
void trace_request_wait_(trace_t *t, int64_t t0);

#define TRACE_ON(comm) __builtin_expect((comm)->trace != NULL, 0)

/* A collective starts (exec_run, schedule resolved) and ends. */
static inline void trace_coll_begin(coll_comm_t *comm, const exec_call_t *call,
                                    const exec_cache_entry_t *e) {
  if (TRACE_ON(comm)) trace_coll_begin_(comm->trace, call, e);
}
static inline void trace_coll_end(coll_comm_t *comm, const exec_call_t *call,
                                  const exec_cache_entry_t *e, coll_status_t status) {
  if (TRACE_ON(comm)) trace_coll_end_(comm->trace, call, e, status);
}
/* Op i of the running schedule is started (posted, or run when local) and done. */
static inline void trace_op_start(coll_comm_t *comm, size_t i) {
  if (TRACE_ON(comm)) trace_op_start_(comm->trace, i);
}
static inline void trace_op_done(coll_comm_t *comm, const exec_cache_entry_t *e, size_t i) {
  if (TRACE_ON(comm)) trace_op_done_(comm->trace, e, i);
}
/* The executor sleeps in transport_set_wait. */
static inline void trace_wait_begin(coll_comm_t *comm) {
  if (TRACE_ON(comm)) trace_wait_begin_(comm->trace);
}
static inline void trace_wait_end(coll_comm_t *comm) {
  if (TRACE_ON(comm)) trace_wait_end_(comm->trace);
}

/* A caller blocks in coll_request_wait: t0 = trace_request_wait_start(comm) before,
 * trace_request_wait_done(comm, t0) after (a slice "request wait" on its thread). The
 * progress thread may be tracing its own waits meanwhile, hence the caller keeps t0. */
static inline int64_t trace_request_wait_start(coll_comm_t *comm) {
  return TRACE_ON(comm) ? coll_now_ns() : 0;
}
static inline void trace_request_wait_done(coll_comm_t *comm, int64_t t0) {
  if (TRACE_ON(comm) && t0 != 0) trace_request_wait_(comm->trace, t0);
}

#endif
