/* The public API's contract: names, argument checks with messages, init from every
 * launcher's environment, agreement on COLL_ALGO and set_algo, non-blocking requests,
 * abort, timeouts naming the silent peer, memory statistics and the INFO log. Where
 * ranks run and how they poll: test_coll_placement.c. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "multiproc.h"
#include "suite_run.h"
#include "tp_util.h"

/* Sanitizers that (rightly) report reading freed memory: the use-after-destroy check
 * is skipped under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A one-rank communicator needs no store (its port is checked, never opened). */
static coll_comm_t *single_comm(void) {
  ct_clean_env();
  coll_config_t cfg = {0};
  cfg.size = 1;
  cfg.local_rank = -1;
  cfg.master_port = 29500;
  cfg.host_store = -1;
  coll_comm_t *comm = NULL;
  ck_assert_int_eq(coll_comm_init_config(&cfg, &comm), COLL_OK);
  return comm;
}

START_TEST(names_and_sizes_cover_every_enum_value) {
  ck_assert_uint_eq(coll_dtype_size(COLL_INT8), 1);
  ck_assert_uint_eq(coll_dtype_size(COLL_BFLOAT16), 2);
  ck_assert_uint_eq(coll_dtype_size(COLL_FLOAT32), 4);
  ck_assert_uint_eq(coll_dtype_size(COLL_UINT64), 8);
  ck_assert_uint_eq(coll_dtype_size(COLL_DTYPE_COUNT), 0);
  ck_assert_uint_eq(coll_dtype_size((coll_dtype_t)-1), 0);
  ck_assert_str_eq(coll_dtype_name(COLL_FLOAT16), "float16");
  ck_assert_ptr_null(coll_dtype_name(COLL_DTYPE_COUNT));
  for (int d = 0; d < COLL_DTYPE_COUNT; d++)
    ck_assert_ptr_nonnull(coll_dtype_name((coll_dtype_t)d));
  ck_assert_str_eq(coll_op_name(COLL_AVG), "avg");
  ck_assert_ptr_null(coll_op_name(COLL_OP_COUNT));
  ck_assert_str_eq(coll_algo_name(COLL_ALGO_HD), "hd");
  ck_assert_str_eq(coll_algo_name(COLL_ALGO_AUTO), "auto");
  ck_assert_ptr_null(coll_algo_name((coll_algo_t)99));
}
END_TEST

