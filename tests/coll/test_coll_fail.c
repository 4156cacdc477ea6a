/* Failures that must explain themselves instead of hanging, with real processes:
 *  - a rank SIGKILLed in the middle of an all-reduce (shm and tcp), 50 times each: every
 *    other rank returns an error naming it within the deadline;
 *  - a rank stopped with SIGSTOP: the others time out and rank 0's hang report names it;
 *  - two hosts made from network namespaces joined by a veth pair, the link taken down
 *    mid-operation: an error, not a hang (skipped where namespaces cannot be made);
 *  - ranks calling different collectives: COLL_ERR_MISMATCH naming both sides;
 *  - coll_comm_get_async_error reports the failure afterwards. */
#include <check.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

enum { BIG = 1 << 18, VICTIM = 2 };

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
  ct_job_t job;
  int delay_us; /* how long the victim runs before it dies */
} kill_case_t;

/* Everyone runs all-reduces; the victim dies part way through one of them (after a few
 * whole ones). The survivors' failing call must name it, within the deadline. */
static int rank_killed_peer(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const kill_case_t *c = arg;
  (void)nranks;
  float *x = calloc(BIG, sizeof *x);
  coll_request_t *req = NULL;
  if (rank == VICTIM) {
    for (int k = 0; k < c->delay_us % 4; k++)
      coll_all_reduce(x, x, BIG, COLL_FLOAT32, COLL_SUM, comm);
    coll_all_reduce_async(x, x, BIG, COLL_FLOAT32, COLL_SUM, comm, &req);
    usleep((useconds_t)c->delay_us);
    raise(SIGKILL);
  }
  coll_status_t st = COLL_OK;
  int64_t took = 0;
  for (int k = 0; k < 1000 && st == COLL_OK; k++) {
    int64_t start = now_ms();
    st = coll_all_reduce(x, x, BIG, COLL_FLOAT32, COLL_SUM, comm);
    took = now_ms() - start;
  }
  int bad = 0;
  if (st == COLL_OK || took > c->job.timeout_ms + 1500 || strstr(coll_last_error(), "rank 2") == NULL) {
    fprintf(stderr, "rank %d: expected an error naming rank 2 within %d ms, got %s after %lld ms: %s\n",
            rank, c->job.timeout_ms, coll_status_name(st), (long long)took, coll_last_error());
    bad = 1;
  }
  coll_status_t async_err = COLL_OK;
  if (coll_comm_get_async_error(comm, &async_err) != COLL_OK || async_err != st) {
    fprintf(stderr, "rank %d: get_async_error says %s, the call said %s\n", rank,
            coll_status_name(async_err), coll_status_name(st));
    bad = 1;
  }
  coll_comm_destroy(comm);
  free(x);
  return bad;
}

static void kill_repeatedly(const char *transport) {
  for (int k = 0; k < 50; k++) {
    kill_case_t c = {.job = {.port = mp_free_port(), .transport = transport, .timeout_ms = 2000},
                     .delay_us = (k * 397) % 3000};
    /* Exactly one failed rank: the victim, killed by its own signal. */
    int failed = ct_run_arg(3, 20000, &c.job, rank_killed_peer, &c);
    if (failed == 3) { /* every rank failed: init, e.g. the free port was taken meanwhile */
      c.job.port = mp_free_port();
      failed = ct_run_arg(3, 20000, &c.job, rank_killed_peer, &c);
    }
    ck_assert_msg(failed == 1, "%s repetition %d: %d ranks failed", transport, k, failed);
  }
}

START_TEST(a_killed_rank_is_named_by_every_other_rank_50_times_over_shm) { kill_repeatedly("shm"); }
END_TEST

START_TEST(a_killed_rank_is_named_by_every_other_rank_50_times_over_tcp) { kill_repeatedly("tcp"); }
END_TEST

/* The victim stops itself before the collective; rank 0's timeout carries the hang
 * report, which names it as silent. */
