/* Verifiable all-reduce inputs. Idea (our own, in the spirit of nccl-tests' "verifiable"
 * data): every value is a small integer, so sums, minima, maxima, averages and products of
 * powers of two are exact in every type and independent of the reduction order.
 *
 *   sum/avg/min/max: v(r, i) = b(i) + J + s(r) * j(i, r/2)
 *       b(i) in [0, m), j in [0, J], s(r) = +1 for even r, -1 for odd r, 0 for the
 *       unpaired last rank of an odd count. The jitters of a pair cancel, so
 *       sum = n (b + J) and avg = b + J exactly, while min and max still differ per rank.
 *   prod:            v(r, i) = 2 if r < k and bit r of h(i) is set, else 1;
 *       product = 2^popcount(h(i) mod 2^k), with k small enough to stay exact.
 *   band/bor/bxor (integer types): random bits e(r, i) within the type's exact range,
 *       combined with a common b(i) so that many ranks neither clear nor set every bit:
 *       band v = b | e, bor v = b & e, bxor v = e; the expected value folds the ranks. */
#include "bench_data.h"

#include <math.h>
#include <string.h>

#include "coll.h"

/* Largest integer each type holds exactly (capped: bigger values add nothing). */
static double exact_limit(int dtype) {
  switch (dtype) {
  case COLL_INT8: return 127.0;
  case COLL_UINT8: return 255.0;
  case COLL_FLOAT16: return 2048.0;
  case COLL_BFLOAT16: return 256.0;
  case COLL_FLOAT8E4M3: return 16.0;
  case COLL_FLOAT8E5M2: return 8.0;
  default: return 65536.0;
  }
}

struct pattern {
  uint64_t m; /* base values in [0, m) */
  uint64_t jitter; /* J */
  int prod_ranks; /* k */
};

