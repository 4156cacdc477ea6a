/* Where a training run's time goes: phase times per step, the run's totals after the
 * warm-up, CPU time, COLL_TRACE spans, and rank 0's closing lines about them. */
#include "trainer_timing.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "clock_seconds.h"

static const char *const phase_names[TRAINER_PHASE_COUNT] = {
    [TRAINER_PHASE_DATA] = "data",         [TRAINER_PHASE_FORWARD] = "forward",
    [TRAINER_PHASE_BACKWARD] = "backward", [TRAINER_PHASE_WAIT] = "comm wait",
    [TRAINER_PHASE_OPTIM] = "optimizer",
};

void trainer_timing_step_start(trainer_timing_t *t, long warmup_steps) {
  if (t->run_steps != (uint64_t)warmup_steps || t->run_steps == 0) return;
  /* The warm-up is over: the totals and the phase means start from here. */
  t->total_s = t->wait_s = t->samples = 0.0;
  memset(t->phase_s, 0, sizeof t->phase_s);
  t->cpu_s = 0.0;
  t->steps_timed = 0;
  t->warmed = true;
}

void trainer_timing_lap(trainer_timing_t *t, trainer_phase_t phase, double *since) {
  double now = clock_seconds();
  t->phase_s[phase] += now - *since;
  *since = now;
}

void trainer_timing_close_step(trainer_timing_t *t, double waited, double *since) {
  t->phase_s[TRAINER_PHASE_WAIT] += waited;
  trainer_timing_lap(t, TRAINER_PHASE_OPTIM, since);
  t->phase_s[TRAINER_PHASE_OPTIM] -= waited; /* that lap held the waits too */
  t->steps_timed++;
}

void trainer_timing_count_step(trainer_timing_t *t, double step_s, double wait_s, double samples) {
  t->total_s += step_s;
  t->wait_s += wait_s;
  t->samples += samples;
  t->run_steps++;
}

double trainer_cpu_seconds(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void trainer_trace_span(coll_comm_t *comm, const char *name, bool begin) {
  if (comm == NULL) return;
  (void)(begin ? coll_trace_span_begin(comm, name) : coll_trace_span_end(comm, name));
}

/* Rank 0's breakdown of its mean step time by phase. */
static void print_phases(const trainer_timing_t *t) {
  if (t->steps_timed == 0) return;
  double steps = (double)t->steps_timed;
  double total = 0.0;
  for (int i = 0; i < TRAINER_PHASE_COUNT; i++) total += t->phase_s[i];
  printf("step time on rank 0: %.3f ms =", 1e3 * total / steps);
  for (int i = 0; i < TRAINER_PHASE_COUNT; i++)
    printf("%s %s %.3f", i > 0 ? "," : "", phase_names[i], 1e3 * t->phase_s[i] / steps);
  printf("; CPU %.3f ms per step\n", 1e3 * t->cpu_s / steps);
}

void trainer_timing_report(const trainer_timing_t *t, int rank, int world, uint64_t global_step,
                           long warmup_steps, train_result_t *res) {
  res->samples_per_s = t->samples / (t->total_s + 1e-12);
  res->comm_share = t->wait_s / (t->total_s + 1e-12);
  if (rank != 0) return;
  const char *counted = t->warmed          ? " (after the warm-up)"
                        : warmup_steps > 0 ? " (warm-up included: no step came after it)"
                                           : "";
  printf(
      "done: %llu steps on %d rank%s, %.0f samples/s, waiting on communication %.1f%% "
      "of step time%s\n",
      (unsigned long long)global_step, world, world > 1 ? "s" : "", res->samples_per_s,
      100.0 * res->comm_share, counted);
  print_phases(t);
}