static int rank_stopped_peer(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  (void)nranks;
  int32_t v = 1, s = 0;
  int bad = coll_all_reduce(&v, &s, 1, COLL_INT32, COLL_SUM, comm) != COLL_OK;
  if (rank == VICTIM) raise(SIGSTOP);
  int64_t start = now_ms();
  coll_status_t st = coll_all_reduce(&v, &s, 1, COLL_INT32, COLL_SUM, comm);
  int64_t took = now_ms() - start;
  const char *msg = coll_last_error();
  if (st != COLL_ERR_TIMEOUT && st != COLL_ERR_REMOTE) bad = 1;
  if (took > job->timeout_ms + 4000) bad = 1;
  if (rank == 0 && st == COLL_ERR_TIMEOUT &&
      (strstr(msg, "hang report") == NULL || strstr(msg, "rank 2: NO REPORT") == NULL))
    bad = 1;
  if (bad)
    fprintf(stderr, "rank %d: expected a timeout (rank 0: with a hang report naming rank 2), got "
                    "%s after %lld ms: %s\n",
            rank, coll_status_name(st), (long long)took, msg);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_stopped_rank_times_the_others_out_and_the_hang_report_names_it) {
  ct_job_t job = {.port = mp_free_port(), .transport = _i ? "tcp" : "shm", .timeout_ms = 800};
  /* mp_run kills the stopped victim at its deadline: one failed rank. */
  ck_assert_int_eq(ct_run_arg(3, 6000, &job, rank_stopped_peer, &job), 1);
}
END_TEST

