/* Cost model (placeholder: ring everywhere until the measured model lands). */
#include "algo/algo_internal.h"

const algo_cost_t algo_cost_shm_default = {.alpha = 1e-6, .beta = 1.0 / 4e9, .gamma = 1.0 / 8e9};
const algo_cost_t algo_cost_tcp_default = {.alpha = 20e-6, .beta = 1.0 / 5e9, .gamma = 1.0 / 8e9};

double algo_predict(coll_algo_t algo, const sched_params_t *p, const algo_cost_t *c) {
  (void)algo;
  (void)p;
  (void)c;
  return 0.0;
}

coll_algo_t algo_select(const sched_params_t *p, const algo_cost_t *c) {
  (void)p;
  (void)c;
  return COLL_ALGO_RING;
}
