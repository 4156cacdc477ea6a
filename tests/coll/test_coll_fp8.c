/* fp8 (float8_e4m3, float8_e5m2) over real forked ranks. The expected results come from a
 * reference written here with libm, not from libcoll's conversions: round to float16
 * (10 mantissa bits, exponent >= -14, nearest even, beyond 65504 Inf), then to fp8
 * (3 or 2 mantissa bits, nearest even, out of range and Inf saturate, NaN stays NaN).
 *  - 2 ranks: every fp8 byte against every other (NaN, Inf, subnormals included):
 *    all_reduce, reduce and reduce_scatter with SUM, PROD, MIN, MAX, AVG and premul_sum
 *    are one pairwise step, so the expected bits are known exactly.
 *  - 4 ranks: values whose partial results are exact in any order (the algorithm's
 *    order is its own), every op, the three calls; saturation and NaN.
 *  - Calls that only move data keep every byte; bitwise ops are refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

enum { N2 = 65536, N4 = 4096 };
static const coll_dtype_t fp8_types[] = {COLL_FLOAT8E4M3, COLL_FLOAT8E5M2};
static const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_AVG};
enum { PREMUL = COLL_OP_COUNT }; /* the sixth "op" of the loops below */

/* The format's mantissa bits, smallest normal exponent and largest finite value. */
typedef struct {
  int mbits, emin;
  double max;
} fmt_t;

static fmt_t fmt_of(coll_dtype_t dt) {
  return dt == COLL_FLOAT8E4M3 ? (fmt_t){3, -6, 448.0} : (fmt_t){2, -14, 57344.0};
}

/* Byte b's value, decoded from the format's definition. */
static double decode(uint8_t b, coll_dtype_t dt) {
  bool e4 = dt == COLL_FLOAT8E4M3;
  int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15, emax = e4 ? 15 : 31;
  int e = (b & 0x7F) >> mb, m = b & ((1 << mb) - 1);
  double sign = (b & 0x80) ? -1.0 : 1.0;
  if (e4 && (b & 0x7F) == 0x7F) return NAN;
  if (!e4 && e == emax) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * ldexp(m, 1 - bias - mb);
  return sign * ldexp((1 << mb) + m, e - bias - mb);
}

/* x rounded to mbits mantissa bits, exponent at least emin (subnormals below), to
 * nearest even (nearbyint in the default rounding mode). */
static double round_bits(double x, int mbits, int emin) {
  if (x == 0 || !isfinite(x)) return x;
  int e = ilogb(x);
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - mbits);
  return nearbyint(x / q) * q;
}

/* What an fp8 step makes of the exact result r: float16, then fp8 saturating. */
static double fp8_round(double r, coll_dtype_t dt) {
  fmt_t f = fmt_of(dt);
  double h = round_bits(r, 10, -14);
  if (fabs(h) > 65504.0) h = copysign(INFINITY, h);
  if (isnan(h)) return NAN;
  double v = round_bits(h, f.mbits, f.emin);
  return fabs(v) > f.max ? copysign(f.max, v) : v;
}

/* One pairwise step of op on values x and y (NaN on either side wins min and max). */
static double step(double x, double y, int op, coll_dtype_t dt) {
  double r = op == COLL_PROD  ? x * y
             : op == COLL_MIN ? (isnan(x) || isnan(y) ? NAN : fmin(x, y))
             : op == COLL_MAX ? (isnan(x) || isnan(y) ? NAN : fmax(x, y))
                              : x + y;
  return fp8_round(r, dt);
}

/* Whether byte got is the value want: same value and sign of zero, NaN only as 0x7F.
 * loose_zero: min and max of +0 and -0 may give either (which operand is "a" is the
 * algorithm's choice, and they compare equal). */
static bool same_as(uint8_t got, double want, coll_dtype_t dt, bool loose_zero) {
  if (isnan(want)) return got == 0x7F;
  double g = decode(got, dt);
  return g == want && (signbit(g) == signbit(want) || (loose_zero && want == 0));
}

static bool same(uint8_t got, double want, coll_dtype_t dt) {
  return same_as(got, want, dt, false);
}

static int ok(int rank, const char *what, coll_status_t st) { return ct_ok(rank, what, st); }

/* The byte encoding value v (exact), by search. */
static uint8_t encode(double v, coll_dtype_t dt) {
  for (int b = 0; b < 256; b++)
    if (same((uint8_t)b, v, dt)) return (uint8_t)b;
  return 0x7F;
}

