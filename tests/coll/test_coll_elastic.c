/* Surviving a lost rank, with real processes over shm and tcp and a store hosted outside
 * the ranks (as collrun does): revoke reaching every member, agreement on who failed
 * after a SIGKILL (every survivor the same set), shrink and go on, a slow rank fenced,
 * the flag's AND, grow with joiners (one and two at once), a dead store giving a clear
 * error, and shrink/grow cycles leaving no file descriptor, thread or segment behind.
 * COLL_TEST_TRANSPORT=ib (tests/rdma/run.sh, in the soft-RoCE guest) runs every case
 * over that transport instead; COLL_TEST_CYCLES=1000 makes the cycles 1000 (docs/elastic.md). */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll_test_util.h"
#include "common/clock.h"
#include "multiproc.h"
#include "suite_run.h"
#include "tp_util.h"

enum { MAX_RANKS = 8, AGREE_MS = 600 };

/* What the ranks report back (shared mapping made before the fork). */
typedef struct {
  int nfailed[MAX_RANKS];
  int failed0[MAX_RANKS];
  uint32_t flag[MAX_RANKS];
  int64_t took_ms[MAX_RANKS];
  int new_rank[MAX_RANKS];
  int pid[MAX_RANKS];
  char id_file[256];
} shared_t;

static shared_t *shared;

/* The transport of loop iteration i: shm, tcp, or COLL_TEST_TRANSPORT for every one. */
static const char *forced_transport(void) {
  const char *forced = getenv("COLL_TEST_TRANSPORT");
  return forced != NULL && forced[0] != '\0' ? forced : NULL;
}
static const char *transport_of(int i) {
  return forced_transport() ? forced_transport() : i % 2 ? "tcp" : "shm";
}

/* The soft-RoCE guest (a forced transport) runs on an emulated CPU, many times slower:
 * there the deadline is longer and the loops shorter; what it checks is that ib works. */
#define GUEST (forced_transport() != NULL)
#define TIMEOUT_MS (GUEST ? 30000 : 8000)
#define RECOVERY_BOUND_MS (GUEST ? 20000 : 4000)
#define AGREE_ROUNDS (GUEST ? 20 : 200)
#define CYCLES (getenv("COLL_TEST_CYCLES") ? atoi(getenv("COLL_TEST_CYCLES")) : GUEST ? 4 : 40)

static void shared_reset(void) {
  if (shared == NULL) {
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(shared, MAP_FAILED);
  }
  memset(shared, 0, sizeof *shared);
}

typedef struct {
  ct_job_t job;
  int victim;
} elastic_job_t;

static int sum_of(const int *ranks, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += ranks[i];
  return s;
}

/* ---- revoke ---- */

static int rank_revoke(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const elastic_job_t *j = arg;
  (void)nranks;
  int bad = 0, v = rank;
  if (rank == j->victim) {
    ct_sleep_ms(200); /* the others are inside an all-reduce this rank never joins */
    bad |= ct_ok(rank, "revoke", coll_comm_revoke(comm));
    bad |= ct_ok(rank, "second revoke", coll_comm_revoke(comm));
  } else {
    int64_t start = coll_now_ms();
    coll_status_t st = coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm);
    shared->took_ms[rank] = coll_now_ms() - start;
    char who[64];
    snprintf(who, sizeof who, "rank %d revoked", j->victim);
    if (st != COLL_ERR_REVOKED || strstr(coll_last_error(), who) == NULL) {
      fprintf(stderr, "rank %d: pending all-reduce gave %s: %s\n", rank, coll_status_name(st),
              coll_last_error());
      bad = 1;
    }
  }
  coll_status_t st = coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm);
  if (st != COLL_ERR_REVOKED) {
    fprintf(stderr, "rank %d: later call gave %s\n", rank, coll_status_name(st));
    bad = 1;
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_revoke_reaches_every_member_within_milliseconds) {
  if (GUEST && _i) return; /* the same transport twice */
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport_of(_i),
                             .timeout_ms = 20000,
                             .store_elsewhere = true},
                     .victim = 2};
  int failed = ct_run_arg(4, 30000, &j.job, rank_revoke, &j);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
  for (int r = 0; r < 4; r++) {
    if (r == j.victim) continue;
    /* 200 ms before the revoke, then a store round trip and a 10 ms wait slice. */
    ck_assert_msg(shared->took_ms[r] < (GUEST ? 10000 : 1500), "rank %d stopped %lld ms after its call began", r,
                  (long long)shared->took_ms[r]);
  }
}
END_TEST

