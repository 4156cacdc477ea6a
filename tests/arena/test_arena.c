/* The arena all-reduce (COLL_ALGO_ARENA) with real forked ranks, a real store and a real
 * shared segment: results for every type and op over 1-8 ranks, counts around the slot
 * and slice boundaries, in place and out of place, bit-identical ranks; ordering with
 * other collectives through the progress thread; a killed rank, a late rank, an aborted
 * rank and a mismatched call (also one that runs a schedule against the arena) end in
 * errors naming them, not hangs; forcing it where it cannot run falls back; the cost
 * model's choice; COLL_TRACE names it. The same for the arena's small-message path
 * (onehost/small.c, COLL_SMALL_BYTES; the other cases run with it off): results, many
 * calls that reuse its two buffers between other collectives, failures, mismatches. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/schedule.h"
#include "coll.h"
#include "coll_test_util.h"
#include "common/clock.h"
#include "core/comm.h"
#include "multiproc.h"
#include "peer_failures.h"
#include "suite_run.h"

typedef struct {
  ct_job_t job;
  const char *slot_bytes;  /* COLL_ARENA_SLOT_BYTES, NULL: default */
  const char *small_bytes; /* COLL_SMALL_BYTES, NULL: "0" (the arena proper) */
  int variant;
} arena_case_t;

/* Init with the arena forced; fails unless the communicator has one (nranks > 1). */
static int init_arena(const void *arg, int rank, int nranks, coll_comm_t **comm) {
  const arena_case_t *c = arg;
  unsetenv("COLL_ARENA");
  if (c->slot_bytes != NULL)
    setenv("COLL_ARENA_SLOT_BYTES", c->slot_bytes, 1);
  else
    unsetenv("COLL_ARENA_SLOT_BYTES");
  setenv("COLL_SMALL_BYTES", c->small_bytes != NULL ? c->small_bytes : "0", 1);
  if (ct_init(&c->job, rank, nranks, comm) != 0) return 1;
  if (nranks > 1 && (*comm)->arena == NULL) {
    fprintf(stderr, "rank %d: no arena on one host over shm\n", rank);
    return 1;
  }
  /* set_algo is agreed through the store at the next call: do that call now, so that
   * the tests' timings measure the arena alone. */
  int32_t one = 1;
  if (coll_comm_set_algo(*comm, COLL_ALGO_ARENA) != COLL_OK ||
      coll_all_reduce(&one, &one, 1, COLL_INT32, COLL_SUM, *comm) != COLL_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
    return 1;
  }
  return 0;
}

/* Every type and op, counts around slices (n), slots (1024 bytes of each type at a 4 KiB
 * slot... measured in elements below) and zero; in place on odd calls. */
