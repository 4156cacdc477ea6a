/* premul_sum (coll_op_create_premul_sum) over real forked ranks: all_reduce, reduce and
 * reduce_scatter of integer and float types, in place and not, blocking, asynchronous and
 * in a group, each rank with its own scalar; the input is read when the call runs; ops
 * made in different orders on different ranks still agree; the errors (wrong dtype,
 * another communicator's op, a destroyed or unknown one, device buffers aside) and
 * destroy. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "elements.h"
#include "mem/memops.h"
#include "multiproc.h"
#include "onehost/arena.h"
#include "suite_run.h"

static bool is_float(coll_dtype_t dt) { return dt >= COLL_FLOAT16; }

/* Rank r's element i: a small integer (-4 .. 4), exact in every type. */
static double value_of(int r, size_t i, uint32_t salt) {
  return (double)((int)((i * 7 + (size_t)r * 3 + salt) % 9) - 4);
}

/* Rank r's scalar: integers r + 2, floats (r + 1) / 2; every product and sum here is
 * exact in float16 and bfloat16 too. */
static double scalar_of(coll_dtype_t dt, int r) {
  return is_float(dt) ? (r + 1) / 2.0 : (double)(r + 2);
}

/* Element i as the type's bits (integers: the low bytes, as put wrote them). */
static uint64_t bits_at(const void *buf, size_t i, coll_dtype_t dt) {
  uint64_t b = 0;
  memcpy(&b, (const char *)buf + i * coll_dtype_size(dt), coll_dtype_size(dt));
  return b;
}

/* The exact result for element i: sum over ranks of value * scalar, wrapped to the type. */
static uint64_t want_bits(coll_dtype_t dt, int nranks, size_t i, uint32_t salt) {
  char tmp[8] = {0};
  if (is_float(dt)) {
    double acc = 0;
    for (int r = 0; r < nranks; r++) acc += value_of(r, i, salt) * scalar_of(dt, r);
    elem_put(tmp, 0, dt, acc);
  } else {
    uint64_t acc = 0;
    for (int r = 0; r < nranks; r++)
      acc += (uint64_t)(int64_t)value_of(r, i, salt) * (uint64_t)(int64_t)scalar_of(dt, r);
    memcpy(tmp, &acc, 8);
  }
  return bits_at(tmp, 0, dt);
}

static void fill(void *buf, size_t n, coll_dtype_t dt, int rank, uint32_t salt) {
  for (size_t i = 0; i < n; i++) elem_put(buf, i, dt, value_of(rank, i, salt));
}

/* Whether buf still holds what fill wrote. */
static bool input_intact(const void *buf, size_t n, coll_dtype_t dt, int rank, uint32_t salt) {
  for (size_t i = 0; i < n; i++) {
    char one[8] = {0};
    elem_put(one, 0, dt, value_of(rank, i, salt));
    if (bits_at(buf, i, dt) != bits_at(one, 0, dt)) return false;
  }
  return true;
}

/* Elements first .. first + n - 1 of the result in out; 0 when all exact. */
static int check(const void *out, size_t first, size_t n, coll_dtype_t dt, int nranks,
                 uint32_t salt, const char *what) {
  for (size_t k = 0; k < n; k++) {
    uint64_t got = bits_at(out, k, dt), want = want_bits(dt, nranks, first + k, salt);
    if (got != want) {
      fprintf(stderr, "%s: %s over %d ranks, element %zu: bits %#llx, want %#llx\n", what,
              coll_dtype_name(dt), nranks, first + k, (unsigned long long)got,
              (unsigned long long)want);
      return 1;
    }
  }
  return 0;
}

static int report(coll_status_t st, int rank, const char *what) {
  if (st == COLL_OK) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_status_name(st), coll_last_error());
  return 1;
}

/* This rank's premul_sum op for dt. */
static int make_op(coll_comm_t *comm, coll_dtype_t dt, int rank, coll_op_t *op) {
  char s[8];
  elem_put(s, 0, dt, scalar_of(dt, rank));
  return report(coll_op_create_premul_sum(comm, s, dt, op), rank, "create_premul_sum");
}

static const coll_dtype_t types[] = {COLL_INT32,   COLL_INT64,   COLL_UINT8,   COLL_INT8,
                                     COLL_FLOAT32, COLL_FLOAT64, COLL_FLOAT16, COLL_BFLOAT16};
