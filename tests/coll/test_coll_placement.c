/* Where ranks run and how they wait, over real forked ranks: unbound ranks of one host
 * start on distinct CPUs and keep their mask (launch/placement.c), a waiter found on another
 * rank's CPU goes home (common/cpu_home.c, wait.h), and the poll follows whether the local
 * ranks may run only on this rank's CPUs (core/comm.c choose_spin), as
 * coll_comm_set_poll_us changes it. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "common/clock.h"
#include "common/cpu_home.h"
#include "common/wait.h"
#include "core/comm.h"
#include "launch/placement.h"
#include "multiproc.h"
#include "suite_run.h"

/* coll_comm_set_poll_us sets the wait's polling time of a rank with a CPU of its own (one
 * rank here), and leaves the user's COLL_SPIN_US alone. */
START_TEST(set_poll_us_applies_unless_coll_spin_us_is_set) {
  ct_clean_env();
  coll_config_t cfg = {.size = 1, .local_rank = -1, .master_port = 29500, .host_store = -1};
  coll_comm_t *comm = NULL;
  ck_assert_int_eq(coll_comm_init_config(&cfg, &comm), COLL_OK);
  ck_assert_int_eq(comm->base.spin_ns, 10000 * 1000);
  ck_assert_int_eq(coll_comm_set_poll_us(comm, 2000), COLL_OK);
  ck_assert_int_eq(comm->base.spin_ns, 2000 * 1000);
  float v = 1;
  ck_assert_int_eq(coll_all_reduce(&v, &v, 1, COLL_FLOAT32, COLL_SUM, comm), COLL_OK);
  coll_comm_destroy(comm);
  ct_clean_env();
  setenv("COLL_SPIN_US", "7", 1);
  ck_assert_int_eq(coll_comm_init_config(&cfg, &comm), COLL_OK);
  ck_assert_int_eq(coll_comm_set_poll_us(comm, 2000), COLL_OK);
  ck_assert_int_eq(comm->base.spin_ns, 7 * 1000);
  unsetenv("COLL_SPIN_US");
  coll_comm_destroy(comm);
}
END_TEST

static void *home_of_other_thread(void *arg) {
  int other_home = *(int *)arg;
  bool moved = coll_cpu_home_return_at(other_home, coll_now_ns());
  return (void *)(intptr_t)(coll_cpu_home() != -1 || moved);
}

/* Puts the thread on CPU first (its mask kept) and takes one turn of coll_wait_spin: true
 * when the turn moved it home (the scheduler may move the thread between the push and the
 * turn: then it tries again, up to 200 times). */
static bool waiter_turn_moves_home(int first, const cpu_set_t *mask, int64_t waited_ns,
                                   int64_t spin_ns, int64_t pure_spin_ns) {
  for (int attempt = 0; attempt < 200; attempt++) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0 || sched_setaffinity(0, sizeof *mask, mask))
      return false;
    if (sched_getcpu() != first) continue;
    int64_t moves = coll_cpu_home_moves();
    coll_wait_spin(waited_ns, spin_ns, pure_spin_ns);
    if (coll_cpu_home_moves() == moves + 1) return true;
  }
  return false;
}

/* After placement as local rank 1 of 2, home is the mask's second CPU: a waiter found on
 * the first (rank 0's) goes back, at most once a millisecond, and keeps its mask; at home
 * or on a CPU that is no rank's it stays; a thread placement did not place has no home.
 * Each check sets its own bit of the failure code. */