/* ---- kill, agree, shrink, go on ---- */

static int rank_killed_then_shrink(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const elastic_job_t *j = arg;
  static float data[1 << 15];
  int bad = coll_all_reduce(data, data, 1 << 15, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK;
  if (rank == j->victim) raise(SIGKILL);
  int64_t start = coll_now_ms();
  coll_status_t st = coll_all_reduce(data, data, 1 << 15, COLL_FLOAT32, COLL_SUM, comm);
  if (st == COLL_OK) {
    fprintf(stderr, "rank %d: the all-reduce without rank %d succeeded\n", rank, j->victim);
    bad = 1;
  }
  coll_agreement_t a = {.flag = st == COLL_OK};
  bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
  shared->nfailed[rank] = a.nfailed;
  shared->failed0[rank] = a.nfailed > 0 ? a.failed[0] : -1;
  shared->flag[rank] = a.flag;
  coll_comm_t *smaller = NULL;
  bad |= ct_ok(rank, "shrink", coll_comm_shrink(comm, a.failed, a.nfailed, &smaller));
  if (smaller != NULL) {
    int r = -1, n = 0, v = rank;
    coll_comm_rank(smaller, &r);
    coll_comm_size(smaller, &n);
    shared->new_rank[rank] = r;
    bad |= ct_ok(rank, "all-reduce after shrink",
                 coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, smaller));
    int survivors[MAX_RANKS], k = 0;
    for (int q = 0; q < nranks; q++)
      if (q != j->victim) survivors[k++] = q;
    if (v != sum_of(survivors, k) || n != nranks - 1) {
      fprintf(stderr, "rank %d: after the shrink: size %d, sum %d\n", rank, n, v);
      bad = 1;
    }
    shared->took_ms[rank] = coll_now_ms() - start;
    bad |= ct_ok(rank, "destroy the new one", coll_comm_destroy(smaller));
  }
  coll_comm_destroy(comm);
  return bad;
}

/* _i 0-5: libcoll's own store; 6-9: the caller's (caller_store.h), where liveness is a
 * lease (base/liveness.c), rank 0 and rank 3 killed. */
START_TEST(survivors_of_a_kill_agree_on_it_shrink_and_go_on) {
  static const int victims[] = {3, 0, 1, 3, 0};
  const char *transport = transport_of(_i);
  int victim = victims[_i / 2];
  bool leases = _i >= 6;
  if (GUEST && _i % 2) return; /* the same transport twice */
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport,
                             .timeout_ms = TIMEOUT_MS,
                             .store_elsewhere = true,
                             .caller_store = leases},
                     .victim = victim};
  int failed = ct_run_arg(4, 60000, &j.job, rank_killed_then_shrink, &j);
  tp_store_stop(&store);
  ck_assert_msg(failed == 1, "%d ranks failed (only the victim should)", failed);
  int64_t worst = 0;
  for (int r = 0, want = 0; r < 4; r++) {
    if (r == victim) continue;
    ck_assert_msg(shared->nfailed[r] == 1 && shared->failed0[r] == victim,
                  "rank %d agreed on %d failed (first %d), not rank %d", r, shared->nfailed[r],
                  shared->failed0[r], victim);
    ck_assert_int_eq(shared->flag[r], 0);
    ck_assert_int_eq(shared->new_rank[r], want++);
    if (shared->took_ms[r] > worst) worst = shared->took_ms[r];
  }
  fprintf(stderr, "%s%s, rank %d killed: failure to a working 3-rank communicator in %lld ms\n",
          transport, leases ? " (the caller's store: leases)" : "", victim, (long long)worst);
  /* Far below the deadline: a dead rank is known from its connections and its store
   * key, nobody waits for a timeout. */
  ck_assert_msg(worst < RECOVERY_BOUND_MS, "took %lld ms", (long long)worst);
}
END_TEST