/* Rank 1 calls broadcast where the others call all_reduce. */
static int rank_mismatch(coll_comm_t *comm, int rank, int nranks) {
  (void)nranks;
  static float x[1024];
  coll_status_t st = rank == 1 ? coll_broadcast(x, 1024, COLL_FLOAT32, 0, comm)
                               : coll_all_reduce(x, x, 1024, COLL_FLOAT32, COLL_SUM, comm);
  const char *msg = coll_last_error();
  int bad = 0;
  /* Ranks 1 and 2 receive from a rank that called something else; rank 2 may see rank
   * 1 leave first, then the message carries rank 1's report as the first failure. */
  if (rank >= 1 && ((st != COLL_ERR_MISMATCH && st != COLL_ERR_REMOTE) || strstr(msg, "called broadcast(float32, 1024, root 0) #1") == NULL ||
                    strstr(msg, "called all_reduce(float32, 1024, sum) #1") == NULL))
    bad = 1;
  if (rank == 0 && st == COLL_OK) bad = 1;
  if (bad) fprintf(stderr, "rank %d: %s: %s\n", rank, coll_status_name(st), msg);
  coll_comm_abort(comm);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(different_collectives_fail_with_a_mismatch_naming_both_calls) {
  ct_job_t job = {.port = mp_free_port(), .transport = _i ? "tcp" : "shm", .timeout_ms = 1500};
  ck_assert_int_eq(ct_run(3, 30000, &job, rank_mismatch), 0);
}
END_TEST

/* ---- two hosts from network namespaces ---- */

static int sh(const char *cmd) {
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

typedef struct {
  char ns[2][32];
  uint16_t port;
} netns_job_t;

static int enter_ns(const char *name) {
  char path[64];
  snprintf(path, sizeof path, "/var/run/netns/%s", name);
  int fd = open(path, O_RDONLY);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) return -1;
  close(fd);
  return 0;
}

static int rank_link_cut(int rank, int nranks, void *arg) {
  const netns_job_t *j = arg;
  if (enter_ns(j->ns[rank]) != 0) return 1;
  ct_clean_env();
  coll_config_t cfg = {0};
  cfg.rank = rank;
  cfg.size = nranks;
  cfg.local_rank = 0;
  cfg.master_addr = "10.231.0.1";
  cfg.master_port = j->port;
  cfg.host_store = -1;
  cfg.timeout_ms = 1500;
  coll_comm_t *comm;
  if (coll_comm_init_config(&cfg, &comm) != COLL_OK) {
    fprintf(stderr, "rank %d: init: %s\n", rank, coll_last_error());
    return 1;
  }
  /* All-reduces until the link goes down: one must fail, within the deadline plus the
   * time the hang report gives up on the unreachable store. */
  float *x = calloc(1 << 18, sizeof *x);
  coll_status_t st = COLL_OK;
  int64_t start = now_ms(), failed_after = 0;
  while (st == COLL_OK && now_ms() - start < 20000) {
    int64_t t0 = now_ms();
    st = coll_all_reduce(x, x, 1 << 18, COLL_FLOAT32, COLL_SUM, comm);
    failed_after = now_ms() - t0;
  }
  int bad = st == COLL_OK || failed_after > 1500 + 5000 || strstr(coll_last_error(), "rank") == NULL;
  if (bad)
    fprintf(stderr, "rank %d: expected an error after the cut, got %s after %lld ms: %s\n", rank,
            coll_status_name(st), (long long)failed_after, coll_last_error());
  coll_comm_abort(comm);
  coll_comm_destroy(comm);
  free(x);
  return bad;
}

/* Runs in a child of its own so the namespaces are removed even when an assertion fails. */
START_TEST(a_cut_link_between_two_namespace_hosts_is_an_error_not_a_hang) {
  if (getuid() != 0 || sh("command -v ip >/dev/null 2>&1") != 0) {
    fprintf(stderr, "skipped: needs root and iproute2 to make network namespaces\n");
    return;
  }
  netns_job_t j = {.port = 29000 + (uint16_t)(getpid() % 1000)};
  snprintf(j.ns[0], sizeof j.ns[0], "ccA%d", (int)getpid());
  snprintf(j.ns[1], sizeof j.ns[1], "ccB%d", (int)getpid());
  char cmd[1024];
  const char *a = j.ns[0], *b = j.ns[1];
  int tag = (int)getpid() % 100000;
  snprintf(cmd, sizeof cmd,
           "ip netns add %s && ip netns add %s && "
           "ip link add cva%d netns %s type veth peer name cvb%d netns %s && "
           "ip -n %s addr add 10.231.0.1/24 dev cva%d && ip -n %s addr add 10.231.0.2/24 dev cvb%d && "
           "ip -n %s link set lo up && ip -n %s link set lo up && "
           "ip -n %s link set cva%d up && ip -n %s link set cvb%d up",
           a, b, tag, a, tag, b, a, tag, b, tag, a, b, a, tag, b, tag);
  if (sh(cmd) != 0) {
    snprintf(cmd, sizeof cmd, "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", j.ns[0], j.ns[1]);
    sh(cmd);
    fprintf(stderr, "skipped: cannot make network namespaces here\n");
    return;
  }
  pid_t cutter = fork();
  if (cutter == 0) {
    usleep(1500 * 1000); /* init done, all-reduces running */
    snprintf(cmd, sizeof cmd, "ip -n %s link set cva%d down", j.ns[0], (int)getppid() % 100000);
    _exit(sh(cmd));
  }
  int failures = mp_run(2, 40000, rank_link_cut, &j);
  int cut_status = 0;
  waitpid(cutter, &cut_status, 0);
  snprintf(cmd, sizeof cmd, "ip netns del %s; ip netns del %s", j.ns[0], j.ns[1]);
  sh(cmd);
  ck_assert_msg(WIFEXITED(cut_status) && WEXITSTATUS(cut_status) == 0, "could not cut the link");
  ck_assert_int_eq(failures, 0);
  fprintf(stderr, "link cut between network namespaces %s and %s: both ranks failed in time\n",
          j.ns[0], j.ns[1]);
}
END_TEST

SUITE_MAIN("coll failures",
           suite_tests("failures", 240,
                       a_killed_rank_is_named_by_every_other_rank_50_times_over_shm,
                       a_killed_rank_is_named_by_every_other_rank_50_times_over_tcp),
           suite_loop_tests("failures", 240, 0, 2,
                            a_stopped_rank_times_the_others_out_and_the_hang_report_names_it,
                            different_collectives_fail_with_a_mismatch_naming_both_calls),
           suite_tests("failures", 240,
                       a_cut_link_between_two_namespace_hosts_is_an_error_not_a_hang))
