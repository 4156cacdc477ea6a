/* Integer mixers for test data that every rank (and the reference) recomputes from an
 * index: the same input always gives the same, well spread bits. */
#ifndef TESTS_COMMON_MIX_H
#define TESTS_COMMON_MIX_H

#include <stdint.h>

static inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

#endif
