// libcoll's fp8 conversions and reductions against NVIDIA's own host code: cuda_fp8.h's
// __nv_cvt_fp8_to_halfraw / __nv_cvt_halfraw_to_fp8 (__NV_SATFINITE) and cuda_fp16.h's
// __hadd, __hmul, __hlt, __hgt, __double2half, all __host__ __device__, compiled here by
// g++ for the CPU (no GPU, no CUDA runtime). Exhaustive: every fp8 byte, every binary16
// bit pattern, every pair of fp8 bytes for each op. Exit 0 when everything matches, 1 with
// the first mismatches printed otherwise.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// memops.h is C: its array conversions use C's restrict, which g++ spells __restrict__.
#define restrict __restrict__
extern "C" {
#include "mem/memops.h"
}
#undef restrict

namespace {

int failures;

void report(const char *check, const char *what, unsigned a, unsigned b, unsigned got,
            unsigned want) {
  if (++failures <= 20)
    std::printf("FAIL %s: %s a=0x%02x b=0x%02x: libcoll 0x%02x, NVIDIA 0x%02x\n", check, what, a, b,
                got, want);
}

struct format {
  const char *name;
  coll_dtype_t dtype;
  __nv_fp8_interpretation_t nv;
  uint16_t (*to_half)(uint8_t);
  uint8_t (*from_half)(uint16_t);
};

const format formats[] = {
    {"float8_e4m3", COLL_FLOAT8E4M3, __NV_E4M3, mem_fp8_e4m3_to_half, mem_half_to_fp8_e4m3},
    {"float8_e5m2", COLL_FLOAT8E5M2, __NV_E5M2, mem_fp8_e5m2_to_half, mem_half_to_fp8_e5m2},
};

__half nv_widen(uint8_t b, const format &f) {
  return __half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, f.nv));
}

uint8_t nv_narrow(__half h, const format &f) {
  return (uint8_t)__nv_cvt_halfraw_to_fp8(__half_raw(h), __NV_SATFINITE, f.nv);
}

uint16_t bits(__half h) { return __half_raw(h).x; }

// Every fp8 byte widens to NVIDIA's binary16 bits, and libcoll's float table holds the
// same value (NaN for NaN).
void every_fp8_byte_widens_like_nvidia(const format &f) {
  for (unsigned b = 0; b < 256; b++) {
    uint16_t want = bits(nv_widen((uint8_t)b, f));
    uint16_t got = f.to_half((uint8_t)b);
    if (got != want) report("every_fp8_byte_widens_like_nvidia", f.name, b, 0, got, want);
    float fw = __half2float(__ushort_as_half(want)), fg = mem_fp8_to_float((uint8_t)b, f.dtype);
    bool same = std::isnan(fw) ? std::isnan(fg) : std::memcmp(&fw, &fg, sizeof fw) == 0;
    if (!same) report("fp8_float_table_matches_nvidia", f.name, b, 0, (unsigned)fg, (unsigned)fw);
  }
}

// Every binary16 bit pattern narrows to NVIDIA's fp8 byte with __NV_SATFINITE (infinities
// and out-of-range values saturate, NaN becomes 0x7F).
void every_half_narrows_like_nvidia_satfinite(const format &f) {
  for (unsigned h = 0; h < 65536; h++) {
    uint8_t want = nv_narrow(__ushort_as_half((unsigned short)h), f);
    uint8_t got = f.from_half((uint16_t)h);
    if (got != want)
      report("every_half_narrows_like_nvidia_satfinite", f.name, h >> 8, h & 0xFF, got, want);
  }
}

// The reference of one pairwise step on binary16 operands. __hadd and __hmul are NVIDIA's
// host emulation of the half instructions: float(a) op float(b) rounded by
// __float2half. For two fp8 operands that is the exact result rounded once to binary16:
// a product of two 4-bit significands is exact in float, and a sum that float rounds has
// its smaller operand below binary16's rounding bit, where both roundings agree.
// Min/max: NVIDIA's half comparisons, with libcoll's rule that a NaN on either side wins
// (NCCL's __hmin/__hmax return the other operand; documented in coll.h).
__half ref_step(__half x, __half y, coll_op_t op) {
  switch (op) {
    case COLL_SUM:
    case COLL_AVG:
      return __hadd(x, y);
    case COLL_PROD:
      return __hmul(x, y);
    case COLL_MIN:
      return (__hlt(x, y) || __hisnan(x)) ? x : y;
    default:
      return (__hgt(x, y) || __hisnan(x)) ? x : y;
  }
}