enum { NTYPES = sizeof types / sizeof types[0] };
static const size_t counts[] = {1, 5, 1000, 70003};
enum { NCOUNTS = sizeof counts / sizeof counts[0], MAX_COUNT = 70003 };

/* all_reduce (in place, out of place, async), reduce (root varies; non-roots pass NULL or
 * a buffer that must stay untouched), reduce_scatter (in place, out of place, async) of
 * every type and count. `in` keeps its input unless the call is in place. */
static int all_forms(coll_comm_t *comm, int rank, int nranks, char *in, char *out, uint32_t *salt,
                     const char *tag) {
  for (int t = 0; t < NTYPES; t++) {
    coll_dtype_t dt = types[t];
    size_t esz = coll_dtype_size(dt);
    coll_op_t op;
    if (make_op(comm, dt, rank, &op)) return 1;
    for (int k = 0; k < NCOUNTS; k++, (*salt)++) {
      size_t n = counts[k];
      uint32_t s = *salt;
      char what[160];
      for (int form = 0; form < 3; form++) { /* 0 out of place, 1 in place, 2 async */
        snprintf(what, sizeof what, "rank %d: %s all_reduce form %d n %zu", rank, tag, form, n);
        fill(in, n, dt, rank, s);
        char *dst = form == 1 ? in : out;
        coll_request_t *req = NULL;
        coll_status_t st = form == 2 ? coll_all_reduce_async(in, dst, n, dt, op, comm, &req)
                                     : coll_all_reduce(in, dst, n, dt, op, comm);
        if (st == COLL_OK && req != NULL) st = coll_request_wait(&req);
        if (report(st, rank, what) || check(dst, 0, n, dt, nranks, s, what)) return 1;
        if (form != 1 && !input_intact(in, n, dt, rank, s)) { /* out of place: left alone */
          fprintf(stderr, "%s: sendbuf changed\n", what);
          return 1;
        }
      }
      int root = (int)(s % (uint32_t)nranks);
      for (int in_place = 0; in_place < 2; in_place++) {
        snprintf(what, sizeof what, "rank %d: %s reduce root %d %s n %zu", rank, tag, root,
                 in_place ? "in place" : "out of place", n);
        fill(in, n, dt, rank, s);
        memset(out, 0x5a, n * esz);
        void *recv = in_place ? (void *)in : rank == root || (s & 1) ? (void *)out : NULL;
        if (report(coll_reduce(in, recv, n, dt, op, root, comm), rank, what)) return 1;
        if (rank == root && check(recv, 0, n, dt, nranks, s, what)) return 1;
        if (rank != root && !in_place)
          for (size_t b = 0; b < n * esz; b++)
            if ((unsigned char)out[b] != 0x5a) {
              fprintf(stderr, "%s: non-root recvbuf changed\n", what);
              return 1;
            }
      }
      for (int form = 0; form < 3; form++) {
        snprintf(what, sizeof what, "rank %d: %s reduce_scatter form %d n %zu", rank, tag, form, n);
        fill(in, (size_t)nranks * n, dt, rank, s);
        char *dst = form == 1 ? in + (size_t)rank * n * esz : out;
        coll_request_t *req = NULL;
        coll_status_t st = form == 2 ? coll_reduce_scatter_async(in, dst, n, dt, op, comm, &req)
                                     : coll_reduce_scatter(in, dst, n, dt, op, comm);
        if (st == COLL_OK && req != NULL) st = coll_request_wait(&req);
        if (report(st, rank, what) || check(dst, (size_t)rank * n, n, dt, nranks, s, what))
          return 1;
      }
    }
    if (report(coll_op_destroy(comm, op), rank, "op_destroy")) return 1;
  }
  return 0;
}

typedef struct {
  ct_job_t job;
  bool windows; /* buffers from coll_mem_alloc (premul_sum then skips the zero-copy path) */
  bool arena;   /* COLL_ALGO_ARENA forced */
} case_t;

