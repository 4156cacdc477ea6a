/* dst = src * scalar on host memory for every dtype: the first step of a premul_sum call
 * (its input scaled, then summed). Any alignment (elements move through locals with
 * memcpy); integers multiply through their unsigned twin so that overflow wraps, as SUM's
 * and PROD's do; float16 / bfloat16 multiply in float32 and round once; fp8 takes an fp8
 * scalar and multiplies as a PROD step does (float16 product, saturating narrowing). */
#include <string.h>

#include "mem/fp8_inline.h"
#include "mem/half_inline.h"
#include "mem/memops.h"

#define DEFINE_SCALE(NAME, T, U)                                                                 \
  static void NAME(unsigned char *dst, const unsigned char *src, size_t n, const void *scalar) { \
    T s;                                                                                         \
    memcpy(&s, scalar, sizeof s);                                                                \
    for (size_t i = 0; i < n; i++) {                                                             \
      T v;                                                                                       \
      memcpy(&v, src + i * sizeof v, sizeof v);                                                  \
      v = (T)((U)v * (U)s);                                                                      \
      memcpy(dst + i * sizeof v, &v, sizeof v);                                                  \
    }                                                                                            \
  }

DEFINE_SCALE(scale_i8, int8_t, uint8_t)
DEFINE_SCALE(scale_u8, uint8_t, uint8_t)
DEFINE_SCALE(scale_i32, int32_t, uint32_t)
DEFINE_SCALE(scale_u32, uint32_t, uint32_t)
DEFINE_SCALE(scale_i64, int64_t, uint64_t)
DEFINE_SCALE(scale_u64, uint64_t, uint64_t)
DEFINE_SCALE(scale_f32, float, float)
DEFINE_SCALE(scale_f64, double, double)

#define DEFINE_SCALE_HALF(NAME, TO_FLOAT, FROM_FLOAT)                                            \
  static void NAME(unsigned char *dst, const unsigned char *src, size_t n, const void *scalar) { \
    float s = TO_FLOAT(half_load(scalar));                                                       \
    for (size_t i = 0; i < n; i++)                                                               \
      half_store(dst + i * 2, FROM_FLOAT(TO_FLOAT(half_load(src + i * 2)) * s));                 \
  }

DEFINE_SCALE_HALF(scale_f16, half_to_float_inline, float_to_half_inline)
DEFINE_SCALE_HALF(scale_bf16, bf16_to_float_inline, float_to_bf16_inline)

#define DEFINE_SCALE_FP8(NAME, STEP)                                                             \
  static void NAME(unsigned char *dst, const unsigned char *src, size_t n, const void *scalar) { \
    uint8_t s = *(const uint8_t *)scalar;                                                        \
    for (size_t i = 0; i < n; i++) dst[i] = STEP(src[i], s, FP8_PROD);                           \
  }

DEFINE_SCALE_FP8(scale_e4m3, fp8_e4m3_step)
DEFINE_SCALE_FP8(scale_e5m2, fp8_e5m2_step)

void mem_host_scale(void *dst, const void *src, size_t count, coll_dtype_t dtype,
                    const void *scalar) {
  switch (dtype) {
    case COLL_INT8:
      scale_i8(dst, src, count, scalar);
      break;
    case COLL_UINT8:
      scale_u8(dst, src, count, scalar);
      break;
    case COLL_INT32:
      scale_i32(dst, src, count, scalar);
      break;
    case COLL_UINT32:
      scale_u32(dst, src, count, scalar);
      break;
    case COLL_INT64:
      scale_i64(dst, src, count, scalar);
      break;
    case COLL_UINT64:
      scale_u64(dst, src, count, scalar);
      break;
    case COLL_FLOAT16:
      scale_f16(dst, src, count, scalar);
      break;
    case COLL_BFLOAT16:
      scale_bf16(dst, src, count, scalar);
      break;
    case COLL_FLOAT32:
      scale_f32(dst, src, count, scalar);
      break;
    case COLL_FLOAT64:
      scale_f64(dst, src, count, scalar);
      break;
    case COLL_FLOAT8E4M3:
      scale_e4m3(dst, src, count, scalar);
      break;
    case COLL_FLOAT8E5M2:
      scale_e5m2(dst, src, count, scalar);
      break;
    default:
      break;
  }
}