START_TEST(bad_arguments_return_invalid_argument_with_a_message) {
  coll_comm_t *comm = single_comm();
  float a[4] = {1, 2, 3, 4}, b[4];
  coll_request_t *req = NULL;
  EXPECT_INVALID(coll_all_reduce(a, b, 4, COLL_FLOAT32, COLL_SUM, NULL), "comm is NULL");
  EXPECT_INVALID(coll_all_reduce(NULL, b, 4, COLL_FLOAT32, COLL_SUM, comm), "sendbuf is NULL");
  EXPECT_INVALID(coll_all_reduce(a, NULL, 4, COLL_FLOAT32, COLL_SUM, comm), "recvbuf is NULL");
  EXPECT_INVALID(coll_all_reduce(a, b, 4, COLL_DTYPE_COUNT, COLL_SUM, comm), "unknown dtype");
  EXPECT_INVALID(coll_all_reduce(a, b, 4, (coll_dtype_t)-3, COLL_SUM, comm), "unknown dtype");
  EXPECT_INVALID(coll_all_reduce(a, b, 4, COLL_FLOAT32, COLL_OP_COUNT, comm), "unknown op");
  EXPECT_INVALID(coll_all_reduce(a, b, SIZE_MAX / 2, COLL_FLOAT32, COLL_SUM, comm), "overflows");
  EXPECT_INVALID(coll_all_reduce(a, a + 1, 3, COLL_FLOAT32, COLL_SUM, comm), "overlap");
  EXPECT_INVALID(coll_all_reduce_async(a, b, 4, COLL_FLOAT32, COLL_SUM, comm, NULL),
                 "request is NULL");
  EXPECT_INVALID(coll_broadcast(a, 4, COLL_FLOAT32, 1, comm), "root 1");
  EXPECT_INVALID(coll_broadcast(a, 4, COLL_FLOAT32, -1, comm), "root -1");
  EXPECT_INVALID(coll_broadcast(NULL, 4, COLL_FLOAT32, 0, comm), "NULL");
  EXPECT_INVALID(coll_broadcast_async(a, 4, COLL_FLOAT32, 0, comm, NULL), "request is NULL");
  EXPECT_INVALID(coll_request_wait(NULL), "request is NULL");
  EXPECT_INVALID(coll_request_wait(&req), "request is NULL");
  EXPECT_INVALID(coll_request_test(&req), "request is NULL");
  EXPECT_INVALID(coll_comm_set_algo(comm, COLL_ALGO_COUNT), "unknown algorithm");
  EXPECT_INVALID(coll_comm_set_poll_us(comm, -1), "poll_us -1");
  EXPECT_INVALID(coll_comm_set_poll_us(NULL, 10), "comm is NULL");
  EXPECT_INVALID(coll_comm_rank(comm, NULL), "rank is NULL");
  EXPECT_INVALID(coll_comm_size(NULL, NULL), "comm is NULL");
  EXPECT_INVALID(coll_comm_mem_stats(comm, NULL), "stats is NULL");
  EXPECT_INVALID(coll_comm_abort(NULL), "comm is NULL");

  /* NULL buffers are fine with count 0, and success clears the message. */
  ck_assert_int_eq(coll_all_reduce(NULL, NULL, 0, COLL_FLOAT32, COLL_SUM, comm), COLL_OK);
  ck_assert_str_eq(coll_last_error(), "");
  ck_assert_int_eq(coll_all_reduce(a, b, 4, COLL_FLOAT32, COLL_AVG, comm), COLL_OK);
  ck_assert(b[3] == 4.0f);
  int r = -1, n = -1;
  ck_assert_int_eq(coll_comm_rank(comm, &r), COLL_OK);
  ck_assert_int_eq(coll_comm_size(comm, &n), COLL_OK);
  ck_assert_int_eq(r, 0);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(coll_comm_destroy(comm), COLL_OK);
  ck_assert_int_eq(coll_comm_destroy(NULL), COLL_OK);
#ifndef UNDER_ASAN
  /* Best-effort detection: the freed memory still holds the dead magic. ASan would
   * (rightly) report the read of freed memory, so this part runs without it only. */
  EXPECT_INVALID(coll_all_reduce(a, b, 4, COLL_FLOAT32, COLL_SUM, comm), "not a live");
#endif

  coll_config_t cfg = {0};
  coll_comm_t *c2 = NULL;
  EXPECT_INVALID(coll_comm_init_config(NULL, &c2), "config is NULL");
  cfg.size = 0;
  EXPECT_INVALID(coll_comm_init_config(&cfg, &c2), "size 0");
  cfg.size = 2;
  cfg.rank = 2;
  EXPECT_INVALID(coll_comm_init_config(&cfg, &c2), "rank 2");
  cfg.rank = 1;
  cfg.master_port = 0;
  EXPECT_INVALID(coll_comm_init_config(&cfg, &c2), "master_port");
  ck_assert_ptr_null(c2);
}
END_TEST

/* Each case sets one launcher's variables (or a broken set) and expects init to fail
 * with a message naming the variable. */
typedef struct {
  const char *vars[8]; /* NAME=value pairs */
  const char *needle;
} env_case_t;