// All 65536 pairs of fp8 bytes through libcoll's host reduction of (format, op), and the
// same once more in place (dst == a).
void every_pair_reduces_like_nvidia_half_arithmetic(const format &f) {
  std::vector<uint8_t> a(65536), b(65536), out(65536), want(65536);
  for (unsigned i = 0; i < 65536; i++) {
    a[i] = (uint8_t)(i >> 8);
    b[i] = (uint8_t)i;
  }
  const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_AVG};
  for (coll_op_t op : ops) {
    mem_reduce_fn fn = mem_host_reduce_fn(f.dtype, op);
    if (fn == nullptr) {
      report("every_pair_reduces_like_nvidia_half_arithmetic", "no reduction", op, 0, 0, 0);
      continue;
    }
    for (unsigned i = 0; i < 65536; i++)
      want[i] = nv_narrow(ref_step(nv_widen(a[i], f), nv_widen(b[i], f), op), f);
    fn(out.data(), a.data(), b.data(), out.size());
    std::vector<uint8_t> inplace = a;
    fn(inplace.data(), inplace.data(), b.data(), inplace.size());
    char what[64];
    std::snprintf(what, sizeof what, "%s %s", f.name, coll_op_name(op));
    for (unsigned i = 0; i < 65536; i++) {
      if (out[i] != want[i])
        report("every_pair_reduces_like_nvidia_half_arithmetic", what, a[i], b[i], out[i], want[i]);
      if (inplace[i] != want[i])
        report("in_place_reduction_matches", what, a[i], b[i], inplace[i], want[i]);
    }
  }
}

// premul_sum's scaling: every value times every scalar, in binary16, narrowed.
void every_value_times_every_scalar_like_nvidia(const format &f) {
  std::vector<uint8_t> v(256), out(256);
  for (unsigned i = 0; i < 256; i++) v[i] = (uint8_t)i;
  for (unsigned s = 0; s < 256; s++) {
    uint8_t scalar = (uint8_t)s;
    mem_host_scale(out.data(), v.data(), 256, f.dtype, &scalar);
    for (unsigned i = 0; i < 256; i++) {
      uint8_t want = nv_narrow(__hmul(nv_widen(v[i], f), nv_widen(scalar, f)), f);
      if (out[i] != want)
        report("every_value_times_every_scalar_like_nvidia", f.name, i, s, out[i], want);
    }
  }
}

// AVG's division: every value over 2..16 ranks, the exact quotient rounded once to
// binary16 (__double2half), then narrowed.
void every_value_averages_like_nvidia(const format &f) {
  for (int n = 2; n <= 16; n++) {
    std::vector<uint8_t> buf(256);
    for (unsigned i = 0; i < 256; i++) buf[i] = (uint8_t)i;
    mem_host_finish_avg(buf.data(), buf.size(), f.dtype, n);
    for (unsigned i = 0; i < 256; i++) {
      double q = (double)__half2float(nv_widen((uint8_t)i, f)) / n;
      uint8_t want = nv_narrow(__double2half(q), f);
      if (buf[i] != want)
        report("every_value_averages_like_nvidia", f.name, i, (unsigned)n, buf[i], want);
    }
  }
}

// libcoll's double -> binary16 rounding (the middle step) against __double2half: every
// binary16 value, the midpoints between neighbours and points just either side of them.
void double_to_half_rounds_like_nvidia() {
  for (unsigned h = 0; h < 0x7C00; h++) {
    double lo = (double)__half2float(__ushort_as_half((unsigned short)h));
    double hi = (double)__half2float(__ushort_as_half((unsigned short)(h + 1)));
    double mid = (lo + hi) / 2;
    const double probes[] = {lo,  mid,  std::nextafter(mid, 0.0), std::nextafter(mid, 1e9),
                             -lo, -mid, -std::nextafter(mid, 1e9)};
    for (double d : probes) {
      uint16_t want = bits(__double2half(d)), got = mem_double_to_half(d);
      if (got != want)
        report("double_to_half_rounds_like_nvidia", "binary16", h >> 8, h & 0xFF, got, want);
    }
  }
  const double edges[] = {
      65504.0, 65519.99,  65520.0, 1e300, INFINITY, -INFINITY, NAN, 0x1p-25, 0x1.0000000000001p-25,
      0x1p-26, 0x1p-1074, -0.0};
  for (double d : edges) {
    uint16_t want = bits(__double2half(d)), got = mem_double_to_half(d);
    bool same = std::isnan(d) ? (got & 0x7FFF) > 0x7C00 : got == want;
    if (!same) report("double_to_half_rounds_like_nvidia", "edge", 0, 0, got, want);
  }
}

}  // namespace

int main() {
  for (const format &f : formats) {
    every_fp8_byte_widens_like_nvidia(f);
    every_half_narrows_like_nvidia_satfinite(f);
    every_pair_reduces_like_nvidia_half_arithmetic(f);
    every_value_times_every_scalar_like_nvidia(f);
    every_value_averages_like_nvidia(f);
  }
  double_to_half_rounds_like_nvidia();
  // The saturation facts the rest relies on, spelled out (cuda_fp8.hpp, host code).
  const format &e4 = formats[0], &e5 = formats[1];
  if (nv_narrow(__ushort_as_half(0x7C00), e4) != 0x7E ||
      nv_narrow(__ushort_as_half(0xFC00), e5) != 0xFB ||
      nv_narrow(__ushort_as_half(0x7E00), e5) != 0x7F)
    report("nvidia_satfinite_facts", "Inf -> max, NaN -> 0x7F", 0, 0, 0, 0);
  std::printf("%s: %d mismatches\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
