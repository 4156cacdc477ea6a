/* The fixed-point conversions of an exact, order-independent sum of float rows
 * (exact_sum.h says what each promises). */
#include "exact_sum.h"

#include <float.h>
#include <math.h>

bool exact_sum_max_abs(const float *x, size_t n, float *max_abs) {
  float largest = 0.0f;
  bool finite = true;
  for (size_t i = 0; i < n; i++) {
    float a = fabsf(x[i]);
    finite &= a <= FLT_MAX; /* false for NaN and +-Inf */
    largest = a > largest ? a : largest;
  }
  *max_abs = finite ? largest : INFINITY;
  return finite;
}

int exact_sum_exponent(float max_abs, size_t terms) {
  if (!(max_abs > 0.0f)) return 0;
  int count_bits = 0; /* ceil(log2(terms)) */
  while (count_bits < 62 && ((size_t)1 << count_bits) < terms) count_bits++;
  int top;
  frexpf(max_abs, &top); /* max_abs < 2^top */
  /* |x| * 2^e < 2^(62 - count_bits), so it rounds to at most that; terms of them to at
   * most 2^62. */
  return 62 - count_bits - top;
}

void exact_sum_add(const float *x, size_t n, int e, int64_t *acc) {
  /* e lies in [-78, 210] (max_abs from 2^-149 to FLT_MAX): 2^e is a double, and x * 2^e
   * is exact in double (24 bits scaled by a power of two, below 2^62). rint rounds in the
   * current mode, to nearest even unless the program changed it. */
  double scale = ldexp(1.0, e);
  for (size_t i = 0; i < n; i++) acc[i] += (int64_t)rint((double)x[i] * scale);
}

void exact_sum_to_float(const int64_t *acc, size_t n, int e, float *out) {
  /* int64 to float rounds once (to nearest); the power of two is then exact in double,
   * and so is the narrowing unless the result leaves float's normal range. */
  double scale = ldexp(1.0, -e);
  for (size_t i = 0; i < n; i++) out[i] = (float)((double)(float)acc[i] * scale);
}
