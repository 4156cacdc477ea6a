/* Internal to the trainer: where a run's time goes. Phases of each step (timed on every
 * rank, printed by rank 0 to take a slow step apart without a profiler), and the run's
 * totals for samples/s and the communication share, the warm-up steps left out of both. */
#ifndef TRAIN_TRAINER_TIMING_H
#define TRAIN_TRAINER_TIMING_H

#include "train.h"

typedef enum {
  TRAINER_PHASE_DATA,
  TRAINER_PHASE_FORWARD,
  TRAINER_PHASE_BACKWARD,
  TRAINER_PHASE_WAIT,
  TRAINER_PHASE_OPTIM,
  TRAINER_PHASE_COUNT
} trainer_phase_t;

typedef struct {
  /* Seconds this rank spent in each phase of the timed steps. */
  double phase_s[TRAINER_PHASE_COUNT];
  double cpu_s; /* CPU time of the whole process (all threads) during the timed steps */
  uint64_t steps_timed;
  /* The run's totals: over every step, until the first step after the warm-up starts
   * them again (a run that ends within its warm-up keeps them all). */
  double total_s, wait_s, samples;
  uint64_t run_steps; /* steps of this process (a resumed run counts from its start) */
  bool warmed;        /* the totals were restarted after the warm-up */
} trainer_timing_t;

/* Before a step: when `warmup_steps` steps of this run are done (and at least one),
 * the totals and the phase times start again from here. */
void trainer_timing_step_start(trainer_timing_t *t, long warmup_steps);
/* Charge the time since *since to `phase`; *since becomes now. */
void trainer_timing_lap(trainer_timing_t *t, trainer_phase_t phase, double *since);
/* The step's last lap: the time since *since, of which `waited` seconds went to
 * waiting for the gradients' reduction and the rest to the optimizer. */
void trainer_timing_close_step(trainer_timing_t *t, double waited, double *since);
/* After a step that succeeded: its wall time, its wait and the samples of all ranks. */
void trainer_timing_count_step(trainer_timing_t *t, double step_s, double wait_s, double samples);
/* CPU seconds used by this process so far, all threads (libcoll's progress thread and
 * its communication included). */
double trainer_cpu_seconds(void);
/* A phase on the COLL_TRACE timeline, next to the collectives it overlaps (nothing
 * without a communicator or without COLL_TRACE). */
void trainer_trace_span(coll_comm_t *comm, const char *name, bool begin);
/* The run's samples/s and communication share into res; rank 0 prints them ("done:")
 * with the mean step time by phase. */
void trainer_timing_report(const trainer_timing_t *t, int rank, int world, uint64_t global_step,
                           long warmup_steps, train_result_t *res);

#endif