static int rank_results(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  int bad = 0;
  uint32_t salt = 1;
  for (int dt = 0; dt < COLL_DTYPE_COUNT && !bad; dt++) {
    size_t esz = coll_dtype_size((coll_dtype_t)dt);
    size_t slot = 4096 / esz; /* elements per round */
    size_t counts[] = {0,        1,        (size_t)nranks - 1,           (size_t)nranks + 1,
                       slot - 1, slot + 1, 3 * slot + (size_t)nranks + 2};
    for (int op = 0; op < COLL_OP_COUNT && !bad; op++) {
      if (!ct_op_applies((coll_dtype_t)dt, (coll_op_t)op)) { /* a bitwise op on a float type */
        double x[2] = {0};
        bad = coll_all_reduce(x, x, 1, (coll_dtype_t)dt, (coll_op_t)op, comm) !=
                  COLL_ERR_INVALID_ARGUMENT ||
              strstr(coll_last_error(), "needs an integer type") == NULL;
        if (bad) fprintf(stderr, "rank %d: no refusal: %s\n", rank, coll_last_error());
        continue;
      }
      for (size_t k = 0; k < sizeof counts / sizeof counts[0] && !bad; k++, salt++) {
        size_t count = counts[k];
        unsigned char *in = malloc(count * esz + 1), *out = malloc(count * esz + 1);
        ct_fill(in, count, (coll_dtype_t)dt, (coll_op_t)op, rank, salt);
        bool in_place = (salt & 1) != 0;
        coll_status_t st =
            coll_all_reduce(in, in_place ? in : out, count, (coll_dtype_t)dt, (coll_op_t)op, comm);
        char what[128];
        snprintf(what, sizeof what, "rank %d: %s %s count %zu %s", rank,
                 coll_dtype_name((coll_dtype_t)dt), coll_op_name((coll_op_t)op), count,
                 in_place ? "in place" : "out of place");
        if (st != COLL_OK) {
          fprintf(stderr, "%s: %s\n", what, coll_last_error());
          bad = 1;
        } else {
          const void *res = in_place ? in : out;
          bad = ct_check_all_reduce(res, count, (coll_dtype_t)dt, (coll_op_t)op, nranks, salt,
                                    what) != 0;
          if (!bad && (op == COLL_SUM || op == COLL_AVG))
            bad = ct_agree(comm, res, count * esz, what);
        }
        free(in);
        free(out);
      }
    }
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(results_for_every_type_and_op_over_1_to_8_ranks) {
  static const int ranks[] = {1, 2, 3, 4, 5, 8};
  arena_case_t c = {.job = {.port = mp_free_port()}, .slot_bytes = "4096"};
  c.job.port = mp_free_port();
  ck_assert_int_eq(ct_run_init(ranks[_i], 60000, init_arena, rank_results, &c), 0);
}
END_TEST

/* The default slot (1 MiB): a float32 buffer of several rounds, AVG, repeated so the
 * slot sets wrap around across calls, results identical on all ranks. */
static int rank_default_slot(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  size_t count = (5u << 20) / 4 / 2 + 3; /* 2.5 MiB: three rounds */
  float *x = malloc(count * sizeof *x);
  int bad = 0;
  for (uint32_t salt = 0; salt < 4 && !bad; salt++) {
    ct_fill(x, count, COLL_FLOAT32, COLL_AVG, rank, salt);
    coll_status_t st = coll_all_reduce(x, x, count, COLL_FLOAT32, COLL_AVG, comm);
    if (st != COLL_OK) {
      fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
      bad = 1;
      break;
    }
    bad = ct_check_all_reduce(x, count, COLL_FLOAT32, COLL_AVG, nranks, salt, "default slot") != 0;
    if (!bad) bad = ct_agree(comm, x, count * sizeof *x, "default slot");
  }
  free(x);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(default_slots_over_several_rounds_and_calls) {
  arena_case_t c = {.job = {.port = mp_free_port()}};
  ck_assert_int_eq(ct_run_init(3, 60000, init_arena, rank_default_slot, &c), 0);
}
END_TEST

/* Async arena all-reduces queued around a broadcast and a reduce_scatter (other
 * algorithms, through the transports) on the same buffers: FIFO order holds. */
static int rank_async_order(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  enum { N = 100003 };
  int64_t *x = malloc(N * sizeof *x), *rs = malloc(N * sizeof *rs);
  for (size_t i = 0; i < N; i++) x[i] = (int64_t)(i % 7) + rank;
  coll_request_t *req[4];
  int bad = 0;
  /* x = sum_r (i%7 + r); then rank 1's x everywhere; then x * n; reduce_scatter of x. */
  bad |= coll_all_reduce_async(x, x, N, COLL_INT64, COLL_SUM, comm, &req[0]) != COLL_OK;
  bad |= coll_broadcast_async(x, N, COLL_INT64, 1, comm, &req[1]) != COLL_OK;
  bad |= coll_all_reduce_async(x, x, N, COLL_INT64, COLL_SUM, comm, &req[2]) != COLL_OK;
  size_t block = N / (size_t)nranks;
  bad |= coll_reduce_scatter_async(x, rs, block, COLL_INT64, COLL_SUM, comm, &req[3]) != COLL_OK;
  for (int k = 0; k < 4 && !bad; k++) {
    if (coll_request_wait(&req[k]) != COLL_OK) {
      fprintf(stderr, "rank %d: request %d: %s\n", rank, k, coll_last_error());
      bad = 1;
    }
  }
  int64_t tri = (int64_t)nranks * (nranks - 1) / 2;
  for (size_t i = 0; i < N && !bad; i++) {
    int64_t want = ((int64_t)(i % 7) * nranks + tri) * nranks;
    if (x[i] != want) {
      fprintf(stderr, "rank %d: x[%zu] = %lld, want %lld\n", rank, i, (long long)x[i],
              (long long)want);
      bad = 1;
    }
  }
  for (size_t i = 0; i < block && !bad; i++) {
    size_t j = (size_t)rank * block + i;
    int64_t want = ((int64_t)(j % 7) * nranks + tri) * nranks * nranks;
    if (rs[i] != want) {
      fprintf(stderr, "rank %d: rs[%zu] = %lld, want %lld\n", rank, i, (long long)rs[i],
              (long long)want);
      bad = 1;
    }
  }
  free(x);
  free(rs);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(async_calls_keep_their_order_with_other_collectives) {
  arena_case_t c = {.job = {.port = mp_free_port()}, .slot_bytes = "65536"};
  ck_assert_int_eq(ct_run_init(4, 60000, init_arena, rank_async_order, &c), 0);
}
END_TEST

/* The failure scenarios of peer_failures.h, over the arena (heap buffers). */

static void *heap_alloc(coll_comm_t *comm, size_t bytes) {
  (void)comm;
  return calloc(1, bytes);
}

static pf_case_t failure_case(const arena_case_t *c) {
  return (pf_case_t){.init = init_arena,
                     .suite_case = c,
                     .alloc = heap_alloc,
                     .release = free,
                     .timeout_ms = c->job.timeout_ms,
                     .variant = c->variant,
                     .killed_says = "arena",
                     .killed_async_error = true,
                     .late_says = "rank 2"};
}

START_TEST(a_killed_rank_is_named_by_the_others_quickly) {
  for (int k = 0; k < 8; k++) {
    /* A deadline far above the liveness check's period: the error must come from that. */
    arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 5000}, .variant = k};
    pf_case_t f = failure_case(&c);
    ck_assert_msg(mp_run(4, 20000, pf_rank_killed, &f) == 1, "repetition %d", k);
  }
}
END_TEST

START_TEST(a_late_rank_times_the_others_out_with_a_hang_report) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 700}};
  pf_case_t f = failure_case(&c);
  ck_assert_int_eq(mp_run(3, 20000, pf_rank_late, &f), 0);
}
END_TEST