static struct pattern pattern_for(int dtype, int op, int nranks) {
  struct pattern p = {.m = 1, .jitter = 0, .prod_ranks = 0};
  double limit = exact_limit(dtype);
  if (op == COLL_PROD) {
    int k = 0;
    while (k < nranks && ldexp(1.0, k + 1) <= limit && k < 16) k++;
    p.prod_ranks = k;
    return p;
  }
  /* min/max never add values; sum and avg add n of them. */
  uint64_t per_rank = (uint64_t)((op == COLL_MIN || op == COLL_MAX) ? limit : limit / nranks);
  if (per_rank >= 10) {
    p.jitter = 4;
    p.m = per_rank - 7 < 64 ? per_rank - 7 : 64;
  } else {
    p.jitter = 0;
    p.m = per_rank + 1;
  }
  return p;
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t base_of(size_t i, uint64_t seed, const struct pattern *p) {
  return mix((uint64_t)i ^ (seed * 0x100000001b3ull)) % p->m;
}

static uint64_t jitter_of(size_t i, int pair, uint64_t seed, const struct pattern *p) {
  if (p->jitter == 0) return 0;
  return mix(((uint64_t)i << 20) ^ ((uint64_t)pair + 1) ^ (seed << 44)) % (p->jitter + 1);
}

static int is_bitwise(int op) { return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR; }

int bench_op_applies(int dtype, int op) {
  return !is_bitwise(op) || dtype < COLL_FLOAT16; /* the integer types come first */
}

static uint64_t bits_of(size_t i, int rank, int dtype, int op, uint64_t seed) {
  uint64_t mask = (uint64_t)exact_limit(dtype); /* 127, 255 or 65535: all ones */
  if (mask == 65536) mask = 65535;
  uint64_t b = mix((uint64_t)i ^ (seed * 0x100000001b3ull)) & mask;
  uint64_t e = mix(((uint64_t)i << 20) ^ ((uint64_t)rank + 1) ^ (seed << 44)) & mask;
  return op == COLL_BAND ? (b | e) : op == COLL_BOR ? (b & e) : e;
}

static double value_of(size_t i, int rank, int nranks, int op, uint64_t seed,
                       const struct pattern *p) {
  if (op == COLL_PROD) {
    uint64_t h = mix((uint64_t)i + seed * 31);
    return (rank < p->prod_ranks && ((h >> rank) & 1)) ? 2.0 : 1.0;
  }
  double v = (double)(base_of(i, seed, p) + p->jitter);
  if (rank == nranks - 1 && nranks % 2 == 1) return v;
  double j = (double)jitter_of(i, rank / 2, seed, p);
  return rank % 2 == 0 ? v + j : v - j;
}

double bench_data_expected(size_t i, int dtype, int op, int nranks, uint64_t seed) {
  if (is_bitwise(op)) {
    uint64_t acc = bits_of(i, 0, dtype, op, seed);
    for (int r = 1; r < nranks; r++) {
      uint64_t v = bits_of(i, r, dtype, op, seed);
      acc = op == COLL_BAND ? acc & v : op == COLL_BOR ? acc | v : acc ^ v;
    }
    return (double)acc;
  }
  struct pattern p = pattern_for(dtype, op, nranks);
  if (op == COLL_PROD) {
    uint64_t h = mix((uint64_t)i + seed * 31);
    uint64_t mask = p.prod_ranks >= 64 ? ~0ull : ((1ull << p.prod_ranks) - 1);
    return ldexp(1.0, __builtin_popcountll(h & mask));
  }
  double centre = (double)(base_of(i, seed, &p) + p.jitter);
  if (op == COLL_SUM) return centre * nranks;
  if (op == COLL_AVG) return centre;
  /* min/max: the largest jitter of any pair decides (pairs are symmetric around centre). */
  double widest = 0.0;
  for (int pair = 0; pair < nranks / 2; pair++) {
    double j = (double)jitter_of(i, pair, seed, &p);
    if (j > widest) widest = j;
  }
  return op == COLL_MAX ? centre + widest : centre - widest;
}

float bench_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  float magnitude;
  if (exp == 0x1f) magnitude = mant ? NAN : INFINITY;
  else if (exp == 0) magnitude = ldexpf((float)mant, -24);
  else magnitude = ldexpf((float)(mant | 0x400u), exp - 25);
  uint32_t bits;
  memcpy(&bits, &magnitude, sizeof bits);
  bits |= sign;
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

uint16_t bench_float_to_half(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  float a = fabsf(f);
  if (isnan(f)) return (uint16_t)(sign | 0x7e00u);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00u); /* rounds to infinity */
  if (a < ldexpf(1.0f, -14)) {
    /* Subnormal: units of 2^-24, rounded to nearest even by rintf. */
    return (uint16_t)(sign | (uint16_t)rintf(ldexpf(a, 24)));
  }
  int e;
  float frac = frexpf(a, &e); /* a = frac * 2^e, frac in [0.5, 1) */
  float scaled = rintf(ldexpf(frac, 11)); /* 11 significant bits */
  if (scaled >= 2048.0f) {
    scaled /= 2.0f;
    e++;
  }
  uint32_t mant = (uint32_t)scaled & 0x3ffu;
  uint32_t exp = (uint32_t)(e - 1 + 15);
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  return (uint16_t)(sign | (exp << 10) | mant);
}

float bench_bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

uint16_t bench_float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)((bits + rounding) >> 16);
}

/* fp8 (coll.h's COLL_FLOAT8E4M3 / E5M2): byte b's value, and v rounded to the format
 * (nearest even, saturating at +-448 / +-57344). The bench's values are small integers
 * and their averages, so a direct rounding suffices here. */
static double fp8_value(uint8_t b, int dtype) {
  int e4 = dtype == COLL_FLOAT8E4M3, mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  int e = (b & 0x7F) >> mb, m = b & ((1 << mb) - 1);
  double sign = (b & 0x80) ? -1.0 : 1.0;
  if ((e4 && (b & 0x7F) == 0x7F) || (!e4 && e == 31)) return !e4 && m == 0 ? sign * INFINITY : NAN;
  return sign * ldexp(e ? (1 << mb) + m : m, (e ? e : 1) - bias - mb);
}

