/* The small promises of coll.h kept to the letter: every call after coll_comm_abort
 * returns COLL_ERR_ABORTED naming the rank and the call; a failed communicator answers
 * queries but refuses work; argument errors begin "rank R: <call>: "; coll_mem_free(NULL)
 * does nothing; the COLL_ALGO error lists every name; one-rank communicators check their
 * store address; integer AVG wraps and truncates toward zero. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

/* 0 when st is want and the message starts "rank R: what: " and holds needle; else 1,
 * said on stderr. */
static int expect_error(int rank, const char *what, coll_status_t st, coll_status_t want,
                        const char *needle) {
  char prefix[96];
  snprintf(prefix, sizeof prefix, "rank %d: %s: ", rank, what);
  const char *msg = coll_last_error();
  if (st == want && strncmp(msg, prefix, strlen(prefix)) == 0 && strstr(msg, needle) != NULL)
    return 0;
  fprintf(stderr, "rank %d: %s: expected %s '%s...%s', got %s '%s'\n", rank, what,
          coll_status_name(want), prefix, needle, coll_status_name(st), msg);
  return 1;
}

/* The message every call on an aborted communicator gives, exactly. */
static int expect_aborted(int rank, const char *what, coll_status_t st) {
  char want[128];
  snprintf(want, sizeof want, "rank %d: %s: the communicator was aborted", rank, what);
  if (st == COLL_ERR_ABORTED && strcmp(coll_last_error(), want) == 0) return 0;
  fprintf(stderr, "rank %d: %s after abort: expected ABORTED '%s', got %s '%s'\n", rank, what, want,
          coll_status_name(st), coll_last_error());
  return 1;
}

/* Rule 6: a group and a window are pending when the rank aborts; the group's end and
 * every later call (bad arguments included) return COLL_ERR_ABORTED naming the rank and
 * the call; a second abort and destroy succeed. */
