/* Check suite 'mem': every host reduction (dtype x op, aliasing forms, odd lengths) against
 * a scalar reference computed another way, premul_sum's scaling, and the
 * float16/bfloat16 conversions (fp8's against NVIDIA's code: test_fp8_ref.cpp). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elements.h"
#include "mem/memops.h"
#include "suite_run.h"

static const size_t dtype_sizes[COLL_DTYPE_COUNT] = {
    [COLL_INT8] = 1,    [COLL_UINT8] = 1,   [COLL_INT32] = 4,      [COLL_UINT32] = 4,
    [COLL_INT64] = 8,   [COLL_UINT64] = 8,  [COLL_FLOAT16] = 2,    [COLL_BFLOAT16] = 2,
    [COLL_FLOAT32] = 4, [COLL_FLOAT64] = 8, [COLL_FLOAT8E4M3] = 1, [COLL_FLOAT8E5M2] = 1,
};

/* Deterministic pseudo-random numbers (xorshift64*). */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* Integer reference: compute in 64-bit unsigned (wrapping), truncate to the width. */
static uint64_t ref_int(uint64_t ux, uint64_t uy, int64_t sx, int64_t sy, int is_signed,
                        coll_op_t op) {
  switch (op) {
    case COLL_SUM:
    case COLL_AVG:
      return ux + uy;
    case COLL_PROD:
      return ux * uy;
    case COLL_MIN:
      return is_signed ? (sx < sy ? ux : uy) : (ux < uy ? ux : uy);
    case COLL_MAX:
      return is_signed ? (sx > sy ? ux : uy) : (ux > uy ? ux : uy);
    case COLL_BAND:
      return ux & uy;
    case COLL_BOR:
      return ux | uy;
    case COLL_BXOR:
      return ux ^ uy;
    default:
      return 0;
  }
}

/* Float reference in double; NaN from either side propagates for min/max. */
static double ref_float(double x, double y, coll_op_t op) {
  switch (op) {
    case COLL_SUM:
    case COLL_AVG:
      return x + y;
    case COLL_PROD:
      return x * y;
    case COLL_MIN:
      return (isnan(x) || isnan(y)) ? NAN : (x < y ? x : y);
    case COLL_MAX:
      return (isnan(x) || isnan(y)) ? NAN : (x > y ? x : y);
    default:
      return 0;
  }
}

static int is_float(coll_dtype_t t) { return t >= COLL_FLOAT16; }

static int is_bitwise(coll_op_t op) { return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR; }

/* Expected bits of element i, written into out (elem size bytes). Float results go
 * double -> float -> half: with 24 >= 2*11+2 bits this double rounding is exact. fp8
 * results: the exact double rounded to float16, then to fp8 (saturating), the two
 * roundings NCCL's float16 arithmetic makes; those conversions are checked against
 * NVIDIA's cuda_fp8.h in test_fp8_ref.cpp. */
static void expected(const void *a, const void *b, size_t i, coll_dtype_t t, coll_op_t op,
                     void *out) {
  if (!is_float(t)) {
    uint64_t ux, uy;
    int64_t sx, sy;
    elem_get_int(a, i, t, &ux, &sx);
    elem_get_int(b, i, t, &uy, &sy);
    uint64_t r = ref_int(ux, uy, sx, sy, t == COLL_INT8 || t == COLL_INT32 || t == COLL_INT64, op);
    memcpy(out, &r, dtype_sizes[t]); /* little-endian: the low bytes */
    return;
  }
  double r = ref_float(elem_get(a, i, t), elem_get(b, i, t), op);
  elem_put(out, 0, t, r);
}

/* Fill with values that exercise each type: small and large integers, negative numbers,
 * and for floats a few zeros of both signs, infinities and NaNs. */
