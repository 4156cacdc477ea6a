/* Surviving a lost rank through the NCCL API (built against our nccl.h and NVIDIA's 2.32.3
 * header: tests/nccl/meson.build), ranks as forked processes: a revoke failing the peers'
 * pending calls and the revoked communicator shrunk, survivors of a killed rank shrinking
 * it away (NCCL_SHRINK_DEFAULT) and leaving out a live rank stuck outside a call
 * (NCCL_SHRINK_ABORT), blocking and not, and a new process taken in by ncclCommGrow.
 * The unique id is made by the test process, which is no rank: libcoll's store lives in
 * the process that called ncclGetUniqueId and must outlive the rank that is killed. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "multiproc.h"
#include "nccl.h"
#include "nccl_check.h"
#include "suite_run.h"

typedef struct job job_t;
struct job {
  int id_pipe[2];   /* the test process's id, one copy per member */
  int grow_pipe[2]; /* rank 0's grow id, one copy per new process */
  int members;      /* ranks of the first communicator; the others join by ncclCommGrow */
  int victim;       /* the rank killed or left out */
  int variant;      /* the loop test's _i */
  int (*member)(int rank, int nranks, ncclComm_t comm, const job_t *job);
  int (*joiner)(int rank, int nranks, const job_t *job);
};

static double seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int rank_main(int rank, int nranks, void *arg) {
  const job_t *job = arg;
  if (rank >= job->members) return job->joiner(rank, nranks, job);
  ncclUniqueId id;
  CHECK(read(job->id_pipe[0], &id, sizeof id) == (ssize_t)sizeof id, "id pipe read");
  ncclComm_t comm = NULL;
  CHECK_NCCL(ncclCommInitRank(&comm, job->members, id, rank));
  return job->member(rank, nranks, comm, job);
}

/* The ranks (members, then joiners) are forked by a launcher process before this one
 * makes the id, so no rank inherits the store this process hosts from then on. */
static void run_ranks(job_t *job, int nranks, int expect_failed) {
  ck_assert_int_eq(pipe(job->id_pipe), 0);
  ck_assert_int_eq(pipe(job->grow_pipe), 0);
  pid_t launcher = fork();
  ck_assert_int_ge(launcher, 0);
  if (launcher == 0) _exit(mp_run(nranks, 90000, rank_main, job) & 0x7f);
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  for (int i = 0; i < job->members; i++)
    ck_assert_int_eq(write(job->id_pipe[1], &id, sizeof id), (ssize_t)sizeof id);
  int status = 0;
  ck_assert_int_eq(waitpid(launcher, &status, 0), launcher);
  ck_assert(WIFEXITED(status));
  ck_assert_msg(WEXITSTATUS(status) == expect_failed, "%d ranks failed, %d expected",
                WEXITSTATUS(status), expect_failed);
  for (int i = 0; i < 2; i++) {
    close(job->id_pipe[i]);
    close(job->grow_pipe[i]);
  }
}

/* Non-blocking (ncclInProgress) calls end when ncclCommGetAsyncError says so. */
static ncclResult_t settle(ncclResult_t r, ncclComm_t comm) {
  if (r != ncclInProgress) return r;
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 60000 && state == ncclInProgress; i++) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) usleep(1000);
  }
  return state;
}

