/* GPU correctness test of reduce, all_gather, reduce_scatter and all_to_all on device
 * buffers (a plain program like test_gpu_coll, run by tests/gpu/run.sh and meson): every
 * dtype and op for reduce and reduce_scatter, every dtype for all_gather and all_to_all,
 * out of place and in place, small, medium and multi-slot sizes, for 1, 2 and 4 ranks
 * sharing the GPUs (cuda_ipc; with COLL_TRANSPORT=tcp through pinned host staging); the
 * four _stream calls queued between copies on one stream for several rounds without
 * synchronising; premul_sum all_reduce, reduce_scatter and reduce against a host
 * reference; a device buffer refused by coll_send/coll_recv.
 * The host-buffer part (the _stream forms on host buffers, a stream call refused inside a
 * group) runs without a GPU too: then 2 ranks run it and the program exits 77.
 * Usage: test_gpu_more [NRANKS...]   (default: 1 2 4). */
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

/* Small, medium (several pipelined segments) and larger than a cuda_ipc slot (4 MiB). */
static const size_t counts[] = {7, 300001};
static const size_t big_count = ((size_t)1 << 21) + 3; /* float32: 8 MiB + 12 bytes */

/* Device buffers of one rank, sized for the largest case, and a host mirror. */
typedef struct {
  int rank, n;
  coll_comm_t *comm;
  char *host;
  char *dsend, *drecv;
} bufs_t;

/* all_to_all: element i of the block rank `from` sends to rank `to` (exact everywhere). */
static double a2a_value(int from, int to, size_t i) {
  return (double)(((size_t)from * 5 + (size_t)to * 3 + i) % 11);
}

static int check_value(int rank, const char *what, coll_dtype_t t, size_t count, size_t k,
                       double got, double want) {
  if (got == want) return 0;
  fprintf(stderr, "rank %d: %s %s count %zu: element %zu is %g, expected %g\n", rank, what,
          coll_dtype_name(t), count, k, got, want);
  return 1;
}

/* Out of place at root n-1 (NULL recvbuf elsewhere), then in place at root 0, where the
 * other ranks' buffers must keep their input. */
static int test_reduce(bufs_t *b, coll_dtype_t t, coll_op_t op, size_t count) {
  int rank = b->rank, n = b->n;
  size_t bytes = count * coll_dtype_size(t);
  for (size_t i = 0; i < count; i++) bench_data_set(b->host, i, (int)t, gpu_value(rank, i, t, op));
  CUDA_OK(cudaMemcpy(b->dsend, b->host, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(b->drecv, 0, bytes));
  int root = n - 1;
  COLL_OK_OR_FAIL(
      coll_reduce(b->dsend, rank == root ? b->drecv : NULL, count, t, op, root, b->comm));
  if (rank == root) {
    CUDA_OK(cudaMemcpy(b->host, b->drecv, bytes, cudaMemcpyDeviceToHost));
    if (gpu_check(rank, n, b->host, 0, count, t, op, "reduce out of place")) return 1;
  }
  COLL_OK_OR_FAIL(coll_reduce(b->dsend, b->dsend, count, t, op, 0, b->comm));
  CUDA_OK(cudaMemcpy(b->host, b->dsend, bytes, cudaMemcpyDeviceToHost));
  if (rank == 0) return gpu_check(rank, n, b->host, 0, count, t, op, "reduce in place");
  for (size_t i = 0; i < count; i++)
    if (check_value(rank, "reduce in place: non-root input changed", t, count, i,
                    bench_data_get(b->host, i, (int)t), gpu_value(rank, i, t, op)))
      return 1;
  return 0;
}

/* Rank r gets block r of the reduction of every rank's n * count elements: out of place,
 * then in place (recvbuf = sendbuf + rank * count). */
static int test_reduce_scatter(bufs_t *b, coll_dtype_t t, coll_op_t op, size_t count) {
  int rank = b->rank, n = b->n;
  size_t esz = coll_dtype_size(t), bytes = count * esz, in = (size_t)n * count;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < in; i++) bench_data_set(b->host, i, (int)t, gpu_value(rank, i, t, op));
    CUDA_OK(cudaMemcpy(b->dsend, b->host, in * esz, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(b->drecv, 0, bytes));
    char *out = pass == 0 ? b->drecv : b->dsend + (size_t)rank * bytes;
    COLL_OK_OR_FAIL(coll_reduce_scatter(b->dsend, out, count, t, op, b->comm));
    CUDA_OK(cudaMemcpy(b->host, out, bytes, cudaMemcpyDeviceToHost));
    if (gpu_check(rank, n, b->host, (size_t)rank * count, count, t, op,
                  pass == 0 ? "reduce_scatter out of place" : "reduce_scatter in place"))
      return 1;
  }
  return 0;
}

