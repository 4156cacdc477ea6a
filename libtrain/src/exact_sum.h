/* An exact, order-independent sum of float rows (train --elastic --bit-identical): each
 * row is converted to 64-bit fixed point at a scale 2^e that every process derives from
 * the same two numbers (the largest |value| over all the rows of the sum, and how many
 * rows there are), so the sum is int64 addition, exact and associative: the same bits
 * whichever process adds which rows, grouped and ordered any way. The float rows are
 * rounded once, to the nearest multiple of 2^-e (values 2^35 times smaller than the
 * largest, at 8 rows, keep all 24 bits; much smaller ones lose bits or become 0), and the
 * sum is rounded once more, to the nearest float. */
#ifndef TRAIN_EXACT_SUM_H
#define TRAIN_EXACT_SUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *max_abs = the largest |x[i]| of n floats (0 for n = 0), or +Inf and false when one of
 * them is NaN or infinite: such a row has no fixed-point value. */
bool exact_sum_max_abs(const float *x, size_t n, float *max_abs);

/* The exponent e for a sum of `terms` rows (terms >= 1) whose values are all at most
 * max_abs (finite, >= 0) in magnitude: every value times 2^e rounds to an integer of at
 * most 2^(62 - ceil(log2 terms)), so any sum of up to `terms` of them, partial sums
 * included, stays within 2^62 (an int64 with a bit to spare). As large as that allows;
 * 0 when max_abs is 0. */
int exact_sum_exponent(float max_abs, size_t terms);

/* acc[i] += x[i] * 2^e rounded to the nearest integer (ties to even), for i < n. The
 * x[i] must be finite and within the max_abs that e was derived from. */
void exact_sum_add(const float *x, size_t n, int e, int64_t *acc);

/* out[i] = acc[i] * 2^-e as the nearest float (one rounding for results in float's
 * normal range), for i < n. A sum of zero is +0. */
void exact_sum_to_float(const int64_t *acc, size_t n, int e, float *out);

#endif
