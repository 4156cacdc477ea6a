/* Registered windows (coll_mem_alloc / coll_mem_free) and the zero-copy all-reduce on
 * them, with real forked ranks, a real store and real shared segments: results for every
 * type and op over 1-4 ranks, in place and out of place, bit-identical ranks and the same
 * bits as the arena; the zero-copy path is really taken (its round counter moves);
 * buffers outside windows, COLL_WINDOW=0 and a forced tcp transport give plain memory
 * and still work; a killed, an aborted and a late rank, mismatched offsets and a heap buffer
 * against windows end in errors, not hangs; bad arguments are clear errors; COLL_TRACE
 * shows the call. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "coll_test_util.h"
#include "common/clock.h"
#include "core/comm.h"
#include "multiproc.h"
#include "onehost/arena.h"
#include "peer_failures.h"
#include "suite_run.h"

typedef struct {
  ct_job_t job;
  const char *window; /* COLL_WINDOW value, NULL: default */
  int variant;
} win_case_t;

static int init(const void *arg, int rank, int nranks, coll_comm_t **comm) {
  const win_case_t *c = arg;
  unsetenv("COLL_ARENA");
  unsetenv("COLL_ARENA_SLOT_BYTES");
  if (c->window != NULL)
    setenv("COLL_WINDOW", c->window, 1);
  else
    unsetenv("COLL_WINDOW");
  return ct_init(&c->job, rank, nranks, comm);
}

/* Zero-copy all-reduces this rank has run so far (0 without an arena). */
static uint32_t zero_copy_calls(const coll_comm_t *comm) {
  return comm->arena != NULL ? comm->arena->win_round : 0;
}

/* Every type and op, counts around the slices and the reduction tile, in place at
 * offset 0 and out of place between two offsets of one window (odd salts), plus an
 * async call: results checked, agreed, and the zero-copy path counted. */