START_TEST(an_aborted_rank_fails_the_others_at_once) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 10000}};
  pf_case_t f = failure_case(&c);
  ck_assert_int_eq(mp_run(3, 30000, pf_rank_abort, &f), 0);
}
END_TEST

/* Rank 1 passes one more element: every rank fails with a mismatch naming both calls. */
static int rank_mismatch(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  static float x[5000];
  size_t count = rank == 1 ? 4001 : 4000;
  coll_status_t st = coll_all_reduce(x, x, count, COLL_FLOAT32, COLL_SUM, comm);
  const char *msg = coll_last_error();
  int bad = st != COLL_ERR_MISMATCH || strstr(msg, "all_reduce(float32, 4001, sum) #2") == NULL ||
            strstr(msg, "all_reduce(float32, 4000, sum) #2") == NULL;
  if (bad) fprintf(stderr, "rank %d: %s: %s\n", rank, coll_status_name(st), msg);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(mismatched_calls_fail_with_both_named) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 5000}};
  ck_assert_int_eq(ct_run_init(3, 20000, init_arena, rank_mismatch, &c), 0);
}
END_TEST

/* Auto choice: rank 1's count is below the arena's threshold, so it runs a schedule over
 * the transports while the others use the arena. The arena ranks see rank 1's
 * fingerprint in the segment and fail at once naming both calls; rank 1 fails too (it
 * learns of the failure when they leave), long before the deadline. */
static int rank_cross_mismatch(int rank, int nranks, void *arg) {
  const arena_case_t *c = arg;
  coll_comm_t *comm;
  (void)nranks;
  unsetenv("COLL_ARENA_SLOT_BYTES");
  if (ct_init(&c->job, rank, nranks, &comm) != 0) return 1;
  static float x[100000];
  size_t count = rank == 1 ? 1000 : 100000;
  int64_t start = coll_now_ms();
  coll_status_t st = coll_all_reduce(x, x, count, COLL_FLOAT32, COLL_SUM, comm);
  int64_t took = coll_now_ms() - start;
  const char *msg = coll_last_error();
  int bad = st == COLL_OK || took > c->job.timeout_ms / 2 ||
            strstr(msg, "all_reduce(float32, 1000, sum) #1") == NULL;
  if (rank != 1)
    bad |= st != COLL_ERR_MISMATCH || strstr(msg, "all_reduce(float32, 100000, sum) #1") == NULL;
  if (bad)
    fprintf(stderr, "rank %d: %s after %lld ms: %s\n", rank, coll_status_name(st), (long long)took,
            msg);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_mismatch_between_the_arena_and_a_schedule_fails_at_once) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 20000}};
  ck_assert_int_eq(mp_run(3, 30000, rank_cross_mismatch, &c), 0);
}
END_TEST

