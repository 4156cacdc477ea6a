/* float16 (IEEE binary16) and bfloat16 <-> float32 conversions, one element and whole
 * arrays (see half_inline.h for the rounding rules). On x86-64 CPUs with AVX2 the float16
 * array conversions use the F16C instructions (vcvtph2ps / vcvtps2ph), chosen at run
 * time, and the bfloat16 ones the same loops compiled for AVX2: the build itself stays
 * baseline x86-64. All paths give the same bits. The 16-bit arrays may sit at any
 * address (user buffers): the typed loops run when they are 2-byte aligned, otherwise
 * loops that move each element with memcpy (half_load / half_store). */
#include <stdbool.h>
#include <stdint.h>

#include "mem/half_inline.h"
#include "mem/memops.h"

static bool u16_aligned(const void *p) { return ((uintptr_t)p & (_Alignof(uint16_t) - 1)) == 0; }

/* The array loops for a 16-bit side at any address: element i is bytes 2i and 2i + 1. */
static void half_to_float_any(float *restrict dst, const unsigned char *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = half_to_float_inline(half_load(src + 2 * i));
}

static void float_to_half_any(unsigned char *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) half_store(dst + 2 * i, float_to_half_inline(src[i]));
}

static void bf16_to_float_any(float *restrict dst, const unsigned char *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float_inline(half_load(src + 2 * i));
}

static void float_to_bf16_any(unsigned char *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) half_store(dst + 2 * i, float_to_bf16_inline(src[i]));
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HALF_HAVE_F16C_PATH 1
#include <immintrin.h>

/* F16C is checked through AVX2: every x86-64 CPU with AVX2 also has F16C (Intel since
 * Ivy Bridge, AMD since Piledriver, both earlier than their AVX2), and
 * __builtin_cpu_supports("avx2") is a cheap read that also covers OS support for the
 * YMM registers (clang 14 does not know the "f16c" feature string). */
static int use_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* The 16-bit side at any alignment: loadu/storeu take any address, the tail goes through
 * half_load / half_store. */
__attribute__((target("avx,f16c"))) static void half_to_float_f16c(
    float *restrict dst, const unsigned char *restrict src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
  for (; i < n; i++) dst[i] = half_to_float_inline(half_load(src + 2 * i));
}

__attribute__((target("avx,f16c"))) static void float_to_half_f16c(unsigned char *restrict dst,
                                                                   const float *restrict src,
                                                                   size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + 2 * i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) half_store(dst + 2 * i, float_to_half_inline(src[i]));
}

/* bfloat16 has no conversion instruction before AVX-512 BF16: the portable loops,
 * compiled for AVX2 (twice the vector width of the baseline build). */
__attribute__((target("avx2"))) static void bf16_to_float_avx2(float *restrict dst,
                                                               const uint16_t *restrict src,
                                                               size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float_inline(src[i]);
}

__attribute__((target("avx2"))) static void float_to_bf16_avx2(uint16_t *restrict dst,
                                                               const float *restrict src,
                                                               size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16_inline(src[i]);
}
#endif

float mem_half_to_float(uint16_t h) { return half_to_float_inline(h); }
uint16_t mem_float_to_half(float f) { return float_to_half_inline(f); }
float mem_bf16_to_float(uint16_t h) { return bf16_to_float_inline(h); }
uint16_t mem_float_to_bf16(float f) { return float_to_bf16_inline(f); }

void mem_half_to_float_n(float *restrict dst, const void *restrict src, size_t n) {
#ifdef HALF_HAVE_F16C_PATH
  if (use_avx2()) {
    half_to_float_f16c(dst, src, n);
    return;
  }
#endif
  mem_half_to_float_n_portable(dst, src, n);
}

void mem_float_to_half_n(void *restrict dst, const float *restrict src, size_t n) {
#ifdef HALF_HAVE_F16C_PATH
  if (use_avx2()) {
    float_to_half_f16c(dst, src, n);
    return;
  }
#endif
  mem_float_to_half_n_portable(dst, src, n);
}

/* Portable array versions, also used by the tests to check the F16C path bit for bit. */
void mem_half_to_float_n_portable(float *restrict dst, const void *restrict src, size_t n) {
  if (!u16_aligned(src)) {
    half_to_float_any(dst, src, n);
    return;
  }
  const uint16_t *s = src;
  for (size_t i = 0; i < n; i++) dst[i] = half_to_float_inline(s[i]);
}

void mem_float_to_half_n_portable(void *restrict dst, const float *restrict src, size_t n) {
  if (!u16_aligned(dst)) {
    float_to_half_any(dst, src, n);
    return;
  }
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i++) d[i] = float_to_half_inline(src[i]);
}

void mem_bf16_to_float_n(float *restrict dst, const void *restrict src, size_t n) {
  if (!u16_aligned(src)) {
    bf16_to_float_any(dst, src, n);
    return;
  }
  const uint16_t *s = src;
#ifdef HALF_HAVE_F16C_PATH
  if (use_avx2()) {
    bf16_to_float_avx2(dst, s, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float_inline(s[i]);
}

void mem_float_to_bf16_n(void *restrict dst, const float *restrict src, size_t n) {
  if (!u16_aligned(dst)) {
    float_to_bf16_any(dst, src, n);
    return;
  }
  uint16_t *d = dst;
#ifdef HALF_HAVE_F16C_PATH
  if (use_avx2()) {
    float_to_bf16_avx2(d, src, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) d[i] = float_to_bf16_inline(src[i]);
}
