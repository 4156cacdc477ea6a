/* The request queue's grace over real forked ranks (core/progress.c): while a caller
 * waits for its asynchronous calls at once, a new call is left to its waiter for the
 * grace, unless a call of its size ran a tenth of the grace or longer last time; that
 * one goes to the progress thread at once, where the host is not crowded. Results are
 * checked as well. And the cheap clock those decisions read (common/cheap_clock.h),
 * calibrated during a communicator's set-up. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"
#include "coll_test_util.h"
#include "common/cheap_clock.h"
#include "common/clock.h"
#include "core/comm.h"
#include "multiproc.h"
#include "suite_run.h"

enum { SMALL_COUNT = 16, LONG_COUNT = 4 << 20, SMALL_CALLS = 40, LONG_CALLS = 3 };
enum { CROWDED_LONG_COUNT = 1 << 20, CROWDED_LONG_CALLS = 8 };

/* One async sum of count floats, all ones, waited for at once. Sets *graced to whether
 * the queue left it to the waiter. 0 when the result is nranks everywhere. */
static int sum_async(coll_comm_t *comm, float *buf, size_t count, int nranks, bool *graced) {
  for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
  coll_request_t *req = NULL;
  coll_status_t st = coll_all_reduce_async(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm, &req);
  if (st != COLL_OK) {
    fprintf(stderr, "coll_all_reduce_async: %s\n", coll_last_error());
    return 1;
  }
  *graced = req->run_after_ns != 0; /* written at submission only; req lives until the wait */
  if (coll_request_wait(&req) != COLL_OK) {
    fprintf(stderr, "coll_request_wait: %s\n", coll_last_error());
    return 1;
  }
  for (size_t i = 0; i < count; i++)
    if (buf[i] != (float)nranks) {
      fprintf(stderr, "element %zu of %zu is %g, not %d\n", i, count, buf[i], nranks);
      return 1;
    }
  return 0;
}

/* How long the last _async call of count floats' size ran (progress.c's record). */
static long long last_run_ns(coll_comm_t *comm, size_t count) {
  int size_class = 64 - __builtin_clzll((unsigned long long)(count * sizeof(float)));
  return (long long)atomic_load(&comm->async_run_ns[size_class]);
}

/* Small calls waited for at once get the grace (in at least one of SMALL_CALLS: the
 * streak needs GRACE_STREAK of them, and a rank descheduled past the grace starts it
 * again). A 16 MiB call takes far more than a tenth of the grace (100 us) on any host, so
 * after the first, no call of that size gets it; small ones still do afterwards. */
static int rank_grace_by_size(coll_comm_t *comm, int rank, int nranks) {
  float *buf = malloc((size_t)LONG_COUNT * sizeof *buf);
  if (buf == NULL) return 1;
  int bad = 0, small_graced = 0, small_after = 0;
  bool graced = false;
  for (int i = 0; i < SMALL_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, SMALL_COUNT, nranks, &graced);
    small_graced += graced;
  }
  for (int i = 0; i < LONG_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, LONG_COUNT, nranks, &graced);
    if (i > 0 && graced) {
      fprintf(stderr, "rank %d: long call %d got the grace; its size last ran %lld ns\n", rank, i,
              last_run_ns(comm, LONG_COUNT));
      bad = 1;
    }
  }
  for (int i = 0; i < SMALL_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, SMALL_COUNT, nranks, &graced);
    small_after += graced;
  }
  if (!bad && (small_graced == 0 || small_after == 0)) {
    fprintf(stderr, "rank %d: small calls with the grace: %d of %d before, %d after\n", rank,
            small_graced, SMALL_CALLS, small_after);
    bad = 1;
  }
  free(buf);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

/* Both ranks bound to one CPU (crowded: core/comm.c): a long call keeps the grace, since
 * a hand-off there is a context switch on the CPU the other rank waits for. Some long
 * call after the first must get it (a rank descheduled between its call and its wait
 * starts the streak again, so not every one need). */
