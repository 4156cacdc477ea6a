/* float8 e4m3 and e5m2 (OCP FP8, NVIDIA's __nv_fp8_e4m3 / __nv_fp8_e5m2) as inline
 * functions, and the one pairwise step every fp8 reduction takes. The rule is NCCL's:
 * both operands widened to binary16, the op done in binary16 (the exact result rounded to
 * nearest even, overflow to Inf), the binary16 result narrowed to fp8 with round to
 * nearest even and saturation (cuda_fp8.h's __NV_SATFINITE: finite values beyond the
 * largest and both infinities become +-448 (e4m3) or +-57344 (e5m2); NaN becomes the
 * canonical NaN 0x7F, sign dropped, as NVIDIA's host conversion does).
 * e4m3: bias 7, no Inf, NaN = S.1111.111, largest 448. e5m2: bias 15, IEEE-like (0x7C Inf,
 * 0x7D-0x7F NaN), largest 57344. Everything is integer code except the double op: no
 * dependence on the FPU rounding mode. */
#ifndef COLL_MEM_FP8_INLINE_H
#define COLL_MEM_FP8_INLINE_H

#include <stdint.h>
#include <string.h>

/* fp8 -> float: exact, one table per format (fp8.c). NaN is a quiet float NaN. */
extern const float mem_fp8_e4m3_float[256];
extern const float mem_fp8_e5m2_float[256];

/* fp8 -> binary16 bits, exact; NaN -> 0x7FFF (what __nv_cvt_fp8_to_halfraw gives on the
 * host). e5m2 is binary16 with the low byte dropped. e4m3's subnormals (m * 2^-9) are
 * binary16 normals: the mantissa is shifted up to its leading one. */
static inline uint16_t fp8_e5m2_to_half(uint8_t b) {
  uint16_t h = (uint16_t)(b << 8);
  return (h & 0x7FFFu) > 0x7C00u ? 0x7FFFu : h;
}

static inline uint16_t fp8_e4m3_to_half(uint8_t b) {
  uint32_t sign = (uint32_t)(b & 0x80u) << 8;
  uint32_t e = (b >> 3) & 0xFu, m = b & 7u;
  uint32_t normal = ((e + 8u) << 10) | (m << 7);
  /* m = 1: 2^-9; m = 2, 3: 2^-8 (1 + (m - 2) / 2); m = 4..7: 2^-7 (1 + (m - 4) / 4). */
  uint32_t sub = m >= 4u   ? (8u << 10) | ((m - 4u) << 8)
                 : m >= 2u ? (7u << 10) | ((m - 2u) << 9)
                 : m == 1u ? (6u << 10)
                           : 0u;
  uint32_t h = (b & 0x7Fu) == 0x7Fu ? 0x7FFFu : sign | (e == 0 ? sub : normal);
  return (uint16_t)h;
}

/* binary16 bits -> fp8, round to nearest even, saturating (see the top of the file). */
static inline uint8_t half_to_fp8_e5m2(uint16_t h) {
  uint32_t a = h & 0x7FFFu;
  /* Same exponent bias: keep the top 2 mantissa bits, rounded to nearest even. The carry
   * may bump the exponent; half subnormals (m * 2^-24) round to e5m2's (k * 2^-16) by the
   * same formula. Inf and everything above 57344's rounding range clamp to 0x7B. */
  uint32_t r = (a + 0x7Fu + ((a >> 8) & 1u)) >> 8;
  r = r > 0x7Bu ? 0x7Bu : r;
  return (uint8_t)(a > 0x7C00u ? 0x7Fu : ((h >> 8) & 0x80u) | r);
}