/* ---- a member dies during the shrink ---- */

/* Rank 3 is killed; then the victim dies after the agreement, before its shrink: rank 2, a
 * member the new communicator's rendezvous waits for, or rank 0, the lowest survivor, which
 * publishes the shrink's record (the new rank 0). The others' shrink fails at once (the
 * rendezvous, or the wait for the record, looks at the victim's liveness key in the
 * parent), not at the 8 s timeout; they agree again and shrink without both. */
static const int shrink_victims[] = {2, 0};

static int rank_dies_in_shrink(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)nranks;
  const int victim = *(const int *)arg;
  int v = 1, bad = 0;
  bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  if (rank == 3) raise(SIGKILL);
  coll_status_t st = coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm);
  int64_t start = coll_now_ms();
  coll_agreement_t a = {.flag = st == COLL_OK};
  bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
  if (rank == victim) raise(SIGKILL);
  coll_comm_t *smaller = NULL;
  st = coll_comm_shrink(comm, a.failed, a.nfailed, &smaller);
  /* The victim's rank in the communicator the shrink makes: 2 of {0,1,2}, 0 of {0,1,2}. */
  char died[32];
  snprintf(died, sizeof died, "rank %d died", victim == 0 ? 0 : 2);
  if (st == COLL_OK || strstr(coll_last_error(), died) == NULL) {
    fprintf(stderr, "rank %d: shrink with a dead member gave %s: %s\n", rank, coll_status_name(st),
            coll_last_error());
    bad = 1;
  }
  coll_comm_destroy(smaller);
  smaller = NULL;
  a.flag = 1;
  bad |= ct_ok(rank, "agree again", coll_comm_agree(comm, &a));
  int lower = victim < 3 ? victim : 3;
  if (a.nfailed != 2 || a.failed[0] != lower || a.failed[1] != 3) {
    fprintf(stderr, "rank %d: agreed on %d failed\n", rank, a.nfailed);
    bad = 1;
  }
  bad |= ct_ok(rank, "shrink again", coll_comm_shrink(comm, a.failed, a.nfailed, &smaller));
  v = 1;
  if (smaller != NULL)
    bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, smaller));
  bad |= v != 2;
  shared->took_ms[rank - (rank > victim)] = coll_now_ms() - start; /* the survivors: 0, 1 */
  coll_comm_destroy(smaller);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_member_that_dies_during_the_shrink_is_found_at_once) {
  int victim = shrink_victims[_i];
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport_of(0),
                             .timeout_ms = TIMEOUT_MS,
                             .store_elsewhere = true}};
  int failed = ct_run_arg(4, 60000, &j.job, rank_dies_in_shrink, &victim);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 2); /* the victim and rank 3, killed */
  for (int r = 0; r < 2; r++)
    ck_assert_msg(shared->took_ms[r] < RECOVERY_BOUND_MS, "rank %d took %lld ms", r,
                  (long long)shared->took_ms[r]);
  fprintf(stderr, "rank %d dead in the shrink: a working 2-rank communicator %lld ms after "
                  "the first agreement began\n",
          victim, (long long)shared->took_ms[0]);
}
END_TEST

/* ---- a slow rank is fenced ---- */