static void fill(void *p, size_t n, coll_dtype_t t, uint64_t seed) {
  uint64_t s = seed | 1;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next(&s);
    double v = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 200.0;
    if (i % 97 == 5) v = INFINITY;
    if (i % 89 == 7) v = -0.0;
    if (i % 83 == 3) v = NAN;
    /* fp8: +-100 in e4m3 (max 448) often sums beyond it: saturation. */
    if (t == COLL_FLOAT8E4M3 || t == COLL_FLOAT8E5M2) v *= i % 5 == 1 ? 4.0 : 1.0;
    if (is_float(t))
      elem_put(p, i, t, v);
    else
      memcpy((char *)p + i * dtype_sizes[t], &r, dtype_sizes[t]);
  }
}

/* Compare bitwise, except that any NaN matches any NaN. */
static int same_element(const void *got, const void *want, coll_dtype_t t) {
  size_t sz = dtype_sizes[t];
  if (memcmp(got, want, sz) == 0) return 1;
  if (!is_float(t)) return 0;
  return isnan(elem_get(got, 0, t)) && isnan(elem_get(want, 0, t));
}

static const size_t lengths[] = {0, 1, 3, 16, 17, 255, 256, 257, 1000, 4099};

/* Alias forms: 0 distinct, 1 dst == a, 2 dst == b, 3 dst == a == b. */
static void check_reduction(coll_dtype_t t, coll_op_t op, int alias) {
  mem_reduce_fn fn = mem_host_reduce_fn(t, op);
  if (is_float(t) && is_bitwise(op)) { /* bitwise ops take integers only */
    ck_assert_msg(fn == NULL, "dtype %d has a bitwise op %d", (int)t, (int)op);
    return;
  }
  ck_assert(fn != NULL);
  size_t sz = dtype_sizes[t];
  for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
    size_t n = lengths[li];
    /* +1 element so that buffers start misaligned for the vector loops. */
    char *a = malloc((n + 1) * sz), *b = malloc((n + 1) * sz), *d = malloc((n + 1) * sz);
    char *want = malloc((n + 1) * sz);
    ck_assert(a && b && d && want);
    char *pa = a + sz, *pb = b + sz, *pd = d + sz;
    fill(pa, n, t, 1234 + n);
    fill(pb, n, t, 987 + n * 7);
    if (alias == 3) memcpy(pb, pa, n * sz);
    for (size_t i = 0; i < n; i++) expected(pa, pb, i, t, op, want + i * sz);
    const void *srca = pa, *srcb = pb;
    void *dst = pd;
    if (alias == 1) dst = pa;
    if (alias == 2) dst = pb;
    if (alias == 3) dst = pa, srcb = pa;
    fn(dst, srca, srcb, n);
    for (size_t i = 0; i < n; i++) {
      if (!same_element((char *)dst + i * sz, want + i * sz, t))
        ck_abort_msg("dtype %d op %d alias %d n %zu: element %zu differs from the reference",
                     (int)t, (int)op, alias, n, i);
    }
    free(a);
    free(b);
    free(d);
    free(want);
  }
}

/* Loop-test index -> (dtype, op): every pair. */
START_TEST(reduction_matches_reference_for_every_dtype_and_op) {
  coll_dtype_t t = (coll_dtype_t)(_i / COLL_OP_COUNT);
  coll_op_t op = (coll_op_t)(_i % COLL_OP_COUNT);
  for (int alias = 0; alias < 4; alias++) check_reduction(t, op, alias);
}
END_TEST

/* Offsets in bytes past malloc's alignment (at least 8) of dst, a and b: each alone,
 * all together, and three different ones, for every misalignment 1..7 of an 8-byte
 * type; then the same with dst == a, dst == b and dst == a == b. */
enum { OFFSET_SETS = 5 * 7 };
static void offset_set(int k, size_t off[3]) {
  size_t m = (size_t)(k / 5) + 1, form = (size_t)(k % 5);
  off[0] = form == 0 || form == 1 || form == 4 ? m : 0;
  off[1] = form == 0 || form == 2 ? m : form == 4 ? (m + 3) % 8 : 0;
  off[2] = form == 0 || form == 3 ? m : form == 4 ? (m + 6) % 8 : 0;
}