/* Forced where it cannot run (tcp forced; COLL_ARENA=0): no arena, the call falls back
 * to the cost model's choice and is right. */
static int rank_fallback(int rank, int nranks, void *arg) {
  const arena_case_t *c = arg;
  if (c->variant == 1) setenv("COLL_ARENA", "0", 1);
  coll_comm_t *comm;
  if (ct_init(&c->job, rank, nranks, &comm) != 0) return 1;
  int bad = comm->arena != NULL;
  bad |= coll_comm_set_algo(comm, COLL_ALGO_ARENA) != COLL_OK;
  float x[1000];
  ct_fill(x, 1000, COLL_FLOAT32, COLL_SUM, rank, 9);
  bad |= coll_all_reduce(x, x, 1000, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK;
  bad |= ct_check_all_reduce(x, 1000, COLL_FLOAT32, COLL_SUM, nranks, 9, "fallback") != 0;
  if (bad) fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
  coll_comm_destroy(comm);
  unsetenv("COLL_ARENA");
  return bad;
}

START_TEST(forced_where_it_cannot_run_falls_back) {
  arena_case_t c = {.job = {.port = mp_free_port(), .transport = _i == 0 ? "tcp" : NULL},
                    .variant = _i};
  ck_assert_int_eq(mp_run(3, 30000, rank_fallback, &c), 0);
}
END_TEST

/* A bad COLL_ARENA_SLOT_BYTES on rank 0 (whose value counts) fails init on every rank
 * at once, naming the variable, instead of leaving the others waiting. */
static int rank_bad_slot(int rank, int nranks, void *arg) {
  const arena_case_t *c = arg;
  if (rank == 0)
    setenv("COLL_ARENA_SLOT_BYTES", "5000", 1);
  else
    unsetenv("COLL_ARENA_SLOT_BYTES");
  coll_comm_t *comm = NULL;
  coll_config_t cfg = {.rank = rank,
                       .size = nranks,
                       .local_rank = rank,
                       .master_addr = "127.0.0.1",
                       .master_port = c->job.port,
                       .host_store = -1,
                       .timeout_ms = c->job.timeout_ms};
  ct_clean_env();
  int64_t start = coll_now_ms();
  coll_status_t st = coll_comm_init_config(&cfg, &comm);
  int64_t took = coll_now_ms() - start;
  int bad = st != COLL_ERR_INVALID_ARGUMENT ||
            strstr(coll_last_error(), "COLL_ARENA_SLOT_BYTES") == NULL || took > 3000;
  if (bad)
    fprintf(stderr, "rank %d: %s after %lld ms: %s\n", rank, coll_status_name(st), (long long)took,
            coll_last_error());
  if (st == COLL_OK) coll_comm_destroy(comm);
  unsetenv("COLL_ARENA_SLOT_BYTES");
  return bad;
}

START_TEST(a_bad_slot_size_on_rank_0_fails_every_rank_at_init) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 20000}};
  ck_assert_int_eq(mp_run(3, 30000, rank_bad_slot, &c), 0);
}
END_TEST

/* COLL_TRACE names the algorithm and shows its phases. */
static int rank_trace(int rank, int nranks, void *arg) {
  ct_trace_to("arena-trace");
  coll_comm_t *comm;
  if (init_arena(arg, rank, nranks, &comm) != 0) return 1;
  static float x[100000];
  int bad = coll_all_reduce(x, x, 100000, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK;
  coll_comm_destroy(comm);
  char *text = ct_trace_take("arena-trace", rank);
  if (text == NULL) return 1;
  if (strstr(text, "\"algo\":\"arena\"") == NULL || strstr(text, "local_reduce") == NULL) {
    fprintf(stderr, "rank %d: the trace does not show the arena:\n%.2000s\n", rank, text);
    bad = 1;
  }
  free(text);
  return bad;
}

START_TEST(the_trace_names_the_arena) {
  arena_case_t c = {.job = {.port = mp_free_port()}, .slot_bytes = "65536"};
  ck_assert_int_eq(mp_run(3, 30000, rank_trace, &c), 0);
}
END_TEST

/* The cost model: never for small buffers, and its choice depends on the call only. */
START_TEST(the_cost_model_takes_it_for_large_buffers_only) {
  sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE, .dtype = COLL_FLOAT32, .nranks = 4};
  p.count = 16;
  ck_assert(!algo_arena_preferred(&p, &algo_cost_shm_default));
  p.count = 4u << 20;
  ck_assert(algo_arena_preferred(&p, &algo_cost_shm_default));
  p.count = 16u << 10; /* 64 KiB: from there with 3 ranks or more */
  p.nranks = 3;
  ck_assert(algo_arena_preferred(&p, &algo_cost_shm_default));
  p.nranks = 2; /* from 16 MiB with 2 */
  ck_assert(!algo_arena_preferred(&p, &algo_cost_shm_default));
  p.count = 4u << 20;
  ck_assert(algo_arena_preferred(&p, &algo_cost_shm_default));
  p.dtype = COLL_FLOAT16;
  ck_assert(!algo_arena_preferred(&p, &algo_cost_shm_default));
  p.collective = COLL_KIND_BROADCAST;
  ck_assert(!algo_arena_preferred(&p, &algo_cost_shm_default));
  ck_assert(algo_select(&p, &algo_cost_shm_default) != COLL_ALGO_ARENA);
}
END_TEST