static int rank_slow(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const elastic_job_t *j = arg;
  int bad = 0;
  coll_agreement_t a = {.flag = 1};
  if (rank == j->victim) {
    ct_sleep_ms(3 * AGREE_MS); /* alive but late: the others' deadline passes */
    coll_status_t st = coll_comm_agree(comm, &a);
    if (st != COLL_ERR_FENCED) {
      fprintf(stderr, "rank %d (late): agree gave %s: %s\n", rank, coll_status_name(st),
              coll_last_error());
      bad = 1;
    }
    coll_comm_destroy(comm);
    return bad;
  }
  bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
  shared->nfailed[rank] = a.nfailed;
  shared->failed0[rank] = a.nfailed ? a.failed[0] : -1;
  coll_comm_t *smaller = NULL;
  bad |= ct_ok(rank, "shrink", coll_comm_shrink(comm, a.failed, a.nfailed, &smaller));
  int v = 1;
  if (smaller != NULL)
    bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, smaller));
  bad |= v != nranks - 1;
  coll_comm_destroy(smaller);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_rank_that_comes_after_the_deadline_is_fenced) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  char ms[32];
  snprintf(ms, sizeof ms, "%d", AGREE_MS);
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport_of(0),
                             .timeout_ms = TIMEOUT_MS,
                             .store_elsewhere = true},
                     .victim = 1};
  setenv("COLL_AGREE_MS", ms, 1); /* ct_init keeps COLL_AGREE_MS: see ct_clean_env */
  int failed = ct_run_arg(3, 30000, &j.job, rank_slow, &j);
  unsetenv("COLL_AGREE_MS");
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
  ck_assert(shared->nfailed[0] == 1 && shared->failed0[0] == 1);
  ck_assert(shared->nfailed[2] == 1 && shared->failed0[2] == 1);
}
END_TEST

/* ---- a rank stuck in a call on a stopped peer is released, not fenced ---- */

/* Rank 2 finishes an all-reduce and stops (SIGSTOP); rank 0 goes to the agreement, rank 1
 * into a second all-reduce that cannot finish. The agreement revokes the communicator
 * after a quarter of its deadline, so rank 1 stops and takes part well before the
 * deadline (which equals the call timeout: without the revoke it came after it and was
 * fenced); only the stopped rank is declared failed. */
static int rank_stuck_behind_a_stopped_peer(int rank, int nranks, void *arg) {
  const elastic_job_t *j = arg;
  coll_comm_t *comm;
  shared->pid[rank] = (int)getpid();
  if (ct_init(&j->job, rank, nranks, &comm) != 0) return 1;
  int v = 1, bad = 0;
  bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  if (rank == j->victim) raise(SIGSTOP); /* rank 0 kills it at the end */
  if (rank == 1) {
    coll_status_t st = coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm);
    if (st == COLL_OK) bad = 1;
  }
  int64_t start = coll_now_ms();
  coll_agreement_t a = {.flag = 1};
  bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
  shared->took_ms[rank] = coll_now_ms() - start;
  shared->nfailed[rank] = a.nfailed;
  shared->failed0[rank] = a.nfailed ? a.failed[0] : -1;
  if (rank == 0) {
    kill(shared->pid[j->victim], SIGKILL);
    kill(shared->pid[j->victim], SIGCONT);
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_rank_stuck_behind_a_stopped_peer_is_released_not_fenced) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport_of(0),
                             .timeout_ms = GUEST ? 12000 : 3000,
                             .store_elsewhere = true},
                     .victim = 2};
  int failed = mp_run(3, 60000, rank_stuck_behind_a_stopped_peer, &j);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 1); /* the stopped rank, killed */
  for (int r = 0; r < 2; r++)
    ck_assert_msg(shared->nfailed[r] == 1 && shared->failed0[r] == 2,
                  "rank %d: %d failed (first %d)", r, shared->nfailed[r], shared->failed0[r]);
}
END_TEST

/* ---- a stopped rank costs the survivors one deadline, not two ---- */

