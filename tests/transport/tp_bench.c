/* Pairwise transport benchmark (not a test): two forked ranks on one store measure the
 * 8-byte round trip, one-way bandwidth, a bidirectional exchange with reduction, and a
 * 2-rank all-reduce built from those (reduce-scatter half + all-gather half).
 * Usage: tp_bench [shm|tcp] [max MiB (64)] [iterations scale (1)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "mem/memops.h"
#include "multiproc.h"
#include "tp_util.h"

typedef struct {
  tp_job_t job;
  size_t max_bytes;
  int scale;
} bench_arg_t;

static const char *const hosts[] = {"benchhost", "benchhost"};

static int sync_pair(tp_rank_t *t, int peer) {
  char a = 0, b = 0;
  transport_recv_t r = {.dst = &b, .len = 1};
  if (tp_recv(t, peer, &r) != COLL_OK || tp_send(t, peer, &a, 1) != COLL_OK) return 1;
  return tp_drain(t, 20000) == COLL_OK ? 0 : 1;
}

static double pingpong_us(tp_rank_t *t, int peer, int iters) {
  char out[8] = {0}, in[8];
  transport_recv_t r = {.dst = in, .len = sizeof in};
  int64_t start = 0;
  for (int i = -100; i < iters; i++) {
    if (i == 0) start = coll_now_ns();
    if (t->rank == 0) {
      if (tp_send(t, peer, out, sizeof out) != COLL_OK || tp_drain(t, 20000) != COLL_OK) return -1;
      if (tp_recv(t, peer, &r) != COLL_OK || tp_drain(t, 20000) != COLL_OK) return -1;
    } else {
      if (tp_recv(t, peer, &r) != COLL_OK || tp_drain(t, 20000) != COLL_OK) return -1;
      if (tp_send(t, peer, out, sizeof out) != COLL_OK || tp_drain(t, 20000) != COLL_OK) return -1;
    }
  }
  return (double)(coll_now_ns() - start) / 1e3 / iters;
}

/* Rank 0 sends `iters` messages of len bytes, rank 1 receives them (two in flight). */
static double oneway_gbs(tp_rank_t *t, int peer, char *buf, char *dst, size_t len, int iters) {
  if (sync_pair(t, peer) != 0) return -1;
  int64_t start = coll_now_ns();
  for (int i = 0; i < iters; i++) {
    coll_status_t st;
    if (t->rank == 0) {
      st = tp_send(t, peer, buf, len);
    } else {
      transport_recv_t r = {.dst = dst, .len = len};
      st = tp_recv(t, peer, &r);
    }
    if (st != COLL_OK || tp_drain(t, 20000) != COLL_OK) return -1;
  }
  if (sync_pair(t, peer) != 0) return -1;
  return (double)len * iters / (double)(coll_now_ns() - start);
}

/* Both ranks send len bytes and receive len bytes reduced into dst at the same time. */
static double exchange_reduce_gbs(tp_rank_t *t, int peer, float *mine, float *dst, size_t len,
                                  int iters, bool reduce) {
  mem_reduce_fn sum = mem_host_reduce_fn(COLL_FLOAT32, COLL_SUM);
  if (sync_pair(t, peer) != 0) return -1;
  int64_t start = coll_now_ns();
  for (int i = 0; i < iters; i++) {
    transport_recv_t r = {.dst = dst, .len = len};
    if (reduce)
      r = (transport_recv_t){
          .dst = dst, .operand = mine, .reduce = sum, .elem_size = 4, .len = len};
    if (tp_recv(t, peer, &r) != COLL_OK || tp_send(t, peer, mine, len) != COLL_OK ||
        tp_drain(t, 20000) != COLL_OK)
      return -1;
  }
  return (double)len * iters / (double)(coll_now_ns() - start);
}

/* 2-rank ring all-reduce of len bytes in place, in segments of seg bytes pipelined:
 * reduce-scatter (each rank reduces its half) then all-gather (swap the halves). */