static int rank_calls_after_abort(coll_comm_t *comm, int rank, int nranks) {
  static float x[64], y[64];
  void *win = NULL, *p = NULL;
  int peer = (rank + 1) % nranks, bad = 0;
  if (coll_mem_alloc(comm, 4096, &win) != COLL_OK || coll_group_start(comm) != COLL_OK ||
      coll_send(x, 4, COLL_FLOAT32, peer, comm) != COLL_OK || coll_comm_abort(comm) != COLL_OK) {
    fprintf(stderr, "rank %d: setting up: %s\n", rank, coll_last_error());
    return 1;
  }
  bad += expect_aborted(rank, "coll_group_end", coll_group_end(comm));
  coll_request_t *req = NULL;
  coll_comm_t *child = NULL;
  coll_mem_stats_t ms;
  coll_status_t async_error = COLL_OK;
  int r = -1, n = -1;
#define AFTER_ABORT(name, call) bad += expect_aborted(rank, name, (call))
  AFTER_ABORT("coll_all_reduce", coll_all_reduce(x, y, 4, COLL_FLOAT32, COLL_SUM, comm));
  AFTER_ABORT("coll_all_reduce_async",
              coll_all_reduce_async(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, &req));
  AFTER_ABORT("coll_all_reduce_async",
              coll_all_reduce_async(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, NULL));
  AFTER_ABORT("coll_all_reduce_stream",
              coll_all_reduce_stream(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, NULL));
  AFTER_ABORT("coll_broadcast", coll_broadcast(x, 4, COLL_FLOAT32, 0, comm));
  AFTER_ABORT("coll_broadcast_async", coll_broadcast_async(x, 4, COLL_FLOAT32, 0, comm, &req));
  AFTER_ABORT("coll_broadcast_stream", coll_broadcast_stream(x, 4, COLL_FLOAT32, 0, comm, NULL));
  AFTER_ABORT("coll_reduce", coll_reduce(x, y, 4, COLL_FLOAT32, COLL_SUM, 0, comm));
  AFTER_ABORT("coll_reduce_async",
              coll_reduce_async(x, y, 4, COLL_FLOAT32, COLL_SUM, 0, comm, &req));
  AFTER_ABORT("coll_reduce_stream",
              coll_reduce_stream(x, y, 4, COLL_FLOAT32, COLL_SUM, 0, comm, NULL));
  AFTER_ABORT("coll_all_gather", coll_all_gather(x, y, 4, COLL_FLOAT32, comm));
  AFTER_ABORT("coll_all_gather_async", coll_all_gather_async(x, y, 4, COLL_FLOAT32, comm, &req));
  AFTER_ABORT("coll_all_gather_stream", coll_all_gather_stream(x, y, 4, COLL_FLOAT32, comm, NULL));
  AFTER_ABORT("coll_reduce_scatter", coll_reduce_scatter(x, y, 4, COLL_FLOAT32, COLL_SUM, comm));
  AFTER_ABORT("coll_reduce_scatter_async",
              coll_reduce_scatter_async(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, &req));
  AFTER_ABORT("coll_reduce_scatter_stream",
              coll_reduce_scatter_stream(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, NULL));
  AFTER_ABORT("coll_all_to_all", coll_all_to_all(x, y, 4, COLL_FLOAT32, comm));
  AFTER_ABORT("coll_all_to_all_async", coll_all_to_all_async(x, y, 4, COLL_FLOAT32, comm, &req));
  AFTER_ABORT("coll_all_to_all_stream", coll_all_to_all_stream(x, y, 4, COLL_FLOAT32, comm, NULL));
  AFTER_ABORT("coll_barrier", coll_barrier(comm));
  AFTER_ABORT("coll_barrier_async", coll_barrier_async(comm, &req));
  AFTER_ABORT("coll_send", coll_send(x, 4, COLL_FLOAT32, peer, comm));
  AFTER_ABORT("coll_send", coll_send(x, 4, COLL_FLOAT32, rank, comm));
  AFTER_ABORT("coll_recv", coll_recv(y, 4, COLL_FLOAT32, peer, comm));
  AFTER_ABORT("coll_send_async", coll_send_async(x, 4, COLL_FLOAT32, peer, comm, &req));
  AFTER_ABORT("coll_recv_async", coll_recv_async(y, 4, COLL_FLOAT32, peer, comm, &req));
  AFTER_ABORT("coll_group_start", coll_group_start(comm));
  AFTER_ABORT("coll_group_end", coll_group_end(comm));
  AFTER_ABORT("coll_comm_split", coll_comm_split(comm, 0, rank, &child));
  AFTER_ABORT("coll_comm_set_algo", coll_comm_set_algo(comm, COLL_ALGO_RING));
  AFTER_ABORT("coll_comm_set_timeout", coll_comm_set_timeout(comm, 1000));
  AFTER_ABORT("coll_comm_set_poll_us", coll_comm_set_poll_us(comm, 10));
  AFTER_ABORT("coll_mem_alloc", coll_mem_alloc(comm, 4096, &p));
  AFTER_ABORT("coll_mem_free", coll_mem_free(comm, win));
  AFTER_ABORT("coll_mem_free", coll_mem_free(comm, NULL));
  AFTER_ABORT("coll_comm_mem_stats", coll_comm_mem_stats(comm, &ms));
  AFTER_ABORT("coll_trace_span_begin", coll_trace_span_begin(comm, "phase"));
  AFTER_ABORT("coll_trace_span_end", coll_trace_span_end(comm, "phase"));
  AFTER_ABORT("coll_comm_rank", coll_comm_rank(comm, &r));
  AFTER_ABORT("coll_comm_rank", coll_comm_rank(comm, NULL));
  AFTER_ABORT("coll_comm_size", coll_comm_size(comm, &n));
  AFTER_ABORT("coll_comm_get_async_error", coll_comm_get_async_error(comm, &async_error));
#undef AFTER_ABORT
  if (req != NULL || child != NULL || p != NULL || r != -1 || n != -1 ||
      async_error != COLL_ERR_ABORTED) {
    fprintf(stderr, "rank %d: outputs after abort: req %p child %p ptr %p rank %d size %d %s\n",
            rank, (void *)req, (void *)child, p, r, n, coll_status_name(async_error));
    bad = 1;
  }
  if (coll_comm_abort(comm) != COLL_OK || coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(every_call_after_abort_returns_aborted_naming_the_rank_and_the_call) {
  ck_assert_int_eq(ct_run(2, 30000, NULL, rank_calls_after_abort), 0);
}
END_TEST

/* A failed (not aborted) communicator refuses work with its failure, but still answers
 * the queries and takes a new timeout. */
static int rank_failed_comm(coll_comm_t *comm, int rank, int nranks) {
  static float x[8];
  int bad =
      coll_all_reduce(x, x, rank == 0 ? 4 : 5, COLL_FLOAT32, COLL_SUM, comm) != COLL_ERR_MISMATCH;
  int r = -1, n = -1;
  coll_status_t async_error = COLL_OK;
  coll_mem_stats_t ms;
  if (coll_comm_rank(comm, &r) != COLL_OK || r != rank || coll_comm_size(comm, &n) != COLL_OK ||
      n != nranks || coll_comm_get_async_error(comm, &async_error) != COLL_OK ||
      async_error != COLL_ERR_MISMATCH || coll_comm_mem_stats(comm, &ms) != COLL_OK ||
      coll_comm_set_timeout(comm, 1000) != COLL_OK) {
    fprintf(stderr, "rank %d: a query on the failed communicator: %s\n", rank, coll_last_error());
    bad = 1;
  }
  if (coll_all_reduce(x, x, 4, COLL_FLOAT32, COLL_SUM, comm) != COLL_ERR_MISMATCH) bad = 1;
  coll_comm_abort(comm);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_failed_communicator_still_answers_queries_but_refuses_work) {
  ct_job_t job = {.port = mp_free_port(), .timeout_ms = 1500};
  ck_assert_int_eq(ct_run(2, 30000, &job, rank_failed_comm), 0);
}
END_TEST

/* A sample of each entry point's argument errors, on two ranks: each names the rank and
 * the call ("rank 1: coll_all_reduce: count ... overflows"), and none breaks the
 * communicator. */
static int rank_argument_errors(coll_comm_t *comm, int rank, int nranks) {
  static float x[64], y[64];
  coll_request_t *req = NULL;
  void *p = NULL;
  int bad = 0, peer = (rank + 1) % nranks;
  const coll_status_t inval = COLL_ERR_INVALID_ARGUMENT;
#define ARG_ERROR(name, call, needle) bad += expect_error(rank, name, (call), inval, needle)
  ARG_ERROR("coll_all_reduce", coll_all_reduce(x, y, SIZE_MAX / 2, COLL_FLOAT32, COLL_SUM, comm),
            "overflows");
  ARG_ERROR("coll_all_reduce_async",
            coll_all_reduce_async(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, NULL), "request is NULL");
  ARG_ERROR("coll_broadcast", coll_broadcast(x, 4, COLL_FLOAT32, nranks, comm), "is outside");
  ARG_ERROR("coll_broadcast_stream", coll_broadcast_stream(x, 4, COLL_FLOAT32, -1, comm, NULL),
            "root -1");
  ARG_ERROR("coll_reduce", coll_reduce(x, y, 4, COLL_DTYPE_COUNT, COLL_SUM, 0, comm),
            "unknown dtype");
  ARG_ERROR("coll_reduce_async",
            coll_reduce_async(x, y, 4, COLL_FLOAT32, COLL_OP_COUNT, 0, comm, &req), "unknown op");
  ARG_ERROR("coll_all_gather", coll_all_gather(x, x + 1, 2, COLL_FLOAT32, comm), "overlap");
  ARG_ERROR("coll_reduce_scatter", coll_reduce_scatter(NULL, y, 4, COLL_FLOAT32, COLL_SUM, comm),
            "sendbuf is NULL");
  ARG_ERROR("coll_all_to_all_stream", coll_all_to_all_stream(x, x, 4, COLL_FLOAT32, comm, NULL),
            "no in-place form");
  ARG_ERROR("coll_barrier_async", coll_barrier_async(comm, NULL), "request is NULL");
  ARG_ERROR("coll_send", coll_send(x, 4, COLL_FLOAT32, nranks, comm), "is outside");
  ARG_ERROR("coll_recv", coll_recv(y, 4, COLL_FLOAT32, rank, comm), "is this rank");
  ARG_ERROR("coll_recv", coll_recv(NULL, 4, COLL_FLOAT32, peer, comm), "buf is NULL");
  ARG_ERROR("coll_send_async", coll_send_async(x, 4, COLL_FLOAT32, peer, comm, NULL),
            "request is NULL");
  ARG_ERROR("coll_group_end", coll_group_end(comm), "no group is open");
  if (coll_group_start(comm) != COLL_OK) bad = 1;
  ARG_ERROR("coll_all_reduce_async",
            coll_all_reduce_async(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, &req), "inside a group");
  bad += expect_error(rank, "coll_all_reduce_stream",
                      coll_all_reduce_stream(x, y, 4, COLL_FLOAT32, COLL_SUM, comm, NULL),
                      COLL_ERR_UNSUPPORTED, "inside a group");
  coll_comm_t *child = NULL;
  ARG_ERROR("coll_comm_split", coll_comm_split(comm, 0, 0, &child), "inside a group");
  if (coll_group_end(comm) != COLL_OK) bad = 1;
  ARG_ERROR("coll_comm_split", coll_comm_split(comm, 0, 0, NULL), "newcomm is NULL");
  ARG_ERROR("coll_comm_set_algo", coll_comm_set_algo(comm, COLL_ALGO_COUNT), "unknown algorithm");
  ARG_ERROR("coll_comm_set_timeout", coll_comm_set_timeout(comm, 0), "timeout_ms 0");
  ARG_ERROR("coll_comm_set_poll_us", coll_comm_set_poll_us(comm, -1), "poll_us -1");
  ARG_ERROR("coll_mem_alloc", coll_mem_alloc(comm, 0, &p), "bytes is 0");
  ARG_ERROR("coll_mem_alloc", coll_mem_alloc(comm, 64, NULL), "ptr is NULL");
  ARG_ERROR("coll_mem_free", coll_mem_free(comm, x), "was not returned by coll_mem_alloc");
  ARG_ERROR("coll_comm_mem_stats", coll_comm_mem_stats(comm, NULL), "stats is NULL");
  ARG_ERROR("coll_trace_span_begin", coll_trace_span_begin(comm, NULL), "name is NULL");
  ARG_ERROR("coll_comm_rank", coll_comm_rank(comm, NULL), "rank is NULL");
  ARG_ERROR("coll_comm_size", coll_comm_size(comm, NULL), "size is NULL");
  ARG_ERROR("coll_comm_get_async_error", coll_comm_get_async_error(comm, NULL),
            "async_error is NULL");
#undef ARG_ERROR
  /* Still usable: nothing above started work. */
  float one = 1, sum = 0;
  if (coll_all_reduce(&one, &sum, 1, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK ||
      sum != (float)nranks || req != NULL || child != NULL || p != NULL)
    bad = 1;
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(argument_errors_on_a_live_communicator_name_the_rank_and_the_call) {
  ck_assert_int_eq(ct_run(2, 30000, NULL, rank_argument_errors), 0);
}
END_TEST

/* coll_mem_free(comm, NULL) is free(NULL): only rank 0 calls it, and the next collective
 * still pairs up. */
static int rank_free_null(coll_comm_t *comm, int rank, int nranks) {
  int bad = 0;
  if (rank == 0 && (coll_mem_free(comm, NULL) != COLL_OK || coll_last_error()[0] != '\0')) {
    fprintf(stderr, "rank 0: coll_mem_free(NULL): %s\n", coll_last_error());
    bad = 1;
  }
  int32_t one = 1, sum = 0;
  if (coll_all_reduce(&one, &sum, 1, COLL_INT32, COLL_SUM, comm) != COLL_OK || sum != nranks)
    bad = 1;
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(freeing_null_registered_memory_does_nothing_and_is_not_collective) {
  ct_job_t job = {.port = mp_free_port(), .timeout_ms = 5000};
  ck_assert_int_eq(ct_run(2, 30000, &job, rank_free_null), 0);
}
END_TEST

/* The names after "is not one of " are exactly coll_algo_name's. */
START_TEST(an_unknown_coll_algo_is_refused_listing_every_accepted_name) {
  ct_clean_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("COLL_ALGO", "fastest", 1);
  coll_comm_t *comm = NULL;
  EXPECT_INVALID(coll_comm_init_env(&comm), "COLL_ALGO='fastest'");
  ct_clean_env();
  const char *list = strstr(coll_last_error(), "is not one of ");
  ck_assert_ptr_nonnull(list);
  char names[256];
  snprintf(names, sizeof names, "%s", list + strlen("is not one of "));
  int seen = 0;
  for (char *save = NULL, *name = strtok_r(names, ", ", &save); name != NULL;
       name = strtok_r(NULL, ", ", &save)) {
    int a = 0;
    while (a < COLL_ALGO_COUNT && strcmp(name, coll_algo_name((coll_algo_t)a)) != 0) a++;
    ck_assert_msg(a < COLL_ALGO_COUNT, "'%s' in '%s' is not an algorithm", name, list);
    seen |= 1 << a;
  }
  ck_assert_msg(seen == (1 << COLL_ALGO_COUNT) - 1, "'%s' leaves out a name", list);
}
END_TEST

/* master_port and master_addr are checked for every size, though one rank opens no store. */
START_TEST(a_one_rank_communicator_checks_master_port_and_master_addr) {
  ct_clean_env();
  coll_config_t cfg = {.size = 1, .local_rank = -1, .host_store = -1};
  coll_comm_t *comm = NULL;
  EXPECT_INVALID(coll_comm_init_config(&cfg, &comm), "master_port 0 is outside 1..65535");
  cfg.master_port = 65536;
  EXPECT_INVALID(coll_comm_init_config(&cfg, &comm), "master_port 65536");
  cfg.master_port = 29500;
  cfg.master_addr = "";
  EXPECT_INVALID(coll_comm_init_config(&cfg, &comm), "master_addr");
  char long_addr[300];
  memset(long_addr, 'a', sizeof long_addr - 1);
  long_addr[sizeof long_addr - 1] = '\0';
  cfg.master_addr = long_addr; /* split's children could not reach it */
  EXPECT_INVALID(coll_comm_init_config(&cfg, &comm), "master_addr is 299 bytes, over 255");
  ck_assert_ptr_null(comm);
  cfg.master_addr = NULL; /* 127.0.0.1 */
  ck_assert_int_eq(coll_comm_init_config(&cfg, &comm), COLL_OK);
  ck_assert_int_eq(coll_comm_destroy(comm), COLL_OK);
}
END_TEST

/* COLL_AVG on integers (coll.h): the sum wraps as COLL_SUM's does, then the division
 * truncates toward zero, on every rank alike. */
static int rank_integer_avg(coll_comm_t *comm, int rank, int nranks) {
  (void)nranks;
  int32_t i32[2] = {rank == 2 ? 2 : 1, rank == 2 ? -2 : -1};
  int8_t i8 = 100; /* 3 x 100 wraps to 44 in int8 */
  int bad = coll_all_reduce(i32, i32, 2, COLL_INT32, COLL_AVG, comm) != COLL_OK ||
            coll_all_reduce(&i8, &i8, 1, COLL_INT8, COLL_AVG, comm) != COLL_OK;
  if (bad || i32[0] != 1 || i32[1] != -1 || i8 != 44 / 3) {
    fprintf(stderr, "rank %d: averages %d %d %d, expected 1 -1 %d: %s\n", rank, i32[0], i32[1], i8,
            44 / 3, coll_last_error());
    bad = 1;
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(integer_averages_wrap_like_the_sum_and_truncate_toward_zero) {
  ck_assert_int_eq(ct_run(3, 30000, NULL, rank_integer_avg), 0);
}
END_TEST

SUITE_MAIN("coll promises",
           suite_tests("promises", 60,
                       every_call_after_abort_returns_aborted_naming_the_rank_and_the_call,
                       a_failed_communicator_still_answers_queries_but_refuses_work,
                       argument_errors_on_a_live_communicator_name_the_rank_and_the_call,
                       freeing_null_registered_memory_does_nothing_and_is_not_collective,
                       an_unknown_coll_algo_is_refused_listing_every_accepted_name,
                       a_one_rank_communicator_checks_master_port_and_master_addr,
                       integer_averages_wrap_like_the_sum_and_truncate_toward_zero))