static const env_case_t env_cases[] = {
    {.vars = {NULL}, .needle = "RANK and WORLD_SIZE"},
    {.vars = {"RANK=0"}, .needle = "WORLD_SIZE"},
    {.vars = {"RANK=0", "WORLD_SIZE=two"}, .needle = "WORLD_SIZE"},
    {.vars = {"RANK=5", "WORLD_SIZE=2"}, .needle = "RANK"},
    {.vars = {"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29500"}, .needle = "MASTER_ADDR"},
    {.vars = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1"}, .needle = "MASTER_PORT"},
    {.vars = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=http"},
     .needle = "MASTER_PORT"},
    {.vars = {"SLURM_PROCID=0"}, .needle = "SLURM_NTASKS"},
    {.vars = {"OMPI_COMM_WORLD_SIZE=2"}, .needle = "OMPI_COMM_WORLD_RANK"},
    {.vars = {"RANK=0", "WORLD_SIZE=1", "COLL_ALGO=fastest"}, .needle = "COLL_ALGO"},
    {.vars = {"RANK=0", "WORLD_SIZE=1", "COLL_TIMEOUT_MS=-5"}, .needle = "COLL_TIMEOUT_MS"},
    {.vars = {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=0"}, .needle = "MASTER_PORT"},
};

static void set_vars(const char *const *vars) {
  for (int i = 0; i < 8 && vars[i] != NULL; i++) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", vars[i]);
    char *eq = strchr(buf, '=');
    *eq = '\0';
    setenv(buf, eq + 1, 1);
  }
}

START_TEST(missing_or_malformed_launcher_variables_are_named) {
  ct_clean_env();
  const env_case_t *c = &env_cases[_i];
  set_vars(c->vars);
  coll_comm_t *comm = NULL;
  EXPECT_INVALID(coll_comm_init_env(&comm), c->needle);
  ck_assert_ptr_null(comm);
}
END_TEST

START_TEST(one_rank_from_the_environment_needs_no_store) {
  ct_clean_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  coll_comm_t *comm = NULL;
  ck_assert_int_eq(coll_comm_init_env(&comm), COLL_OK);
  ck_assert_int_eq(coll_comm_destroy(comm), COLL_OK);
}
END_TEST

typedef struct {
  int style; /* 0 torchrun, 1 Slurm, 2 Open MPI */
  uint16_t port;
} env_job_t;

static int rank_from_env(int rank, int nranks, void *arg) {
  const env_job_t *job = arg;
  ct_clean_env();
  static const char *const names[3][3] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
  };
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv(names[job->style][0], v, 1);
  setenv(names[job->style][2], v, 1);
  snprintf(v, sizeof v, "%d", nranks);
  setenv(names[job->style][1], v, 1);
  snprintf(v, sizeof v, "%u", job->port);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", v, 1);
  setenv("COLL_JOB_TOKEN", "env-test-token", 1);
  coll_comm_t *comm;
  coll_status_t st = coll_comm_init_env(&comm);
  if (st != COLL_OK) {
    fprintf(stderr, "rank %d: init_env: %s\n", rank, coll_last_error());
    return 1;
  }
  int r = -1, n = -1;
  coll_comm_rank(comm, &r);
  coll_comm_size(comm, &n);
  int32_t x = rank + 1, sum = 0;
  st = coll_all_reduce(&x, &sum, 1, COLL_INT32, COLL_SUM, comm);
  int bad = r != rank || n != nranks || st != COLL_OK || sum != nranks * (nranks + 1) / 2;
  if (bad) fprintf(stderr, "rank %d: r=%d n=%d st=%d sum=%d\n", rank, r, n, st, sum);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(init_from_torchrun_slurm_and_open_mpi_variables) {
  env_job_t job = {.style = _i, .port = mp_free_port()};
  ck_assert_int_eq(mp_run(3, 30000, rank_from_env, &job), 0);
}
END_TEST

static int rank_algo_mismatch(int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  ct_clean_env();
  setenv("COLL_ALGO", rank == 2 ? "tree" : "ring", 1);
  coll_config_t cfg = {0};
  cfg.rank = rank;
  cfg.size = nranks;
  cfg.master_port = job->port;
  cfg.host_store = -1;
  cfg.timeout_ms = 10000;
  coll_comm_t *comm = NULL;
  coll_status_t st = coll_comm_init_config(&cfg, &comm);
  const char *msg = coll_last_error();
  if (st != COLL_ERR_MISMATCH || strstr(msg, "'tree'") == NULL || strstr(msg, "'ring'") == NULL ||
      strstr(msg, "COLL_ALGO") == NULL) {
    fprintf(stderr, "rank %d: expected a COLL_ALGO mismatch, got %s: %s\n", rank,
            coll_status_name(st), msg);
    return 1;
  }
  return comm == NULL ? 0 : 1;
}

START_TEST(a_rank_with_a_different_coll_algo_fails_init_with_mismatch) {
  ct_job_t job = {.port = mp_free_port()};
  ck_assert_int_eq(mp_run(3, 30000, rank_algo_mismatch, &job), 0);
}
END_TEST

static int rank_set_algo_mismatch(coll_comm_t *comm, int rank, int nranks) {
  coll_comm_set_algo(comm, rank == 0 ? COLL_ALGO_RING : COLL_ALGO_MASTER);
  float x = 1, y;
  coll_status_t st = coll_all_reduce(&x, &y, 1, COLL_FLOAT32, COLL_SUM, comm);
  int bad = st != COLL_ERR_MISMATCH || strstr(coll_last_error(), "master") == NULL;
  if (bad) fprintf(stderr, "rank %d: got %s: %s\n", rank, coll_status_name(st), coll_last_error());
  /* Agreeing again makes the communicator usable. */
  coll_comm_set_algo(comm, COLL_ALGO_RING);
  st = coll_all_reduce(&x, &y, 1, COLL_FLOAT32, COLL_SUM, comm);
  if (st != COLL_OK || y != (float)nranks) bad = 1;
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(different_set_algo_choices_fail_the_next_call_with_mismatch) {
  ck_assert_int_eq(ct_run(2, 30000, NULL, rank_set_algo_mismatch), 0);
}
END_TEST

/* Rounds of six requests (all-reduces and a broadcast) plus a blocking call behind
 * them; requests are completed by polling, by waiting in reverse order, and (round 2)
 * by waiting at once, which lets the waiter run queued work itself. */
static int rank_async(coll_comm_t *comm, int rank, int nranks) {
  enum { NREQ = 6, ROUNDS = 4 };
  static const size_t counts[NREQ] = {1, 1000, 65536 + 5, 7, 300000, 33};
  static const coll_dtype_t types[NREQ] = {COLL_FLOAT32, COLL_INT32,   COLL_FLOAT64,
                                           COLL_UINT8,   COLL_FLOAT32, COLL_BFLOAT16};
  void *bufs[NREQ];
  coll_request_t *reqs[NREQ];
  int bad = 0;
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < NREQ; k++) {
      uint32_t salt = (uint32_t)(round * NREQ + k);
      bufs[k] = malloc(counts[k] * coll_dtype_size(types[k]));
      coll_status_t st;
      if (k == 3) { /* a broadcast among the all-reduces */
        ct_fill(bufs[k], counts[k], types[k], COLL_SUM, nranks - 1, salt);
        st = coll_broadcast_async(bufs[k], counts[k], types[k], nranks - 1, comm, &reqs[k]);
      } else {
        ct_fill(bufs[k], counts[k], types[k], COLL_SUM, rank, salt);
        st = coll_all_reduce_async(bufs[k], bufs[k], counts[k], types[k], COLL_SUM, comm, &reqs[k]);
      }
      if (st != COLL_OK) bad = 1;
      if (round == 2 && st == COLL_OK && coll_request_wait(&reqs[k]) != COLL_OK) bad = 1;
    }
    /* A blocking call queues behind the requests (FIFO on every rank). */
    int32_t one = 1, total = 0;
    if (coll_all_reduce(&one, &total, 1, COLL_INT32, COLL_SUM, comm) != COLL_OK || total != nranks)
      bad = 1;
    if (round != 2) {
      /* Poll the last one with test, wait for the others in reverse order. */
      while (coll_request_test(&reqs[NREQ - 1]) == COLL_IN_PROGRESS) ct_sleep_ms(1);
      if (reqs[NREQ - 1] != NULL) bad = 1;
      for (int k = NREQ - 2; k >= 0; k--)
        if (coll_request_wait(&reqs[k]) != COLL_OK || reqs[k] != NULL) bad = 1;
    }
    for (int k = 0; k < NREQ; k++) {
      char what[64];
      uint32_t salt = (uint32_t)(round * NREQ + k);
      snprintf(what, sizeof what, "rank %d: round %d async %d", rank, round, k);
      size_t wrong =
          k == 3 ? ct_check_broadcast(bufs[k], counts[k], types[k], nranks - 1, salt, what)
                 : ct_check_all_reduce(bufs[k], counts[k], types[k], COLL_SUM, nranks, salt, what);
      if (wrong) bad = 1;
      free(bufs[k]);
    }
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(several_requests_in_flight_complete_in_order_with_correct_results) {
  ck_assert_int_eq(ct_run(3, 60000, NULL, rank_async), 0);
}
END_TEST

typedef struct {
  coll_comm_t *comm;
  int delay_ms;
} aborter_t;

static void *abort_later(void *arg) {
  aborter_t *a = arg;
  ct_sleep_ms(a->delay_ms);
  coll_comm_abort(a->comm);
  return NULL;
}

/* Rank 1 never joins the collective; rank 0 is unblocked by abort from another thread
 * (loop index 0: a request being waited for; 1: a blocking call). */
static int rank_abort(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  (void)nranks;
  int bad = 0;
  if (rank == 0) {
    static float x[1000], y[1000];
    aborter_t a = {.comm = comm, .delay_ms = 200};
    pthread_t t;
    pthread_create(&t, NULL, abort_later, &a);
    int64_t start = now_ms();
    coll_status_t st;
    if (job->timeout_ms == 60001) {
      /* Three queued requests: the running one and the two behind it all fail. */
      coll_request_t *req[3];
      st = COLL_OK;
      for (int k = 0; k < 3 && st == COLL_OK; k++)
        st = coll_all_reduce_async(x, y, 1000, COLL_FLOAT32, COLL_SUM, comm, &req[k]);
      if (st == COLL_OK) {
        st = coll_request_wait(&req[0]);
        for (int k = 1; k < 3; k++)
          if (coll_request_wait(&req[k]) != COLL_ERR_ABORTED) bad = 1;
      }
    } else {
      st = coll_all_reduce(x, y, 1000, COLL_FLOAT32, COLL_SUM, comm);
    }
    int64_t took = now_ms() - start;
    pthread_join(t, NULL);
    if (st != COLL_ERR_ABORTED || took > 5000) {
      fprintf(stderr, "rank 0: expected ABORTED quickly, got %s after %lld ms: %s\n",
              coll_status_name(st), (long long)took, coll_last_error());
      bad = 1;
    }
    if (coll_all_reduce(x, y, 1, COLL_FLOAT32, COLL_SUM, comm) != COLL_ERR_ABORTED) bad = 1;
  } else {
    ct_sleep_ms(1500);
    coll_comm_abort(comm);
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(abort_from_another_thread_unblocks_the_waiter) {
  ct_job_t job = {.port = mp_free_port(), .timeout_ms = _i == 0 ? 60001 : 60000};
  ck_assert_int_eq(ct_run_arg(2, 30000, &job, rank_abort, &job), 0);
}
END_TEST

/* Rank 1 stays silent (loop 0) or dies (loop 1); rank 0 gets an error naming it within
 * its deadline, and the communicator stays failed. */
static int rank_silent_peer(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  (void)nranks;
  if (rank == 1) {
    if (job->transport != NULL && strcmp(job->transport, "tcp") == 0) _exit(0);
    ct_sleep_ms(3000);
    coll_comm_abort(comm);
    coll_comm_destroy(comm);
    return 0;
  }
  static float x[100000], y[100000];
  int64_t start = now_ms();
  coll_status_t st = coll_all_reduce(x, y, 100000, COLL_FLOAT32, COLL_SUM, comm);
  int64_t took = now_ms() - start;
  int bad = 0;
  if ((st != COLL_ERR_TIMEOUT && st != COLL_ERR_REMOTE) || took > job->timeout_ms + 2000 ||
      strstr(coll_last_error(), "rank 1") == NULL ||
      strstr(coll_last_error(), "all_reduce") == NULL) {
    fprintf(stderr, "rank 0: expected a timeout naming rank 1, got %s after %lld ms: %s\n",
            coll_status_name(st), (long long)took, coll_last_error());
    bad = 1;
  }
  coll_status_t again = coll_all_reduce(x, y, 1, COLL_FLOAT32, COLL_SUM, comm);
  if (again != st) bad = 1;
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_silent_or_dead_peer_becomes_an_error_naming_it) {
  ct_job_t job = {.port = mp_free_port(), .timeout_ms = 700, .transport = _i ? "tcp" : "shm"};
  ck_assert_int_eq(ct_run_arg(2, 30000, &job, rank_silent_peer, &job), 0);
}
END_TEST

static int rank_mem_and_log(int rank, int nranks, void *arg) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/coll_log_test_%d_%d.txt", (int)getpid(), rank);
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  if (fd < 0) return 1;
  int saved = dup(2);
  dup2(fd, 2);
  coll_comm_t *comm;
  setenv("COLL_DEBUG", "INFO", 1); /* read once, at the first log line */
  int bad = ct_init(arg, rank, nranks, &comm);
  if (bad) return 1;
  coll_comm_set_algo(comm, COLL_ALGO_RING);
  static float x[1 << 18];
  if (coll_all_reduce(x, x, 1 << 18, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK) bad = 1;
  /* Chosen, not forced: 8 bytes on the small-message lines, 64 KiB by the cost model
   * (the arena's rule starts higher at 2 ranks). */
  coll_comm_set_algo(comm, COLL_ALGO_AUTO);
  if (coll_all_reduce(x, x, 2, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK) bad = 1;
  if (coll_all_reduce(x, x, 1 << 14, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK) bad = 1;
  coll_mem_stats_t ms;
  if (coll_comm_mem_stats(comm, &ms) != COLL_OK || ms.staging_bytes == 0 ||
      ms.staging_bytes_peak < ms.staging_bytes ||
      ms.staging_bytes > (size_t)(nranks - 1) * 16 * 1024 * 1024 + (8u << 20)) {
    bad = 1;
  }
  coll_comm_destroy(comm);
  fflush(stderr);
  dup2(saved, 2);
  char text[8192] = "";
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  unlink(path);
  text[n > 0 ? n : 0] = '\0';
  if (strstr(text, "algo ring (forced)") == NULL || strstr(text, "transport shm") == NULL ||
      strstr(text, "2 x float32 sum, algo arena (small-message lines: 8 B <= ") == NULL ||
      strstr(text, "(cost model; arena only from 16777216 B at 2 ranks, measured)") == NULL) {
    fprintf(stderr, "rank %d: the INFO log lacks an algorithm, its reason or the transport:\n%s\n",
            rank, text);
    bad = 1;
  }
  if (bad)
    fprintf(stderr, "rank %d: staging %zu peak %zu\n", rank, ms.staging_bytes,
            ms.staging_bytes_peak);
  return bad;
}

START_TEST(info_log_names_algorithm_why_and_transport_and_staging_is_reported) {
  ct_job_t job = {.port = mp_free_port(), .transport = "shm"};
  ck_assert_int_eq(mp_run(2, 30000, rank_mem_and_log, &job), 0);
}
END_TEST

/* The store is hosted by the test parent (like a launcher); every rank creates two
 * communicators on it and interleaves collectives on both: their keys must not collide. */
static int rank_two_comms(int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  ct_clean_env();
  setenv("COLL_STORE_HOSTED", "1", 1);
  coll_config_t cfg = {0};
  cfg.rank = rank;
  cfg.size = nranks;
  cfg.master_port = job->port;
  cfg.host_store = -1;
  cfg.timeout_ms = 20000;
  cfg.token = "parent-token";
  coll_comm_t *a = NULL, *b = NULL;
  if (coll_comm_init_config(&cfg, &a) != COLL_OK || coll_comm_init_config(&cfg, &b) != COLL_OK) {
    fprintf(stderr, "rank %d: init: %s\n", rank, coll_last_error());
    return 1;
  }
  int bad = 0;
  for (int k = 0; k < 20; k++) {
    int32_t x = rank + k, sa = 0;
    int64_t y = (int64_t)rank * 1000 + k, sb = 0;
    coll_request_t *req;
    if (coll_all_reduce_async(&y, &sb, 1, COLL_INT64, COLL_MAX, b, &req) != COLL_OK) bad = 1;
    if (coll_all_reduce(&x, &sa, 1, COLL_INT32, COLL_SUM, a) != COLL_OK) bad = 1;
    if (coll_request_wait(&req) != COLL_OK) bad = 1;
    if (sa != nranks * (nranks - 1) / 2 + nranks * k || sb != (int64_t)(nranks - 1) * 1000 + k)
      bad = 1;
  }
  if (coll_comm_destroy(b) != COLL_OK || coll_comm_destroy(a) != COLL_OK) bad = 1;
  if (bad) fprintf(stderr, "rank %d: two communicators interfered: %s\n", rank, coll_last_error());
  return bad;
}

START_TEST(two_communicators_on_a_launcher_hosted_store_do_not_collide) {
  /* The launcher's store runs in a helper process: forking ranks from a process with a
   * server thread can hand a child a lock that thread held (tp_util.h). */
  tp_store_host_t host;
  ck_assert(tp_store_start_token(&host, "parent-token"));
  ct_job_t job = {.port = host.port};
  int failures = mp_run(3, 30000, rank_two_comms, &job);
  tp_store_stop(&host);
  ck_assert_int_eq(failures, 0);
}
END_TEST

/* Ranks that disagree on the count (a user error the library cannot prevent) get
 * COLL_ERR_MISMATCH at once from the fingerprints, naming both calls. */
static int rank_count_mismatch(coll_comm_t *comm, int rank, int nranks) {
  (void)nranks;
  static float x[2048];
  int64_t start = now_ms();
  coll_status_t st = coll_all_reduce(x, x, rank == 0 ? 1000 : 1001, COLL_FLOAT32, COLL_SUM, comm);
  int64_t took = now_ms() - start;
  int bad = st != COLL_ERR_MISMATCH || took > 1000 ||
            strstr(coll_last_error(), "rank 0 called all_reduce(float32, 1000, sum) #1") == NULL ||
            strstr(coll_last_error(), "rank 1 called all_reduce(float32, 1001, sum) #1") == NULL;
  if (bad)
    fprintf(stderr, "rank %d: expected an error, got %s after %lld ms: %s\n", rank,
            coll_status_name(st), (long long)took, coll_last_error());
  coll_comm_abort(comm);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(ranks_that_disagree_on_the_count_get_a_mismatch_naming_both) {
  ct_job_t job = {.port = mp_free_port(), .timeout_ms = 1500, .transport = _i ? "tcp" : "shm"};
  ck_assert_int_eq(ct_run(2, 30000, &job, rank_count_mismatch), 0);
}
END_TEST

SUITE_MAIN("coll api",
           suite_tests("api", 60, names_and_sizes_cover_every_enum_value,
                       bad_arguments_return_invalid_argument_with_a_message),
           suite_loop_tests("api", 60, 0, (int)(sizeof env_cases / sizeof env_cases[0]),
                            missing_or_malformed_launcher_variables_are_named),
           suite_tests("api", 60, one_rank_from_the_environment_needs_no_store),
           suite_loop_tests("api", 60, 0, 3, init_from_torchrun_slurm_and_open_mpi_variables),
           suite_tests("api", 60, a_rank_with_a_different_coll_algo_fails_init_with_mismatch,
                       different_set_algo_choices_fail_the_next_call_with_mismatch,
                       several_requests_in_flight_complete_in_order_with_correct_results),
           suite_loop_tests("api", 60, 0, 2, abort_from_another_thread_unblocks_the_waiter,
                            a_silent_or_dead_peer_becomes_an_error_naming_it),
           suite_tests("api", 60,
                       info_log_names_algorithm_why_and_transport_and_staging_is_reported,
                       two_communicators_on_a_launcher_hosted_store_do_not_collide),
           suite_loop_tests("api", 60, 0, 2,
                            ranks_that_disagree_on_the_count_get_a_mismatch_naming_both))
