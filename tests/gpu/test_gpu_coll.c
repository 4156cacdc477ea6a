/* GPU correctness test (a plain program, run by tests/gpu/run.sh and meson): every dtype
 * and op of all-reduce on device buffers, out of place and in place, for 1, 2 and 4
 * ranks sharing the GPUs (cuda_ipc); stream-ordered all-reduce and broadcast; a host
 * buffer call on the same communicator; a host/device mix rejected. Values are small
 * integers, so every result is exact whatever the order of the reduction.
 * Usage: test_gpu_coll [NRANKS...]   (default: 1 2 4). Exit 77 without a CUDA device. */
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "gpu_values.h"
#include "multiproc.h"

typedef struct {
  int ndev;
  uint16_t port;
} args_t;

static const size_t counts[] = {7, 300001};

static int check(int rank, int n, const void *host, size_t count, coll_dtype_t t, coll_op_t op,
                 const char *what) {
  return gpu_check(rank, n, host, 0, count, t, op, what);
}

/* Every dtype and op, out of place and in place, blocking calls on device pointers. */
static int all_types(coll_comm_t *comm, int rank, int n) {
  size_t max_bytes = counts[1] * 8;
  void *host = malloc(max_bytes), *dsend = NULL, *drecv = NULL;
  if (host == NULL) return 1;
  CUDA_OK(cudaMalloc(&dsend, max_bytes));
  CUDA_OK(cudaMalloc(&drecv, max_bytes));
  for (int t = 0; t < COLL_DTYPE_COUNT; t++) {
    for (int op = 0; op < COLL_OP_COUNT; op++) {
      if (!gpu_op_applies((coll_dtype_t)t, (coll_op_t)op)) continue;
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t count = counts[c], bytes = count * coll_dtype_size((coll_dtype_t)t);
        for (size_t i = 0; i < count; i++)
          bench_data_set(host, i, t, gpu_value(rank, i, (coll_dtype_t)t, (coll_op_t)op));
        CUDA_OK(cudaMemcpy(dsend, host, bytes, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(drecv, 0, bytes));
        COLL_OK_OR_FAIL(coll_all_reduce(dsend, drecv, count, (coll_dtype_t)t, (coll_op_t)op, comm));
        CUDA_OK(cudaMemcpy(host, drecv, bytes, cudaMemcpyDeviceToHost));
        if (check(rank, n, host, count, (coll_dtype_t)t, (coll_op_t)op, "out of place")) return 1;
        COLL_OK_OR_FAIL(coll_all_reduce(dsend, dsend, count, (coll_dtype_t)t, (coll_op_t)op, comm));
        CUDA_OK(cudaMemcpy(host, dsend, bytes, cudaMemcpyDeviceToHost));
        if (check(rank, n, host, count, (coll_dtype_t)t, (coll_op_t)op, "in place")) return 1;
      }
    }
  }
  cudaFree(dsend);
  cudaFree(drecv);
  free(host);
  return 0;
}

/* Stream calls: an H2D copy, the all-reduce and a D2H copy queued on one stream, several
 * rounds without synchronising in between; then a stream broadcast. */
