/* Host memory operations on buffers of any alignment: the element-wise reduction of each
 * (dtype, op) and AVG's final division (host_reduce.c), premul_sum's scaling
 * (host_scale.c), float16 / bfloat16 <-> float32 conversions of one value or an array
 * (half.c) and the fp8 conversions (fp8.c). Device buffers: mem_cuda.h. */
#ifndef COLL_MEM_MEMOPS_H
#define COLL_MEM_MEMOPS_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* dst[i] = a[i] OP b[i] for i < count. dst may alias a or b (exactly, not partially).
 * Any alignment of each pointer (aligned ones take the vectorised loops, host_reduce.c).
 * For COLL_AVG the function sums; mem_host_finish_avg() divides at the end. */
typedef void (*mem_reduce_fn)(void *dst, const void *a, const void *b, size_t count);

/* The host reduction for (dtype, op); NULL if either is out of range or the op does not
 * apply to the type (a bitwise op on a float type). */
mem_reduce_fn mem_host_reduce_fn(coll_dtype_t dtype, coll_op_t op);

/* buf[i] /= nranks (integers: truncating division), used once after an AVG sum; buf at
 * any alignment. */
void mem_host_finish_avg(void *buf, size_t count, coll_dtype_t dtype, int nranks);

/* dst[i] = src[i] * *scalar (one element of dtype at any address) for i < count, in
 * dtype's arithmetic (host_scale.c): integers wrap, float16/bfloat16 multiply in
 * float32, fp8 in float16 (the scalar one fp8 byte; see fp8_inline.h). dst may alias src
 * exactly; any alignment. premul_sum's input step. */
void mem_host_scale(void *dst, const void *src, size_t count, coll_dtype_t dtype,
                    const void *scalar);

/* float16 / bfloat16 <-> float32 conversions (round to nearest even), for tests and the
 * trainer. */
float mem_half_to_float(uint16_t h);
uint16_t mem_float_to_half(float f);
float mem_bf16_to_float(uint16_t h);
uint16_t mem_float_to_bf16(float f);
/* The same on arrays (vectorised): dst[i] = convert(src[i]) for i < n, no aliasing. The
 * 16-bit side is void *: n 16-bit elements at any address (not necessarily 2-byte
 * aligned, so never passed as uint16_t *); the float side is an aligned float array. */
void mem_half_to_float_n(float *restrict dst, const void *restrict src, size_t n);
void mem_float_to_half_n(void *restrict dst, const float *restrict src, size_t n);
void mem_bf16_to_float_n(float *restrict dst, const void *restrict src, size_t n);
void mem_float_to_bf16_n(void *restrict dst, const float *restrict src, size_t n);
/* The float16 array conversions without CPU-specific instructions (the ones above may use
 * F16C); same results, exported so that tests can compare the two. */
void mem_half_to_float_n_portable(float *restrict dst, const void *restrict src, size_t n);
void mem_float_to_half_n_portable(void *restrict dst, const float *restrict src, size_t n);

/* fp8 (COLL_FLOAT8E4M3 / COLL_FLOAT8E5M2) conversions, fp8_inline.h's rules: fp8 ->
 * float16 bits exact (NaN -> 0x7FFF), float16 bits -> fp8 to nearest even saturating
 * (NaN -> 0x7F), double -> float16 bits to nearest even (overflow to Inf). */
uint16_t mem_fp8_e4m3_to_half(uint8_t b);
uint16_t mem_fp8_e5m2_to_half(uint8_t b);
uint8_t mem_half_to_fp8_e4m3(uint16_t h);
uint8_t mem_half_to_fp8_e5m2(uint16_t h);
uint16_t mem_double_to_half(double d);
/* The value of fp8 byte b of dtype (exact), and d rounded to float16 and then to fp8 of
 * dtype (the two roundings of an fp8 reduction step). */
float mem_fp8_to_float(uint8_t b, coll_dtype_t dtype);
uint8_t mem_double_to_fp8(double d, coll_dtype_t dtype);

#endif