/* Rank 3 stops (SIGSTOP) before an all-reduce; the others wait for it until their
 * deadline, agree, shrink and go on. The ranks that timed out were waiting for rank 3
 * (their hang records say so), so the agreement fails it after a short grace instead of
 * waiting a second deadline for it (it is alive: its liveness key stays). */
static int rank_stopped_before_a_call(int rank, int nranks, void *arg) {
  const elastic_job_t *j = arg;
  coll_comm_t *comm;
  shared->pid[rank] = (int)getpid();
  if (ct_init(&j->job, rank, nranks, &comm) != 0) return 1;
  int v = 1, bad = 0;
  bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  if (rank == j->victim) raise(SIGSTOP); /* rank 0 kills it at the end */
  int64_t start = coll_now_ms();
  v = 1;
  if (coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm) == COLL_OK) {
    fprintf(stderr, "rank %d: the all-reduce without the stopped rank succeeded\n", rank);
    bad = 1;
  }
  coll_agreement_t a = {.flag = 1};
  bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
  shared->nfailed[rank] = a.nfailed;
  shared->failed0[rank] = a.nfailed ? a.failed[0] : -1;
  coll_comm_t *smaller = NULL;
  bad |= ct_ok(rank, "shrink", coll_comm_shrink(comm, a.failed, a.nfailed, &smaller));
  v = 1;
  if (smaller != NULL)
    bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, smaller));
  bad |= v != nranks - 1;
  shared->took_ms[rank] = coll_now_ms() - start;
  if (rank == 0) {
    kill(shared->pid[j->victim], SIGKILL);
    kill(shared->pid[j->victim], SIGCONT);
  }
  coll_comm_destroy(smaller);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_stopped_rank_costs_the_survivors_one_deadline_not_two) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  int deadline = GUEST ? 12000 : 3000;
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport_of(_i),
                             .timeout_ms = deadline,
                             .store_elsewhere = true},
                     .victim = 3};
  int failed = mp_run(4, 60000, rank_stopped_before_a_call, &j);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 1); /* the stopped rank, killed */
  int64_t worst = 0;
  for (int r = 0; r < 3; r++) {
    ck_assert_msg(shared->nfailed[r] == 1 && shared->failed0[r] == 3,
                  "rank %d: %d failed (first %d)", r, shared->nfailed[r], shared->failed0[r]);
    if (shared->took_ms[r] > worst) worst = shared->took_ms[r];
  }
  fprintf(stderr, "%s, rank 3 stopped: a working 3-rank communicator %lld ms after the call "
                  "began (deadline %d ms: %.2fx)\n",
          transport_of(_i), (long long)worst, deadline, (double)worst / deadline);
  /* Issue 51's target: within 1.2x the deadline (it was 2x: a second deadline in the
   * agreement). */
  ck_assert_msg(worst <= deadline * 12 / 10, "took %lld ms, over 1.2x the deadline of %d ms",
                (long long)worst, deadline);
}
END_TEST

/* ---- a long job keeps its liveness keys ---- */

/* The watcher's parked get times out (every minute; 100 ms here) and its next call may
 * replace the connection, whose close made the store drop the rank's liveness key: then a
 * live rank that was merely slow looked dead to a peer waiting for it (an ASan CI run:
 * "rank 1 died" after 60 s). The ranks idle through many park timeouts, then rank 1 is
 * 800 ms late to an all-reduce: the others must wait for it, not declare it dead. */
