/* Deterministic random numbers (xoshiro256** seeded by splitmix64): the same seed gives
 * the same initialisation and shuffles on every rank and every platform. */
#include "train.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void train_rng_seed(train_rng_t *rng, uint64_t seed) {
  for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&seed);
}

uint64_t train_rng_next(train_rng_t *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

float train_rng_uniform(train_rng_t *rng) {
  return (float)(train_rng_next(rng) >> 40) * (1.0f / 16777216.0f);
}

uint64_t train_rng_below(train_rng_t *rng, uint64_t bound) {
  /* Rejection of the top partial range keeps every value equally likely. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = train_rng_next(rng);
  } while (x >= limit);
  return x % bound;
}