/* ---- the small-message path (COLL_SMALL_BYTES) ---- */

START_TEST(small_path_results_for_every_type_and_op_over_2_to_8_ranks) {
  static const int ranks[] = {2, 3, 4, 5, 8};
  arena_case_t c = {.job = {.port = mp_free_port()}, .slot_bytes = "4096", .small_bytes = "65536"};
  ck_assert_int_eq(ct_run_init(ranks[_i], 60000, init_arena, rank_results, &c), 0);
}
END_TEST

/* Many calls of changing sizes (so both buffers and their stale lines of other sizes
 * are reused; the larger ones run through the arena proper), every 5th in place, some
 * asynchronous; a broadcast from a changing root every 7th (small ones through the
 * small path, the others over the transports), a barrier every 11th: exact int32
 * results, and float sums equal on every rank. */
static int rank_small_many(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  enum { MAXN = 6000, CALLS = 600 }; /* 24 KB: above 16 KiB the arena proper */
  int32_t *x = malloc(MAXN * sizeof *x), *y = malloc(MAXN * sizeof *y);
  float *f = malloc(MAXN * sizeof *f);
  int bad = 0;
  for (int t = 0; t < CALLS && !bad; t++) {
    size_t n = 1 + (size_t)(t * 7919) % MAXN;
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)(i * 3 + (size_t)t) + rank * 1000;
    int32_t *dst = t % 5 == 0 ? x : y;
    coll_status_t st;
    if (t % 3 == 0) {
      coll_request_t *req;
      st = coll_all_reduce_async(x, dst, n, COLL_INT32, COLL_SUM, comm, &req);
      if (st == COLL_OK) st = coll_request_wait(&req);
    } else {
      st = coll_all_reduce(x, dst, n, COLL_INT32, COLL_SUM, comm);
    }
    for (size_t i = 0; i < n && st == COLL_OK && !bad; i++) {
      int32_t want = (int32_t)(i * 3 + (size_t)t) * nranks + 1000 * nranks * (nranks - 1) / 2;
      if (dst[i] != want) {
        fprintf(stderr, "rank %d: call %d: [%zu] = %d, want %d\n", rank, t, i, dst[i], want);
        bad = 1;
      }
    }
    if (st == COLL_OK && t % 7 == 0) { /* the transports' broadcast, or the small path's */
      size_t bn = t % 14 == 0 ? n : 1 + n % 300;
      for (size_t i = 0; i < bn; i++) y[i] = rank == t % nranks ? (int32_t)(i ^ (size_t)t) : -1;
      st = coll_broadcast(y, bn, COLL_INT32, t % nranks, comm);
      for (size_t i = 0; i < bn && st == COLL_OK && !bad; i++)
        if (y[i] != (int32_t)(i ^ (size_t)t)) {
          fprintf(stderr, "rank %d: broadcast %d: [%zu] = %d\n", rank, t, i, y[i]);
          bad = 1;
        }
    }
    if (st == COLL_OK && t % 11 == 0) st = coll_barrier(comm);
    if (st == COLL_OK && t % 50 == 0) {
      ct_fill(f, n, COLL_FLOAT32, COLL_SUM, rank, (uint32_t)t);
      st = coll_all_reduce(f, f, n, COLL_FLOAT32, COLL_SUM, comm);
      if (st == COLL_OK) bad |= ct_agree(comm, f, n * sizeof *f, "small float sum");
    }
    if (st != COLL_OK) {
      fprintf(stderr, "rank %d: call %d: %s\n", rank, t, coll_last_error());
      bad = 1;
    }
  }
  free(x);
  free(y);
  free(f);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(small_path_reuses_its_buffers_across_many_calls_and_other_collectives) {
  arena_case_t c = {.job = {.port = mp_free_port()}, .small_bytes = "16384"};
  ck_assert_int_eq(ct_run_init(2 + _i, 60000, init_arena, rank_small_many, &c), 0);
}
END_TEST