/* Run fn on copies of a and b placed at the given offsets in fresh buffers, with alias
 * form `alias` (as in check_reduction), and copy the n result elements to out. */
static void reduce_placed(mem_reduce_fn fn, const char *a, const char *b, size_t n, size_t sz,
                          int alias, const size_t off[3], char *out) {
  char *bd = malloc(n * sz + 8), *ba = malloc(n * sz + 8), *bb = malloc(n * sz + 8);
  ck_assert(bd && ba && bb);
  char *pd = bd + off[0], *pa = ba + off[1], *pb = bb + off[2];
  if (alias == 1 || alias == 3) pd = pa;
  if (alias == 2) pd = pb;
  if (alias == 3) pb = pa;
  memcpy(pa, a, n * sz);
  if (alias != 3) memcpy(pb, b, n * sz);
  fn(pd, pa, pb, n);
  memcpy(out, pd, n * sz);
  free(bd);
  free(ba);
  free(bb);
}

/* The same reduction on buffers at every byte offset gives the bits it gives on aligned
 * ones (NaNs included): user buffers may have any alignment. */
START_TEST(reductions_give_the_same_bits_at_every_misalignment) {
  coll_dtype_t t = (coll_dtype_t)(_i / COLL_OP_COUNT);
  coll_op_t op = (coll_op_t)(_i % COLL_OP_COUNT);
  mem_reduce_fn fn = mem_host_reduce_fn(t, op);
  if (fn == NULL && is_float(t) && is_bitwise(op)) return; /* none (checked above) */
  size_t sz = dtype_sizes[t];
  static const size_t ns[] = {1, 3, 17, 257, 1000};
  static const size_t aligned[3] = {0, 0, 0};
  for (size_t li = 0; li < sizeof ns / sizeof ns[0]; li++) {
    size_t n = ns[li];
    char *a = malloc(n * sz), *b = malloc(n * sz), *want = malloc(n * sz), *got = malloc(n * sz);
    ck_assert(a && b && want && got);
    fill(a, n, t, 55 + n);
    fill(b, n, t, 77 + n * 3);
    for (int alias = 0; alias < 4; alias++) {
      reduce_placed(fn, a, b, n, sz, alias, aligned, want);
      for (int k = 0; k < OFFSET_SETS; k++) {
        size_t off[3];
        offset_set(k, off);
        reduce_placed(fn, a, b, n, sz, alias, off, got);
        if (memcmp(got, want, n * sz) != 0)
          ck_abort_msg("dtype %d op %d alias %d n %zu at offsets %zu/%zu/%zu: not the aligned bits",
                       (int)t, (int)op, alias, n, off[0], off[1], off[2]);
      }
    }
    free(a);
    free(b);
    free(want);
    free(got);
  }
}
END_TEST

START_TEST(reduce_table_rejects_unknown_dtype_and_op) {
  ck_assert(mem_host_reduce_fn(COLL_DTYPE_COUNT, COLL_SUM) == NULL);
  ck_assert(mem_host_reduce_fn(COLL_FLOAT32, COLL_OP_COUNT) == NULL);
  ck_assert(mem_host_reduce_fn((coll_dtype_t)-1, COLL_SUM) == NULL);
}
END_TEST

START_TEST(integer_sum_and_product_wrap_around) {
  int8_t a8[2] = {127, -128}, b8[2] = {1, -1}, d8[2];
  mem_host_reduce_fn(COLL_INT8, COLL_SUM)(d8, a8, b8, 2);
  ck_assert_int_eq(d8[0], -128);
  ck_assert_int_eq(d8[1], 127);
  int64_t a64[1] = {INT64_MAX}, b64[1] = {2}, d64[1];
  mem_host_reduce_fn(COLL_INT64, COLL_PROD)(d64, a64, b64, 1);
  ck_assert_int_eq(d64[0], -2);
  uint32_t a32[1] = {UINT32_MAX}, b32[1] = {2}, d32[1];
  mem_host_reduce_fn(COLL_UINT32, COLL_SUM)(d32, a32, b32, 1);
  ck_assert_uint_eq(d32[0], 1);
}
END_TEST

