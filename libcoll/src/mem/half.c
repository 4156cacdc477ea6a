/* float16 (IEEE binary16) and bfloat16 <-> float32 conversions by bit manipulation, so
 * they behave the same on every x86-64 and compiler: round to nearest even, Inf and NaN
 * preserved (NaN stays NaN, quieted, with the top payload bits kept). */
#include <stdint.h>
#include <string.h>

#include "mem/memops.h"

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float mem_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    /* Zero or subnormal: mant * 2^-24 is exact in float32. */
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7F800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t mem_float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu)); /* NaN */
    return (uint16_t)(sign | 0x7C00u);                                                /* Inf */
  }
  /* 65520 is halfway between 65504 (largest half) and 65536: ties to even go up. */
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);
  if (a < 0x38800000u) {
    /* Below the smallest normal half (2^-14): a subnormal in units of 2^-24. 2^-25 and
     * below round to zero (2^-25 itself is a tie and zero is even). */
    if (a <= 0x33000000u) return sign;
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - (a >> 23); /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q); /* q == 0x400 is the smallest normal: still right */
  }
  uint32_t h = (a >> 13) - (112u << 10);
  uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry bumps the exponent */
  return (uint16_t)(sign | h);
}

float mem_bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

uint16_t mem_float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