/* An all-reduce of every rank's `value` on comm: the sum. */
static int sum_is(int rank, ncclComm_t comm, int32_t value, int32_t want) {
  CHECK_NCCL(ncclAllReduce(&value, &value, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(value == want, "sum %d, want %d", value, want);
  return 0;
}

/* ---- a revoke reaches the peers; the revoked communicator is shrunk ---- */

static int member_revoke(int rank, int nranks, ncclComm_t comm, const job_t *job) {
  int32_t x = 1;
  if (rank == job->victim) {
    usleep(300 * 1000); /* the others wait in an all-reduce this rank never joins */
    CHECK_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  } else {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
    double s = seconds_since(&t0);
    const char *m = ncclGetLastError(comm);
    CHECK(r == ncclInvalidUsage && strstr(m, "revoked") != NULL,
          "the pending all-reduce gave %d (%s)", (int)r, m);
    CHECK(s < 10, "the peer's revoke took %.1f s to stop the call (deadline 60 s)", s);
    /* As a NCCL program does on every rank (a second revoke changes nothing). */
    CHECK_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  }
  CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm,
                "revoked");
  CHECK_REFUSED(ncclCommFinalize(comm), ncclInvalidUsage, comm, "revoked");
  CHECK_REFUSED(ncclCommSplit(comm, 0, rank, &(ncclComm_t){NULL}, NULL), ncclInvalidUsage, comm,
                "revoked");
  CHECK_REFUSED(ncclCommRevoke(comm, 1), ncclInvalidArgument, comm, "revokeFlags");
  ncclResult_t async = ncclInProgress;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async state after revoke %d", (int)async);
  /* Shrinking a revoked communicator, leaving nobody out: a working copy. */
  ncclComm_t copy = NULL;
  CHECK_NCCL(ncclCommShrink(comm, NULL, 0, &copy, NULL, NCCL_SHRINK_DEFAULT));
  int count = 0, me = -1;
  CHECK_NCCL(ncclCommCount(copy, &count));
  CHECK_NCCL(ncclCommUserRank(copy, &me));
  CHECK(count == nranks && me == rank, "rank %d of %d after the shrink", me, count);
  if (sum_is(rank, copy, rank, nranks * (nranks - 1) / 2)) return 1;
  CHECK_NCCL(ncclCommDestroy(copy));
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

START_TEST(a_revoke_fails_the_peers_pending_calls_and_the_revoked_comm_shrinks) {
  setenv("COLL_TIMEOUT_MS", "60000", 1);
  job_t job = {.members = 3, .victim = 2, .member = member_revoke};
  run_ranks(&job, 3, 0);
}
END_TEST

/* ---- a rank killed or left out, the survivors shrink and go on ---- */

typedef struct {
  ncclComm_t comm;
  ncclResult_t result;
  double took_s;
} pending_t;

static void *pending_all_reduce(void *arg) {
  pending_t *p = arg;
  int32_t x = 1;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  p->result = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, p->comm, NULL);
  p->took_s = seconds_since(&t0);
  return NULL;
}

/* Variants: bit 0, the shrink is non-blocking; bit 1, NCCL_SHRINK_ABORT with the left-out
 * rank alive (else NCCL_SHRINK_DEFAULT after it was killed). */
static int member_shrink(int rank, int nranks, ncclComm_t comm, const job_t *job) {
  const bool nonblocking = job->variant & 1, abort_flag = job->variant & 2;
  const int victim = job->victim;
  CHECK(sum_is(rank, comm, 1, nranks) == 0, "first all-reduce");
  if (rank == victim) {
    if (!abort_flag) raise(SIGKILL);
    /* Alive, outside every call, while the others leave it out; by the time it comes
     * back its communicator was revoked by their shrink. */
    usleep(1500 * 1000);
    int32_t x = 1;
    CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm,
                  "revoked");
    CHECK_NCCL(ncclCommDestroy(comm));
    return 0;
  }
  pending_t pending = {.comm = comm};
  pthread_t thread;
  if (abort_flag) {
    /* A call the left-out rank never joins: the shrink's abort must end it. */
    CHECK(pthread_create(&thread, NULL, pending_all_reduce, &pending) == 0, "thread");
    usleep(200 * 1000);
  } else {
    int32_t x = 1;
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
    CHECK(r == ncclRemoteError || r == ncclTimeout, "the all-reduce without rank %d gave %d (%s)",
          victim, (int)r, ncclGetLastError(comm));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = nonblocking ? 0 : 1;
  ncclComm_t smaller = NULL;
  int exclude = victim;
  ncclResult_t r = ncclCommShrink(comm, &exclude, 1, &smaller, &config,
                                  abort_flag ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
  CHECK(r == ncclSuccess || (nonblocking && r == ncclInProgress), "shrink gave %d (%s)", (int)r,
        ncclGetLastError(comm));
  CHECK_NCCL(settle(r, smaller));
  if (abort_flag) {
    pthread_join(thread, NULL);
    CHECK(pending.result == ncclInvalidUsage && pending.took_s < 10,
          "the pending all-reduce gave %d after %.1f s", (int)pending.result, pending.took_s);
  }
  int count = 0, me = -1, want = rank - (rank > victim);
  CHECK_NCCL(ncclCommCount(smaller, &count));
  CHECK_NCCL(ncclCommUserRank(smaller, &me));
  CHECK(count == nranks - 1 && me == want, "rank %d of %d, want %d of %d", me, count, want,
        nranks - 1);
  /* The survivors' old ranks: 0 + 1 + ... + (n-1) - victim. */
  if (sum_is(rank, smaller, rank, nranks * (nranks - 1) / 2 - victim)) return 1;
  /* The parent is done: revoked by the shrink, or failed already (it keeps its error). */
  int32_t x = 1;
  if (abort_flag)
    CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm,
                  "revoked");
  else
    CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclRemoteError, comm,
                  "is gone");
  CHECK_NCCL(ncclCommDestroy(smaller));
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

START_TEST(survivors_leave_out_a_killed_or_stuck_rank_and_go_on) {
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  job_t job = {.members = 4, .victim = 1, .variant = _i, .member = member_shrink};
  run_ranks(&job, 4, _i & 2 ? 0 : 1); /* the killed rank is the one failure */
}
END_TEST

/* ---- a new process joins ---- */

/* Variants: 0, the new process asks for the rank it gets (2) and every call blocks; 1, the
 * same without blocking; 2, it asks for rank 0 and is told why not. */
static int member_grow(int rank, int nranks, ncclComm_t comm, const job_t *job) {
  ncclUniqueId gid, again;
  if (rank == 0) {
    CHECK_NCCL(ncclCommGetUniqueId(comm, &gid));
    CHECK_REFUSED(ncclCommGetUniqueId(comm, &again), ncclInvalidUsage, comm, "not been used");
    for (int i = job->members; i < nranks; i++)
      CHECK(write(job->grow_pipe[1], &gid, sizeof gid) == (ssize_t)sizeof gid, "pipe write");
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = job->variant == 1 ? 0 : 1;
  ncclComm_t grown = NULL;
  ncclResult_t r = ncclCommGrow(comm, nranks, rank == 0 ? &gid : NULL, -1, &grown, &config);
  CHECK(r == ncclSuccess || (config.blocking == 0 && r == ncclInProgress), "grow gave %d (%s)",
        (int)r, ncclGetLastError(comm));
  CHECK_NCCL(settle(r, grown));
  int count = 0, me = -1;
  CHECK_NCCL(ncclCommCount(grown, &count));
  CHECK_NCCL(ncclCommUserRank(grown, &me));
  CHECK(count == nranks && me == rank, "rank %d of %d after the grow", me, count);
  if (job->variant == 2) {
    /* The new process refused its rank and revoked the new communicator. */
    int32_t x = 1;
    CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, grown, NULL), ncclInvalidUsage,
                  grown, "revoked");
  } else if (sum_is(rank, grown, rank, nranks * (nranks - 1) / 2)) {
    return 1;
  }
  if (rank == 0) {
    CHECK_NCCL(ncclCommGetUniqueId(comm, &again)); /* the grow used the first */
    CHECK(memcmp(&gid, &again, sizeof gid) == 0, "the lineage's id changed");
  }
  CHECK_NCCL(ncclCommDestroy(grown));
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

static int joiner_grow(int rank, int nranks, const job_t *job) {
  ncclUniqueId gid;
  CHECK(read(job->grow_pipe[0], &gid, sizeof gid) == (ssize_t)sizeof gid, "grow pipe read");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = job->variant == 1 ? 0 : 1;
  ncclComm_t grown = NULL;
  int ask = job->variant == 2 ? 0 : rank;
  ncclResult_t r = ncclCommGrow(NULL, nranks, &gid, ask, &grown, &config);
  if (job->variant == 2) {
    const char *m = ncclGetLastError(NULL);
    CHECK(r == ncclInvalidUsage && grown == NULL && strstr(m, "order") != NULL,
          "asking for rank 0 gave %d (%s)", (int)r, m);
    return 0;
  }
  CHECK(r == ncclSuccess || (config.blocking == 0 && r == ncclInProgress), "join gave %d (%s)",
        (int)r, ncclGetLastError(NULL));
  CHECK_NCCL(settle(r, grown));
  int count = 0, me = -1;
  CHECK_NCCL(ncclCommCount(grown, &count));
  CHECK_NCCL(ncclCommUserRank(grown, &me));
  CHECK(count == nranks && me == rank, "new rank %d of %d", me, count);
  if (sum_is(rank, grown, rank, nranks * (nranks - 1) / 2)) return 1;
  CHECK_NCCL(ncclCommDestroy(grown));
  return 0;
}

START_TEST(a_new_process_joins_through_grow) {
  setenv("COLL_TIMEOUT_MS", "30000", 1);
  job_t job = {.members = 2, .variant = _i, .member = member_grow, .joiner = joiner_grow};
  run_ranks(&job, 3, 0);
}
END_TEST

/* ---- arguments ---- */

static int member_arguments(int rank, int nranks, ncclComm_t comm, const job_t *job) {
  (void)job;
  ncclComm_t out = (ncclComm_t)&out;
  int self = rank, everyone[2] = {0, 1}, outside = nranks;
  CHECK_REFUSED(ncclCommShrink(comm, &self, 1, &out, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, comm, "is this rank");
  CHECK(out == NULL, "newcomm not cleared");
  CHECK_REFUSED(ncclCommShrink(comm, everyone, 2, &out, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, comm, "excludeRanksCount");
  CHECK_REFUSED(ncclCommShrink(comm, &outside, 1, &out, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, comm, "not a rank");
  CHECK_REFUSED(ncclCommShrink(comm, &outside, 1, &out, NULL, 2), ncclInvalidArgument, comm,
                "shrinkFlags");
  CHECK_REFUSED(ncclCommGrow(comm, nranks, NULL, -1, &out, NULL), ncclInvalidArgument, comm,
                "does not add ranks");
  CHECK_REFUSED(ncclCommGrow(comm, nranks + 1, NULL, 5, &out, NULL), ncclInvalidArgument, comm,
                "rank -1");
  ncclUniqueId other;
  CHECK_NCCL(ncclGetUniqueId(&other));
  CHECK_REFUSED(ncclCommGrow(comm, nranks + 1, &other, -1, &out, NULL), ncclInvalidArgument, comm,
                "not one of this communicator's");
  CHECK_REFUSED(ncclCommGrow(NULL, 3, NULL, 2, &out, NULL), ncclInvalidArgument, NULL, "uniqueId");
  CHECK_REFUSED(ncclCommGrow(NULL, 3, &other, 3, &out, NULL), ncclInvalidArgument, NULL,
                "0..nRanks-1");
  if (sum_is(rank, comm, 1, nranks)) return 1; /* nothing above touched it */
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

START_TEST(bad_shrink_and_grow_arguments_are_refused) {
  job_t job = {.members = 2, .member = member_arguments};
  run_ranks(&job, 2, 0);
}
END_TEST

SUITE_MAIN("nccl elastic",
           suite_tests("processes", 120,
                       a_revoke_fails_the_peers_pending_calls_and_the_revoked_comm_shrinks),
           suite_loop_tests("processes", 120, 0, 4,
                            survivors_leave_out_a_killed_or_stuck_rank_and_go_on),
           suite_loop_tests("processes", 120, 0, 3, a_new_process_joins_through_grow),
           suite_tests("processes", 120, bad_shrink_and_grow_arguments_are_refused))