static int rank_grace_crowded(int rank, int nranks, void *arg) {
  cpu_set_t mine, one;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return 1;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &mine)) {
      CPU_SET(c, &one);
      break;
    }
  if (sched_setaffinity(0, sizeof one, &one) != 0) return 1; /* before init: published */
  coll_comm_t *comm;
  if (ct_init(arg, rank, nranks, &comm) != 0) return 1;
  float *buf = malloc((size_t)CROWDED_LONG_COUNT * sizeof *buf);
  if (buf == NULL) return 1;
  int bad = !comm->base.spin_crowded, long_graced = 0;
  if (bad) fprintf(stderr, "rank %d: two ranks on one CPU are not counted crowded\n", rank);
  bool graced = false;
  for (int i = 0; i < SMALL_CALLS && !bad; i++)
    bad |= sum_async(comm, buf, SMALL_COUNT, nranks, &graced);
  for (int i = 0; i < CROWDED_LONG_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, CROWDED_LONG_COUNT, nranks, &graced);
    long_graced += i > 0 && graced;
  }
  if (!bad && long_graced == 0) {
    fprintf(stderr,
            "rank %d: crowded, no long call after the first got the grace (last ran %lld ns)\n",
            rank, last_run_ns(comm, CROWDED_LONG_COUNT));
    bad = 1;
  }
  free(buf);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(crowded_ranks_keep_the_grace_for_long_calls) {
  ct_job_t job = {.port = mp_free_port(), .transport = "shm"};
  ck_assert_int_eq(mp_run(2, 60000, rank_grace_crowded, &job), 0);
}
END_TEST

START_TEST(calls_of_a_size_that_ran_long_go_to_the_progress_thread_small_ones_keep_the_grace) {
  ct_job_t job = {.port = mp_free_port(), .transport = "shm"};
  ck_assert_int_eq(ct_run(2, 60000, &job, rank_grace_by_size), 0);
}
END_TEST

/* After a communicator's set-up and the calibration span (2 ms), the cheap clock reads
 * the counter (where it can), never steps back, and measures 20 ms sleeps as
 * coll_now_ns does, within 0.1 % (its calibration is good to about 0.02 %). */
static int rank_cheap_clock(coll_comm_t *comm, int rank, int nranks) {
  (void)nranks;
  int bad = 0;
  ct_sleep_ms(3);
  int64_t prev = coll_cheap_now_ns();
  if (coll_cheap_clock_uses_counter() && atomic_load(&coll_cheap_clock.ready) != 1) {
    fprintf(stderr, "rank %d: the counter is invariant but not calibrated 3 ms after init\n", rank);
    bad = 1;
  }
  if (rank == 0 && !coll_cheap_clock_uses_counter())
    fprintf(stderr,
            "note: no invariant time-stamp counter here; the cheap clock is "
            "coll_now_ns, and only its pace is checked\n");
  for (int i = 0; i < 1000000 && !bad; i++) {
    int64_t now = coll_cheap_now_ns();
    if (now < prev) {
      fprintf(stderr, "rank %d: reading %d went back %lld ns\n", rank, i, (long long)(prev - now));
      bad = 1;
    }
    prev = now;
  }
  for (int i = 0; i < 5 && !bad; i++) {
    int64_t cheap0 = coll_cheap_now_ns(), mono0 = coll_now_ns();
    ct_sleep_ms(20);
    int64_t cheap = coll_cheap_now_ns() - cheap0, mono = coll_now_ns() - mono0;
    int64_t off = cheap > mono ? cheap - mono : mono - cheap;
    if (off > mono / 1000 + 20000) {
      fprintf(stderr, "rank %d: a sleep took %lld ns on the cheap clock, %lld on coll_now_ns\n",
              rank, (long long)cheap, (long long)mono);
      bad = 1;
    }
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(the_cheap_clock_is_calibrated_by_init_never_steps_back_and_keeps_pace) {
  ct_job_t job = {.port = mp_free_port(), .transport = "shm"};
  ck_assert_int_eq(ct_run(2, 60000, &job, rank_cheap_clock), 0);
}
END_TEST

SUITE_MAIN(
    "coll queue",
    suite_tests("grace", 90,
                calls_of_a_size_that_ran_long_go_to_the_progress_thread_small_ones_keep_the_grace,
                crowded_ranks_keep_the_grace_for_long_calls),
    suite_tests("cheap clock", 60,
                the_cheap_clock_is_calibrated_by_init_never_steps_back_and_keeps_pace))
