/* Internal to libtrain: the one monotonic clock that step phases, DDP's waits and the
 * console's rates are measured with. */
#ifndef TRAIN_CLOCK_SECONDS_H
#define TRAIN_CLOCK_SECONDS_H

#include <time.h>

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
static inline double clock_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
