/* How every waiter of libcoll waits (the executor, the arena, coll_request_wait): spin
 * with the pause instruction for the first pure_spin_ns (at most spin_ns), then yield the
 * core until spin_ns (with more ranks than cores, the rank we wait for may need this one), then
 * block in the waiter's own way (transport_set_wait, a futex, a condition variable) in
 * short slices so that abort and deadlines are seen. Each yield, and the pure spin after
 * its first 5 us, first checks that the thread is not on another local rank's CPU
 * (cpu_home.h). The communicator chooses the two
 * times (COLL_SPIN_US, COLL_PURE_SPIN_US; core/comm.c). */
#ifndef COLL_COMMON_WAIT_H
#define COLL_COMMON_WAIT_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cpu_home.h"
#include "common/util.h"

/* The pure spin of a thread that shares its CPU with the caller's thread: the progress
 * thread, which works while the caller computes, yields after this long even where the
 * rank's own waits never yield (a rank bound to a CPU of its own, core/comm.c). */
enum { COLL_WAIT_BACKGROUND_PURE_NS = 5000 };

/* A pure spin this long or longer also looks whether the thread sits on another local
 * rank's CPU and goes home (cpu_home.h; rate-limited there). */
enum { COLL_WAIT_HOME_AFTER_NS = 5000 };

/* The calling thread's cap on pure_spin_ns (INT64_MAX: none; the progress thread sets
 * COLL_WAIT_BACKGROUND_PURE_NS). */
extern _Thread_local int64_t coll_wait_pure_cap_ns;

/* One turn of a waiter that has waited waited_ns without progress: pause or yield and
 * return true (look again), or return false: time to block. */
static inline bool coll_wait_spin(int64_t waited_ns, int64_t spin_ns, int64_t pure_spin_ns) {
  if (waited_ns < pure_spin_ns && waited_ns < spin_ns && waited_ns < coll_wait_pure_cap_ns) {
    if (waited_ns >= COLL_WAIT_HOME_AFTER_NS) coll_cpu_home_return();
    coll_cpu_relax();
    return true;
  }
  if (waited_ns < spin_ns) {
    if (!coll_cpu_home_return()) sched_yield();
    return true;
  }
  return false;
}

#endif