static int check_way_home(int home, const cpu_set_t *mask) {
  int first = -1, third = -1;
  for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, mask)) {
      if (seen == 0) first = c;
      if (seen == 2) third = c;
      seen++;
    }
  int bad = 0;
  /* Through the waiter: a yield turn of coll_wait_spin on the first CPU moves home (waited
   * 2 ns: past the pure spin (1), before blocking (10)); then, a move interval later, a
   * turn of a pure spin that never yields, past its first COLL_WAIT_HOME_AFTER_NS. */
  bad |= !waiter_turn_moves_home(first, mask, 2, 10, 1) << 9;
  ct_sleep_ms(2);
  int64_t long_spin = 100 * (int64_t)COLL_WAIT_HOME_AFTER_NS;
  bad |= !waiter_turn_moves_home(first, mask, COLL_WAIT_HOME_AFTER_NS, long_spin, long_spin) << 10;
  int64_t t = coll_now_ns() + 2000000, moves = coll_cpu_home_moves();
  bad |= coll_cpu_home() != home;
  bad |= coll_cpu_home_return_at(home, t) << 1;
  bad |= (third >= 0 && coll_cpu_home_return_at(third, t)) << 2;
  bad |= !coll_cpu_home_return_at(first, t) << 3;
  bad |= coll_cpu_home_return_at(first, t + 500000) << 4;
  bad |= !coll_cpu_home_return_at(first, t + 2000000) << 5;
  bad |= (coll_cpu_home_moves() != moves + 2) << 6;
  cpu_set_t after;
  bad |= (sched_getaffinity(0, sizeof after, &after) != 0 || !CPU_EQUAL(mask, &after)) << 7;
  pthread_t thread;
  void *other = NULL;
  if (pthread_create(&thread, NULL, home_of_other_thread, &first) != 0 ||
      pthread_join(thread, &other) != 0 || other != NULL)
    bad |= 1 << 8;
  if (bad)
    fprintf(stderr, "way home: home %d, first CPU %d, third %d: failed checks 0x%x\n", home, first,
            third, bad);
  return bad != 0;
}

/* Unbound ranks of one host start on distinct CPUs (launch/placement.c): called as init
 * calls it, for local rank 1 of 2, the thread goes to the second CPU of its mask and the
 * mask is the same after; only once per process. (Where the thread runs after that is
 * the scheduler's business: under load it may move it again at once.) */
static int rank_place(int rank, int nranks, void *arg) {
  (void)nranks;
  (void)arg;
  ct_clean_env();
  cpu_set_t before, after;
  if (sched_getaffinity(0, sizeof before, &before) != 0) return 1;
  int want = -1;
  for (int c = 0, seen = 0; c < CPU_SETSIZE && want < 0; c++)
    if (CPU_ISSET(c, &before) && seen++ == 1) want = c;
  int cpu = -3, again = -3;
  int bad = ct_ok(rank, "placement", placement_spread_once(rank, 1, 2, &cpu));
  bad |= sched_getaffinity(0, sizeof after, &after) != 0 || !CPU_EQUAL(&before, &after);
  bad |= ct_ok(rank, "placement again", placement_spread_once(rank, 1, 2, &again));
  if (bad || cpu != want || again != -1) {
    fprintf(stderr, "rank %d: moved to CPU %d (expected %d), then %d (expected -1); mask %s\n",
            rank, cpu, want, again, CPU_EQUAL(&before, &after) ? "kept" : "changed");
    return 1;
  }
  return check_way_home(want, &before);
}

/* A 2-rank all-reduce that must give 2, then destroy: non-zero when it did not. */
static int sum_of_two_then_destroy(int rank, coll_comm_t *comm) {
  float v = 1;
  int bad = ct_ok(rank, "all_reduce", coll_all_reduce(&v, &v, 1, COLL_FLOAT32, COLL_SUM, comm));
  bad |= v != 2.0f;
  coll_comm_destroy(comm);
  return bad;
}

/* Whether this process may run on 2 CPUs; says why the test skips when not. */
static bool two_cpus_or_skip(void) {
  cpu_set_t mask;
  ck_assert_int_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
  if (CPU_COUNT(&mask) >= 2) return true;
  fprintf(stderr, "skipped: this process may run on %d CPU only\n", CPU_COUNT(&mask));
  return false;
}