static int stream_calls(coll_comm_t *comm, int rank, int n) {
  enum { ROUNDS = 4 };
  size_t count = 1 << 20, bytes = count * sizeof(float);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  float *in[ROUNDS], *out[ROUNDS], *dbuf[ROUNDS];
  for (int k = 0; k < ROUNDS; k++) {
    CUDA_OK(cudaMallocHost((void **)&in[k], bytes));
    CUDA_OK(cudaMallocHost((void **)&out[k], bytes));
    CUDA_OK(cudaMalloc((void **)&dbuf[k], bytes));
    for (size_t i = 0; i < count; i++) in[k][i] = (float)(rank + k + (int)(i % 5));
  }
  for (int k = 0; k < ROUNDS; k++) {
    CUDA_OK(cudaMemcpyAsync(dbuf[k], in[k], bytes, cudaMemcpyHostToDevice, s));
    COLL_OK_OR_FAIL(coll_all_reduce_stream(dbuf[k], dbuf[k], count, COLL_FLOAT32, COLL_SUM, comm, s));
    CUDA_OK(cudaMemcpyAsync(out[k], dbuf[k], bytes, cudaMemcpyDeviceToHost, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  for (int k = 0; k < ROUNDS; k++) {
    for (size_t i = 0; i < count; i++) {
      float want = (float)(n * (k + (int)(i % 5)) + n * (n - 1) / 2);
      if (out[k][i] != want) {
        fprintf(stderr, "rank %d: stream all-reduce round %d element %zu is %g, expected %g\n",
                rank, k, i, (double)out[k][i], (double)want);
        return 1;
      }
    }
  }
  int root = 1 % n;
  for (size_t i = 0; i < count; i++) in[0][i] = (float)(rank * 1000 + (int)(i % 13));
  CUDA_OK(cudaMemcpyAsync(dbuf[0], in[0], bytes, cudaMemcpyHostToDevice, s));
  COLL_OK_OR_FAIL(coll_broadcast_stream(dbuf[0], count, COLL_FLOAT32, root, comm, s));
  CUDA_OK(cudaMemcpyAsync(out[0], dbuf[0], bytes, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < count; i++) {
    if (out[0][i] != (float)(root * 1000 + (int)(i % 13))) {
      fprintf(stderr, "rank %d: stream broadcast element %zu is %g\n", rank, i, (double)out[0][i]);
      return 1;
    }
  }
  for (int k = 0; k < ROUNDS; k++) {
    cudaFreeHost(in[k]);
    cudaFreeHost(out[k]);
    cudaFree(dbuf[k]);
  }
  cudaStreamDestroy(s);
  return 0;
}

/* Host buffers still work on a communicator that has run device calls; a host/device
 * mix is an argument error (found locally, before any communication). */
static int host_and_mix(coll_comm_t *comm, int rank, int n) {
  double v[3] = {rank, 1, -rank};
  COLL_OK_OR_FAIL(coll_all_reduce(v, v, 3, COLL_FLOAT64, COLL_SUM, comm));
  if (v[0] != n * (n - 1) / 2.0 || v[1] != n || v[2] != -v[0]) {
    fprintf(stderr, "rank %d: host all-reduce after device calls is wrong\n", rank);
    return 1;
  }
  void *d = NULL;
  CUDA_OK(cudaMalloc(&d, sizeof v));
  coll_status_t st = coll_all_reduce(d, v, 3, COLL_FLOAT64, COLL_SUM, comm);
  cudaFree(d);
  if (st != COLL_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "rank %d: a device sendbuf with a host recvbuf gave %s, not an error\n", rank,
            coll_status_name(st));
    return 1;
  }
  return 0;
}

static int rank_main(int rank, int n, void *arg) {
  const args_t *a = arg;
  coll_comm_t *comm = gpu_comm_open(rank, n, a->port, a->ndev);
  if (comm == NULL) return 1;
  int rc = all_types(comm, rank, n);
  if (rc == 0) rc = stream_calls(comm, rank, n);
  if (rc == 0) rc = host_and_mix(comm, rank, n);
  coll_status_t st = coll_comm_destroy(comm);
  if (rc == 0 && st != COLL_OK) {
    fprintf(stderr, "rank %d: destroy: %s\n", rank, coll_last_error());
    rc = 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  args_t a = {.ndev = gpu_device_count()};
  if (a.ndev == 0) {
    printf("skipped: no CUDA device\n");
    return GPU_SKIP;
  }
  int ranks[16] = {1, 2, 4}, nrun = 3;
  if (argc > 1) {
    nrun = 0;
    for (int i = 1; i < argc && nrun < 16; i++) ranks[nrun++] = atoi(argv[i]);
  }
  int failed = 0;
  for (int k = 0; k < nrun; k++) {
    a.port = mp_free_port();
    int bad = mp_run(ranks[k], 240000, rank_main, &a);
    printf("%s: %d rank(s) on %d GPU(s): every dtype x op, in place, stream calls, broadcast\n",
           bad ? "FAIL" : "PASS", ranks[k], a.ndev);
    fflush(stdout);
    failed += bad != 0;
  }
  return failed ? 1 : 0;
}
