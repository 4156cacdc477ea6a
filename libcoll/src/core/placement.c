/* Where the unbound ranks of one host start running. The rendezvous wakes every rank
 * through the store's sockets, and the kernel moves a task woken that way onto the CPU
 * of the task that woke it: ranks whose CPU mask allows several CPUs often leave
 * coll_comm_init on one CPU, and stay there for 5-30 ms, because the load balancer does
 * not move a task that ran within the last half millisecond until its attempts have
 * failed a few times. Over that time every wait is a hand-over of that one CPU (2 ranks
 * over shm: the first 200 8-byte all-reduces took 6.5-9.2 us each instead of 0.4-0.6 in
 * 10 of 20 runs; bench/README.md, "Unbound ranks at start"). Open MPI's ranks never
 * sleep, so the balancer moves one at once.
 *
 * So, once per process, at its first communicator's init: the rank moves to the
 * (local index mod n)-th CPU of its mask and sets the whole mask back. The mask is the
 * caller's again (this is not binding: the scheduler moves the rank as it likes after);
 * only the starting CPU changes. Ranks bound to one CPU are left alone, and COLL_SPREAD=0
 * turns this off. Only the calling thread moves; threads created after start on its
 * CPU, as threads do. */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/env.h"
#include "common/log.h"
#include "core/comm.h"

static _Atomic bool placed;

void placement_spread_once(int local_index, int local_count) {
  if (local_count < 2 || local_index < 0 || atomic_exchange(&placed, true)) return;
  int64_t enabled = 1;
  if (coll_env_int("COLL_SPREAD", 0, 1, 1, &enabled) != COLL_OK || !enabled) return;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return;
  int n = CPU_COUNT(&mask);
  if (n < 2) return;
  int want = -1;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE && want < 0; cpu++)
    if (CPU_ISSET(cpu, &mask) && seen++ == local_index % n) want = cpu;
  int now = sched_getcpu();
  if (want < 0 || now == want) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(want, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return;
  if (sched_setaffinity(0, sizeof mask, &mask) != 0)
    coll_log(COLL_LOG_WARN, "could not restore the CPU mask after moving to CPU %d", want);
  coll_log(COLL_LOG_INFO, "local rank %d of %d: started on CPU %d, moved to CPU %d (COLL_SPREAD)",
           local_index, local_count, now, want);
}
