/* Input patterns whose all-reduce result is exactly computable, and the check that counts
 * wrong elements (allreduce_bench -c 1). */
#ifndef BENCH_DATA_H
#define BENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fill `count` elements of `dtype` with rank `rank`'s input for `op` over `nranks` ranks.
 * Element i's value depends only on (i, rank, nranks, dtype, op, seed), so a prefix of a
 * larger fill is the fill of the smaller size. Values are small non-negative integers:
 * exact in every type, and chosen so that no partial sum or product leaves the range
 * where the type is exact (int8: 127, half: 2048, bfloat16: 256). */
void bench_data_fill(void *buf, size_t count, int dtype, int op, int rank, int nranks,
                     uint64_t seed);

/* 1 when op takes dtype (the bitwise ops: integer types only), else 0. */
int bench_op_applies(int dtype, int op);

/* Number of elements of `result` (count elements) that differ from the all-reduce of the
 * inputs bench_data_fill gives every rank. Exact comparison, except avg on floating
 * types: a library may multiply by 1/n, so a relative error of about 2 ulps is allowed. */
size_t bench_data_check(const void *result, size_t count, int dtype, int op, int nranks,
                        uint64_t seed);

/* The expected result for element i (as a double; exact for every type). */
double bench_data_expected(size_t i, int dtype, int op, int nranks, uint64_t seed);

/* Read and write one element of any coll_dtype_t as a double (round to nearest even). */
double bench_data_get(const void *buf, size_t i, int dtype);
void bench_data_set(void *buf, size_t i, int dtype, double value);

/* IEEE binary16 and bfloat16 conversions, round to nearest even. */
float bench_half_to_float(uint16_t h);
uint16_t bench_float_to_half(float f);
float bench_bf16_to_float(uint16_t b);
uint16_t bench_float_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