START_TEST(small_path_mismatched_calls_fail_with_both_named) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 5000}, .small_bytes = "65536"};
  ck_assert_int_eq(ct_run_init(3, 20000, init_arena, rank_mismatch, &c), 0);
}
END_TEST

/* Rank 2 exits right after init: the others' small all-reduce names it, long before
 * the deadline (the liveness check of the segment's locks). */
static int rank_small_killed(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  if (rank == 2) _exit(0);
  float x[100] = {0};
  int64_t start = coll_now_ms();
  coll_status_t st = coll_all_reduce(x, x, 100, COLL_FLOAT32, COLL_SUM, comm);
  int64_t took = coll_now_ms() - start;
  const char *msg = coll_last_error();
  int bad = st != COLL_ERR_REMOTE || strstr(msg, "rank 2") == NULL ||
            strstr(msg, "small") == NULL || took > 3000;
  if (bad)
    fprintf(stderr, "rank %d: %s after %lld ms: %s\n", rank, coll_status_name(st), (long long)took,
            msg);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(small_path_a_killed_rank_is_named_by_the_others_quickly) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 20000}, .small_bytes = "65536"};
  ck_assert_int_eq(ct_run_init(3, 30000, init_arena, rank_small_killed, &c), 0);
}
END_TEST

START_TEST(small_path_a_late_rank_times_the_others_out_with_a_hang_report) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 700}, .small_bytes = "65536"};
  pf_case_t f = failure_case(&c);
  ck_assert_int_eq(mp_run(3, 20000, pf_rank_late, &f), 0);
}
END_TEST

START_TEST(small_path_an_aborted_rank_fails_the_others_at_once) {
  arena_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 10000}, .small_bytes = "65536"};
  pf_case_t f = failure_case(&c);
  ck_assert_int_eq(mp_run(3, 30000, pf_rank_abort, &f), 0);
}
END_TEST

/* The measured thresholds: 4 KiB at two ranks, 32 KiB at more; none for one rank. */
START_TEST(the_cost_model_sends_small_messages_to_the_small_path) {
  ck_assert_uint_eq(algo_small_max_bytes(1), 0);
  ck_assert_uint_eq(algo_small_max_bytes(2), 4096);
  ck_assert_uint_eq(algo_small_max_bytes(4), 32768);
  ck_assert_uint_eq(algo_small_broadcast_max_bytes(2), 1024);
  ck_assert_uint_eq(algo_small_broadcast_max_bytes(3), 32768);
}
END_TEST

SUITE_MAIN("arena",
           suite_loop_tests("arena", 120, 0, 6, results_for_every_type_and_op_over_1_to_8_ranks),
           suite_tests("arena", 120, default_slots_over_several_rounds_and_calls,
                       async_calls_keep_their_order_with_other_collectives,
                       a_killed_rank_is_named_by_the_others_quickly,
                       a_late_rank_times_the_others_out_with_a_hang_report,
                       an_aborted_rank_fails_the_others_at_once,
                       mismatched_calls_fail_with_both_named,
                       a_mismatch_between_the_arena_and_a_schedule_fails_at_once),
           suite_loop_tests("arena", 120, 0, 2, forced_where_it_cannot_run_falls_back),
           suite_tests("arena", 120, the_trace_names_the_arena,
                       a_bad_slot_size_on_rank_0_fails_every_rank_at_init,
                       the_cost_model_takes_it_for_large_buffers_only),
           suite_loop_tests("arena", 120, 0, 5,
                            small_path_results_for_every_type_and_op_over_2_to_8_ranks),
           suite_loop_tests("arena", 120, 0, 3,
                            small_path_reuses_its_buffers_across_many_calls_and_other_collectives),
           suite_tests("arena", 120, small_path_mismatched_calls_fail_with_both_named,
                       small_path_a_killed_rank_is_named_by_the_others_quickly,
                       small_path_a_late_rank_times_the_others_out_with_a_hang_report,
                       small_path_an_aborted_rank_fails_the_others_at_once,
                       the_cost_model_sends_small_messages_to_the_small_path))
