/* float16 / bfloat16 <-> float32 conversions as branch-free inline functions (selects on
 * integers, no table), so that loops over arrays of them vectorise. Round to nearest
 * even; Inf preserved; NaN stays NaN (quieted, sign and top payload bits kept). The
 * subnormal float16 path relies on the default rounding mode (round to nearest). And a
 * 16-bit element read and written at any address, for buffers of any alignment. */
#ifndef COLL_MEM_HALF_INLINE_H
#define COLL_MEM_HALF_INLINE_H

#include <stdint.h>
#include <string.h>

static inline uint32_t half_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float half_bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The element at p, which need not be 2-byte aligned (memcpy: one unaligned load). */
static inline uint16_t half_load(const void *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return h;
}

static inline void half_store(void *p, uint16_t h) { memcpy(p, &h, sizeof h); }

static inline float half_to_float_inline(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
  /* Inf; NaN quieted (payload kept), as vcvtph2ps does. */
  uint32_t special = 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0u);
  uint32_t sub = half_float_bits((float)mant * 0x1p-24f); /* zero, subnormal: exact */
  uint32_t bits = exp == 0 ? sub : exp == 31 ? special : normal;
  return half_bits_float(sign | bits);
}

static inline uint16_t float_to_half_inline(float f) {
  uint32_t u = half_float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7FFFFFFFu;
  /* Normal range: adding 0xFFF plus the kept lowest bit, then truncating the 13 dropped
   * bits, rounds to nearest even; the carry may bump the exponent, as it should. */
  uint32_t normal = ((a + 0xFFFu + ((a >> 13) & 1u)) >> 13) - (112u << 10);
  /* Below 2^-14: adding 0.5f makes the FPU round |f| to a multiple of 2^-24 (the ulp of
   * 0.5), which is then the subnormal's mantissa. */
  uint32_t sub = half_float_bits(half_bits_float(a) + 0.5f) - 0x3F000000u;
  uint32_t nan = 0x7E00u | ((a >> 13) & 0x3FFu);
  uint32_t h = a > 0x7F800000u    ? nan
               : a >= 0x477FF000u ? 0x7C00u /* 65520 and up, Inf: ties to even go up */
               : a < 0x38800000u  ? sub
                                  : normal;
  return (uint16_t)(sign | h);
}

static inline float bf16_to_float_inline(uint16_t h) { return half_bits_float((uint32_t)h << 16); }

static inline uint16_t float_to_bf16_inline(float f) {
  uint32_t u = half_float_bits(f);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

#endif