/* Through a real init of 2 ranks: the mask is the same after init, and the ranks work. */
static int rank_init_keeps_mask(int rank, int nranks, void *arg) {
  cpu_set_t before, after;
  if (sched_getaffinity(0, sizeof before, &before) != 0) return 1;
  coll_comm_t *comm;
  if (ct_init(arg, rank, nranks, &comm) != 0) return 1;
  int bad = sched_getaffinity(0, sizeof after, &after) != 0 || !CPU_EQUAL(&before, &after);
  if (bad) fprintf(stderr, "rank %d: the CPU mask changed across init\n", rank);
  return bad | sum_of_two_then_destroy(rank, comm);
}

START_TEST(unbound_ranks_start_on_distinct_cpus_and_keep_their_mask) {
  if (!two_cpus_or_skip()) return;
  ck_assert_int_eq(mp_run(1, 30000, rank_place, NULL), 0);
  ct_job_t job = {.port = mp_free_port()};
  ck_assert_int_eq(mp_run(2, 30000, rank_init_keeps_mask, &job), 0);
  /* A value other than 0 or 1 fails init, naming the variable. */
  ct_clean_env();
  setenv("COLL_SPREAD", "2", 1);
  coll_config_t cfg = {.size = 1, .local_rank = -1, .master_port = 29500, .host_store = -1};
  coll_comm_t *comm = NULL;
  EXPECT_INVALID(coll_comm_init_config(&cfg, &comm), "COLL_SPREAD");
  ck_assert_ptr_null(comm);
  unsetenv("COLL_SPREAD");
}
END_TEST

/* The poll follows where the local ranks may run (core/comm.c choose_spin): ranks bound
 * to CPUs of their own, or one bound beside one unbound, are not crowded and poll for
 * 10 ms; two bound to one CPU are crowded and poll for 5 us. */
enum { OWN_CPUS, ONE_CPU, ONE_BOUND_ONE_FREE };
typedef struct {
  ct_job_t job;
  int layout;
} bind_job_t;

static int rank_bound_poll(int rank, int nranks, void *arg) {
  bind_job_t *bj = arg;
  cpu_set_t mask, one;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return 1;
  int want = bj->layout == ONE_CPU ? 0 : rank, cpu = -1;
  for (int c = 0, seen = 0; c < CPU_SETSIZE && cpu < 0; c++)
    if (CPU_ISSET(c, &mask) && seen++ == want) cpu = c;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  bool free_rank = bj->layout == ONE_BOUND_ONE_FREE && rank == 1;
  if (!free_rank && sched_setaffinity(0, sizeof one, &one) != 0) return 1;
  coll_comm_t *comm;
  if (ct_init(&bj->job, rank, nranks, &comm) != 0) return 1;
  bool crowded = bj->layout == ONE_CPU;
  int64_t spin = crowded ? 5 * 1000 : 10000 * 1000;
  /* Not crowded, bound or not, a rank never yields. */
  int64_t pure = crowded ? 1000 : spin;
  int bad = comm->base.spin_crowded != crowded || comm->base.spin_ns != spin ||
            comm->base.pure_spin_ns != pure;
  if (bad)
    fprintf(stderr,
            "rank %d (layout %d): crowded %d, poll %lld ns (%lld pure); expected %d, %lld (%lld)\n",
            rank, bj->layout, comm->base.spin_crowded, (long long)comm->base.spin_ns,
            (long long)comm->base.pure_spin_ns, crowded, (long long)spin, (long long)pure);
  return bad | sum_of_two_then_destroy(rank, comm);
}

START_TEST(bound_ranks_on_cpus_of_their_own_poll_long_and_two_on_one_cpu_briefly) {
  if (!two_cpus_or_skip()) return;
  bind_job_t bj = {.job = {.port = mp_free_port()}, .layout = _i};
  ck_assert_int_eq(mp_run(2, 30000, rank_bound_poll, &bj), 0);
}
END_TEST

SUITE_MAIN("coll placement",
           suite_tests("placement", 60, set_poll_us_applies_unless_coll_spin_us_is_set,
                       unbound_ranks_start_on_distinct_cpus_and_keep_their_mask),
           suite_loop_tests("placement", 60, 0, 3,
                            bound_ranks_on_cpus_of_their_own_poll_long_and_two_on_one_cpu_briefly))
