/* Monotonic time and deadlines: every wait in libcoll is bounded by one. */
#ifndef COLL_COMMON_CLOCK_H
#define COLL_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t coll_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* coll_now_ns up to one scheduler tick (1-4 ms) old, for about 4 ns a reading: for marks
 * that others compare with coll_now_ns on a scale of seconds (heartbeats). */
static inline int64_t coll_coarse_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t coll_now_ms(void) { return coll_now_ns() / 1000000LL; }

/* The CLOCK_MONOTONIC time ns (>= 0) from now, as pthread_cond_timedwait takes it
 * (libcoll's condition variables use that clock); and the same in ms. */
static inline struct timespec coll_timespec_in_ns(int64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ns / 1000000000LL);
  ts.tv_nsec += (long)(ns % 1000000000LL);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static inline struct timespec coll_timespec_in_ms(int ms) {
  return coll_timespec_in_ns((int64_t)ms * 1000000LL);
}

/* Absolute deadline in ns for a timeout in ms; timeout_ms < 0 means "never". */
static inline int64_t coll_deadline_ns(int timeout_ms) {
  return timeout_ms < 0 ? INT64_MAX : coll_now_ns() + (int64_t)timeout_ms * 1000000LL;
}

/* Milliseconds left until an absolute deadline, clamped to [0, INT32_MAX]; -1 for "never"
 * (suits poll/epoll_wait). */
static inline int coll_ms_left(int64_t deadline_ns) {
  if (deadline_ns == INT64_MAX) return -1;
  int64_t left = (deadline_ns - coll_now_ns() + 999999) / 1000000;
  if (left < 0) return 0;
  if (left > INT32_MAX) return INT32_MAX;
  return (int)left;
}

#endif