static double allreduce2_busbw(tp_rank_t *t, int peer, float *buf, size_t len, int iters) {
  mem_reduce_fn sum = mem_host_reduce_fn(COLL_FLOAT32, COLL_SUM);
  size_t half = len / 2;
  char *base = (char *)buf;
  char *my_half = base + (t->rank == 0 ? 0 : half);
  char *other_half = base + (t->rank == 0 ? half : 0);
  size_t seg = 1u << 20;
  if (sync_pair(t, peer) != 0) return -1;
  int64_t start = coll_now_ns();
  for (int i = 0; i < iters; i++) {
    for (size_t off = 0; off < half; off += seg) {
      size_t n = half - off < seg ? half - off : seg;
      transport_recv_t r = {
          .dst = my_half + off, .operand = my_half + off, .reduce = sum, .elem_size = 4, .len = n};
      if (tp_recv(t, peer, &r) != COLL_OK || tp_send(t, peer, other_half + off, n) != COLL_OK)
        return -1;
    }
    if (tp_drain(t, 20000) != COLL_OK) return -1;
    for (size_t off = 0; off < half; off += seg) {
      size_t n = half - off < seg ? half - off : seg;
      transport_recv_t r = {.dst = other_half + off, .len = n};
      if (tp_recv(t, peer, &r) != COLL_OK || tp_send(t, peer, my_half + off, n) != COLL_OK)
        return -1;
    }
    if (tp_drain(t, 20000) != COLL_OK) return -1;
  }
  double secs = (double)(coll_now_ns() - start) / 1e9;
  return (double)len * iters / secs / 1e9; /* busbw = algbw for 2 ranks */
}

static int bench_rank(int rank, int n, void *p) {
  bench_arg_t *arg = p;
  tp_rank_t t;
  if (tp_open(&arg->job, rank, n, &t) != COLL_OK) {
    fprintf(stderr, "rank %d: connect: %s\n", rank, coll_last_error());
    return 1;
  }
  int peer = 1 - rank;
  const char *name = transport_set_conn(t.set, peer)->ops->name;
  double lat = pingpong_us(&t, peer, 2000 * arg->scale);
  if (rank == 0) printf("%s: 8-byte round trip %.2f us\n", name, lat);
  size_t max = arg->max_bytes;
  char *a = malloc(max), *b = malloc(max);
  memset(a, 1, max);
  memset(b, 2, max);
  for (size_t len = 64 * 1024; len <= max; len *= 4) {
    int iters = (int)((size_t)(256u << 20) * (size_t)arg->scale / len);
    if (iters < 3) iters = 3;
    double one = oneway_gbs(&t, peer, a, b, len, iters);
    double xc = exchange_reduce_gbs(&t, peer, (float *)a, (float *)b, len, iters, false);
    double xr = exchange_reduce_gbs(&t, peer, (float *)a, (float *)b, len, iters, true);
    double ar = allreduce2_busbw(&t, peer, (float *)a, len, iters);
    if (rank == 0)
      printf(
          "%s: %8zu KiB  one-way %5.2f GB/s  exchange copy %5.2f GB/s/dir  exchange+reduce "
          "%5.2f GB/s/dir  allreduce(2) busbw %5.2f GB/s\n",
          name, len / 1024, one, xc, xr, ar);
    fflush(stdout);
  }
  if (rank == 0) printf("%s: staging bytes %zu\n", name, transport_set_staging_bytes(t.set));
  free(a);
  free(b);
  tp_close(&t);
  return 0;
}

int main(int argc, char **argv) {
  bench_arg_t arg = {.job = {.prefix = "bench/", .hosts = hosts, .timeout_ms = 20000},
                     .max_bytes = 64u << 20,
                     .scale = 1};
  arg.job.forced = argc > 1 ? argv[1] : "shm";
  if (argc > 2) arg.max_bytes = (size_t)atoi(argv[2]) << 20;
  if (argc > 3) arg.scale = atoi(argv[3]) > 0 ? atoi(argv[3]) : 1;
  tp_store_host_t store;
  if (!tp_store_start(&store)) return 1;
  arg.job.port = store.port;
  int failed = mp_run(2, 600000, bench_rank, &arg);
  tp_store_stop(&store);
  return failed == 0 ? 0 : 1;
}