START_TEST(float_min_max_propagate_nan_from_either_side) {
  float a[3] = {NAN, 1.0f, 2.0f}, b[3] = {1.0f, NAN, 3.0f}, d[3];
  for (coll_op_t op = COLL_MIN; op <= COLL_MAX; op++) {
    mem_host_reduce_fn(COLL_FLOAT32, op)(d, a, b, 3);
    ck_assert(isnan(d[0]) && isnan(d[1]));
    ck_assert(d[2] == (op == COLL_MIN ? 2.0f : 3.0f));
  }
}
END_TEST

START_TEST(finish_avg_divides_every_type) {
  int32_t i32[3] = {9, -9, 10};
  mem_host_finish_avg(i32, 3, COLL_INT32, 4);
  ck_assert_int_eq(i32[0], 2);
  ck_assert_int_eq(i32[1], -2); /* truncates toward zero */
  ck_assert_int_eq(i32[2], 2);
  uint8_t u8[1] = {255};
  mem_host_finish_avg(u8, 1, COLL_UINT8, 2);
  ck_assert_uint_eq(u8[0], 127);
  double f64[2] = {3.0, -1.5};
  mem_host_finish_avg(f64, 2, COLL_FLOAT64, 3);
  ck_assert(f64[0] == 1.0 && f64[1] == -0.5);
  float f32[1] = {0.3f * 3};
  mem_host_finish_avg(f32, 1, COLL_FLOAT32, 3);
  ck_assert(f32[0] == (0.3f * 3) / 3.0f);
  uint16_t h[2] = {mem_float_to_half(6.0f), mem_float_to_half(INFINITY)};
  mem_host_finish_avg(h, 2, COLL_FLOAT16, 4);
  ck_assert(mem_half_to_float(h[0]) == 1.5f);
  ck_assert(isinf(mem_half_to_float(h[1])));
  uint16_t bf[1] = {mem_float_to_bf16(-8.0f)};
  mem_host_finish_avg(bf, 1, COLL_BFLOAT16, 8);
  ck_assert(mem_bf16_to_float(bf[0]) == -1.0f);
  /* fp8: e4m3 0x7E is 448 (/3 = 149.33 -> 149.375 in float16 -> 144 in e4m3, whose
   * neighbours are 144 and 160), 0x01 is 2^-9 (/2 = 2^-10: a tie, to even 0); e5m2 0x7B is
   * 57344 (/4 = 14336, exact), 0x7C Inf (/4 still Inf in float16, saturated to 57344). */
  uint8_t e4[2] = {0x7E, 0x01}, e5[2] = {0x7B, 0x7C};
  mem_host_finish_avg(e4, 1, COLL_FLOAT8E4M3, 3);
  mem_host_finish_avg(e4 + 1, 1, COLL_FLOAT8E4M3, 2);
  ck_assert(mem_fp8_to_float(e4[0], COLL_FLOAT8E4M3) == 144.0f && e4[1] == 0x00);
  mem_host_finish_avg(e5, 2, COLL_FLOAT8E5M2, 4);
  ck_assert(mem_fp8_to_float(e5[0], COLL_FLOAT8E5M2) == 14336.0f && e5[1] == 0x7B);
  int8_t one[1] = {5};
  mem_host_finish_avg(one, 1, COLL_INT8, 1); /* one rank: unchanged */
  ck_assert_int_eq(one[0], 5);
}
END_TEST

/* premul_sum's scaling: known products per type (integers wrap in their width, the 16-bit
 * floats round once from float32), in place and at an odd address. */