static int rank_forms(int rank, int nranks, void *arg) {
  const case_t *c = arg;
  coll_comm_t *comm;
  unsetenv("COLL_ARENA");
  unsetenv("COLL_WINDOW");
  if (ct_init(&c->job, rank, nranks, &comm) != 0) return 1;
  size_t bytes = (size_t)nranks * MAX_COUNT * 8 + MAX_COUNT * 8 + 8;
  char *in = NULL, *out = NULL;
  int bad = 0;
  if (c->windows) {
    bad = report(coll_mem_alloc(comm, bytes, (void **)&in), rank, "mem_alloc") ||
          report(coll_mem_alloc(comm, bytes, (void **)&out), rank, "mem_alloc");
  } else {
    in = malloc(bytes);
    out = malloc(bytes);
    bad = in == NULL || out == NULL;
  }
  if (!bad && c->arena) bad = report(coll_comm_set_algo(comm, COLL_ALGO_ARENA), rank, "set_algo");
  uint32_t salt = 1;
  uint32_t rounds = comm->arena != NULL ? comm->arena->round : 0;
  uint32_t win_rounds = comm->arena != NULL ? comm->arena->win_round : 0;
  const char *tag = c->windows ? "windows" : c->arena ? "arena" : "schedules";
  if (!bad) bad = all_forms(comm, rank, nranks, in, out, &salt, tag);
  if (!bad && c->arena && nranks > 1 && (comm->arena == NULL || comm->arena->round == rounds)) {
    fprintf(stderr, "rank %d: the arena ran no premul_sum all-reduce\n", rank);
    bad = 1;
  }
  if (!bad && comm->arena != NULL && comm->arena->win_round != win_rounds) {
    fprintf(stderr, "rank %d: a premul_sum took the zero-copy window\n", rank);
    bad = 1;
  }
  if (c->windows) {
    coll_mem_free(comm, in);
    coll_mem_free(comm, out);
  } else {
    free(in);
    free(out);
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(premul_sum_is_exact_for_every_form_and_type_on_1_to_4_ranks) {
  case_t c = {.job = {.port = mp_free_port()}};
  ck_assert_int_eq(mp_run(1 + _i, 240000, rank_forms, &c), 0);
}
END_TEST

START_TEST(premul_sum_through_the_arena_and_with_window_buffers_is_exact) {
  case_t c = {.job = {.port = mp_free_port()}, .arena = _i == 0, .windows = _i == 1};
  ck_assert_int_eq(mp_run(3, 240000, rank_forms, &c), 0);
}
END_TEST

/* The input is read when the call runs, not when it is issued: an asynchronous premul_sum
 * queued behind an all-reduce reads that all-reduce's output, and so does a premul_sum
 * recorded in a group after it. Then: the op destroyed right after an async call was
 * issued; the call still uses its scalar. */
static int rank_order(coll_comm_t *comm, int rank, int nranks) {
  enum { N = 200000 };
  float *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4);
  int bad = a == NULL || b == NULL || c == NULL;
  coll_op_t op;
  float scalar = 0.5f * (float)(rank + 1), sum_scalars = 0;
  for (int r = 0; r < nranks; r++) sum_scalars += 0.5f * (float)(r + 1);
  if (!bad) bad = report(coll_op_create_premul_sum(comm, &scalar, COLL_FLOAT32, &op), rank, "make");
  for (int round = 0; round < 2 && !bad; round++) {
    for (size_t i = 0; i < N; i++) a[i] = (float)((i + (size_t)rank) % 5), b[i] = -1000.0f;
    if (round == 0) {
      coll_request_t *r1 = NULL, *r2 = NULL;
      bad = report(coll_all_reduce_async(a, b, N, COLL_FLOAT32, COLL_SUM, comm, &r1), rank, "a1") ||
            report(coll_all_reduce_async(b, c, N, COLL_FLOAT32, op, comm, &r2), rank, "a2") ||
            report(coll_request_wait(&r1), rank, "w1") ||
            report(coll_request_wait(&r2), rank, "w2");
    } else {
      bad = report(coll_group_start(comm), rank, "group_start") ||
            report(coll_all_reduce(a, b, N, COLL_FLOAT32, COLL_SUM, comm), rank, "g1") ||
            report(coll_all_reduce(b, c, N, COLL_FLOAT32, op, comm), rank, "g2") ||
            report(coll_group_end(comm), rank, "group_end");
    }
    for (size_t i = 0; i < N && !bad; i++) {
      float s = 0;
      for (int r = 0; r < nranks; r++) s += (float)((i + (size_t)r) % 5);
      if (c[i] != s * sum_scalars) {
        fprintf(stderr, "rank %d: %s: element %zu is %g, want %g\n", rank,
                round == 0 ? "async" : "group", i, c[i], s * sum_scalars);
        bad = 1;
      }
    }
  }
  /* Destroyed while the call is queued. */
  coll_request_t *req = NULL;
  for (size_t i = 0; i < N; i++) a[i] = 2.0f;
  if (!bad) bad = report(coll_all_reduce_async(a, c, N, COLL_FLOAT32, op, comm, &req), rank, "a3");
  if (!bad) bad = report(coll_op_destroy(comm, op), rank, "destroy");
  if (!bad) bad = report(coll_request_wait(&req), rank, "w3");
  for (size_t i = 0; i < N && !bad; i++)
    if (c[i] != 2.0f * sum_scalars) {
      fprintf(stderr, "rank %d: after destroy: element %zu is %g\n", rank, i, c[i]);
      bad = 1;
    }
  free(a);
  free(b);
  free(c);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(premul_sum_reads_its_input_when_it_runs_and_survives_destroy) {
  ck_assert_int_eq(ct_run(3, 60000, NULL, rank_order), 0);
}
END_TEST

/* Rank 0 makes its float32 op first and its int32 op second, the others the other way
 * round: the handles differ between ranks, the fingerprints ("premul_sum") do not. */
static int rank_orders(coll_comm_t *comm, int rank, int nranks) {
  coll_op_t fop, iop;
  int bad = rank == 0
                ? make_op(comm, COLL_FLOAT32, rank, &fop) || make_op(comm, COLL_INT32, rank, &iop)
                : make_op(comm, COLL_INT32, rank, &iop) || make_op(comm, COLL_FLOAT32, rank, &fop);
  char in[64 * 4], out[64 * 4];
  for (int k = 0; k < 3 && !bad; k++) {
    coll_dtype_t dt = k == 1 ? COLL_INT32 : COLL_FLOAT32;
    fill(in, 64, dt, rank, (uint32_t)k);
    bad = report(coll_all_reduce(in, out, 64, dt, dt == COLL_INT32 ? iop : fop, comm), rank,
                 "all_reduce") ||
          check(out, 0, 64, dt, nranks, (uint32_t)k, "orders");
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(ops_made_in_different_orders_on_different_ranks_agree) {
  ck_assert_int_eq(ct_run(3, 60000, NULL, rank_orders), 0);
}
END_TEST

/* Rank 1 calls a plain sum where the others call premul_sum: every rank fails with
 * COLL_ERR_MISMATCH naming both. */
static int rank_mismatch(coll_comm_t *comm, int rank, int nranks) {
  (void)nranks;
  coll_op_t op;
  float x[16] = {0};
  int bad = make_op(comm, COLL_FLOAT32, rank, &op);
  coll_status_t st = coll_all_reduce(x, x, 16, COLL_FLOAT32, rank == 1 ? COLL_SUM : op, comm);
  if (!bad && (st != COLL_ERR_MISMATCH || strstr(coll_last_error(), "premul_sum") == NULL ||
               strstr(coll_last_error(), ", sum)") == NULL)) {
    fprintf(stderr, "rank %d: %s '%s', want a mismatch of premul_sum and sum\n", rank,
            coll_status_name(st), coll_last_error());
    bad = 1;
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(premul_sum_against_a_plain_sum_is_a_mismatch_on_every_rank) {
  ck_assert_int_eq(ct_run(3, 60000, NULL, rank_mismatch), 0);
}
END_TEST

/* 0 when st is COLL_ERR_INVALID_ARGUMENT and the message holds needle. */
static int expect_invalid(coll_status_t st, const char *needle, int rank, const char *what) {
  if (st == COLL_ERR_INVALID_ARGUMENT && strstr(coll_last_error(), needle) != NULL) return 0;
  fprintf(stderr, "rank %d: %s: got %s '%s', want '%s'\n", rank, what, coll_status_name(st),
          coll_last_error(), needle);
  return 1;
}

static int rank_errors(int rank, int nranks, void *arg) {
  const ct_job_t *job = arg;
  coll_comm_t *comm, *child = NULL;
  if (ct_init(job, rank, nranks, &comm) != 0) return 1;
  float f = 2.0f, x[4] = {1, 2, 3, 4};
  int32_t ix[4] = {1, 2, 3, 4};
  coll_op_t op, other, gone;
  int bad = report(coll_op_create_premul_sum(comm, &f, COLL_FLOAT32, &op), rank, "make");
  bad += expect_invalid(coll_op_create_premul_sum(comm, NULL, COLL_FLOAT32, &other),
                        "scalar is NULL", rank, "NULL scalar");
  bad += expect_invalid(coll_op_create_premul_sum(comm, &f, COLL_FLOAT32, NULL), "op is NULL", rank,
                        "NULL op");
  bad += expect_invalid(coll_op_create_premul_sum(comm, &f, COLL_DTYPE_COUNT, &other),
                        "unknown dtype", rank, "bad dtype");
  bad += expect_invalid(coll_op_create_premul_sum(NULL, &f, COLL_FLOAT32, &other), "comm is NULL",
                        rank, "NULL comm");
  /* The call's dtype must be the op's: the message names both. */
  bad += expect_invalid(coll_all_reduce(ix, ix, 4, COLL_INT32, op, comm),
                        "is a premul_sum of float32, but the call's dtype is int32", rank, "dtype");
  bad += expect_invalid(
      coll_reduce_scatter_async(ix, ix, 1, COLL_INT32, op, comm, &(coll_request_t *){NULL}),
      "premul_sum of float32", rank, "dtype async");
  char who[64];
  snprintf(who, sizeof who, "rank %d: coll_reduce: unknown op", rank);
  bad += expect_invalid(coll_reduce(x, x, 4, COLL_FLOAT32, (coll_op_t)123456, 0, comm), who, rank,
                        "unknown value");
  /* Another communicator's op (a split child) is unknown here, and the other way round. */
  bad += report(coll_comm_split(comm, 0, rank, &child), rank, "split");
  if (child != NULL) {
    bad += report(coll_op_create_premul_sum(child, &f, COLL_FLOAT32, &other), rank, "make child");
    bad += expect_invalid(coll_all_reduce(x, x, 4, COLL_FLOAT32, other, comm), "unknown op", rank,
                          "child's op");
    bad += expect_invalid(coll_all_reduce(x, x, 4, COLL_FLOAT32, op, child), "unknown op", rank,
                          "parent's op on child");
    bad += expect_invalid(coll_op_destroy(comm, other), "not a live op of this communicator", rank,
                          "destroy child's op on parent");
    bad += report(coll_all_reduce(x, x, 4, COLL_FLOAT32, other, child), rank, "child's own op");
    for (int i = 0; i < 4; i++)
      if (x[i] != (float)(i + 1) * 2.0f * (float)nranks) bad++;
    bad += report(coll_op_destroy(child, other), rank, "destroy child op");
    bad += report(coll_comm_destroy(child), rank, "destroy child");
  }
  /* Destroyed: refused by calls and by a second destroy; built-in ops are not destroyed. */
  bad += report(coll_op_create_premul_sum(comm, &f, COLL_FLOAT32, &gone), rank, "make gone");
  bad += report(coll_op_destroy(comm, gone), rank, "destroy gone");
  bad += expect_invalid(coll_all_reduce(x, x, 4, COLL_FLOAT32, gone, comm), "unknown op", rank,
                        "destroyed op");
  bad += expect_invalid(coll_op_destroy(comm, gone), "not a live op", rank, "destroy twice");
  bad += expect_invalid(coll_op_destroy(comm, COLL_SUM), "op sum is built in", rank,
                        "destroy built-in");
  bad += coll_op_name(op) != NULL; /* only its communicator knows it */
  /* Still healthy: the live op works. */
  for (int i = 0; i < 4; i++) x[i] = 1.0f;
  bad += report(coll_all_reduce(x, x, 4, COLL_FLOAT32, op, comm), rank, "live op");
  if (x[0] != 2.0f * (float)nranks) bad++;
  coll_comm_destroy(comm);
  return bad != 0;
}

START_TEST(premul_sum_errors_name_the_rank_the_call_and_what_was_wrong) {
  ct_job_t job = {.port = mp_free_port()};
  ck_assert_int_eq(mp_run(2, 60000, rank_errors, &job), 0);
}
END_TEST

SUITE_MAIN("premul",
           suite_tests("premul_sum", 300,
                       premul_sum_errors_name_the_rank_the_call_and_what_was_wrong,
                       ops_made_in_different_orders_on_different_ranks_agree,
                       premul_sum_against_a_plain_sum_is_a_mismatch_on_every_rank,
                       premul_sum_reads_its_input_when_it_runs_and_survives_destroy),
           suite_loop_tests("premul_sum", 300, 0, 4,
                            premul_sum_is_exact_for_every_form_and_type_on_1_to_4_ranks),
           suite_loop_tests("premul_sum", 300, 0, 2,
                            premul_sum_through_the_arena_and_with_window_buffers_is_exact))