/* Rank r's scalar for premul_sum: 2^(r-1) on 2 ranks (0.5, 1), 2^(r%3-1) on 4. */
static double scalar_of(int rank) { return ldexp(1.0, rank % 3 - 1); }

/* Run all_reduce, reduce (root nranks-1) and reduce_scatter of in (count per rank;
 * reduce_scatter takes count * nranks) with op, checking each against want(i) (the
 * expected value of element i of the full vector). */
typedef double (*want_fn)(size_t i, coll_dtype_t dt, int op, int nranks);

static int run_reductions(coll_comm_t *comm, int rank, int nranks, coll_dtype_t dt, int op,
                          const uint8_t *in, size_t count, want_fn want) {
  uint8_t *out = malloc(count), *work = malloc(count);
  int bad = 0;
  coll_op_t cop = (coll_op_t)op;
  bool loose = op == COLL_MIN || op == COLL_MAX;
  if (op == PREMUL) {
    uint8_t s = encode(scalar_of(rank), dt);
    bad += ok(rank, "premul create", coll_op_create_premul_sum(comm, &s, dt, &cop));
  }
  char what[96];
  snprintf(what, sizeof what, "%s %s", coll_dtype_name(dt),
           op == PREMUL ? "premul" : coll_op_name(cop));
  if (!bad) bad += ok(rank, what, coll_all_reduce(in, out, count, dt, cop, comm));
  for (size_t i = 0; i < count && !bad; i++)
    if (!same_as(out[i], want(i, dt, op, nranks), dt, loose)) {
      fprintf(stderr, "rank %d: all_reduce %s element %zu: 0x%02x, want %g\n", rank, what, i,
              out[i], want(i, dt, op, nranks));
      bad = 1;
    }
  memcpy(work, in, count); /* reduce in place at the root */
  int root = nranks - 1;
  if (!bad) bad += ok(rank, what, coll_reduce(work, work, count, dt, cop, root, comm));
  for (size_t i = 0; i < count && !bad && rank == root; i++)
    if (!same_as(work[i], want(i, dt, op, nranks), dt, loose)) {
      fprintf(stderr, "rank %d: reduce %s element %zu: 0x%02x\n", rank, what, i, work[i]);
      bad = 1;
    }
  size_t chunk = count / (size_t)nranks;
  if (!bad) bad += ok(rank, what, coll_reduce_scatter(in, out, chunk, dt, cop, comm));
  for (size_t i = 0; i < chunk && !bad; i++) {
    size_t k = (size_t)rank * chunk + i;
    if (!same_as(out[i], want(k, dt, op, nranks), dt, loose)) {
      fprintf(stderr, "rank %d: reduce_scatter %s element %zu: 0x%02x\n", rank, what, k, out[i]);
      bad = 1;
    }
  }
  if (op == PREMUL) bad += ok(rank, "premul destroy", coll_op_destroy(comm, cop));
  free(out);
  free(work);
  return bad;
}

/* 2 ranks: element i is the pair (i >> 8, i & 0xFF), rank 0 holding the first byte. */
static uint8_t pair_byte(size_t i, int rank) { return (uint8_t)(rank == 0 ? i >> 8 : i); }

static double want_pair(size_t i, coll_dtype_t dt, int op, int nranks) {
  (void)nranks;
  double x = decode(pair_byte(i, 0), dt), y = decode(pair_byte(i, 1), dt);
  if (op == PREMUL) {
    x = step(x, scalar_of(0), COLL_PROD, dt);
    y = step(y, scalar_of(1), COLL_PROD, dt);
  }
  double s = step(x, y, op == PREMUL || op == COLL_AVG ? COLL_SUM : op, dt);
  return op == COLL_AVG ? fp8_round(s / 2, dt) : s;
}

static int rank_pairs(coll_comm_t *comm, int rank, int nranks) {
  uint8_t *in = malloc(N2);
  int bad = 0;
  for (size_t i = 0; i < N2; i++) in[i] = pair_byte(i, rank);
  for (int t = 0; t < 2 && !bad; t++)
    for (int o = 0; o <= 5 && !bad; o++)
      bad += run_reductions(comm, rank, nranks, fp8_types[t], o < 5 ? (int)ops[o] : PREMUL, in, N2,
                            want_pair);
  free(in);
  return bad | (coll_comm_destroy(comm) != COLL_OK);
}

/* 4 ranks: partial results exact in any order. Sums: -2..2 times 2^k, |partial| <= 8 *
 * 2^k (e5m2 holds the integers to 8); products: +-2^j; min/max: nonzero +-(1..7) * 2^k;
 * premul: -1..1 times 2^k, scaled by 0.5, 1, 2, 0.5: |partial| <= 8 * 2^(k-1). */