/* Every rank gets every rank's block: out of place, then in place (sendbuf = recvbuf +
 * rank * count). */
static int test_all_gather(bufs_t *b, coll_dtype_t t, size_t count) {
  int rank = b->rank, n = b->n;
  size_t esz = coll_dtype_size(t), bytes = count * esz, out = (size_t)n * count;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < count; i++)
      bench_data_set(b->host, i, (int)t, gpu_value(rank, i, t, COLL_SUM));
    CUDA_OK(cudaMemset(b->drecv, 0, out * esz));
    char *in = pass == 0 ? b->dsend : b->drecv + (size_t)rank * bytes;
    CUDA_OK(cudaMemcpy(in, b->host, bytes, cudaMemcpyHostToDevice));
    COLL_OK_OR_FAIL(coll_all_gather(in, b->drecv, count, t, b->comm));
    CUDA_OK(cudaMemcpy(b->host, b->drecv, out * esz, cudaMemcpyDeviceToHost));
    const char *what = pass == 0 ? "all_gather out of place" : "all_gather in place";
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++)
        if (check_value(rank, what, t, count, (size_t)p * count + i,
                        bench_data_get(b->host, (size_t)p * count + i, (int)t),
                        gpu_value(p, i, t, COLL_SUM)))
          return 1;
  }
  return 0;
}

/* Block p of sendbuf goes to rank p; block p of recvbuf came from rank p. */
static int test_all_to_all(bufs_t *b, coll_dtype_t t, size_t count) {
  int rank = b->rank, n = b->n;
  size_t esz = coll_dtype_size(t), total = (size_t)n * count;
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++)
      bench_data_set(b->host, (size_t)p * count + i, (int)t, a2a_value(rank, p, i));
  CUDA_OK(cudaMemcpy(b->dsend, b->host, total * esz, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(b->drecv, 0, total * esz));
  COLL_OK_OR_FAIL(coll_all_to_all(b->dsend, b->drecv, count, t, b->comm));
  CUDA_OK(cudaMemcpy(b->host, b->drecv, total * esz, cudaMemcpyDeviceToHost));
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++)
      if (check_value(rank, "all_to_all", t, count, (size_t)p * count + i,
                      bench_data_get(b->host, (size_t)p * count + i, (int)t),
                      a2a_value(p, rank, i)))
        return 1;
  return 0;
}

static int blocking_calls(bufs_t *b) {
  int rank = b->rank;
  for (int t = 0; t < COLL_DTYPE_COUNT; t++) {
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      for (int op = 0; op < COLL_OP_COUNT; op++) {
        if (!gpu_op_applies((coll_dtype_t)t, (coll_op_t)op)) continue;
        if (test_reduce(b, (coll_dtype_t)t, (coll_op_t)op, counts[c])) return 1;
        if (test_reduce_scatter(b, (coll_dtype_t)t, (coll_op_t)op, counts[c])) return 1;
      }
      if (test_all_gather(b, (coll_dtype_t)t, counts[c])) return 1;
      if (test_all_to_all(b, (coll_dtype_t)t, counts[c])) return 1;
    }
  }
  if (test_reduce(b, COLL_FLOAT32, COLL_AVG, big_count)) return 1;
  if (test_reduce_scatter(b, COLL_FLOAT32, COLL_AVG, big_count)) return 1;
  if (test_all_gather(b, COLL_FLOAT32, big_count)) return 1;
  if (test_all_to_all(b, COLL_FLOAT32, big_count)) return 1;
  if (rank == 0) printf("blocking calls: every dtype and op, in and out of place: ok\n");
  return 0;
}

/* The four _stream calls, each between an H2D and a D2H copy on one stream, ROUNDS
 * rounds queued before one synchronisation. The device buffers are reused every round
 * (stream order keeps the rounds apart); inputs and results have pinned buffers per
 * round. float32 sums of small integers are exact. */