static int rank_long_lived(coll_comm_t *comm, int rank, int nranks) {
  int v = 1, bad = 0;
  bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  ct_sleep_ms(1500 + (rank == 1 ? 800 : 0));
  v = 1;
  bad |= ct_ok(rank, "late all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  bad |= v != nranks;
  bad |= ct_ok(rank, "destroy", coll_comm_destroy(comm));
  return bad;
}

START_TEST(a_long_job_keeps_its_liveness_keys) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  elastic_job_t j = {.job = {.port = store.port,
                             .transport = transport_of(1),
                             .timeout_ms = TIMEOUT_MS,
                             .store_elsewhere = true}};
  setenv("COLL_TEST_WATCH_PARK_MS", "100", 1);
  int failed = ct_run(3, 60000, &j.job, rank_long_lived);
  unsetenv("COLL_TEST_WATCH_PARK_MS");
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- the flag's AND, many times ---- */

static int rank_flags(coll_comm_t *comm, int rank, int nranks) {
  int bad = 0;
  int64_t start = coll_now_ms();
  for (int k = 0; k < AGREE_ROUNDS && !bad; k++) {
    /* Bit b is cleared by rank b % nranks on round k when (k >> b) & 1. */
    uint32_t mine = ~0u, want = ~0u;
    for (int b = 0; b < 8; b++)
      if ((k >> b) & 1) {
        want &= ~(1u << b);
        if (b % nranks == rank) mine &= ~(1u << b);
      }
    coll_agreement_t a = {.flag = mine};
    bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
    if (!bad && (a.flag != want || a.nfailed != 0 || a.joiners != 0)) {
      fprintf(stderr, "rank %d round %d: flag %#x (want %#x), %d failed, %d joiners\n", rank, k,
              a.flag, want, a.nfailed, a.joiners);
      bad = 1;
    }
  }
  shared->took_ms[rank] = coll_now_ms() - start;
  bad |= ct_ok(rank, "destroy", coll_comm_destroy(comm));
  return bad;
}

START_TEST(agreement_ands_the_flags_of_every_rank) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  elastic_job_t j = {.job = {.port = store.port, .timeout_ms = TIMEOUT_MS, .store_elsewhere = true}};
  int failed = ct_run(4, 60000, &j.job, rank_flags);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
  fprintf(stderr, "4 ranks: %d agreements in %lld ms\n", AGREE_ROUNDS,
          (long long)shared->took_ms[0]);
}
END_TEST

/* ---- grow ---- */

static int write_id(const coll_unique_id_t *id) {
  char tmp[300];
  snprintf(tmp, sizeof tmp, "%s.tmp", shared->id_file);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL || fwrite(id, sizeof *id, 1, f) != 1) return 1;
  fclose(f);
  return rename(tmp, shared->id_file) != 0;
}

static int read_id(coll_unique_id_t *id) {
  for (int waited = 0; waited < 20000; waited += 10) {
    FILE *f = fopen(shared->id_file, "rb");
    if (f != NULL) {
      size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) return 0;
    }
    ct_sleep_ms(10);
  }
  return 1;
}

typedef struct {
  ct_job_t job;
  int members;
  int cycles; /* grow tests: 0; cycles: shrink away the last rank and take it in again */
} grow_job_t;

static int count_dir(const char *path, const char *prefix) {
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* Shared-memory segments this process made that are still in /dev/shm (every name
 * libcoll makes holds "-p<pid>-"; tests running beside this one make their own). */
static int own_segments(void) {
  char mark[32];
  snprintf(mark, sizeof mark, "-p%d-", (int)getpid());
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "coll", 4) == 0 && strstr(e->d_name, mark) != NULL) n++;
  closedir(d);
  return n;
}