static int rank_results(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  enum { MAX_BYTES = 80000 * 8 };
  unsigned char *win = NULL;
  int bad = 0;
  if (coll_mem_alloc(comm, 2 * MAX_BYTES + 64, (void **)&win) != COLL_OK) {
    fprintf(stderr, "rank %d: coll_mem_alloc: %s\n", rank, coll_last_error());
    coll_comm_destroy(comm);
    return 1;
  }
  coll_mem_stats_t ms;
  if (coll_comm_mem_stats(comm, &ms) != COLL_OK || (nranks > 1) != (ms.window_bytes > 0)) {
    fprintf(stderr, "rank %d: window_bytes %zu with %d ranks\n", rank, ms.window_bytes, nranks);
    bad = 1;
  }
  uint32_t salt = 1, calls = 0, before = zero_copy_calls(comm);
  for (int dt = 0; dt < COLL_DTYPE_COUNT && !bad; dt++) {
    size_t esz = coll_dtype_size((coll_dtype_t)dt);
    size_t counts[] = {1, (size_t)nranks + 1, 1003, 32768 / esz * (size_t)nranks + 5,
                       MAX_BYTES / esz};
    for (int op = 0; op < COLL_OP_COUNT && !bad; op++) {
      if (!ct_op_applies((coll_dtype_t)dt, (coll_op_t)op)) { /* a bitwise op on a float type */
        bad = coll_all_reduce(win, win + 64, 1, (coll_dtype_t)dt, (coll_op_t)op, comm) !=
                  COLL_ERR_INVALID_ARGUMENT ||
              strstr(coll_last_error(), "needs an integer type") == NULL;
        if (bad) fprintf(stderr, "rank %d: no refusal: %s\n", rank, coll_last_error());
        continue;
      }
      for (size_t k = 0; k < sizeof counts / sizeof counts[0] && !bad; k++, salt++) {
        size_t count = counts[k];
        bool in_place = (salt & 1) == 0;
        unsigned char *in = win + (in_place ? 0 : 64), *out = in_place ? in : win + 64 + MAX_BYTES;
        ct_fill(in, count, (coll_dtype_t)dt, (coll_op_t)op, rank, salt);
        coll_status_t st;
        if (salt % 7 == 0) {
          coll_request_t *req = NULL;
          st = coll_all_reduce_async(in, out, count, (coll_dtype_t)dt, (coll_op_t)op, comm, &req);
          if (st == COLL_OK) st = coll_request_wait(&req);
        } else {
          st = coll_all_reduce(in, out, count, (coll_dtype_t)dt, (coll_op_t)op, comm);
        }
        calls++;
        char what[128];
        snprintf(what, sizeof what, "rank %d: %s %s count %zu %s", rank,
                 coll_dtype_name((coll_dtype_t)dt), coll_op_name((coll_op_t)op), count,
                 in_place ? "in place" : "out of place");
        if (st != COLL_OK) {
          fprintf(stderr, "%s: %s\n", what, coll_last_error());
          bad = 1;
          break;
        }
        bad = ct_check_all_reduce(out, count, (coll_dtype_t)dt, (coll_op_t)op, nranks, salt,
                                  what) != 0;
        if (!bad) bad = ct_agree(comm, out, count * esz, what);
      }
    }
  }
  uint32_t zc = zero_copy_calls(comm) - before;
  if (!bad && zc != (nranks > 1 ? calls : 0)) {
    fprintf(stderr, "rank %d: %u of %u calls were zero-copy\n", rank, zc, calls);
    bad = 1;
  }
  if (coll_mem_free(comm, win) != COLL_OK) {
    fprintf(stderr, "rank %d: coll_mem_free: %s\n", rank, coll_last_error());
    bad = 1;
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(results_for_every_type_and_op_over_1_to_4_ranks) {
  win_case_t c = {.job = {.port = mp_free_port()}};
  ck_assert_int_eq(ct_run_init(_i + 1, 90000, init, rank_results, &c), 0);
}
END_TEST

/* A float32 sum and average through the window give the same bits as the arena on a
 * heap buffer (same order of reduction), on every rank. */
static int rank_same_bits(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  size_t count = 270000 + 3;
  float *w = NULL, *h = malloc(count * sizeof *h);
  int bad = coll_mem_alloc(comm, count * sizeof *w, (void **)&w) != COLL_OK || h == NULL ||
            coll_comm_set_algo(comm, COLL_ALGO_ARENA) != COLL_OK;
  for (int op = COLL_SUM; op <= COLL_AVG && !bad; op += COLL_AVG - COLL_SUM) {
    ct_fill(w, count, COLL_FLOAT32, (coll_op_t)op, rank, 99);
    memcpy(h, w, count * sizeof *h);
    uint32_t before = zero_copy_calls(comm);
    bad = coll_all_reduce(w, w, count, COLL_FLOAT32, (coll_op_t)op, comm) != COLL_OK ||
          coll_all_reduce(h, h, count, COLL_FLOAT32, (coll_op_t)op, comm) != COLL_OK ||
          zero_copy_calls(comm) - before != 1 || memcmp(w, h, count * sizeof *h) != 0 ||
          ct_agree(comm, w, count * sizeof *w, "same bits");
  }
  if (bad) fprintf(stderr, "rank %d: window and arena differ: %s\n", rank, coll_last_error());
  free(h);
  coll_comm_destroy(comm); /* frees the window too */
  return bad;
}

START_TEST(the_same_bits_as_the_arena) {
  win_case_t c = {.job = {.port = mp_free_port()}};
  ck_assert_int_eq(ct_run_init(3, 30000, init, rank_same_bits, &c), 0);
}
END_TEST

/* Plain memory where zero-copy cannot run (variant 0: COLL_WINDOW=0, 1: tcp forced),
 * and, with windows, buffers outside them or half in one: all correct, none zero-copy. */
static int rank_plain(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const win_case_t *c = arg;
  size_t count = 5000;
  float *w = NULL, *h = calloc(count, sizeof *h);
  int bad = coll_mem_alloc(comm, count * sizeof *w, (void **)&w) != COLL_OK || h == NULL;
  coll_mem_stats_t ms = {0};
  bool plain = c->variant < 2;
  if (!bad && (coll_comm_mem_stats(comm, &ms) != COLL_OK || (ms.window_bytes == 0) != plain)) {
    fprintf(stderr, "rank %d: window_bytes %zu (variant %d)\n", rank, ms.window_bytes, c->variant);
    bad = 1;
  }
  uint32_t before = zero_copy_calls(comm), salt = 7;
  float *pairs[3][2] = {{w, w}, {h, h}, {w, h}};
  for (int p = 0; p < 3 && !bad; p++, salt++) {
    float *in = pairs[p][0], *out = pairs[p][1];
    ct_fill(in, count, COLL_FLOAT32, COLL_SUM, rank, salt);
    bad = coll_all_reduce(in, out, count, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK ||
          ct_check_all_reduce(out, count, COLL_FLOAT32, COLL_SUM, nranks, salt, "plain") != 0;
  }
  uint32_t zc = zero_copy_calls(comm) - before;
  if (!bad && zc != (plain ? 0u : 1u)) {
    fprintf(stderr, "rank %d: %u zero-copy calls (variant %d)\n", rank, zc, c->variant);
    bad = 1;
  }
  if (bad) fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
  if (w != NULL && coll_mem_free(comm, w) != COLL_OK) bad = 1;
  free(h);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(plain_memory_where_zero_copy_cannot_run_and_buffers_outside_windows) {
  win_case_t c = {.job = {.port = mp_free_port(), .transport = _i == 1 ? "tcp" : NULL},
                  .window = _i == 0 ? "0" : NULL,
                  .variant = _i};
  ck_assert_int_eq(ct_run_init(2, 30000, init, rank_plain, &c), 0);
}
END_TEST

/* The failure scenarios of peer_failures.h, over registered windows. */

static void *alloc_window(coll_comm_t *comm, size_t bytes) {
  void *p = NULL;
  return coll_mem_alloc(comm, bytes, &p) == COLL_OK ? p : NULL;
}

static pf_case_t failure_case(const win_case_t *c) {
  return (pf_case_t){.init = init,
                     .suite_case = c,
                     .alloc = alloc_window,
                     .release = NULL, /* the communicator frees its windows */
                     .timeout_ms = c->job.timeout_ms,
                     .variant = c->variant,
                     .killed_says = "window",
                     .late_says = "rank 2 (its input in its window"};
}

START_TEST(a_killed_rank_is_named_by_the_others_quickly) {
  for (int k = 0; k < 4; k++) {
    win_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 5000}, .variant = k};
    pf_case_t f = failure_case(&c);
    ck_assert_msg(mp_run(3, 20000, pf_rank_killed, &f) == 1, "repetition %d", k);
  }
}
END_TEST

START_TEST(a_late_rank_times_the_others_out_with_a_hang_report) {
  win_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 700}};
  pf_case_t f = failure_case(&c);
  ck_assert_int_eq(mp_run(3, 20000, pf_rank_late, &f), 0);
}
END_TEST

