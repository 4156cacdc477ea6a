/* The calibration of the cheap clock (cheap_clock.h): the first reading records the
 * counter and coll_now_ns together; the first one CALIBRATE_NS or more later fixes the
 * rate from the two spans. Until then (and for good where the counter is not invariant)
 * readings are coll_now_ns. Threads may race to calibrate: one of them publishes. */
#include "common/cheap_clock.h"

#include <pthread.h>

#include "common/clock.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

coll_cheap_clock_t coll_cheap_clock;

/* Long enough for a rate within 1-2 parts in 10^4 (measured here against spans of 10 ms
 * and more: the readings at its ends are off by 0.2-0.4 us), short enough to end within a
 * communicator's set-up (core/comm.c opens the span there). */
enum { CALIBRATE_NS = 2 * 1000 * 1000 };

#if defined(__x86_64__)
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static bool invariant;     /* written once under start_once */
static int64_t start_ns;   /* the first reading's coll_now_ns ... */
static uint64_t start_tsc; /* ... and counter */
static pthread_mutex_t publish_mu = PTHREAD_MUTEX_INITIALIZER;

/* CPUID 0x80000007, EDX bit 8: the counter runs at a constant rate in every power state
 * (Linux's constant_tsc and nonstop_tsc). */
static void start(void) {
  unsigned int eax, ebx, ecx, edx;
  invariant = __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8)) != 0;
  start_ns = coll_now_ns();
  start_tsc = __rdtsc();
}
#endif

int64_t coll_cheap_now_ns_slow(void) {
  int64_t now = coll_now_ns();
#if defined(__x86_64__)
  pthread_once(&start_once, start);
  if (!invariant || now - start_ns < CALIBRATE_NS) return now;
  uint64_t tsc = __rdtsc();
  pthread_mutex_lock(&publish_mu);
  if (atomic_load_explicit(&coll_cheap_clock.ready, memory_order_relaxed) == 0 && tsc > start_tsc) {
    coll_cheap_clock.ns0 = now;
    coll_cheap_clock.tsc0 = tsc;
    coll_cheap_clock.ns_per_tick = (double)(now - start_ns) / (double)(tsc - start_tsc);
    atomic_store_explicit(&coll_cheap_clock.ready, 1, memory_order_release);
  }
  pthread_mutex_unlock(&publish_mu);
#endif
  return now;
}

bool coll_cheap_clock_uses_counter(void) {
#if defined(__x86_64__)
  pthread_once(&start_once, start);
  return invariant;
#else
  return false;
#endif
}
