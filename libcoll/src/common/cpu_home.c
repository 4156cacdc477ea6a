/* The way back to a rank's own CPU (cpu_home.h). Why: a sleeping rank that its peer wakes
 * through a socket or a futex may be moved by the kernel onto the waker's CPU (the
 * wake-up's affinity to the waker), and two ranks that then take turns on that CPU look
 * cache-hot to the load balancer, which leaves them there for milliseconds while the
 * other CPU idles (2 unbound ranks over tcp: 48-52 us per 8-byte all-reduce instead of
 * 8-9 in about 1 run in 7; bench/results/README.md, "Unbound ranks during a run"). */
#include "common/cpu_home.h"

#include <errno.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

#define MOVE_INTERVAL_NS 1000000LL

static _Thread_local int home_cpu = -1;
static _Thread_local cpu_set_t others_homes;
static _Thread_local int64_t last_move_ns;
static _Thread_local int64_t moves;

int coll_cpu_move_keep_mask(int cpu, const cpu_set_t *mask) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return -1;
  return sched_setaffinity(0, sizeof *mask, mask) == 0 ? 0 : errno;
}

void coll_cpu_home_set(int home, const cpu_set_t *peer_homes) {
  home_cpu = home;
  others_homes = *peer_homes;
  CPU_CLR(home, &others_homes);
  last_move_ns = 0;
  moves = 0;
}

int coll_cpu_home(void) { return home_cpu; }

int64_t coll_cpu_home_moves(void) { return moves; }

bool coll_cpu_home_return_at(int cpu, int64_t now_ns) {
  if (home_cpu < 0 || cpu == home_cpu || cpu < 0 || cpu >= CPU_SETSIZE ||
      !CPU_ISSET(cpu, &others_homes))
    return false;
  if (last_move_ns != 0 && now_ns - last_move_ns < MOVE_INTERVAL_NS) return false;
  last_move_ns = now_ns;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || !CPU_ISSET(home_cpu, &mask) ||
      CPU_COUNT(&mask) < 2) {
    home_cpu = -1; /* the caller changed the mask since: its choice now */
    return false;
  }
  int failed = coll_cpu_move_keep_mask(home_cpu, &mask);
  if (failed < 0) return false;
  if (failed > 0) {
    coll_log(COLL_LOG_WARN,
             "could not restore the CPU mask after moving back to CPU %d (%s); this thread "
             "stays on that CPU (COLL_SPREAD=0 leaves the mask alone)",
             home_cpu, strerror(failed));
    home_cpu = -1;
    return true;
  }
  if (moves++ == 0)
    coll_log(COLL_LOG_INFO, "found waiting on CPU %d, another local rank's; moved back to CPU %d",
             cpu, home_cpu);
  return true;
}

bool coll_cpu_home_return(void) {
  if (home_cpu < 0) return false;
  return coll_cpu_home_return_at(sched_getcpu(), coll_now_ns());
}
