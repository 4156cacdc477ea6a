/* Bitwise and / or / xor over real forked ranks: all_reduce, reduce and reduce_scatter give
 * the exact fold of every rank's random bits on each integer type, through the schedule
 * executor (every all-reduce algorithm), the arena and the zero-copy window; on a float
 * type every reducing call form is refused with a message naming the rank, the call, the
 * op and the type. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "multiproc.h"
#include "onehost/arena.h"
#include "suite_run.h"

static const coll_op_t bit_ops[] = {COLL_BAND, COLL_BOR, COLL_BXOR};
static const coll_dtype_t int_types[] = {COLL_INT8,   COLL_UINT8, COLL_INT32,
                                         COLL_UINT32, COLL_INT64, COLL_UINT64};
enum { NBIT_OPS = 3, NINT_TYPES = 6 };

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Rank r's element i: random bits over the whole element, so that and-ing and or-ing a
 * few ranks leaves ones and zeros in every byte. */
static uint64_t bits_of(int r, size_t i, uint32_t salt) {
  return mix64(((uint64_t)salt << 40) ^ ((uint64_t)(r + 1) << 32) ^ (uint64_t)i);
}

static uint64_t fold(coll_op_t op, int nranks, size_t i, uint32_t salt) {
  uint64_t acc = bits_of(0, i, salt);
  for (int r = 1; r < nranks; r++) {
    uint64_t v = bits_of(r, i, salt);
    acc = op == COLL_BAND ? acc & v : op == COLL_BOR ? acc | v : acc ^ v;
  }
  return acc;
}

/* Elements are the low esz bytes of the 64-bit values (little-endian). */
static void fill(void *buf, size_t n, size_t esz, int rank, uint32_t salt) {
  for (size_t i = 0; i < n; i++) {
    uint64_t v = bits_of(rank, i, salt);
    memcpy((char *)buf + i * esz, &v, esz);
  }
}

/* Number of elements of out (n of them, the reduction's elements first .. first + n - 1)
 * that differ from the exact fold; prints the first. */
static size_t check(const void *out, size_t first, size_t n, coll_dtype_t dt, coll_op_t op,
                    int nranks, uint32_t salt, const char *what) {
  size_t esz = coll_dtype_size(dt), bad = 0;
  for (size_t k = 0; k < n; k++) {
    uint64_t want = fold(op, nranks, first + k, salt), got = 0;
    memcpy(&got, (const char *)out + k * esz, esz);
    if (esz < 8) want &= (1ull << (8 * esz)) - 1;
    if (got != want && bad++ == 0)
      fprintf(stderr, "%s: %s %s over %d ranks, element %zu: got %#llx, want %#llx\n", what,
              coll_dtype_name(dt), coll_op_name(op), nranks, first + k, (unsigned long long)got,
              (unsigned long long)want);
  }
  return bad;
}

static int report(coll_status_t st, int rank, const char *what) {
  if (st == COLL_OK) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_status_name(st), coll_last_error());
  return 1;
}

/* One all-reduce of n elements, in place or not; 0 when exact. */
static int one_all_reduce(coll_comm_t *comm, int rank, int nranks, void *in, void *out, size_t n,
                          coll_dtype_t dt, coll_op_t op, uint32_t salt, const char *tag) {
  char what[128];
  snprintf(what, sizeof what, "rank %d: %s all_reduce %s n %zu", rank, tag,
           in == out ? "in place" : "out of place", n);
  fill(in, n, coll_dtype_size(dt), rank, salt);
  if (report(coll_all_reduce(in, out, n, dt, op, comm), rank, what)) return 1;
  return check(out, 0, n, dt, op, nranks, salt, what) != 0;
}

static const size_t counts[] = {1, 7, 1023, 70001};
enum { NCOUNTS = sizeof counts / sizeof counts[0], MAX_COUNT = 70001 };

/* Every integer type and bitwise op, every count, in place and not. */
static int all_reduces(coll_comm_t *comm, int rank, int nranks, void *in, void *out,
                       const char *tag, uint32_t *salt) {
  for (int t = 0; t < NINT_TYPES; t++)
    for (int o = 0; o < NBIT_OPS; o++)
      for (int k = 0; k < NCOUNTS; k++)
        for (int in_place = 0; in_place < 2; in_place++)
          if (one_all_reduce(comm, rank, nranks, in, in_place ? in : out, counts[k], int_types[t],
                             bit_ops[o], (*salt)++, tag))
            return 1;
  return 0;
}

/* Schedules: each all-reduce algorithm, then reduce (every root, non-roots passing NULL or
 * an untouched buffer) and reduce_scatter (in place and not). */