static double exact_value(size_t i, int rank, int op) {
  int k = (int)(i % 6) - 3, v = (int)((i * 7 + (size_t)rank * 5) % 5) - 2;
  double sign = ((i >> 3) + (size_t)rank) & 1 ? -1.0 : 1.0;
  if (op == PREMUL) v = (int)((i * 7 + (size_t)rank * 5) % 3) - 1; /* scaled by up to 2 */
  if (op == COLL_PROD) return sign * ldexp(1.0, (int)((i + (size_t)rank) % 3) - 1);
  if (op == COLL_MIN || op == COLL_MAX)
    return sign * (1 + (double)((i + (size_t)rank * 3) % 7)) * ldexp(1.0, k);
  return v * ldexp(1.0, k);
}

static double want_exact(size_t i, coll_dtype_t dt, int op, int nranks) {
  double acc = 0;
  for (int r = 0; r < nranks; r++) {
    double v = exact_value(i, r, op);
    if (op == PREMUL) v *= scalar_of(r);
    acc = r == 0            ? v
          : op == COLL_PROD ? acc * v
          : op == COLL_MIN  ? fmin(acc, v)
          : op == COLL_MAX  ? fmax(acc, v)
                            : acc + v;
  }
  return op == COLL_AVG ? fp8_round(acc / nranks, dt) : acc;
}

/* Every rank's input is the same special value s: SUM, MAX and AVG of 448s (e4m3) or of
 * +Inf (e5m2) give the largest finite value; one NaN makes every op's result 0x7F. */
static double want_special(size_t i, coll_dtype_t dt, int op, int nranks) {
  (void)op, (void)nranks;
  return i % 2 ? NAN : fmt_of(dt).max;
}

static int rank_exact(coll_comm_t *comm, int rank, int nranks) {
  uint8_t *in = malloc(N4);
  int bad = 0;
  for (int t = 0; t < 2 && !bad; t++) {
    coll_dtype_t dt = fp8_types[t];
    for (int o = 0; o <= 5 && !bad; o++) {
      int op = o < 5 ? (int)ops[o] : PREMUL;
      for (size_t i = 0; i < N4; i++) in[i] = encode(exact_value(i, rank, op), dt);
      bad += run_reductions(comm, rank, nranks, dt, op, in, N4, want_exact);
    }
    /* Saturation: even elements 448 (e4m3) or +Inf (e5m2) on every rank; odd ones NaN
     * on rank 1 and 1.0 elsewhere. */
    uint8_t big = dt == COLL_FLOAT8E4M3 ? 0x7E : 0x7C, nan = 0x7F, one = encode(1.0, dt);
    for (size_t i = 0; i < N4; i++) in[i] = i % 2 ? (rank == 1 ? nan : one) : big;
    static const int sat_ops[] = {COLL_SUM, COLL_MAX, COLL_AVG};
    for (int o = 0; o < 3 && !bad; o++) {
      if (sat_ops[o] == COLL_AVG) { /* max / nranks, not Inf / nranks */
        uint8_t out[2];
        uint8_t pair[2] = {big, one};
        bad += ok(rank, "avg", coll_all_reduce(pair, out, 2, dt, COLL_AVG, comm));
        if (!bad && !same(out[0], fp8_round(fmt_of(dt).max / nranks, dt), dt)) bad = 1;
        continue;
      }
      bad += run_reductions(comm, rank, nranks, dt, sat_ops[o], in, N4, want_special);
    }
  }
  free(in);
  return bad | (coll_comm_destroy(comm) != COLL_OK);
}

/* broadcast, all_gather, all_to_all, gather, scatter, send/recv move every byte (NaNs,
 * Infs, -0 included) unchanged; the bitwise ops are refused naming the type. */
