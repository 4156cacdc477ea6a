/* float16 (IEEE binary16) and bfloat16 <-> float32 conversions, one element and whole
 * arrays (see half_inline.h for the rounding rules). */
#include "mem/half_inline.h"
#include "mem/memops.h"

float mem_half_to_float(uint16_t h) { return half_to_float_inline(h); }
uint16_t mem_float_to_half(float f) { return float_to_half_inline(f); }
float mem_bf16_to_float(uint16_t h) { return bf16_to_float_inline(h); }
uint16_t mem_float_to_bf16(float f) { return float_to_bf16_inline(f); }

void mem_half_to_float_n(float *restrict dst, const uint16_t *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = half_to_float_inline(src[i]);
}

void mem_float_to_half_n(uint16_t *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = float_to_half_inline(src[i]);
}

void mem_bf16_to_float_n(float *restrict dst, const uint16_t *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float_inline(src[i]);
}

void mem_float_to_bf16_n(uint16_t *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16_inline(src[i]);
}
