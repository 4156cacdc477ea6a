/* Test values of the GPU programs: small integers, exact in every dtype (float16 and
 * bfloat16 included), so a reduction's result does not depend on its order and can be
 * compared with ==; the expected result of a reduction over n ranks; checks that print
 * the first wrong element. */
#ifndef TESTS_GPU_GPU_VALUES_H
#define TESTS_GPU_GPU_VALUES_H

#include <stdbool.h>
#include <stddef.h>

#include "bench_data.h" /* bench_data_set / bench_data_get: element i of a typed buffer */
#include "coll.h"

/* Whether op takes t (the bitwise ops: integer types only). */
bool gpu_op_applies(coll_dtype_t t, coll_op_t op);
/* Rank r's element i for a reduction with op (PROD: 1 or 2; bitwise ops: every byte
 * value, -128..127 signed, times 65537 in the 4- and 8-byte types; else -4..4, 0..8
 * unsigned). */
double gpu_value(int r, size_t i, coll_dtype_t t, coll_op_t op);
/* Element i of the reduction of every rank's gpu_value over n ranks (AVG: C's truncating
 * division for integers). */
double gpu_expected(int n, size_t i, coll_dtype_t t, coll_op_t op);
/* 0 when host[k] == gpu_expected(n, first + k) for k < count, else 1 after printing the
 * first wrong element. */
int gpu_check(int rank, int n, const void *host, size_t first, size_t count, coll_dtype_t t,
              coll_op_t op, const char *what);

#endif
