/* Host reductions dst = a OP b for every dtype and op (the bitwise ops on integers only),
 * as simple loops the compiler vectorises (this module is built at -O3, see meson.build),
 * and the AVG division.
 * Buffers may have any alignment: each function first checks its pointers against the
 * element type's _Alignof; all aligned, it runs the typed loops, otherwise a loop that
 * moves each element through a local with memcpy (one unaligned load or store each, no
 * undefined behaviour: a misaligned pointer is never even converted to a typed one).
 * float16/bfloat16 reductions leave their 16-bit side to half.c, which does the same; fp8
 * ones are bytes, widened through a table and rounded by fp8_inline.h. */
#include <stdint.h>
#include <string.h>

#include "mem/fp8_inline.h"
#include "mem/half_inline.h"
#include "mem/memops.h"

/* Whether every address in `bits` (pointers or'ed together as integers) suits T. */
#define ALIGNED_FOR(T, bits) (((bits) & (_Alignof(T) - 1)) == 0)

/* Element-wise expressions on x (from a) and y (from b). Integer sum and product go
 * through the unsigned type so that overflow wraps instead of being undefined. Float min
 * and max propagate NaN from either side. */
#define EXPR_ISUM(T, U) (T)((U)x + (U)y)
#define EXPR_IPROD(T, U) (T)((U)x * (U)y)
#define EXPR_MIN(T, U) (x < y ? x : y)
#define EXPR_MAX(T, U) (x > y ? x : y)
#define EXPR_BAND(T, U) (T)((U)x & (U)y)
#define EXPR_BOR(T, U) (T)((U)x | (U)y)
#define EXPR_BXOR(T, U) (T)((U)x ^ (U)y)
#define EXPR_FSUM(T, U) (x + y)
#define EXPR_FPROD(T, U) (x * y)
#define EXPR_FMIN(T, U) ((x < y || x != x) ? x : y)
#define EXPR_FMAX(T, U) ((x > y || x != x) ? x : y)

/* One reduction as three loops: distinct buffers, dst == a, dst == b. Each loop's
 * pointers are then truly non-aliasing (restrict is honest) and vectorise without
 * runtime overlap checks; the operand order x = a, y = b is kept in all three. The
 * all-equal case (x OP x) takes the plain loop. Misaligned buffers take the _any loop,
 * without restrict: it reads element i of a and b before it writes element i of dst, so
 * every exact aliasing is fine there too. */
#define DEFINE_REDUCE(NAME, T, U, EXPR)                                                       \
  static void NAME##_any(unsigned char *d, const unsigned char *a, const unsigned char *b,    \
                         size_t n) {                                                          \
    for (size_t i = 0; i < n; i++) {                                                          \
      T x, y, r;                                                                              \
      memcpy(&x, a + i * sizeof x, sizeof x);                                                 \
      memcpy(&y, b + i * sizeof y, sizeof y);                                                 \
      r = EXPR(T, U);                                                                         \
      memcpy(d + i * sizeof r, &r, sizeof r);                                                 \
    }                                                                                         \
  }                                                                                           \
  static void NAME##_abd(T *restrict d, const T *restrict a, const T *restrict b, size_t n) { \
    for (size_t i = 0; i < n; i++) {                                                          \
      T x = a[i], y = b[i];                                                                   \
      d[i] = EXPR(T, U);                                                                      \
    }                                                                                         \
  }                                                                                           \
  static void NAME##_da(T *restrict d, const T *restrict b, size_t n) {                       \
    for (size_t i = 0; i < n; i++) {                                                          \
      T x = d[i], y = b[i];                                                                   \
      d[i] = EXPR(T, U);                                                                      \
    }                                                                                         \
  }                                                                                           \
  static void NAME##_db(T *restrict d, const T *restrict a, size_t n) {                       \
    for (size_t i = 0; i < n; i++) {                                                          \
      T x = a[i], y = d[i];                                                                   \
      d[i] = EXPR(T, U);                                                                      \
    }                                                                                         \
  }                                                                                           \
  static void NAME##_same(T *d, size_t n) {                                                   \
    for (size_t i = 0; i < n; i++) {                                                          \
      T x = d[i], y = d[i];                                                                   \
      d[i] = EXPR(T, U);                                                                      \
    }                                                                                         \
  }                                                                                           \
  static void NAME(void *dst, const void *a, const void *b, size_t n) {                       \
    if (!ALIGNED_FOR(T, (uintptr_t)dst | (uintptr_t)a | (uintptr_t)b)) {                      \
      NAME##_any(dst, a, b, n);                                                               \
      return;                                                                                 \
    }                                                                                         \
    if (dst == a && dst == b)                                                                 \
      NAME##_same((T *)dst, n);                                                               \
    else if (dst == a)                                                                        \
      NAME##_da((T *)dst, (const T *)b, n);                                                   \
    else if (dst == b)                                                                        \
      NAME##_db((T *)dst, (const T *)a, n);                                                   \
    else                                                                                      \
      NAME##_abd((T *)dst, (const T *)a, (const T *)b, n);                                    \
  }

