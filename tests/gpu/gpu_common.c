/* Helpers of the GPU test programs: see gpu_common.h. */
#include "gpu_common.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

coll_comm_t *gpu_comm_open(int rank, int nranks, uint16_t port, int ndev) {
  cudaError_t err = ndev > 0 ? cudaSetDevice(rank % ndev) : cudaSuccess;
  if (err != cudaSuccess) {
    fprintf(stderr, "rank %d: cudaSetDevice(%d): %s\n", rank, rank % ndev, cudaGetErrorString(err));
    return NULL;
  }
  coll_config_t cfg = {0};
  cfg.rank = rank;
  cfg.size = nranks;
  cfg.local_rank = rank;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = port;
  cfg.host_store = -1;
  cfg.timeout_ms = 60000;
  coll_comm_t *comm = NULL;
  coll_status_t st = coll_comm_init_config(&cfg, &comm);
  if (st != COLL_OK) {
    fprintf(stderr, "rank %d: coll_comm_init_config: %s (%s)\n", rank, coll_status_string(st),
            coll_last_error());
    return NULL;
  }
  return comm;
}