static uint8_t fp8_from(double v, int dtype) {
  uint8_t best = 0x7F;
  double err = INFINITY;
  for (int b = 0; b < 256 && !isnan(v); b++) { /* nearest; ties to the even encoding */
    double x = fp8_value((uint8_t)b, dtype), d = fabs(x - v);
    if (isnan(x) || isinf(x)) continue;
    if (d < err || (d == err && !(b & 1))) best = (uint8_t)b, err = d;
  }
  return best;
}

double bench_data_get(const void *buf, size_t i, int dtype) {
  switch (dtype) {
  case COLL_INT8: return ((const int8_t *)buf)[i];
  case COLL_UINT8: return ((const uint8_t *)buf)[i];
  case COLL_INT32: return ((const int32_t *)buf)[i];
  case COLL_UINT32: return ((const uint32_t *)buf)[i];
  case COLL_INT64: return (double)((const int64_t *)buf)[i];
  case COLL_UINT64: return (double)((const uint64_t *)buf)[i];
  case COLL_FLOAT16: return bench_half_to_float(((const uint16_t *)buf)[i]);
  case COLL_BFLOAT16: return bench_bf16_to_float(((const uint16_t *)buf)[i]);
  case COLL_FLOAT32: return ((const float *)buf)[i];
  case COLL_FLOAT64: return ((const double *)buf)[i];
  case COLL_FLOAT8E4M3:
  case COLL_FLOAT8E5M2: return fp8_value(((const uint8_t *)buf)[i], dtype);
  default: return NAN;
  }
}

void bench_data_set(void *buf, size_t i, int dtype, double value) {
  switch (dtype) {
  case COLL_INT8: ((int8_t *)buf)[i] = (int8_t)value; break;
  case COLL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)value; break;
  case COLL_INT32: ((int32_t *)buf)[i] = (int32_t)value; break;
  case COLL_UINT32: ((uint32_t *)buf)[i] = (uint32_t)value; break;
  case COLL_INT64: ((int64_t *)buf)[i] = (int64_t)value; break;
  case COLL_UINT64: ((uint64_t *)buf)[i] = (uint64_t)value; break;
  case COLL_FLOAT16: ((uint16_t *)buf)[i] = bench_float_to_half((float)value); break;
  case COLL_BFLOAT16: ((uint16_t *)buf)[i] = bench_float_to_bf16((float)value); break;
  case COLL_FLOAT32: ((float *)buf)[i] = (float)value; break;
  case COLL_FLOAT64: ((double *)buf)[i] = value; break;
  case COLL_FLOAT8E4M3:
  case COLL_FLOAT8E5M2: ((uint8_t *)buf)[i] = fp8_from(value, dtype); break;
  default: break;
  }
}

void bench_data_fill(void *buf, size_t count, int dtype, int op, int rank, int nranks,
                     uint64_t seed) {
  struct pattern p = pattern_for(dtype, op, nranks);
  for (size_t i = 0; i < count; i++)
    bench_data_set(buf, i, dtype,
                   is_bitwise(op) ? (double)bits_of(i, rank, dtype, op, seed)
                                  : value_of(i, rank, nranks, op, seed, &p));
}

/* Relative tolerance for avg on floating types: about two units in the last place. */
static double avg_tolerance(int dtype) {
  switch (dtype) {
  case COLL_FLOAT16: return ldexp(1.0, -9);
  case COLL_BFLOAT16: return ldexp(1.0, -6);
  case COLL_FLOAT32: return ldexp(1.0, -22);
  case COLL_FLOAT64: return ldexp(1.0, -51);
  case COLL_FLOAT8E4M3: return ldexp(1.0, -3);
  case COLL_FLOAT8E5M2: return ldexp(1.0, -2);
  default: return 0.0;
  }
}

size_t bench_data_check(const void *result, size_t count, int dtype, int op, int nranks,
                        uint64_t seed) {
  double tol = op == COLL_AVG ? avg_tolerance(dtype) : 0.0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    double want = bench_data_expected(i, dtype, op, nranks, seed);
    double got = bench_data_get(result, i, dtype);
    if (got == want) continue;
    if (tol > 0.0 && fabs(got - want) <= tol * fabs(want)) continue;
    wrong++;
  }
  return wrong;
}