static int rank_moves(coll_comm_t *comm, int rank, int nranks) {
  size_t n = 256, all = n * (size_t)nranks;
  uint8_t *in = malloc(all), *out = malloc(all);
  int bad = 0;
  for (int t = 0; t < 2 && !bad; t++) {
    coll_dtype_t dt = fp8_types[t];
    for (size_t i = 0; i < all; i++) in[i] = (uint8_t)(i + (size_t)rank);
    memcpy(out, in, n);
    bad += ok(rank, "broadcast", coll_broadcast(out, n, dt, 0, comm));
    for (size_t i = 0; i < n && !bad; i++) bad += out[i] != (uint8_t)i;
    if (!bad) bad += ok(rank, "all_gather", coll_all_gather(in, out, n, dt, comm));
    for (size_t i = 0; i < all && !bad; i++) bad += out[i] != (uint8_t)(i % n + i / n);
    if (!bad) bad += ok(rank, "all_to_all", coll_all_to_all(in, out, n, dt, comm));
    for (size_t i = 0; i < all && !bad; i++)
      bad += out[i] != (uint8_t)((size_t)rank * n + i % n + i / n);
    if (!bad) bad += ok(rank, "gather", coll_gather(in, out, n, dt, 0, comm));
    for (size_t i = 0; i < all && !bad && rank == 0; i++) bad += out[i] != (uint8_t)(i % n + i / n);
    if (!bad) bad += ok(rank, "scatter", coll_scatter(in, out, n, dt, 0, comm));
    for (size_t i = 0; i < n && !bad; i++) bad += out[i] != (uint8_t)((size_t)rank * n + i);
    if (!bad && nranks > 1) {
      int peer = rank ^ 1;
      if (rank & 1) {
        bad += ok(rank, "recv", coll_recv(out, n, dt, peer, comm));
        bad += ok(rank, "send", coll_send(in, n, dt, peer, comm));
      } else {
        bad += ok(rank, "send", coll_send(in, n, dt, peer, comm));
        bad += ok(rank, "recv", coll_recv(out, n, dt, peer, comm));
      }
      for (size_t i = 0; i < n && !bad; i++) bad += out[i] != (uint8_t)(i + (size_t)peer);
    }
    if (bad)
      fprintf(stderr, "rank %d: %s: a data-moving call changed bytes\n", rank, coll_dtype_name(dt));
    char want[96];
    snprintf(want, sizeof want, "op bxor needs an integer type, not %s", coll_dtype_name(dt));
    if (coll_all_reduce(in, out, n, dt, COLL_BXOR, comm) != COLL_ERR_INVALID_ARGUMENT ||
        strstr(coll_last_error(), want) == NULL) {
      fprintf(stderr, "rank %d: bxor on %s: '%s'\n", rank, coll_dtype_name(dt), coll_last_error());
      bad++;
    }
  }
  free(in);
  free(out);
  return bad | (coll_comm_destroy(comm) != COLL_OK);
}

START_TEST(fp8_names_and_sizes) {
  ck_assert_str_eq(coll_dtype_name(COLL_FLOAT8E4M3), "float8_e4m3");
  ck_assert_str_eq(coll_dtype_name(COLL_FLOAT8E5M2), "float8_e5m2");
  ck_assert_uint_eq(coll_dtype_size(COLL_FLOAT8E4M3), 1);
  ck_assert_uint_eq(coll_dtype_size(COLL_FLOAT8E5M2), 1);
  /* The reference's own decoding: the formats' largest values and NaN/Inf encodings. */
  ck_assert(decode(0x7E, COLL_FLOAT8E4M3) == 448.0 && isnan(decode(0xFF, COLL_FLOAT8E4M3)));
  ck_assert(decode(0x7B, COLL_FLOAT8E5M2) == 57344.0 && isinf(decode(0x7C, COLL_FLOAT8E5M2)));
  ck_assert(decode(0x01, COLL_FLOAT8E4M3) == 0x1p-9 && decode(0x01, COLL_FLOAT8E5M2) == 0x1p-16);
}
END_TEST

START_TEST(every_pair_of_fp8_bytes_reduces_to_the_float16_step_on_2_ranks) {
  ck_assert_int_eq(ct_run(2, 120000, NULL, rank_pairs), 0);
}
END_TEST

START_TEST(fp8_reductions_are_exact_and_saturate_on_4_ranks) {
  ck_assert_int_eq(ct_run(4, 120000, NULL, rank_exact), 0);
}
END_TEST

START_TEST(fp8_reductions_are_exact_on_2_ranks_over_tcp) {
  ct_job_t job = {.port = mp_free_port(), .transport = "tcp"};
  ck_assert_int_eq(ct_run(2, 120000, &job, rank_exact), 0);
}
END_TEST

START_TEST(data_moving_calls_keep_every_fp8_byte_and_bitwise_ops_are_refused) {
  ck_assert_int_eq(ct_run(4, 60000, NULL, rank_moves), 0);
}
END_TEST

SUITE_MAIN("fp8", suite_tests("ranks", 240, fp8_names_and_sizes,
                              every_pair_of_fp8_bytes_reduces_to_the_float16_step_on_2_ranks,
                              fp8_reductions_are_exact_and_saturate_on_4_ranks,
                              fp8_reductions_are_exact_on_2_ranks_over_tcp,
                              data_moving_calls_keep_every_fp8_byte_and_bitwise_ops_are_refused))