START_TEST(scale_multiplies_every_type_in_its_arithmetic) {
  int8_t i8[3] = {3, -4, 100}, s8 = 3, o8[3];
  mem_host_scale(o8, i8, 3, COLL_INT8, &s8);
  ck_assert(o8[0] == 9 && o8[1] == -12 && o8[2] == 44); /* 300 wraps to 44 */
  uint8_t u8[2] = {0x81, 2}, su8 = 2;
  mem_host_scale(u8, u8, 2, COLL_UINT8, &su8); /* in place */
  ck_assert(u8[0] == 2 && u8[1] == 4);
  int32_t i32[2] = {-7, INT32_MAX}, s32 = -2;
  mem_host_scale(i32, i32, 2, COLL_INT32, &s32);
  ck_assert(i32[0] == 14 && i32[1] == 2); /* -2 * INT32_MAX wraps to 2 */
  uint32_t u32[1] = {0x80000001u}, su32 = 4;
  mem_host_scale(u32, u32, 1, COLL_UINT32, &su32);
  ck_assert(u32[0] == 4);
  int64_t i64[1] = {-3}, s64 = 1000000000000ll;
  mem_host_scale(i64, i64, 1, COLL_INT64, &s64);
  ck_assert(i64[0] == -3000000000000ll);
  uint64_t u64[1] = {UINT64_MAX}, su64 = 3;
  mem_host_scale(u64, u64, 1, COLL_UINT64, &su64);
  ck_assert(u64[0] == UINT64_MAX - 2);
  float f32[2] = {1.5f, -0.25f}, sf = 0.5f;
  mem_host_scale(f32, f32, 2, COLL_FLOAT32, &sf);
  ck_assert(f32[0] == 0.75f && f32[1] == -0.125f);
  double f64[1] = {0.1}, sd = 3.0;
  mem_host_scale(f64, f64, 1, COLL_FLOAT64, &sd);
  ck_assert(f64[0] == 0.1 * 3.0);
  uint16_t h[2] = {mem_float_to_half(3.0f), mem_float_to_half(65504.0f)};
  uint16_t sh = mem_float_to_half(0.25f);
  mem_host_scale(h, h, 2, COLL_FLOAT16, &sh);
  ck_assert(mem_half_to_float(h[0]) == 0.75f && mem_half_to_float(h[1]) == 16376.0f);
  uint16_t bf[1] = {mem_float_to_bf16(-6.0f)}, sbf = mem_float_to_bf16(1.5f);
  mem_host_scale(bf, bf, 1, COLL_BFLOAT16, &sbf);
  ck_assert(mem_bf16_to_float(bf[0]) == -9.0f);
  /* fp8: the scalar is one fp8 byte; 3 * 0.5 = 1.5, 448 * 2 saturates to 448 (e4m3);
   * e5m2 -1.25 * 0.75 = -0.9375 rounds (ties to even) to -1.0. */
  uint8_t e4[2] = {mem_double_to_fp8(3.0, COLL_FLOAT8E4M3), 0x7E}, s4 = 0x38 /* 1.0 */;
  uint8_t half4 = mem_double_to_fp8(0.5, COLL_FLOAT8E4M3),
          two4 = mem_double_to_fp8(2.0, COLL_FLOAT8E4M3);
  ck_assert(mem_fp8_to_float(s4, COLL_FLOAT8E4M3) == 1.0f);
  mem_host_scale(e4, e4, 1, COLL_FLOAT8E4M3, &half4);
  mem_host_scale(e4 + 1, e4 + 1, 1, COLL_FLOAT8E4M3, &two4);
  ck_assert(mem_fp8_to_float(e4[0], COLL_FLOAT8E4M3) == 1.5f && e4[1] == 0x7E);
  uint8_t e5[1] = {mem_double_to_fp8(-1.25, COLL_FLOAT8E5M2)},
          s5 = mem_double_to_fp8(0.75, COLL_FLOAT8E5M2);
  mem_host_scale(e5, e5, 1, COLL_FLOAT8E5M2, &s5);
  ck_assert(mem_fp8_to_float(e5[0], COLL_FLOAT8E5M2) == -1.0f);
  /* Source, destination and scalar at odd addresses: the same bits. */
  char raw[1 + 3 * sizeof(double) + 1 + sizeof(double)];
  double src[3] = {1.0, -2.5, 1e300}, want[3] = {2.0, -5.0, 2e300}, got[3], two = 2.0;
  memcpy(raw + 1, src, sizeof src);
  memcpy(raw + 2 + sizeof src, &two, sizeof two);
  mem_host_scale(raw + 1, raw + 1, 3, COLL_FLOAT64, raw + 2 + sizeof src);
  memcpy(got, raw + 1, sizeof got);
  ck_assert(memcmp(got, want, sizeof got) == 0);
}
END_TEST