static int rank_schedules(coll_comm_t *comm, int rank, int nranks) {
  size_t maxb = (size_t)nranks * MAX_COUNT * 8;
  char *in = malloc(maxb), *out = malloc(maxb);
  int bad = in == NULL || out == NULL;
  uint32_t salt = 1;
  static const coll_algo_t algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD,
                                      COLL_ALGO_MASTER};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0] && !bad; a++) {
    bad = report(coll_comm_set_algo(comm, algos[a]), rank, "set_algo");
    if (!bad) bad = all_reduces(comm, rank, nranks, in, out, coll_algo_name(algos[a]), &salt);
  }
  if (!bad) bad = report(coll_comm_set_algo(comm, COLL_ALGO_AUTO), rank, "set_algo auto");
  for (int t = 0; t < NINT_TYPES && !bad; t++) {
    coll_dtype_t dt = int_types[t];
    size_t esz = coll_dtype_size(dt);
    for (int o = 0; o < NBIT_OPS && !bad; o++) {
      coll_op_t op = bit_ops[o];
      for (int k = 0; k < NCOUNTS && !bad; k++, salt++) {
        size_t n = counts[k];
        char what[128];
        int root = (int)(salt % (uint32_t)nranks);
        snprintf(what, sizeof what, "rank %d: reduce root %d n %zu", rank, root, n);
        fill(in, n, esz, rank, salt);
        memset(out, 0x5a, n * esz);
        bool pass_null = (salt & 1) != 0;
        void *recv = rank == root ? out : pass_null ? NULL : out;
        bad = report(coll_reduce(in, recv, n, dt, op, root, comm), rank, what);
        if (!bad && rank == root) bad = check(out, 0, n, dt, op, nranks, salt, what) != 0;
        for (size_t b = 0; !bad && rank != root && b < n * esz; b++)
          if ((unsigned char)out[b] != 0x5a) {
            fprintf(stderr, "%s: non-root recvbuf changed\n", what);
            bad = 1;
          }
        /* reduce_scatter: rank r gets block r of the fold of nranks * n elements. */
        snprintf(what, sizeof what, "rank %d: reduce_scatter %s n %zu", rank,
                 (salt & 1) ? "in place" : "out of place", n);
        fill(in, (size_t)nranks * n, esz, rank, salt);
        char *dst = (salt & 1) ? in + (size_t)rank * n * esz : out;
        if (!bad) bad = report(coll_reduce_scatter(in, dst, n, dt, op, comm), rank, what);
        if (!bad) bad = check(dst, (size_t)rank * n, n, dt, op, nranks, salt, what) != 0;
      }
    }
  }
  free(in);
  free(out);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(bitwise_reductions_are_exact_through_every_schedule_on_2_to_4_ranks) {
  ck_assert_int_eq(ct_run(2 + _i, 240000, NULL, rank_schedules), 0);
}
END_TEST

/* The arena (COLL_ALGO_ARENA) runs every one of these all-reduces: its round counter
 * grows. */
