/* Recursive halving-doubling all-reduce (placeholder until the real one lands). */
#include "algo/algo_internal.h"
#include "common/error.h"

coll_status_t algo_hd_allreduce(const sched_params_t *p, sched_t *s) {
  (void)s;
  (void)p;
  return coll_error(COLL_ERR_UNSUPPORTED, "hd all-reduce: not implemented yet");
}