/* Rank 1 uses another offset of the window: every rank fails with a mismatch. */
static int rank_mismatch(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  float *x = NULL;
  if (coll_mem_alloc(comm, 8192 * sizeof *x, (void **)&x) != COLL_OK) return 1;
  coll_status_t st = coll_all_reduce(x + (rank == 1 ? 16 : 0), x + (rank == 1 ? 16 : 0), 4000,
                                     COLL_FLOAT32, COLL_SUM, comm);
  const char *msg = coll_last_error();
  int bad = st != COLL_ERR_MISMATCH || strstr(msg, "window 0+64 -> 0+64") == NULL ||
            strstr(msg, "window 0+0 -> 0+0") == NULL;
  if (bad) fprintf(stderr, "rank %d: %s: %s\n", rank, coll_status_name(st), msg);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(different_offsets_are_a_mismatch) {
  win_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 5000}};
  ck_assert_int_eq(ct_run_init(3, 20000, init, rank_mismatch, &c), 0);
}
END_TEST

/* Auto choice: rank 1 passes a heap buffer (a schedule over the transports at this size)
 * while the others pass their windows: the window ranks see rank 1's fingerprint and fail
 * at once naming both calls; rank 1 fails too when they leave, long before the deadline. */
static int rank_cross_mismatch(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const win_case_t *c = arg;
  (void)nranks;
  static float heap[1000];
  float *w = NULL;
  if (coll_mem_alloc(comm, sizeof heap, (void **)&w) != COLL_OK) return 1;
  float *x = rank == 1 ? heap : w;
  int64_t start = coll_now_ms();
  coll_status_t st = coll_all_reduce(x, x, 1000, COLL_FLOAT32, COLL_SUM, comm);
  int64_t took = coll_now_ms() - start;
  const char *msg = coll_last_error();
  int bad = st == COLL_OK || took > c->job.timeout_ms / 2;
  if (rank != 1)
    bad |= st != COLL_ERR_MISMATCH || strstr(msg, "window 0+0 -> 0+0") == NULL ||
           strstr(msg, "all_reduce(float32, 1000, sum) #1") == NULL;
  if (bad)
    fprintf(stderr, "rank %d: %s after %lld ms: %s\n", rank, coll_status_name(st), (long long)took,
            msg);
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(a_heap_buffer_against_windows_fails_at_once) {
  win_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 20000}};
  ck_assert_int_eq(ct_run_init(3, 30000, init, rank_cross_mismatch, &c), 0);
}
END_TEST

START_TEST(an_aborted_rank_fails_the_others_at_once) {
  win_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 10000}};
  pf_case_t f = failure_case(&c);
  ck_assert_int_eq(mp_run(3, 30000, pf_rank_abort, &f), 0);
}
END_TEST