/* mem_host_finish_avg on a buffer at every byte offset gives the aligned bits. */
START_TEST(finish_avg_gives_the_same_bits_at_every_misalignment) {
  coll_dtype_t t = (coll_dtype_t)_i;
  size_t sz = dtype_sizes[t], n = 257;
  static const int nranks[] = {2, 3, 7};
  char *src = malloc(n * sz), *want = malloc(n * sz), *buf = malloc(n * sz + 8);
  ck_assert(src && want && buf);
  fill(src, n, t, 31337);
  for (size_t ri = 0; ri < sizeof nranks / sizeof nranks[0]; ri++) {
    memcpy(want, src, n * sz);
    mem_host_finish_avg(want, n, t, nranks[ri]);
    for (size_t off = 1; off < 8; off++) {
      memcpy(buf + off, src, n * sz);
      mem_host_finish_avg(buf + off, n, t, nranks[ri]);
      if (memcmp(buf + off, want, n * sz) != 0)
        ck_abort_msg("dtype %d nranks %d at offset %zu: not the aligned bits", (int)t, nranks[ri],
                     off);
    }
  }
  free(src);
  free(want);
  free(buf);
}
END_TEST

/* Independent rounding reference: binary search of the (monotone) positive encodings
 * 0..max_bits for the nearest value, ties to the even encoding. */
static uint16_t nearest_encoding(float f, float (*to_float)(uint16_t), uint16_t inf_bits) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double v = fabs((double)f);
  uint16_t lo = 0, hi = inf_bits; /* to_float(lo) <= v < to_float(hi) once narrowed */
  if (v >= (double)to_float(inf_bits)) return (uint16_t)(sign | inf_bits);
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if ((double)to_float(mid) <= v)
      lo = mid;
    else
      hi = mid;
  }
  double dlo = v - (double)to_float(lo);
  double dhi;
  if (hi == inf_bits) {
    /* The value past the largest finite one, for the overflow tie: 2 * max - prev. */
    double top = 2.0 * (double)to_float(lo) - (double)to_float((uint16_t)(lo - 1));
    dhi = top - v;
  } else {
    dhi = (double)to_float(hi) - v;
  }
  uint16_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return (uint16_t)(sign | pick);
}

START_TEST(half_conversions_round_trip_every_encoding) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = mem_half_to_float((uint16_t)h);
    uint16_t back = mem_float_to_half(f);
    if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu)) {
      ck_assert_msg(isnan(f) && (back & 0x7C00u) == 0x7C00u && (back & 0x3FFu) &&
                        (back & 0x8000u) == (h & 0x8000u),
                    "half NaN 0x%04x must stay NaN", h);
    } else {
      ck_assert_msg(back == h, "half 0x%04x -> %g -> 0x%04x", h, (double)f, back);
    }
    float g = mem_bf16_to_float((uint16_t)h);
    uint16_t bback = mem_float_to_bf16(g);
    if (isnan(g))
      ck_assert(isnan(mem_bf16_to_float(bback)) && (bback & 0x8000u) == (h & 0x8000u));
    else
      ck_assert_msg(bback == h, "bf16 0x%04x -> %g -> 0x%04x", h, (double)g, bback);
  }
}
END_TEST

