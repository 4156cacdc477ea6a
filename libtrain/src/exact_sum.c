/* The fixed-point conversions of an exact, order-independent sum of float rows
 * (exact_sum.h says what each promises). The loops are written so that the compiler
 * vectorises them for any x86-64 (SSE2): integer maxima of the magnitudes' bits, and
 * the double-to-int64 rounding by adding 1.5 * 2^52. */
#include "exact_sum.h"

#include <math.h>
#include <string.h>

/* Every scaled value is below 2^50 in magnitude, so it converts by the 2^52 trick
 * (exact below 2^51), and EXACT_SUM_MAX_TERMS (2^12) of them sum to at most 2^62. */
enum { VALUE_BITS = 50 };
_Static_assert(EXACT_SUM_MAX_TERMS <= 4096, "2^50 x terms must stay within 2^62");

bool exact_sum_max_abs(const float *x, size_t n, float *max_abs) {
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

void exact_sum_add(const float *restrict x, size_t n, int e, bool first, int64_t *restrict acc) {
  /* e lies in [-78, 198] (max_abs from 2^-149 to FLT_MAX): 2^e is a double, and x * 2^e
   * is exact in double (24 bits scaled by a power of two) and below 2^50. Adding 1.5 *
   * 2^52 lands in [2^52, 2^53), where doubles are the integers: the addition rounds to
   * the nearest (even) integer, and the low bits of the sum are that integer plus the
   * bits of 1.5 * 2^52. */
  const double scale = ldexp(1.0, e), shift = 0x1.8p52;
  int64_t shift_bits;
  memcpy(&shift_bits, &shift, sizeof shift_bits);
  if (first) {
    for (size_t i = 0; i < n; i++) {
      double y = (double)x[i] * scale + shift;
      int64_t bits;
      memcpy(&bits, &y, sizeof bits);
      acc[i] = bits - shift_bits;
    }
    return;
  }
  for (size_t i = 0; i < n; i++) {
    double y = (double)x[i] * scale + shift;
    int64_t bits;
    memcpy(&bits, &y, sizeof bits);
    acc[i] += bits - shift_bits;
  }
}

void exact_sum_to_float(const int64_t *acc, size_t n, int e, float *out) {
  /* int64 to float rounds once (to nearest); the power of two is then exact in double,
   * and so is the narrowing unless the result leaves float's normal range. */
  double scale = ldexp(1.0, -e);
  for (size_t i = 0; i < n; i++) out[i] = (float)((double)(float)acc[i] * scale);
}