/* COLL_TRACE records the zero-copy call with its phases (as local ops). */
static int rank_trace(int rank, int nranks, void *arg) {
  ct_trace_to("window-trace");
  coll_comm_t *comm;
  if (init(arg, rank, nranks, &comm) != 0) return 1;
  float *x = NULL;
  int bad = coll_mem_alloc(comm, 100000 * sizeof *x, (void **)&x) != COLL_OK ||
            coll_all_reduce(x, x, 100000, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK ||
            zero_copy_calls(comm) != 1;
  coll_comm_destroy(comm);
  char *text = ct_trace_take("window-trace", rank);
  if (text == NULL) return 1;
  if (bad || strstr(text, "\"algo\":\"window\"") == NULL || strstr(text, "local_reduce") == NULL) {
    fprintf(stderr, "rank %d: the trace does not show the call:\n%.2000s\n", rank, text);
    bad = 1;
  }
  free(text);
  return bad;
}

START_TEST(the_trace_shows_the_zero_copy_call) {
  win_case_t c = {.job = {.port = mp_free_port()}};
  ck_assert_int_eq(mp_run(2, 30000, rank_trace, &c), 0);
}
END_TEST

/* Bad arguments: clear errors, nothing allocated; different sizes fail every rank. */
static int rank_bad_args(coll_comm_t *comm, int rank, int nranks, void *arg) {
  (void)arg;
  (void)nranks;
  void *p = (void *)1, *q = NULL;
  int bad = 0;
  struct {
    coll_status_t st;
    const char *text;
  } cases[] = {
      {coll_mem_alloc(NULL, 64, &p), "comm is NULL"},
      {coll_mem_alloc(comm, 64, NULL), "ptr is NULL"},
      {coll_mem_alloc(comm, 0, &p), "bytes is 0"},
      {coll_mem_free(comm, &q), "was not returned by coll_mem_alloc"},
      {coll_mem_free(NULL, &q), "comm is NULL"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].st != COLL_ERR_INVALID_ARGUMENT) {
      fprintf(stderr, "rank %d: case %zu: %s\n", rank, i, coll_status_name(cases[i].st));
      bad = 1;
    }
  }
  /* The messages, checked one at a time (coll_last_error is the latest). */
  if (coll_mem_free(comm, &q) == COLL_OK || strstr(coll_last_error(), "coll_mem_alloc") == NULL)
    bad = 1;
  if (p != NULL) bad = 1;                            /* *ptr is cleared on error */
  if (coll_mem_free(comm, NULL) != COLL_OK) bad = 1; /* like free(NULL) */
  /* A double free is an unknown pointer the second time. */
  if (coll_mem_alloc(comm, 100, &q) != COLL_OK || coll_mem_free(comm, q) != COLL_OK ||
      coll_mem_free(comm, q) != COLL_ERR_INVALID_ARGUMENT)
    bad = 1;
  /* Rank 1 asks for another size: every rank learns it. */
  coll_status_t st = coll_mem_alloc(comm, rank == 1 ? 8192 : 4096, &q);
  if (st != COLL_ERR_INVALID_ARGUMENT || strstr(coll_last_error(), "asked for") == NULL ||
      q != NULL) {
    fprintf(stderr, "rank %d: different sizes: %s: %s\n", rank, coll_status_name(st),
            coll_last_error());
    bad = 1;
  }
  /* The communicator still works, windows too; an allocation while an asynchronous
   * call is queued waits for it. */
  coll_request_t *req = NULL;
  void *q2 = NULL;
  if (coll_mem_alloc(comm, 4096, &q) != COLL_OK ||
      coll_all_reduce(q, q, 1024, COLL_INT32, COLL_SUM, comm) != COLL_OK ||
      coll_all_reduce_async(q, q, 1024, COLL_INT32, COLL_SUM, comm, &req) != COLL_OK ||
      coll_mem_alloc(comm, 4096, &q2) != COLL_OK || coll_request_wait(&req) != COLL_OK ||
      coll_mem_free(comm, q2) != COLL_OK)
    bad = 1;
  if (bad) fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(bad_arguments_are_clear_errors) {
  win_case_t c = {.job = {.port = mp_free_port(), .timeout_ms = 5000}};
  ck_assert_int_eq(ct_run_init(2, 20000, init, rank_bad_args, &c), 0);
}
END_TEST

SUITE_MAIN("window",
           suite_loop_tests("window", 120, 0, 4, results_for_every_type_and_op_over_1_to_4_ranks),
           suite_tests("window", 120, the_same_bits_as_the_arena),
           suite_loop_tests("window", 120, 0, 3,
                            plain_memory_where_zero_copy_cannot_run_and_buffers_outside_windows),
           suite_tests("window", 120, a_killed_rank_is_named_by_the_others_quickly,
                       different_offsets_are_a_mismatch, bad_arguments_are_clear_errors,
                       a_heap_buffer_against_windows_fails_at_once,
                       an_aborted_rank_fails_the_others_at_once,
                       a_late_rank_times_the_others_out_with_a_hang_report,
                       the_trace_shows_the_zero_copy_call))
