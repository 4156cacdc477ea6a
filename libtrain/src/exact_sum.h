/* An exact, order-independent sum of float rows (train --elastic --bit-identical): each
 * row is converted to 64-bit fixed point at a scale 2^e that every process derives from
 * the same number, the largest |value| over all the rows of the sum, so the sum is int64
 * addition, exact and associative: the same bits whichever process adds which rows,
 * grouped and ordered any way. The largest value becomes an integer just below 2^50 (50
 * bits rather than the 62 - log2(rows) an int64 could hold: below 2^51 the conversion
 * is one vectorised addition on any x86-64, and 2^12 rows still cannot overflow). The
 * float rows are rounded once, to the nearest multiple of 2^-e: values down to 2^-26 of
 * the largest keep all 24 bits, smaller ones lose low bits, and those below 2^-51 of it
 * become 0; the sum is rounded once more, to the nearest float. */
#ifndef TRAIN_EXACT_SUM_H
#define TRAIN_EXACT_SUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *max_abs = the largest |x[i]| of n floats (0 for n = 0), or +Inf and false when one of
 * them is NaN or infinite: such a row has no fixed-point value. */
bool exact_sum_max_abs(const float *x, size_t n, float *max_abs);

/* At most this many rows in one sum (partial sums included). */
#define EXACT_SUM_MAX_TERMS 4096

/* The exponent e for a sum whose values are all at most max_abs (finite, >= 0) in
 * magnitude: every value times 2^e rounds to an integer of at most 2^50, and the
 * largest to one of at least 2^49, so any sum of up to EXACT_SUM_MAX_TERMS of them, in
 * any grouping, stays within 2^62. 0 when max_abs is 0. */
int exact_sum_exponent(float max_abs);

/* acc[i] = the sum over rows j < nrows of rows[j * stride + i] * 2^e, each rounded to
 * the nearest integer (ties to even), for i < n (0 when nrows is 0). The values must be
 * finite and within the max_abs that e was derived from, and nrows at most
 * EXACT_SUM_MAX_TERMS. */
void exact_sum_rows(const float *rows, size_t nrows, size_t stride, size_t n, int e, int64_t *acc);

/* out[i] = acc[i] * 2^-e as the nearest float (one rounding for results in float's
 * normal range), for i < n. A sum of zero is +0. */
void exact_sum_to_float(const int64_t *acc, size_t n, int e, float *out);

#endif
