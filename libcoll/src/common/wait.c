/* The per-thread cap on a waiter's pure spin (wait.h): every thread starts without one;
 * the progress thread sets its own (core/progress.c). */
#include "common/wait.h"

_Thread_local int64_t coll_wait_pure_cap_ns = INT64_MAX;