static int rank_arena(int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  coll_comm_t *comm;
  unsetenv("COLL_ARENA");
  if (ct_init(job, rank, nranks, &comm) != 0) return 1;
  int bad = comm->arena == NULL;
  if (bad) fprintf(stderr, "rank %d: no arena\n", rank);
  char *in = malloc(MAX_COUNT * 8), *out = malloc(MAX_COUNT * 8);
  bad = bad || in == NULL || out == NULL;
  uint32_t salt = 100;
  if (!bad) bad = report(coll_comm_set_algo(comm, COLL_ALGO_ARENA), rank, "set_algo arena");
  if (!bad) {
    uint32_t before = comm->arena->round;
    bad = all_reduces(comm, rank, nranks, in, out, "arena", &salt);
    if (!bad && comm->arena->round == before) {
      fprintf(stderr, "rank %d: the arena ran no round\n", rank);
      bad = 1;
    }
  }
  free(in);
  free(out);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(bitwise_all_reduce_is_exact_through_the_arena_on_2_to_4_ranks) {
  ct_job_t job = {.port = mp_free_port()};
  ck_assert_int_eq(mp_run(2 + _i, 120000, rank_arena, &job), 0);
}
END_TEST

/* Buffers from coll_mem_alloc: every call takes the zero-copy window (its counter grows
 * by one per call). */
static int rank_window(int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  coll_comm_t *comm;
  unsetenv("COLL_ARENA");
  unsetenv("COLL_WINDOW");
  if (ct_init(job, rank, nranks, &comm) != 0) return 1;
  char *win = NULL;
  int bad = report(coll_mem_alloc(comm, 2 * MAX_COUNT * 8, (void **)&win), rank, "mem_alloc");
  bad = bad || comm->arena == NULL;
  uint32_t salt = 200, calls = 0;
  uint32_t before = bad ? 0 : comm->arena->win_round;
  for (int t = 0; t < NINT_TYPES && !bad; t++)
    for (int o = 0; o < NBIT_OPS && !bad; o++)
      for (int k = 0; k < NCOUNTS && !bad; k++, calls++) {
        bool in_place = (salt & 1) != 0;
        char *in = win, *out = in_place ? win : win + MAX_COUNT * 8;
        bad = one_all_reduce(comm, rank, nranks, in, out, counts[k], int_types[t], bit_ops[o],
                             salt++, "window");
      }
  if (!bad && comm->arena->win_round - before != calls) {
    fprintf(stderr, "rank %d: %u of %u calls took the window\n", rank,
            comm->arena->win_round - before, calls);
    bad = 1;
  }
  if (win != NULL && coll_mem_free(comm, win) != COLL_OK) bad = 1;
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(bitwise_all_reduce_is_exact_through_the_zero_copy_window_on_2_to_4_ranks) {
  ct_job_t job = {.port = mp_free_port()};
  ck_assert_int_eq(mp_run(2 + _i, 120000, rank_window, &job), 0);
}
END_TEST

/* 0 when st is COLL_ERR_INVALID_ARGUMENT with "rank R: CALL: op OP needs an integer type,
 * not TYPE". */
static int expect_refusal(coll_status_t st, int rank, const char *call, coll_op_t op,
                          coll_dtype_t dt) {
  char want[160];
  snprintf(want, sizeof want, "rank %d: %s: op %s needs an integer type, not %s", rank, call,
           coll_op_name(op), coll_dtype_name(dt));
  if (st == COLL_ERR_INVALID_ARGUMENT && strstr(coll_last_error(), want) != NULL) return 0;
  fprintf(stderr, "rank %d: %s: got %s '%s', want '%s'\n", rank, call, coll_status_name(st),
          coll_last_error(), want);
  return 1;
}

/* Every reducing call form with every float type and bitwise op is refused alike on
 * every rank (before any message is sent), and the communicator keeps working. */
static int rank_refusals(coll_comm_t *comm, int rank, int nranks) {
  static const coll_dtype_t floats[] = {COLL_FLOAT16, COLL_BFLOAT16,   COLL_FLOAT32,
                                        COLL_FLOAT64, COLL_FLOAT8E4M3, COLL_FLOAT8E5M2};
  double in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  int bad = 0;
  for (int f = 0; f < 6; f++)
    for (int o = 0; o < NBIT_OPS; o++) {
      coll_dtype_t dt = floats[f];
      coll_op_t op = bit_ops[o];
      coll_request_t *req = NULL;
      bad += expect_refusal(coll_all_reduce(in, out, 2, dt, op, comm), rank, "coll_all_reduce", op,
                            dt);
      bad += expect_refusal(coll_all_reduce_async(in, out, 2, dt, op, comm, &req), rank,
                            "coll_all_reduce_async", op, dt);
      bad += req != NULL;
      bad += expect_refusal(coll_all_reduce_stream(in, out, 2, dt, op, comm, NULL), rank,
                            "coll_all_reduce_stream", op, dt);
      bad += expect_refusal(coll_reduce(in, out, 2, dt, op, 0, comm), rank, "coll_reduce", op, dt);
      bad += expect_refusal(coll_reduce_async(in, out, 2, dt, op, 0, comm, &req), rank,
                            "coll_reduce_async", op, dt);
      bad += expect_refusal(coll_reduce_stream(in, out, 2, dt, op, 0, comm, NULL), rank,
                            "coll_reduce_stream", op, dt);
      bad += expect_refusal(coll_reduce_scatter(in, out, 1, dt, op, comm), rank,
                            "coll_reduce_scatter", op, dt);
      bad += expect_refusal(coll_reduce_scatter_async(in, out, 1, dt, op, comm, &req), rank,
                            "coll_reduce_scatter_async", op, dt);
      bad += expect_refusal(coll_reduce_scatter_stream(in, out, 1, dt, op, comm, NULL), rank,
                            "coll_reduce_scatter_stream", op, dt);
    }
  /* Nothing was sent: the next collective runs as usual. */
  int64_t x = rank + 1, want = (int64_t)nranks * (nranks + 1) / 2;
  if (!bad) bad = report(coll_all_reduce(&x, &x, 1, COLL_INT64, COLL_SUM, comm), rank, "sum");
  if (!bad && x != want) bad = 1;
  /* Broadcast and all_gather take no op: a bitwise op value never bothers them. */
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(bitwise_ops_on_float_types_are_refused_by_every_reducing_call) {
  ck_assert_int_eq(ct_run(2, 60000, NULL, rank_refusals), 0);
}
END_TEST

START_TEST(op_names_include_the_bitwise_ops) {
  ck_assert_str_eq(coll_op_name(COLL_BAND), "band");
  ck_assert_str_eq(coll_op_name(COLL_BOR), "bor");
  ck_assert_str_eq(coll_op_name(COLL_BXOR), "bxor");
  ck_assert_ptr_null(coll_op_name(COLL_OP_COUNT));
}
END_TEST

SUITE_MAIN(
    "bitwise",
    suite_tests("ops", 300, op_names_include_the_bitwise_ops,
                bitwise_ops_on_float_types_are_refused_by_every_reducing_call),
    suite_loop_tests("ops", 300, 0, 3,
                     bitwise_reductions_are_exact_through_every_schedule_on_2_to_4_ranks,
                     bitwise_all_reduce_is_exact_through_the_arena_on_2_to_4_ranks,
                     bitwise_all_reduce_is_exact_through_the_zero_copy_window_on_2_to_4_ranks))