#define DEFINE_INT_OPS(NAME, T, U)             \
  DEFINE_REDUCE(NAME##_sum, T, U, EXPR_ISUM)   \
  DEFINE_REDUCE(NAME##_prod, T, U, EXPR_IPROD) \
  DEFINE_REDUCE(NAME##_min, T, U, EXPR_MIN)    \
  DEFINE_REDUCE(NAME##_max, T, U, EXPR_MAX)    \
  DEFINE_REDUCE(NAME##_band, T, U, EXPR_BAND)  \
  DEFINE_REDUCE(NAME##_bor, T, U, EXPR_BOR)    \
  DEFINE_REDUCE(NAME##_bxor, T, U, EXPR_BXOR)

#define DEFINE_FLOAT_OPS(NAME, T)              \
  DEFINE_REDUCE(NAME##_sum, T, T, EXPR_FSUM)   \
  DEFINE_REDUCE(NAME##_prod, T, T, EXPR_FPROD) \
  DEFINE_REDUCE(NAME##_min, T, T, EXPR_FMIN)   \
  DEFINE_REDUCE(NAME##_max, T, T, EXPR_FMAX)

DEFINE_INT_OPS(i8, int8_t, uint8_t)
DEFINE_INT_OPS(u8, uint8_t, uint8_t)
DEFINE_INT_OPS(i32, int32_t, uint32_t)
DEFINE_INT_OPS(u32, uint32_t, uint32_t)
DEFINE_INT_OPS(i64, int64_t, uint64_t)
DEFINE_INT_OPS(u64, uint64_t, uint64_t)
DEFINE_FLOAT_OPS(f32, float)
DEFINE_FLOAT_OPS(f64, double)

/* float16 / bfloat16: widen a block of each operand to float32, reduce with the float32
 * loop, round back. Blocks stay in L1 and keep the float32 loop vectorised. dst may alias
 * a or b exactly: each block is fully read before it is written. The 16-bit side is
 * addressed in bytes: the array conversions (half.c) take it at any alignment. */
enum { HALF_BLOCK = 256 };

#define DEFINE_HALF_OPS(NAME, TO_FLOAT_N, FROM_FLOAT_N)                              \
  static void NAME##_apply(void *dst, const void *a, const void *b, size_t n,        \
                           void (*op)(void *, const void *, const void *, size_t)) { \
    const unsigned char *pa = a, *pb = b;                                            \
    unsigned char *pd = dst;                                                         \
    float fa[HALF_BLOCK], fb[HALF_BLOCK];                                            \
    for (size_t base = 0; base < n; base += HALF_BLOCK) {                            \
      size_t len = n - base < HALF_BLOCK ? n - base : HALF_BLOCK;                    \
      TO_FLOAT_N(fa, pa + base * 2, len);                                            \
      TO_FLOAT_N(fb, pb + base * 2, len);                                            \
      op(fa, fa, fb, len);                                                           \
      FROM_FLOAT_N(pd + base * 2, fa, len);                                          \
    }                                                                                \
  }                                                                                  \
  static void NAME##_sum(void *d, const void *a, const void *b, size_t n) {          \
    NAME##_apply(d, a, b, n, f32_sum);                                               \
  }                                                                                  \
  static void NAME##_prod(void *d, const void *a, const void *b, size_t n) {         \
    NAME##_apply(d, a, b, n, f32_prod);                                              \
  }                                                                                  \
  static void NAME##_min(void *d, const void *a, const void *b, size_t n) {          \
    NAME##_apply(d, a, b, n, f32_min);                                               \
  }                                                                                  \
  static void NAME##_max(void *d, const void *a, const void *b, size_t n) {          \
    NAME##_apply(d, a, b, n, f32_max);                                               \
  }

DEFINE_HALF_OPS(f16, mem_half_to_float_n, mem_float_to_half_n)
DEFINE_HALF_OPS(bf16, mem_bf16_to_float_n, mem_float_to_bf16_n)

/* fp8: fp8_inline.h's pairwise step (float16 arithmetic, saturating narrowing), a block
 * at a time like float16: widen both operands through the exact fp8 -> float table, run
 * the float32 loop, round to float16 (F16C where there is one), narrow. float32 gives the
 * step's result: a product of two fp8 values and min/max are exact in it, and a sum that
 * float32 rounds has its smaller operand far below float16's rounding bit, where the
 * larger (at most 4 significant bits) has only zeros, so both round it alike (and
 * test_fp8_ref checks all 65536 pairs of each format and op against NVIDIA's code). dst
 * may alias a or b exactly: each block is read before it is written. Every (format, op)
 * is its own function: cuda_ipc maps a function back to its (dtype, op). */
#define DEFINE_FP8_OPS(NAME, TABLE, NARROW)                                          \
  static void NAME##_apply(void *dst, const void *a, const void *b, size_t n,        \
                           void (*op)(void *, const void *, const void *, size_t)) { \
    const unsigned char *pa = a, *pb = b;                                            \
    unsigned char *pd = dst;                                                         \
    float fa[HALF_BLOCK], fb[HALF_BLOCK];                                            \
    uint16_t h[HALF_BLOCK];                                                          \
    for (size_t base = 0; base < n; base += HALF_BLOCK) {                            \
      size_t len = n - base < HALF_BLOCK ? n - base : HALF_BLOCK;                    \
      for (size_t i = 0; i < len; i++) {                                             \
        fa[i] = TABLE[pa[base + i]];                                                 \
        fb[i] = TABLE[pb[base + i]];                                                 \
      }                                                                              \
      op(fa, fa, fb, len);                                                           \
      mem_float_to_half_n(h, fa, len);                                               \
      for (size_t i = 0; i < len; i++) pd[base + i] = NARROW(h[i]);                  \
    }                                                                                \
  }                                                                                  \
  static void NAME##_sum(void *d, const void *a, const void *b, size_t n) {          \
    NAME##_apply(d, a, b, n, f32_sum);                                               \
  }                                                                                  \
  static void NAME##_prod(void *d, const void *a, const void *b, size_t n) {         \
    NAME##_apply(d, a, b, n, f32_prod);                                              \
  }                                                                                  \
  static void NAME##_min(void *d, const void *a, const void *b, size_t n) {          \
    NAME##_apply(d, a, b, n, f32_min);                                               \
  }                                                                                  \
  static void NAME##_max(void *d, const void *a, const void *b, size_t n) {          \
    NAME##_apply(d, a, b, n, f32_max);                                               \
  }

DEFINE_FP8_OPS(e4m3, mem_fp8_e4m3_float, half_to_fp8_e4m3)
DEFINE_FP8_OPS(e5m2, mem_fp8_e5m2_float, half_to_fp8_e5m2)

/* AVG sums here; the division happens once at the end (mem_host_finish_avg). The bitwise
 * ops exist for the integer types only: a float row leaves them NULL. */
#define FLOAT_ROW(NAME)                                                        \
  [COLL_SUM] = NAME##_sum, [COLL_PROD] = NAME##_prod, [COLL_MIN] = NAME##_min, \
  [COLL_MAX] = NAME##_max, [COLL_AVG] = NAME##_sum
#define INT_ROW(NAME) \
  FLOAT_ROW(NAME), [COLL_BAND] = NAME##_band, [COLL_BOR] = NAME##_bor, [COLL_BXOR] = NAME##_bxor

static const mem_reduce_fn reduce_table[COLL_DTYPE_COUNT][COLL_OP_COUNT] = {
    [COLL_INT8] = {INT_ROW(i8)},           [COLL_UINT8] = {INT_ROW(u8)},
    [COLL_INT32] = {INT_ROW(i32)},         [COLL_UINT32] = {INT_ROW(u32)},
    [COLL_INT64] = {INT_ROW(i64)},         [COLL_UINT64] = {INT_ROW(u64)},
    [COLL_FLOAT16] = {FLOAT_ROW(f16)},     [COLL_BFLOAT16] = {FLOAT_ROW(bf16)},
    [COLL_FLOAT32] = {FLOAT_ROW(f32)},     [COLL_FLOAT64] = {FLOAT_ROW(f64)},
    [COLL_FLOAT8E4M3] = {FLOAT_ROW(e4m3)}, [COLL_FLOAT8E5M2] = {FLOAT_ROW(e5m2)},
};

mem_reduce_fn mem_host_reduce_fn(coll_dtype_t dtype, coll_op_t op) {
  if ((unsigned)dtype >= COLL_DTYPE_COUNT || (unsigned)op >= COLL_OP_COUNT) return NULL;
  return reduce_table[dtype][op];
}

/* Integer AVG truncates toward zero (C division); floats divide exactly rounded rather
 * than multiply by a reciprocal, so an average of equal values is that value. T is the
 * element type, D the type divided in, DIV the new value of v (an element) given d. */
#define DEFINE_DIVIDE(NAME, T, D, DIV)                    \
  static void NAME(void *buf, size_t count, int nranks) { \
    const D d = (D)nranks;                                \
    if (ALIGNED_FOR(T, (uintptr_t)buf)) {                 \
      T *p = buf;                                         \
      for (size_t i = 0; i < count; i++) {                \
        T v = p[i];                                       \
        p[i] = DIV;                                       \
      }                                                   \
    } else {                                              \
      unsigned char *p = buf;                             \
      for (size_t i = 0; i < count; i++) {                \
        T v;                                              \
        memcpy(&v, p + i * sizeof v, sizeof v);           \
        v = DIV;                                          \
        memcpy(p + i * sizeof v, &v, sizeof v);           \
      }                                                   \
    }                                                     \
  }

#define DIV_PLAIN(T) (T)(v / d)
DEFINE_DIVIDE(divide_i8, int8_t, int8_t, DIV_PLAIN(int8_t))
DEFINE_DIVIDE(divide_u8, uint8_t, uint8_t, DIV_PLAIN(uint8_t))
DEFINE_DIVIDE(divide_i32, int32_t, int32_t, DIV_PLAIN(int32_t))
DEFINE_DIVIDE(divide_u32, uint32_t, uint32_t, DIV_PLAIN(uint32_t))
DEFINE_DIVIDE(divide_i64, int64_t, int64_t, DIV_PLAIN(int64_t))
DEFINE_DIVIDE(divide_u64, uint64_t, uint64_t, DIV_PLAIN(uint64_t))
DEFINE_DIVIDE(divide_f32, float, float, DIV_PLAIN(float))
DEFINE_DIVIDE(divide_f64, double, double, DIV_PLAIN(double))
DEFINE_DIVIDE(divide_f16, uint16_t, float, float_to_half_inline(half_to_float_inline(v) / d))
DEFINE_DIVIDE(divide_bf16, uint16_t, float, float_to_bf16_inline(bf16_to_float_inline(v) / d))
/* fp8: the exact quotient rounded once to float16 (double's 53 bits leave no double
 * rounding for a 4-bit significand over an int), then to fp8, saturating. */
DEFINE_DIVIDE(divide_e4m3, uint8_t, double,
              half_to_fp8_e4m3(fp8_double_to_half(mem_fp8_e4m3_float[v] / d)))
DEFINE_DIVIDE(divide_e5m2, uint8_t, double,
              half_to_fp8_e5m2(fp8_double_to_half(mem_fp8_e5m2_float[v] / d)))

void mem_host_finish_avg(void *buf, size_t count, coll_dtype_t dtype, int nranks) {
  if (nranks <= 1 || buf == NULL) return;
  switch (dtype) {
    case COLL_INT8:
      divide_i8(buf, count, nranks);
      break;
    case COLL_UINT8:
      divide_u8(buf, count, nranks);
      break;
    case COLL_INT32:
      divide_i32(buf, count, nranks);
      break;
    case COLL_UINT32:
      divide_u32(buf, count, nranks);
      break;
    case COLL_INT64:
      divide_i64(buf, count, nranks);
      break;
    case COLL_UINT64:
      divide_u64(buf, count, nranks);
      break;
    case COLL_FLOAT16:
      divide_f16(buf, count, nranks);
      break;
    case COLL_BFLOAT16:
      divide_bf16(buf, count, nranks);
      break;
    case COLL_FLOAT32:
      divide_f32(buf, count, nranks);
      break;
    case COLL_FLOAT64:
      divide_f64(buf, count, nranks);
      break;
    case COLL_FLOAT8E4M3:
      divide_e4m3(buf, count, nranks);
      break;
    case COLL_FLOAT8E5M2:
      divide_e5m2(buf, count, nranks);
      break;
    default:
      break;
  }
}
