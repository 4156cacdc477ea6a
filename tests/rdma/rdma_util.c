/* Helpers of the 'rdma' tests (see rdma_util.h). */
#include "rdma_util.h"

#include "transport/ib/ib_device.h"

bool rdma_have_port(void) {
  ib_port_pick_t pick;
  return ib_device_pick(&pick, NULL) == COLL_OK;
}

int rdma_run_ranks(int n, mp_rank_fn fn, tp_job_t *job, void *arg, int timeout_ms) {
  tp_store_host_t store;
  if (!tp_store_start(&store)) return -1;
  job->port = store.port;
  int failed = mp_run(n, timeout_ms, fn, arg);
  tp_store_stop(&store);
  return failed;
}
