/* GPU check of libnccl.so.2's premul-sum ops on device buffers (nccl_check.sh runs it, on
 * cuda_ipc and staged with COLL_TRANSPORT=tcp): a ncclScalarDevice op whose scalar lives
 * in device memory is read in the order of the call's stream (a new value copied on that
 * stream just before the second all-reduce is seen; a grouped call reads it at
 * ncclGroupEnd), next to a ncclScalarHostImmediate op that keeps its value; all-reduce
 * and reduce-scatter results checked against a host reference. Written against nccl.h
 * only, ranks forked. Without a GPU it exits 77.
 *   nccl_premul_device [NRANKS]   (default 2) */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_devices.h"
#include "multiproc.h"
#include "nccl.h"
#include "nccl_check.h"

enum { COUNT = 100003 };

#define CUDA_OK(call) CHECK((e_ = (call)) == cudaSuccess, "%s", cudaGetErrorString(e_))

typedef struct {
  int fds[2]; /* rank 0 writes the unique id once for every other rank */
  int ndev;
} args_t;

/* Rank r's element i: small integers, so every scaled sum is exact in float32. */
static float input(int r, size_t i) { return (float)(r + (int)(i % 5)); }

/* got[i] == sum over ranks r of scale(r) * input(r, first + i). */
static int check(int rank, int n, const char *what, const float *got, size_t count, size_t first,
                 float (*scale)(int r, int round), int round) {
  for (size_t i = 0; i < count; i++) {
    double want = 0;
    for (int r = 0; r < n; r++) want += (double)scale(r, round) * input(r, first + i);
    CHECK(got[i] == want, "%s: element %zu is %g, expected %g", what, i, got[i], want);
  }
  return 0;
}

static float device_scale(int r, int round) { return (float)((r + 1) * (round + 1)); }
static float immediate_scale(int r, int round) {
  (void)round;
  return 0.5f * (float)(r + 1);
}

static int rank_main(int rank, int n, void *arg) {
  args_t *a = arg;
  cudaError_t e_;
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    for (int i = 1; i < n; i++) CHECK(write(a->fds[1], &id, sizeof id) == sizeof id, "write");
  } else {
    CHECK(read(a->fds[0], &id, sizeof id) == sizeof id, "read");
  }
  CUDA_OK(cudaSetDevice(rank % a->ndev));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  size_t in = (size_t)n * COUNT;
  float *h = malloc(in * sizeof *h), *dsend = NULL, *drecv = NULL, *dscalar = NULL;
  CHECK(h != NULL, "out of memory");
  CUDA_OK(cudaMalloc((void **)&dsend, in * sizeof *h));
  CUDA_OK(cudaMalloc((void **)&drecv, in * sizeof *h));
  CUDA_OK(cudaMalloc((void **)&dscalar, sizeof *dscalar));
  for (size_t i = 0; i < in; i++) h[i] = input(rank, i);
  CUDA_OK(cudaMemcpy(dsend, h, in * sizeof *h, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float value = device_scale(rank, 0), imm = immediate_scale(rank, 0);
  CUDA_OK(cudaMemcpy(dscalar, &value, sizeof value, cudaMemcpyHostToDevice));
  ncclRedOp_t dev_op, imm_op;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&dev_op, dscalar, ncclFloat32, ncclScalarDevice, comm));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&imm_op, &imm, ncclFloat32, ncclScalarHostImmediate, comm));
  imm = 1000; /* copied at creation: never seen */
  /* Rounds 0 and 1: the device scalar rewritten on the stream just before the call. */
  for (int round = 0; round < 3; round++) {
    value = device_scale(rank, round);
    CUDA_OK(cudaMemcpyAsync(dscalar, &value, sizeof value, cudaMemcpyHostToDevice, s));
    if (round == 2) CHECK_NCCL(ncclGroupStart()); /* read at ncclGroupEnd */
    CHECK_NCCL(ncclAllReduce(dsend, drecv, COUNT, ncclFloat32, dev_op, comm, s));
    if (round == 2) CHECK_NCCL(ncclGroupEnd());
    CUDA_OK(cudaMemcpyAsync(h, drecv, COUNT * sizeof *h, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    if (check(rank, n, "device-scalar all-reduce", h, COUNT, 0, device_scale, round)) return 1;
  }
  CHECK_NCCL(ncclReduceScatter(dsend, drecv, COUNT, ncclFloat32, dev_op, comm, s));
  CUDA_OK(cudaMemcpyAsync(h, drecv, COUNT * sizeof *h, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  if (check(rank, n, "device-scalar reduce-scatter", h, COUNT, (size_t)rank * COUNT, device_scale,
            2))
    return 1;
  CHECK_NCCL(ncclAllReduce(dsend, drecv, COUNT, ncclFloat32, imm_op, comm, s));
  CUDA_OK(cudaMemcpyAsync(h, drecv, COUNT * sizeof *h, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  if (check(rank, n, "host-immediate all-reduce", h, COUNT, 0, immediate_scale, 0)) return 1;
  CHECK_NCCL(ncclRedOpDestroy(dev_op, comm));
  CHECK_NCCL(ncclRedOpDestroy(imm_op, comm));
  CHECK_NCCL(ncclCommDestroy(comm));
  CUDA_OK(cudaStreamDestroy(s));
  cudaFree(dsend);
  cudaFree(drecv);
  cudaFree(dscalar);
  free(h);
  return 0;
}

int main(int argc, char **argv) {
  args_t a = {.ndev = gpu_device_count()};
  if (a.ndev == 0) {
    printf("skipped: no CUDA device\n");
    return GPU_SKIP;
  }
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 1 || pipe(a.fds) != 0) return 1;
  int bad = mp_run(n, 120000, rank_main, &a);
  printf(
      "%s: %d rank(s): premul-sum ops (ncclScalarDevice, ncclScalarHostImmediate) on device "
      "buffers\n",
      bad ? "FAIL" : "PASS", n);
  return bad ? 1 : 0;
}
