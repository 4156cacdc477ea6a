/* Where the unbound ranks of one host start running. The rendezvous wakes every rank
 * through the store's sockets, and the kernel may move a task woken that way onto the
 * CPU of the task that woke it: ranks whose CPU mask allows several CPUs often leave
 * coll_comm_init on one CPU and stay there for milliseconds (more than 6 in our runs),
 * as the load balancer is slow to move a task that ran within the last half
 * millisecond. Over that time every wait is a hand-over of that one CPU (2 ranks
 * over shm: the first 200 8-byte all-reduces took 6.5-9.2 us each instead of 0.4-0.6 in
 * 10 of 20 runs; bench/results/README.md, "Unbound ranks at start"). Open MPI's ranks never
 * sleep, so the balancer moves one at once.
 *
 * So, once per process, at its first communicator's init: the rank moves to the
 * (local index mod n)-th CPU of its mask and sets the whole mask back. The mask is the
 * caller's again (this is not binding: the scheduler moves the rank as it likes after);
 * only the starting CPU changes. The same wake-ups can later pull a rank that slept onto
 * its peer's CPU: when every local rank has a CPU of its own, the CPU chosen here becomes
 * the thread's home (common/cpu_home.h), and a waiter found on another local rank's home
 * goes back to its own. Ranks bound to one CPU are left alone, and COLL_SPREAD=0 turns
 * both off. Only the calling thread moves; threads created after start on its CPU, as
 * threads do. */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/cpu_home.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "launch/placement.h"

static _Atomic bool placed;

/* Move this thread to its CPU: *cpu is that CPU, or -1 when it is left alone. */
static coll_status_t spread(int rank, int index, int count, int *cpu) {
  if (count < 2 || index < 0 || atomic_exchange(&placed, true)) return COLL_OK;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return COLL_OK;
  int n = CPU_COUNT(&mask);
  if (n < 2) return COLL_OK;
  /* The j-th local rank's CPU is the (j mod n)-th of the mask (the ranks of one launch
   * share a mask); want is ours, others_homes the other ranks'. */
  int want = -1;
  cpu_set_t others_homes;
  CPU_ZERO(&others_homes);
  for (int c = 0, seen = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &mask)) continue;
    for (int j = seen; j < count; j += n)
      if (j == index)
        want = c;
      else
        CPU_SET(c, &others_homes);
    seen++;
  }
  int now = sched_getcpu();
  if (want >= 0 && now != want) {
    int failed = coll_cpu_move_keep_mask(want, &mask);
    if (failed < 0) return COLL_OK;
    if (failed > 0)
      return coll_error_errno(COLL_ERR_SYSTEM, failed,
                              "rank %d: could not restore the CPU mask after moving to CPU %d "
                              "(COLL_SPREAD=0 leaves the mask alone)",
                              rank, want);
    coll_log(COLL_LOG_INFO, "local rank %d of %d: started on CPU %d, moved to CPU %d (COLL_SPREAD)",
             index, count, now, want);
  }
  /* A home only when every local rank has a CPU of its own: the harm it undoes is a CPU
   * left idle while two ranks share another. With more ranks than CPUs none idles, and
   * moving back would only fight the balancer's own sharing out. */
  if (want >= 0 && count <= n) coll_cpu_home_set(want, &others_homes);
  *cpu = want;
  return COLL_OK;
}

coll_status_t placement_spread_once(int rank, int local_index, int local_count, int *cpu) {
  int where = -1;
  int64_t enabled = 1;
  coll_status_t st = coll_env_int("COLL_SPREAD", 0, 1, 1, &enabled);
  if (st != COLL_OK) st = coll_error_prefix(st, "rank %d: ", rank);
  if (st == COLL_OK && enabled) st = spread(rank, local_index, local_count, &where);
  if (cpu != NULL) *cpu = where;
  return st;
}