START_TEST(half_conversions_round_to_nearest_even) {
  ck_assert_uint_eq(mem_float_to_half(65504.0f), 0x7BFF);
  ck_assert_uint_eq(mem_float_to_half(65519.0f), 0x7BFF);
  ck_assert_uint_eq(mem_float_to_half(65520.0f), 0x7C00);
  ck_assert_uint_eq(mem_float_to_half(-1e9f), 0xFC00);
  ck_assert_uint_eq(mem_float_to_half(0x1p-24f), 0x0001);
  ck_assert_uint_eq(mem_float_to_half(0x1p-25f), 0x0000);
  ck_assert_uint_eq(mem_float_to_half(0x1.000002p-25f), 0x0001);
  ck_assert_uint_eq(mem_float_to_half(0x3p-25f), 0x0002);        /* tie 1.5 units -> 2 (even) */
  ck_assert_uint_eq(mem_float_to_half(1.0f + 0x1p-11f), 0x3C00); /* tie -> even */
  ck_assert_uint_eq(mem_float_to_half(1.0f + 0x3p-11f), 0x3C02);
  ck_assert_uint_eq(mem_float_to_half(-0.0f), 0x8000);
  ck_assert_uint_eq(mem_float_to_bf16(1.0f + 0x1p-8f), 0x3F80); /* tie -> even */
  ck_assert_uint_eq(mem_float_to_bf16(1.0f + 0x3p-8f), 0x3F82);
  ck_assert_uint_eq(mem_float_to_bf16(INFINITY), 0x7F80);
  ck_assert_uint_eq(mem_float_to_bf16(-INFINITY), 0xFF80);
  ck_assert(isnan(mem_bf16_to_float(mem_float_to_bf16(NAN))));
  ck_assert(isnan(mem_half_to_float(mem_float_to_half(-NAN))));
  ck_assert(isinf(mem_half_to_float(mem_float_to_half(INFINITY))));
  uint64_t s = 42;
  for (int i = 0; i < 200000; i++) {
    uint32_t bits = (uint32_t)(rng_next(&s) >> 32);
    /* Keep exponents near the half range so that subnormals and overflow show up. */
    bits = (bits & 0x807FFFFFu) | ((uint32_t)(100 + (bits >> 23) % 50) << 23);
    float f;
    memcpy(&f, &bits, sizeof f);
    ck_assert_msg(mem_float_to_half(f) == nearest_encoding(f, mem_half_to_float, 0x7C00),
                  "float %a to half", (double)f);
    uint32_t bbits = (uint32_t)(rng_next(&s) >> 32);
    if ((bbits & 0x7F800000u) == 0x7F800000u) continue;
    memcpy(&f, &bbits, sizeof f);
    ck_assert_msg(mem_float_to_bf16(f) == nearest_encoding(f, mem_bf16_to_float, 0x7F80),
                  "float %a to bf16", (double)f);
  }
}
END_TEST

/* The array conversions (F16C where the CPU has it) give the same bits as the portable
 * code: every half, and random floats of every class, at a length with a tail. */
START_TEST(array_conversions_match_the_portable_code_bit_for_bit) {
  size_t n = 65536 + 5;
  uint16_t *h = malloc(n * 2), *h1 = malloc(n * 2), *h2 = malloc(n * 2);
  float *f = malloc(n * 4), *f1 = malloc(n * 4), *f2 = malloc(n * 4);
  ck_assert(h && h1 && h2 && f && f1 && f2);
  for (size_t i = 0; i < n; i++) h[i] = (uint16_t)i;
  mem_half_to_float_n(f1, h, n);
  mem_half_to_float_n_portable(f2, h, n);
  ck_assert(memcmp(f1, f2, n * 4) == 0);
  mem_bf16_to_float_n(f1, h, n);
  for (size_t i = 0; i < n; i++) f2[i] = mem_bf16_to_float(h[i]);
  ck_assert(memcmp(f1, f2, n * 4) == 0);
  uint64_t s = 7;
  for (int round = 0; round < 6; round++) {
    for (size_t i = 0; i < n; i++) {
      uint32_t bits = (uint32_t)(rng_next(&s) >> 32);
      if (round % 2) /* exponents near the half range: subnormals, ties, overflow */
        bits = (bits & 0x807FFFFFu) | ((uint32_t)(98 + (bits >> 23) % 50) << 23);
      memcpy(&f[i], &bits, 4);
    }
    mem_float_to_half_n(h1, f, n);
    mem_float_to_half_n_portable(h2, f, n);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(h1[i] == h2[i], "float %a: 0x%04x vs portable 0x%04x", (double)f[i], h1[i],
                    h2[i]);
    mem_float_to_bf16_n(h1, f, n);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(h1[i] == mem_float_to_bf16(f[i]), "float %a to bf16", (double)f[i]);
  }
  free(h), free(h1), free(h2), free(f), free(f1), free(f2);
}
END_TEST

