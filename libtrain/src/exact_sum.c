/* The fixed-point conversions of an exact, order-independent sum of float rows
 * (exact_sum.h says what each promises). The loops are written so that the compiler
 * vectorises them for any x86-64 (SSE2): integer maxima of the magnitudes' bits, and
 * the double-to-int64 rounding by adding 1.5 * 2^52. */
#include "exact_sum.h"

#include <math.h>
#include <string.h>

/* Clones for AVX-512 and AVX2, picked at load time (as backend_cpu.c's optimizer steps):
 * the magnitude maximum runs 7 times faster in 512-bit vectors than in the baseline
 * build's 128-bit ones. Integer maxima and exactly rounded additions give the same bits
 * in every clone. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef WIDE_CLONES
#define WIDE_CLONES
#endif

/* Every scaled value is below 2^50 in magnitude, so it converts by the 2^52 trick
 * (exact below 2^51), and EXACT_SUM_MAX_TERMS (2^12) of them sum to at most 2^62. */
enum { VALUE_BITS = 50 };
_Static_assert(EXACT_SUM_MAX_TERMS <= 4096, "2^50 x terms must stay within 2^62");

WIDE_CLONES bool exact_sum_max_abs(const float *x, size_t n, float *max_abs) {
  /* A float's magnitude bits (sign cleared) order like its magnitude, and +Inf (0x7f800000)
   * and every NaN (above it) above every finite value. */
  uint32_t largest = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    u &= 0x7fffffffu;
    largest = u > largest ? u : largest;
  }
  if (largest >= 0x7f800000u) {
    *max_abs = INFINITY;
    return false;
  }
  memcpy(max_abs, &largest, sizeof largest);
  return true;
}

int exact_sum_exponent(float max_abs) {
  if (!(max_abs > 0.0f)) return 0;
  int top;
  frexpf(max_abs, &top); /* max_abs < 2^top, so |x| * 2^e < 2^VALUE_BITS */
  return VALUE_BITS - top;
}

/* acc[i] (+)= x[i] * 2^e rounded, for i < n. e lies in [-78, 198] (max_abs from 2^-149
 * to FLT_MAX): 2^e is a double, and x * 2^e is exact in double (24 bits scaled by a power
 * of two) and below 2^50. Adding 1.5 * 2^52 lands in [2^52, 2^53), where doubles are the
 * integers: the addition rounds to the nearest (even) integer, and the low bits of the
 * sum are that integer plus the bits of 1.5 * 2^52. */
static inline void convert(const float *restrict x, size_t n, double scale, bool first,
                           int64_t *restrict acc) {
  const double shift = 0x1.8p52;
  int64_t shift_bits;
  memcpy(&shift_bits, &shift, sizeof shift_bits);
  for (size_t i = 0; i < n; i++) {
    double y = (double)x[i] * scale + shift;
    int64_t bits;
    memcpy(&bits, &y, sizeof bits);
    acc[i] = (first ? 0 : acc[i]) + (bits - shift_bits);
  }
}

WIDE_CLONES void exact_sum_rows(const float *rows, size_t nrows, size_t stride, size_t n, int e,
                                int64_t *restrict acc) {
  if (nrows == 0) {
    memset(acc, 0, n * sizeof *acc);
    return;
  }
  /* In blocks of 2048 values (16 KiB of sums, which stay in the L1 cache while every row
   * adds to them): each row is read once and the sums written once, where a pass per row
   * would read and write all the sums again for each row. */
  enum { BLOCK = 2048 };
  const double scale = ldexp(1.0, e);
  for (size_t lo = 0; lo < n; lo += BLOCK) {
    size_t len = n - lo < BLOCK ? n - lo : BLOCK;
    for (size_t j = 0; j < nrows; j++)
      convert(rows + j * stride + lo, len, scale, j == 0, acc + lo);
  }
}

void exact_sum_to_float(const int64_t *acc, size_t n, int e, float *out) {
  /* int64 to float rounds once (to nearest); the power of two is then exact in double,
   * and so is the narrowing unless the result leaves float's normal range. */
  double scale = ldexp(1.0, -e);
  for (size_t i = 0; i < n; i++) out[i] = (float)((double)(float)acc[i] * scale);
}