enum { ROUNDS = 3, KINDS = 4 };
static int stream_calls(bufs_t *b) {
  int rank = b->rank, n = b->n;
  size_t count = ((size_t)1 << 18) + 1, bytes = count * sizeof(float);
  size_t nb = (size_t)n * bytes; /* the largest input or output of the four */
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  float *in[ROUNDS][KINDS], *out[ROUNDS][KINDS];
  float *dev_in[KINDS], *dev_out[KINDS];
  for (int k = 0; k < KINDS; k++) {
    CUDA_OK(cudaMalloc((void **)&dev_in[k], nb));
    CUDA_OK(cudaMalloc((void **)&dev_out[k], nb));
    for (int r = 0; r < ROUNDS; r++) {
      CUDA_OK(cudaMallocHost((void **)&in[r][k], nb));
      CUDA_OK(cudaMallocHost((void **)&out[r][k], nb));
      memset(out[r][k], 0xff, nb);
    }
  }
  for (int r = 0; r < ROUNDS; r++) {
    /* 0 reduce_scatter, 1 all_gather, 2 all_to_all: n * count inputs or count; 3 reduce. */
    for (size_t j = 0; j < (size_t)n * count; j++) {
      in[r][0][j] = (float)gpu_value(rank, j + (size_t)r, COLL_FLOAT32, COLL_SUM);
      in[r][2][j] = (float)(a2a_value(rank, (int)(j / count), j % count) + r);
    }
    for (size_t i = 0; i < count; i++) {
      in[r][1][i] = (float)gpu_value(rank, i + (size_t)r, COLL_FLOAT32, COLL_SUM);
      in[r][3][i] = in[r][1][i];
    }
  }
  for (int r = 0; r < ROUNDS; r++) {
    int root = r % n;
    CUDA_OK(cudaMemcpyAsync(dev_in[0], in[r][0], nb, cudaMemcpyHostToDevice, s));
    COLL_OK_OR_FAIL(coll_reduce_scatter_stream(dev_in[0], dev_out[0], count, COLL_FLOAT32, COLL_SUM,
                                               b->comm, s));
    CUDA_OK(cudaMemcpyAsync(out[r][0], dev_out[0], bytes, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaMemcpyAsync(dev_in[1], in[r][1], bytes, cudaMemcpyHostToDevice, s));
    COLL_OK_OR_FAIL(coll_all_gather_stream(dev_in[1], dev_out[1], count, COLL_FLOAT32, b->comm, s));
    CUDA_OK(cudaMemcpyAsync(out[r][1], dev_out[1], nb, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaMemcpyAsync(dev_in[2], in[r][2], nb, cudaMemcpyHostToDevice, s));
    COLL_OK_OR_FAIL(coll_all_to_all_stream(dev_in[2], dev_out[2], count, COLL_FLOAT32, b->comm, s));
    CUDA_OK(cudaMemcpyAsync(out[r][2], dev_out[2], nb, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaMemcpyAsync(dev_in[3], in[r][3], bytes, cudaMemcpyHostToDevice, s));
    COLL_OK_OR_FAIL(coll_reduce_stream(dev_in[3], rank == root ? dev_out[3] : NULL, count,
                                       COLL_FLOAT32, COLL_SUM, root, b->comm, s));
    if (rank == root)
      CUDA_OK(cudaMemcpyAsync(out[r][3], dev_out[3], bytes, cudaMemcpyDeviceToHost, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  for (int r = 0; r < ROUNDS; r++) {
    int root = r % n;
    for (size_t i = 0; i < count; i++) {
      size_t g = (size_t)rank * count + i;
      if (check_value(rank, "reduce_scatter_stream", COLL_FLOAT32, count, i, out[r][0][i],
                      gpu_expected(n, g + (size_t)r, COLL_FLOAT32, COLL_SUM)))
        return 1;
      if (rank == root && check_value(rank, "reduce_stream", COLL_FLOAT32, count, i, out[r][3][i],
                                      gpu_expected(n, i + (size_t)r, COLL_FLOAT32, COLL_SUM)))
        return 1;
    }
    for (int p = 0; p < n; p++) {
      for (size_t i = 0; i < count; i++) {
        size_t j = (size_t)p * count + i;
        if (check_value(rank, "all_gather_stream", COLL_FLOAT32, count, j, out[r][1][j],
                        gpu_value(p, i + (size_t)r, COLL_FLOAT32, COLL_SUM)) ||
            check_value(rank, "all_to_all_stream", COLL_FLOAT32, count, j, out[r][2][j],
                        a2a_value(p, rank, i) + r))
          return 1;
      }
    }
  }
  for (int k = 0; k < KINDS; k++) {
    cudaFree(dev_in[k]);
    cudaFree(dev_out[k]);
    for (int r = 0; r < ROUNDS; r++) {
      cudaFreeHost(in[r][k]);
      cudaFreeHost(out[r][k]);
    }
  }
  cudaStreamDestroy(s);
  if (rank == 0) printf("stream calls: %d rounds of the four, one synchronisation: ok\n", ROUNDS);
  return 0;
}

/* Point-to-point calls refuse device buffers with a clear message (before any
 * communication, so no peer waits). */
static int p2p_refused(bufs_t *b) {
  int rank = b->rank, peer = (rank + 1) % b->n;
  coll_status_t st = coll_send(b->dsend, 4, COLL_FLOAT32, peer, b->comm);
  coll_status_t st2 = coll_recv(b->drecv, 4, COLL_FLOAT32, peer, b->comm);
  if (st != COLL_ERR_UNSUPPORTED || st2 != COLL_ERR_UNSUPPORTED ||
      strstr(coll_last_error(), "point-to-point") == NULL) {
    fprintf(stderr, "rank %d: send/recv of device buffers gave %s/%s (%s), not unsupported\n", rank,
            coll_status_name(st), coll_status_name(st2), coll_last_error());
    return 1;
  }
  return 0;
}

/* premul_sum on device buffers (scaled by the CUDA path after the stream gate): all_reduce
 * out of place, reduce_scatter, reduce at the last rank, and an in-place all_reduce_stream
 * queued right behind the copy that writes its input (the scaling must read that input),
 * each against a host reference. Rank r's scalar is r + 1 and its element i is r + i % 7,
 * so every sum is exact in float32. */
static float premul_input(int r, size_t i) { return (float)(r + (int)(i % 7)); }

static int premul_check(int rank, int n, const char *what, const float *got, size_t count,
                        size_t first) {
  for (size_t i = 0; i < count; i++) {
    double want = 0;
    for (int r = 0; r < n; r++) want += (double)(r + 1) * premul_input(r, first + i);
    if (check_value(rank, what, COLL_FLOAT32, count, i, got[i], want)) return 1;
  }
  return 0;
}

static int premul_on_device(bufs_t *b) {
  int rank = b->rank, n = b->n;
  size_t count = counts[1], in = (size_t)n * count, bytes = count * sizeof(float);
  float scalar = (float)(rank + 1), *h = (float *)b->host;
  coll_op_t op;
  COLL_OK_OR_FAIL(coll_op_create_premul_sum(b->comm, &scalar, COLL_FLOAT32, &op));
  for (size_t i = 0; i < in; i++) h[i] = premul_input(rank, i);
  CUDA_OK(cudaMemcpy(b->dsend, h, in * sizeof(float), cudaMemcpyHostToDevice));
  COLL_OK_OR_FAIL(coll_all_reduce(b->dsend, b->drecv, count, COLL_FLOAT32, op, b->comm));
  CUDA_OK(cudaMemcpy(h, b->drecv, bytes, cudaMemcpyDeviceToHost));
  if (premul_check(rank, n, "premul_sum all_reduce", h, count, 0)) return 1;
  COLL_OK_OR_FAIL(coll_reduce_scatter(b->dsend, b->drecv, count, COLL_FLOAT32, op, b->comm));
  CUDA_OK(cudaMemcpy(h, b->drecv, bytes, cudaMemcpyDeviceToHost));
  if (premul_check(rank, n, "premul_sum reduce_scatter", h, count, (size_t)rank * count)) return 1;
  int root = n - 1;
  COLL_OK_OR_FAIL(coll_reduce(b->dsend, rank == root ? b->drecv : NULL, count, COLL_FLOAT32, op,
                              root, b->comm));
  if (rank == root) {
    CUDA_OK(cudaMemcpy(h, b->drecv, bytes, cudaMemcpyDeviceToHost));
    if (premul_check(rank, n, "premul_sum reduce", h, count, 0)) return 1;
  }
  /* The input is unchanged by the out-of-place calls (scaled in a copy). */
  CUDA_OK(cudaMemcpy(h, b->dsend, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++)
    if (check_value(rank, "premul_sum: input changed", COLL_FLOAT32, count, i, h[i],
                    premul_input(rank, i)))
      return 1;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaMemsetAsync(b->drecv, 0, bytes, s));
  CUDA_OK(cudaMemcpyAsync(b->drecv, b->dsend, bytes, cudaMemcpyDeviceToDevice, s));
  COLL_OK_OR_FAIL(coll_all_reduce_stream(b->drecv, b->drecv, count, COLL_FLOAT32, op, b->comm, s));
  CUDA_OK(cudaMemcpyAsync(h, b->drecv, bytes, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamDestroy(s));
  if (premul_check(rank, n, "premul_sum all_reduce_stream in place", h, count, 0)) return 1;
  COLL_OK_OR_FAIL(coll_op_destroy(b->comm, op));
  if (rank == 0) printf("premul_sum on device buffers: all_reduce, reduce_scatter, reduce: ok\n");
  return 0;
}

/* The _stream forms with host buffers run like the blocking calls (with the NULL stream
 * here, so this part needs no GPU); inside a group they are refused. */
static int host_stream_calls(coll_comm_t *comm, int rank, int n) {
  enum { C = 5 };
  double in[4 * C * 4] = {0}, out[4 * C * 4] = {0};
  if (n > 4) return 0;
  for (int i = 0; i < n * C; i++) in[i] = rank * 100 + i;
  COLL_OK_OR_FAIL(coll_all_gather_stream(in, out, C, COLL_FLOAT64, comm, NULL));
  for (int p = 0; p < n; p++)
    for (int i = 0; i < C; i++)
      if (check_value(rank, "host all_gather_stream", COLL_FLOAT64, C, (size_t)(p * C + i),
                      out[p * C + i], p * 100 + i))
        return 1;
  COLL_OK_OR_FAIL(coll_reduce_scatter_stream(in, out, C, COLL_FLOAT64, COLL_MAX, comm, NULL));
  for (int i = 0; i < C; i++)
    if (check_value(rank, "host reduce_scatter_stream", COLL_FLOAT64, C, (size_t)i, out[i],
                    (n - 1) * 100 + rank * C + i))
      return 1;
  COLL_OK_OR_FAIL(coll_all_to_all_stream(in, out, C, COLL_FLOAT64, comm, NULL));
  for (int p = 0; p < n; p++)
    for (int i = 0; i < C; i++)
      if (check_value(rank, "host all_to_all_stream", COLL_FLOAT64, C, (size_t)(p * C + i),
                      out[p * C + i], p * 100 + rank * C + i))
        return 1;
  out[0] = -1;
  COLL_OK_OR_FAIL(
      coll_reduce_stream(in, rank == 0 ? out : NULL, 1, COLL_FLOAT64, COLL_SUM, 0, comm, NULL));
  if (rank == 0 &&
      check_value(rank, "host reduce_stream", COLL_FLOAT64, 1, 0, out[0], 100.0 * n * (n - 1) / 2))
    return 1;
  COLL_OK_OR_FAIL(coll_group_start(comm));
  coll_status_t st = coll_all_to_all_stream(in, out, C, COLL_FLOAT64, comm, NULL);
  COLL_OK_OR_FAIL(coll_group_end(comm));
  if (st != COLL_ERR_UNSUPPORTED) {
    fprintf(stderr, "rank %d: a stream call inside a group gave %s, not unsupported\n", rank,
            coll_status_name(st));
    return 1;
  }
  return 0;
}

static int rank_main(int rank, int n, void *arg) {
  const args_t *a = arg;
  coll_comm_t *comm = gpu_comm_open(rank, n, a->port, a->ndev);
  if (comm == NULL) return 1;
  int rc = host_stream_calls(comm, rank, n);
  bufs_t b = {.rank = rank, .n = n, .comm = comm};
  if (rc == 0 && a->ndev > 0) {
    size_t cap = (size_t)n * big_count * sizeof(float);
    size_t small = (size_t)n * counts[1] * 8;
    if (small > cap) cap = small;
    b.host = malloc(cap);
    if (b.host == NULL || cudaMalloc((void **)&b.dsend, cap) != cudaSuccess ||
        cudaMalloc((void **)&b.drecv, cap) != cudaSuccess) {
      fprintf(stderr, "rank %d: out of memory for %zu-byte buffers\n", rank, cap);
      rc = 1;
    }
    if (rc == 0) rc = blocking_calls(&b);
    if (rc == 0) rc = stream_calls(&b);
    if (rc == 0 && n > 1) rc = p2p_refused(&b);
    if (rc == 0) rc = premul_on_device(&b);
    /* Host buffers still work after device calls. */
    if (rc == 0) rc = host_stream_calls(comm, rank, n);
    cudaFree(b.dsend);
    cudaFree(b.drecv);
    free(b.host);
  }
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
    a.port = mp_free_port();
    int bad = mp_run(2, 60000, rank_main, &a);
    printf("%s: 2 ranks: _stream calls on host buffers, refused in a group\n",
           bad ? "FAIL" : "PASS");
    if (bad) return 1;
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
    int bad = mp_run(ranks[k], 300000, rank_main, &a);
    printf(
        "%s: %d rank(s) on %d GPU(s): reduce, all_gather, reduce_scatter, all_to_all "
        "(every dtype x op, in place, stream calls, premul_sum)\n",
        bad ? "FAIL" : "PASS", ranks[k], a.ndev);
    fflush(stdout);
    failed += bad != 0;
  }
  return failed ? 1 : 0;
}