/* The array conversions read and write the 16-bit side at odd addresses (a float16
 * buffer inside a byte stream) with the bits they give on aligned arrays. */
START_TEST(array_conversions_give_the_same_bits_at_odd_addresses) {
  size_t n = 1000 + 5;
  uint16_t *h = malloc(n * 2), *hw = malloc(n * 2);
  float *f = malloc(n * 4), *fw = malloc(n * 4), *fg = malloc(n * 4);
  char *odd_buf = malloc(n * 2 + 1);
  ck_assert(h && hw && f && fw && fg && odd_buf);
  void *odd = odd_buf + 1;
  uint64_t s = 99;
  for (size_t i = 0; i < n; i++) {
    h[i] = (uint16_t)(rng_next(&s) >> 48);
    uint32_t bits = (uint32_t)(rng_next(&s) >> 32);
    memcpy(&f[i], &bits, 4);
  }
  memcpy(odd, h, n * 2);
  /* Each conversion on aligned arrays, then with its 16-bit side at the odd address. */
  static const struct {
    const char *what;
    void (*to_float)(float *restrict, const void *restrict, size_t);
    void (*from_float)(void *restrict, const float *restrict, size_t);
  } conversions[] = {
      {"half to float", mem_half_to_float_n, NULL},
      {"half to float (portable)", mem_half_to_float_n_portable, NULL},
      {"bf16 to float", mem_bf16_to_float_n, NULL},
      {"float to half", NULL, mem_float_to_half_n},
      {"float to half (portable)", NULL, mem_float_to_half_n_portable},
      {"float to bf16", NULL, mem_float_to_bf16_n},
  };
  for (size_t k = 0; k < sizeof conversions / sizeof conversions[0]; k++) {
    if (conversions[k].to_float != NULL) {
      conversions[k].to_float(fw, h, n);
      conversions[k].to_float(fg, odd, n);
      ck_assert_msg(memcmp(fg, fw, n * 4) == 0, "%s at an odd address", conversions[k].what);
    } else {
      conversions[k].from_float(hw, f, n);
      conversions[k].from_float(odd, f, n);
      ck_assert_msg(memcmp(odd, hw, n * 2) == 0, "%s at an odd address", conversions[k].what);
    }
  }
  free(h), free(hw), free(f), free(fw), free(fg), free(odd_buf);
}
END_TEST

SUITE_MAIN("mem",
           suite_loop_tests("host", 60, 0, COLL_DTYPE_COUNT *COLL_OP_COUNT,
                            reduction_matches_reference_for_every_dtype_and_op,
                            reductions_give_the_same_bits_at_every_misalignment),
           suite_tests("host", 60, reduce_table_rejects_unknown_dtype_and_op,
                       integer_sum_and_product_wrap_around,
                       float_min_max_propagate_nan_from_either_side, finish_avg_divides_every_type,
                       scale_multiplies_every_type_in_its_arithmetic),
           suite_loop_tests("host", 60, 0, COLL_DTYPE_COUNT,
                            finish_avg_gives_the_same_bits_at_every_misalignment),
           suite_tests("host", 60, half_conversions_round_trip_every_encoding,
                       half_conversions_round_to_nearest_even,
                       array_conversions_match_the_portable_code_bit_for_bit,
                       array_conversions_give_the_same_bits_at_odd_addresses))
