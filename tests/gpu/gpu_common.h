/* Shared by the GPU test programs (plain executables, no Check: they must build and run
 * on a GPU machine without it): device detection (gpu_devices.h), communicator setup for
 * forked ranks, exit codes. */
#ifndef TESTS_GPU_GPU_COMMON_H
#define TESTS_GPU_GPU_COMMON_H

#include <stdint.h>

#include "coll.h"
#include "gpu_devices.h"
/* Communicator of `rank` of `nranks` on the store at 127.0.0.1:port (rank 0 hosts it),
 * with this rank's GPU (rank % ndev) made current first (none when ndev is 0: host
 * buffers only). NULL after printing why. */
coll_comm_t *gpu_comm_open(int rank, int nranks, uint16_t port, int ndev);

/* Return 1 from the calling rank function (a variable `rank` in scope) after printing
 * the failed call; CUDA_OK needs <cuda_runtime.h> included by the caller. */
#define CUDA_OK(call)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));      \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

#define COLL_OK_OR_FAIL(call)                                                            \
  do {                                                                                   \
    coll_status_t s_ = (call);                                                           \
    if (s_ != COLL_OK) {                                                                 \
      fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, #call, coll_status_string(s_),     \
              coll_last_error());                                                        \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

#endif
