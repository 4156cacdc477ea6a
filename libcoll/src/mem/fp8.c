/* float8 e4m3 / e5m2: the fp8 -> float tables (built by the compiler from the formats'
 * definitions) and the conversions of fp8_inline.h as functions, for the tests and the
 * reduction rows of host_reduce.c / host_scale.c. */
#include <math.h>
#include <stdint.h>

#include "mem/fp8_inline.h"
#include "mem/memops.h"

/* The value of byte b as a constant expression. e4m3: 0x7F / 0xFF NaN, exponent field 0
 * subnormal (m * 2^-9), else (8 + m) * 2^(e - 10). e5m2: exponent field 31 Inf or NaN,
 * 0 subnormal (m * 2^-16), else (4 + m) * 2^(e - 17). */
#define FP8_SIGN(b) (((b)&0x80) ? -1.0 : 1.0)
#define E4M3_E(b) (((b) >> 3) & 15)
#define E4M3_M(b) ((b)&7)
#define E4M3(b)                                         \
  (((b)&0x7F) == 0x7F ? (double)NAN                     \
   : E4M3_E(b) == 0   ? FP8_SIGN(b) * E4M3_M(b) / 512.0 \
                      : FP8_SIGN(b) * (8 + E4M3_M(b)) * (double)(1u << E4M3_E(b)) / 1024.0)
#define E5M2_E(b) (((b) >> 2) & 31)
#define E5M2_M(b) ((b)&3)
#define E5M2(b)                                                                  \
  (E5M2_E(b) == 31  ? (E5M2_M(b) ? (double)NAN : FP8_SIGN(b) * (double)INFINITY) \
   : E5M2_E(b) == 0 ? FP8_SIGN(b) * E5M2_M(b) / 65536.0                          \
                    : FP8_SIGN(b) * (4 + E5M2_M(b)) * (double)(1u << E5M2_E(b)) / 131072.0)

#define T4(F, b) F(b), F((b) + 1), F((b) + 2), F((b) + 3)
#define T16(F, b) T4(F, b), T4(F, (b) + 4), T4(F, (b) + 8), T4(F, (b) + 12)
#define T64(F, b) T16(F, b), T16(F, (b) + 16), T16(F, (b) + 32), T16(F, (b) + 48)
#define T256(F) T64(F, 0), T64(F, 64), T64(F, 128), T64(F, 192)

const float mem_fp8_e4m3_float[256] = {T256(E4M3)};
const float mem_fp8_e5m2_float[256] = {T256(E5M2)};

uint16_t mem_fp8_e4m3_to_half(uint8_t b) { return fp8_e4m3_to_half(b); }
uint16_t mem_fp8_e5m2_to_half(uint8_t b) { return fp8_e5m2_to_half(b); }
uint8_t mem_half_to_fp8_e4m3(uint16_t h) { return half_to_fp8_e4m3(h); }
uint8_t mem_half_to_fp8_e5m2(uint16_t h) { return half_to_fp8_e5m2(h); }
uint16_t mem_double_to_half(double d) { return fp8_double_to_half(d); }

float mem_fp8_to_float(uint8_t b, coll_dtype_t dtype) {
  return dtype == COLL_FLOAT8E5M2 ? mem_fp8_e5m2_float[b] : mem_fp8_e4m3_float[b];
}

uint8_t mem_double_to_fp8(double d, coll_dtype_t dtype) {
  uint16_t h = fp8_double_to_half(d);
  return dtype == COLL_FLOAT8E5M2 ? half_to_fp8_e5m2(h) : half_to_fp8_e4m3(h);
}
