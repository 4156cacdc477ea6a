/* All-reduce benchmark on device buffers (float32 sum, blocking calls, nccl-tests'
 * algbw/busbw), next to the device's own device-to-device cudaMemcpy bandwidth C measured
 * in the same run and the bound busbw <= 4 C / (5 n) for n ranks sharing one GPU.
 * Usage: gpu_bench NRANKS [MIN_BYTES [MAX_BYTES]]  (8 B .. 256 MiB). Exit 77 without GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpu_common.h"
#include "multiproc.h"

typedef struct {
  int ndev;
  uint16_t port;
  size_t min_bytes, max_bytes;
} args_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bytes copied per second by cudaMemcpyAsync device to device (256 MiB, 20 times). */
static double d2d_bandwidth(void) {
  size_t bytes = (size_t)256 << 20;
  void *a = NULL, *b = NULL;
  cudaEvent_t e0, e1;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
  cudaEventRecord(e0, 0);
  for (int i = 0; i < 20; i++) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
  cudaEventRecord(e1, 0);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(a);
  cudaFree(b);
  return ms > 0 ? 20.0 * (double)bytes / (ms * 1e-3) : 0;
}

static int rank_main(int rank, int n, void *arg) {
  const args_t *a = arg;
  coll_comm_t *comm = gpu_comm_open(rank, n, a->port, a->ndev);
  if (comm == NULL) return 1;
  double c = rank == 0 ? d2d_bandwidth() : 0;
  coll_all_reduce(&c, &c, 1, COLL_FLOAT64, COLL_MAX, comm);
  double bound = 4.0 * c / (5.0 * n);
  float *buf = NULL;
  if (cudaMalloc((void **)&buf, a->max_bytes) != cudaSuccess) return 1;
  cudaMemset(buf, 0, a->max_bytes);
  cudaDeviceSynchronize();
  if (rank == 0) {
    printf("# gpu_bench: %d ranks on %d GPU(s), float32 sum, device buffers\n", n, a->ndev);
    printf("# device-to-device cudaMemcpy C = %.1f GB/s; bound busbw <= 4C/(5n) = %.1f GB/s\n",
           c / 1e9, bound / 1e9);
    printf("%12s %10s %12s %12s %12s\n", "bytes", "iters", "time_us", "algbw_GB/s", "busbw_GB/s");
  }
  double best_bus = 0;
  size_t best_bytes = 0;
  int rc = 0;
  for (size_t bytes = a->min_bytes; bytes <= a->max_bytes && rc == 0; bytes *= 2) {
    size_t count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
    int iters = bytes <= (1u << 20) ? 50 : bytes <= (32u << 20) ? 20 : 5;
    for (int w = 0; w < 2 && rc == 0; w++)
      rc = coll_all_reduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK;
    double t0 = now_s();
    for (int i = 0; i < iters && rc == 0; i++)
      rc = coll_all_reduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK;
    double t = (now_s() - t0) / iters;
    if (rc != 0) {
      fprintf(stderr, "rank %d: all-reduce of %zu bytes: %s\n", rank, bytes, coll_last_error());
      break;
    }
    coll_all_reduce(&t, &t, 1, COLL_FLOAT64, COLL_MAX, comm);
    double alg = (double)(count * sizeof(float)) / t, bus = alg * 2.0 * (n - 1) / n;
    if (bus > best_bus) {
      best_bus = bus;
      best_bytes = bytes;
    }
    if (rank == 0) {
      printf("%12zu %10d %12.1f %12.2f %12.2f\n", count * sizeof(float), iters, t * 1e6, alg / 1e9,
             bus / 1e9);
      fflush(stdout);
    }
  }
  if (rank == 0 && rc == 0)
    printf("# SUMMARY n=%d best busbw %.1f GB/s at %zu bytes; bound %.1f GB/s (C = %.1f GB/s)\n", n,
           best_bus / 1e9, best_bytes, bound / 1e9, c / 1e9);
  cudaFree(buf);
  if (coll_comm_destroy(comm) != COLL_OK) rc = 1;
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gpu_bench NRANKS [MIN_BYTES [MAX_BYTES]]\n");
    return 2;
  }
  args_t a = {.ndev = gpu_device_count(),
              .min_bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 8,
              .max_bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : (size_t)256 << 20};
  if (a.ndev == 0) {
    printf("skipped: no CUDA device\n");
    return GPU_SKIP;
  }
  int n = atoi(argv[1]);
  if (n < 1 || a.min_bytes < 4 || a.max_bytes < a.min_bytes) {
    fprintf(stderr, "gpu_bench: bad arguments\n");
    return 2;
  }
  a.port = mp_free_port();
  return mp_run(n, 420000, rank_main, &a) == 0 ? 0 : 1;
}
