/* Where the unbound ranks of one host start running (placement.c). */
#ifndef COLL_LAUNCH_PLACEMENT_H
#define COLL_LAUNCH_PLACEMENT_H

#include "coll.h"

/* Unbound ranks of one host: start this thread on the (local_index mod n)-th CPU of its
 * mask, once per process, keeping the mask; when each of the local_count local ranks has
 * a CPU of its own, that CPU becomes the thread's home (common/cpu_home.h). rank names
 * the rank in errors; local_index is -1 when unknown. *cpu (may be NULL): that CPU, or -1
 * when the rank was left alone. COLL_SPREAD=0: off; a bad value is an error. */
coll_status_t placement_spread_once(int rank, int local_index, int local_count, int *cpu);

#endif