static inline uint8_t half_to_fp8_e4m3(uint16_t h) {
  uint32_t a = h & 0x7FFFu;
  /* 2^-6 (0x2400) and up: e4m3 normals, 3 mantissa bits kept, exponent rebiased 15 -> 7. */
  uint32_t normal = ((a + 0x3Fu + ((a >> 7) & 1u)) >> 7) - (8u << 3);
  normal = normal > 0x7Eu ? 0x7Eu : normal;
  /* Below: a count of 2^-9 (e4m3 subnormals, 8 counts being 2^-6, the smallest normal:
   * its encoding 0x08 is that count). The half's significand, shifted right by s with
   * round to nearest even; s = 16 - e for half exponent field e (15 for subnormals). */
  uint32_t e = a >> 10;
  uint32_t sig = (a & 0x3FFu) | (e ? 0x400u : 0u);
  uint32_t s = 16u - (e ? e : 1u); /* e <= 8 here, so 8 <= s <= 15 */
  uint32_t q = sig >> (s & 15u), rem = sig & ((1u << (s & 15u)) - 1u),
           half = 1u << ((s - 1u) & 15u);
  uint32_t sub = q + (rem > half || (rem == half && (q & 1u)));
  uint32_t r = a < 0x2400u ? sub : normal;
  return (uint8_t)(a > 0x7C00u ? 0x7Fu : ((h >> 8) & 0x80u) | r);
}

/* double -> binary16 bits, round to nearest even once, overflow to Inf; NaN -> 0x7E00. */
static inline uint16_t fp8_double_to_half(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  uint32_t sign = (uint32_t)(u >> 48) & 0x8000u;
  uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  /* 2^-14 and up: 10 of 52 mantissa bits kept, exponent rebiased 1023 -> 15. */
  uint64_t normal = ((a + 0x1FFFFFFFFFFull + ((a >> 42) & 1u)) >> 42) - (1008ull << 10);
  /* Below: a count of 2^-24 (binary16 subnormals), the significand shifted right by
   * s = 1051 - exponent, at least 43 here; from 54 on everything rounds to 0. */
  uint64_t e = a >> 52;
  uint64_t sig = (a & 0xFFFFFFFFFFFFFull) | (e ? 1ull << 52 : 0u);
  uint64_t s = 1051u - (e < 1008u ? (e > 997u ? e : 997u) : 1008u); /* 43 .. 54 */
  uint64_t q = sig >> s, rem = sig & ((1ull << s) - 1u), half = 1ull << (s - 1u);
  uint64_t sub = q + (rem > half || (rem == half && (q & 1u)));
  uint64_t r = a > 0x7FF0000000000000ull    ? 0x7E00u
               : a >= 0x40EFFE0000000000ull ? 0x7C00u /* 65520 and up, Inf */
               : a < 0x3F10000000000000ull  ? sub
                                            : normal;
  return (uint16_t)(sign | (uint32_t)r);
}

/* The pairwise step of an fp8 reduction on already widened operands x and y: the op in
 * double (exact for one sum or product of two fp8 values), rounded to binary16, narrowed.
 * Min and max compare in binary16 (the same order as in double) and a NaN on either side
 * wins, as libcoll's other float types do (NCCL's __hmin/__hmax would return the other
 * operand). */
enum { FP8_SUM, FP8_PROD, FP8_MIN, FP8_MAX };

static inline double fp8_op(double x, double y, int op) {
  return op == FP8_SUM    ? x + y
         : op == FP8_PROD ? x * y
         : op == FP8_MIN  ? ((x < y || x != x) ? x : y)
                          : ((x > y || x != x) ? x : y);
}

static inline uint8_t fp8_e4m3_step(uint8_t a, uint8_t b, int op) {
  double r = fp8_op(mem_fp8_e4m3_float[a], mem_fp8_e4m3_float[b], op);
  return half_to_fp8_e4m3(fp8_double_to_half(r));
}

static inline uint8_t fp8_e5m2_step(uint8_t a, uint8_t b, int op) {
  double r = fp8_op(mem_fp8_e5m2_float[a], mem_fp8_e5m2_float[b], op);
  return half_to_fp8_e5m2(fp8_double_to_half(r));
}

#endif