/* A joiner: read the id the members published, join, check an all-reduce. */
static int join_and_check(int rank, int expect_size, coll_comm_t **out) {
  coll_unique_id_t id;
  if (read_id(&id) != 0) {
    fprintf(stderr, "rank %d: no grow id\n", rank);
    return 1;
  }
  coll_comm_t *comm = NULL;
  int bad = ct_ok(rank, "join", coll_comm_join(&id, TIMEOUT_MS, &comm));
  if (bad) return 1;
  int r = -1, n = 0, v = 0;
  coll_comm_rank(comm, &r);
  coll_comm_size(comm, &n);
  v = r;
  bad |= ct_ok(rank, "all-reduce after join", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  if (n != expect_size || v != n * (n - 1) / 2) {
    fprintf(stderr, "joiner %d: rank %d of %d, sum %d\n", rank, r, n, v);
    bad = 1;
  }
  *out = comm;
  return bad;
}

/* Members: wait until the agreement counts the joiners, grow, check. */
static int members_grow(int rank, coll_comm_t **comm, int joiners) {
  int bad = 0;
  coll_agreement_t a = {.flag = 1};
  for (int tries = 0; tries < 2000 && !bad; tries++) {
    a.flag = 1;
    bad |= ct_ok(rank, "agree", coll_comm_agree(*comm, &a));
    if (a.joiners >= joiners) break;
    ct_sleep_ms(5);
  }
  if (bad || a.joiners < joiners) {
    fprintf(stderr, "rank %d: %d joiners counted, %d expected\n", rank, a.joiners, joiners);
    return 1;
  }
  coll_comm_t *bigger = NULL;
  bad |= ct_ok(rank, "grow", coll_comm_grow(*comm, a.joiners, &bigger));
  if (bad) return 1;
  int n = 0, r = -1, v = 0;
  coll_comm_size(bigger, &n);
  coll_comm_rank(bigger, &r);
  v = r;
  bad |= ct_ok(rank, "all-reduce after grow", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, bigger));
  if (v != n * (n - 1) / 2) {
    fprintf(stderr, "member %d: sum %d of %d ranks\n", rank, v, n);
    bad = 1;
  }
  coll_comm_destroy(*comm);
  *comm = bigger;
  return bad;
}

