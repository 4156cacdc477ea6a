/* Schedule simulator: runs every rank's schedule in one process over in-memory buffers,
 * for tests, the cost model and the coll-sim teaching tool. Sends are rendezvous (a send
 * completes only together with its matching receive, in the receiver's current step), the
 * strictest reading of schedule.h, so a schedule that runs here cannot deadlock on a
 * transport that buffers less or more. Before running, every step is checked for memory
 * hazards (two ops of one step touching the same elements, one of them writing, with
 * INPUT and OUTPUT treated as the same memory since in-place calls alias them) and every
 * op for bounds and peers. */
#ifndef COLL_SIM_SIM_H
#define COLL_SIM_SIM_H

#include <stddef.h>

#include "algo/schedule.h"

/* One executed op. Ops with the same round ran concurrently (round = simulated time). */
typedef struct {
  size_t round;
  int rank;
  size_t step;     /* index into that rank's sched_t.steps */
  size_t op_index; /* index into that rank's sched_t.ops */
  sched_op_t op;
} sim_event_t;

typedef struct {
  int nranks;
  size_t nrounds;         /* simulated time until every rank finished */
  size_t *bytes_sent;     /* [nranks] */
  size_t *bytes_received; /* [nranks] */
  size_t *link_bytes;     /* [src * nranks + dst]: bytes sent from src to dst */
  size_t max_steps;       /* the longest schedule, in steps */
  sim_event_t *events;    /* in execution order; only with record_events */
  size_t nevents;
  size_t events_cap;
} sim_result_t;

typedef struct {
  coll_dtype_t dtype;
  coll_op_t op;         /* COLL_AVG: the simulator divides like the executor does */
  void *const *inputs;  /* [nranks] each sched.in_count elements; NULL: dry run (no data) */
  void *const *outputs; /* [nranks]; may equal inputs[r] (in-place) */
  int record_events;    /* 1: fill sim_result_t.events */
  /* all_to_allv (sim_run_algo): [nranks], rank r's 4 * nranks counts (schedule.h's
   * SCHED_V_*); NULL: every rank uses p->vcounts. */
  const size_t *const *vcounts;
} sim_config_t;

/* Run scheds[0..nranks-1] (scheds[r] is rank r's schedule). On failure (deadlock, count
 * mismatch, hazard, bad op) returns an error whose message (coll_last_error) names the
 * ranks, steps and ops involved; res is freed then. */
coll_status_t sim_run(const sched_t *scheds, int nranks, const sim_config_t *cfg,
                      sim_result_t *res);

/* Build every rank's schedule of `algo` for p (p->rank is ignored) and run them. */
coll_status_t sim_run_algo(coll_algo_t algo, const sched_params_t *p, const sim_config_t *cfg,
                           sim_result_t *res);

void sim_result_free(sim_result_t *res);

/* The executed ops, in order: for (i = 0; i < sim_event_count(r); i++) sim_event_at(r, i). */
static inline size_t sim_event_count(const sim_result_t *res) { return res->nevents; }
static inline const sim_event_t *sim_event_at(const sim_result_t *res, size_t i) {
  return i < res->nevents ? &res->events[i] : NULL;
}

#endif
