/* A clock for the hot path's short intervals (was this call waited for within 50 us, did
 * that one run 100 us or longer): the CPU's invariant time-stamp counter scaled to ns,
 * about 11 ns a reading where clock_gettime costs 25-50 ns (kvm-clock). Three readings
 * of clock_gettime were 0.14 us of an asynchronous 8-byte all-reduce's 0.70 (2 ranks,
 * shm). Its readings compare only with each other: its rate differs from coll_now_ns's
 * by the calibration's error (measured 1-2 parts in 10^4 with its 2 ms span: 20 ns on a
 * 100 us interval) and by NTP's slewing of CLOCK_MONOTONIC (up to 5 in 10^4), so over
 * hours the two drift apart by seconds; deadlines and heartbeats stay on coll_now_ns.
 * Where the counter is not invariant (or not x86-64), and until its calibration span
 * (2 ms from the first reading) has passed, it reads coll_now_ns. */
#ifndef COLL_COMMON_CHEAP_CLOCK_H
#define COLL_COMMON_CHEAP_CLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* The counter's scale, set once by coll_cheap_now_ns_slow (cheap_clock.c):
 * ns = ns0 + (tsc - tsc0) * ns_per_tick; ready is 1 once the three are set. */
typedef struct {
  _Atomic int ready;
  int64_t ns0;
  uint64_t tsc0;
  double ns_per_tick;
} coll_cheap_clock_t;
extern coll_cheap_clock_t coll_cheap_clock;

/* Before calibration, and where the counter cannot serve: coll_now_ns (and a step of
 * the calibration). */
int64_t coll_cheap_now_ns_slow(void);

/* Whether the counter serves here (x86-64 with an invariant counter): once calibrated,
 * readings come from it; otherwise they are coll_now_ns for good. */
bool coll_cheap_clock_uses_counter(void);

static inline int64_t coll_cheap_now_ns(void) {
#if defined(__x86_64__)
  /* Signed ticks: another CPU's counter may stand a little behind tsc0's. */
  if (atomic_load_explicit(&coll_cheap_clock.ready, memory_order_acquire) == 1)
    return coll_cheap_clock.ns0 + (int64_t)((double)(int64_t)(__rdtsc() - coll_cheap_clock.tsc0) *
                                            coll_cheap_clock.ns_per_tick);
#endif
  return coll_cheap_now_ns_slow();
}

#endif