static int rank_grow(int rank, int nranks, void *arg) {
  const grow_job_t *g = arg;
  coll_comm_t *comm = NULL;
  if (rank >= g->members) {
    ct_clean_env();
    int bad = join_and_check(rank, nranks, &comm);
    coll_comm_destroy(comm);
    return bad;
  }
  if (ct_init(&g->job, rank, g->members, &comm) != 0) return 1;
  int bad = 0;
  if (rank == 0) {
    coll_unique_id_t id;
    bad |= ct_ok(rank, "grow id", coll_comm_grow_id(comm, &id));
    bad |= write_id(&id);
  }
  bad |= members_grow(rank, &comm, nranks - g->members);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(joiners_are_taken_in_by_grow) {
  int joiners = _i + 1;
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  snprintf(shared->id_file, sizeof shared->id_file, "/tmp/coll-elastic-id-%d", (int)getpid());
  grow_job_t g = {.job = {.port = store.port, .timeout_ms = TIMEOUT_MS, .store_elsewhere = true},
                  .members = 2};
  int failed = mp_run(2 + joiners, 60000, rank_grow, &g);
  unlink(shared->id_file);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- cycles leave nothing behind ---- */

static int rank_cycles(int rank, int nranks, void *arg) {
  const grow_job_t *g = arg;
  coll_comm_t *comm = NULL;
  int last = nranks - 1, bad = 0;
  if (ct_init(&g->job, rank, nranks, &comm) != 0) return 1;
  if (rank == 0) {
    coll_unique_id_t id;
    bad |= ct_ok(rank, "grow id", coll_comm_grow_id(comm, &id));
    bad |= write_id(&id);
  }
  int fds0 = count_dir("/proc/self/fd", ""), threads0 = count_dir("/proc/self/task", "");
  for (int k = 0; k < g->cycles && !bad; k++) {
    /* Everyone's last call finished before anyone leaves: a revoke would stop it. */
    coll_agreement_t a = {.flag = 1};
    bad |= ct_ok(rank, "agree before the cycle", coll_comm_agree(comm, &a));
    if (rank == last) {
      /* Left out: a rank that leaves revokes what it leaves (the members' shrink does
       * too), so that no destroy waits in a barrier; then it joins again. */
      bad |= ct_ok(rank, "revoke", coll_comm_revoke(comm));
      coll_comm_destroy(comm);
      comm = NULL;
      bad |= join_and_check(rank, nranks, &comm);
      continue;
    }
    int out = last;
    coll_comm_t *smaller = NULL;
    bad |= ct_ok(rank, "shrink", coll_comm_shrink(comm, &out, 1, &smaller));
    coll_comm_destroy(comm);
    comm = smaller;
    if (!bad) bad |= members_grow(rank, &comm, 1);
  }
  /* Every process has what it had after its first communicator: nothing accumulates. */
  coll_comm_destroy(comm);
  comm = NULL;
  int fds1 = count_dir("/proc/self/fd", ""), threads1 = count_dir("/proc/self/task", "");
  int segments = own_segments();
  if (fds1 > fds0 || threads1 > threads0 || segments != 0) {
    fprintf(stderr,
            "rank %d after %d cycles: fds %d -> %d, threads %d -> %d, %d segments of this "
            "process left in /dev/shm\n",
            rank, g->cycles, fds0, fds1, threads0, threads1, segments);
    bad = 1;
  }
  return bad;
}

START_TEST(shrink_and_grow_cycles_leave_nothing_behind) {
  if (GUEST && _i) return; /* the same transport twice */
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  shared_reset();
  snprintf(shared->id_file, sizeof shared->id_file, "/tmp/coll-elastic-cyc-%d", (int)getpid());
  grow_job_t g = {.job = {.port = store.port,
                          .transport = transport_of(_i),
                          .timeout_ms = TIMEOUT_MS,
                          .store_elsewhere = true},
                  .cycles = CYCLES};
  int failed = mp_run(3, 120000, rank_cycles, &g);
  unlink(shared->id_file);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- the store's host dies ---- */

static int rank_store_host_dies(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const elastic_job_t *j = arg;
  (void)nranks;
  int v = 1, bad = 0;
  bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  if (rank == 0) raise(SIGKILL); /* it hosts the store */
  coll_status_t st = coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm);
  int64_t start = coll_now_ms();
  coll_agreement_t a = {.flag = st == COLL_OK};
  st = coll_comm_agree(comm, &a);
  int64_t took = coll_now_ms() - start;
  if (st == COLL_OK || strstr(coll_last_error(), "store") == NULL || took > 2 * j->job.timeout_ms) {
    fprintf(stderr, "rank %d: agree without the store gave %s after %lld ms: %s\n", rank,
            coll_status_name(st), (long long)took, coll_last_error());
    bad = 1;
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(agreement_without_the_store_fails_clearly) {
  shared_reset();
  elastic_job_t j = {.job = {.port = mp_free_port(), .timeout_ms = 1500}};
  int failed = ct_run_arg(3, 30000, &j.job, rank_store_host_dies, &j);
  ck_assert_int_eq(failed, 1); /* rank 0, killed */
}
END_TEST

SUITE_MAIN("coll elastic",
           suite_loop_tests("elastic", 300, 0, 2,
                            a_revoke_reaches_every_member_within_milliseconds),
           suite_loop_tests("elastic", 300, 0, 10, survivors_of_a_kill_agree_on_it_shrink_and_go_on),
           suite_tests("elastic", 300, a_rank_that_comes_after_the_deadline_is_fenced,
                       a_rank_stuck_behind_a_stopped_peer_is_released_not_fenced,
                       agreement_ands_the_flags_of_every_rank, a_long_job_keeps_its_liveness_keys),
           suite_loop_tests("elastic", 300, 0, 2,
                            a_stopped_rank_costs_the_survivors_one_deadline_not_two,
                            a_member_that_dies_during_the_shrink_is_found_at_once),
           suite_loop_tests("elastic", 300, 0, 2, joiners_are_taken_in_by_grow,
                            shrink_and_grow_cycles_leave_nothing_behind),
           suite_tests("elastic", 300, agreement_without_the_store_fails_clearly))
