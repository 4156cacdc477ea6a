/* allreduce_bench: all-reduce bandwidth and latency of libcoll, one process per rank
 * (collrun, mpirun or srun), with nccl-tests' all_reduce_perf options and columns; -C
 * runs another collective (broadcast, reduce, all_gather, reduce_scatter, all_to_all)
 * with nccl-tests' size and bus-bandwidth conventions. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_data.h"
#include "bench_report.h"
#include "coll.h"
#include "coll_config.h"

/* Per-rank record gathered to rank 0 for the "Using ranks" lines. */
#define HOST_LEN 56

struct bench {
  bench_args_t args;
  coll_comm_t *comm;
  int rank;
  int nranks;
  void *sendbuf;
  void *recvbuf;
  size_t buf_bytes;
  double *samples; /* args.iters timings, microseconds */
  bench_row_t *rows;
  size_t nrows, rows_cap;
  bench_meta_t meta;
  uint8_t *rank_info; /* pid and host of every rank, for the header */
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A library call failed: say which rank and why. The caller aborts the communicator so
 * peers see the failure promptly instead of waiting for their timeout. */
static int fail(const struct bench *b, const char *what, coll_status_t st) {
  fprintf(stderr, "allreduce_bench: rank %d: %s failed: %s (%s): %s\n", b->rank, what,
          coll_status_name(st), coll_status_string(st), coll_last_error());
  return -1;
}

static int all_reduce_small(struct bench *b, void *buf, size_t count, coll_dtype_t dtype,
                            coll_op_t op, const char *what) {
  coll_status_t st = coll_all_reduce(buf, buf, count, dtype, op, b->comm);
  return st == COLL_OK ? 0 : fail(b, what, st);
}

/* Elements per rank for a size of `elems` elements in nccl-tests' sense: all_gather's
 * size is its output, reduce_scatter's its input, all_to_all's either: n blocks. */
static size_t per_rank(const struct bench *b, size_t elems) {
  int c = b->args.collective;
  bool blocks = c == BENCH_ALL_GATHER || c == BENCH_REDUCE_SCATTER || c == BENCH_ALL_TO_ALL;
  return blocks ? elems / (size_t)b->nranks : elems;
}

/* The collectives other than all-reduce; in-place as NCCL defines it (all_to_all has
 * none: it runs out of place). */
static int run_other(struct bench *b, const void *send, void *recv, size_t count, int dtype,
                     int op) {
  coll_dtype_t dt = (coll_dtype_t)dtype;
  size_t block = count * coll_dtype_size(dt) * (size_t)b->rank;
  bool in_place = send == recv;
  coll_request_t *req = NULL, **rq = b->args.blocking ? NULL : &req;
  coll_status_t st;
  switch (b->args.collective) {
  case BENCH_BROADCAST:
    st = rq ? coll_broadcast_async(recv, count, dt, b->args.root, b->comm, rq)
            : coll_broadcast(recv, count, dt, b->args.root, b->comm);
    break;
  case BENCH_REDUCE:
    st = rq ? coll_reduce_async(send, recv, count, dt, (coll_op_t)op, b->args.root, b->comm, rq)
            : coll_reduce(send, recv, count, dt, (coll_op_t)op, b->args.root, b->comm);
    break;
  case BENCH_ALL_GATHER:
    if (in_place) send = (const char *)recv + block;
    st = rq ? coll_all_gather_async(send, recv, count, dt, b->comm, rq)
            : coll_all_gather(send, recv, count, dt, b->comm);
    break;
  case BENCH_REDUCE_SCATTER:
    if (in_place) recv = (char *)recv + block;
    st = rq ? coll_reduce_scatter_async(send, recv, count, dt, (coll_op_t)op, b->comm, rq)
            : coll_reduce_scatter(send, recv, count, dt, (coll_op_t)op, b->comm);
    break;
  default:
    st = rq ? coll_all_to_all_async(b->sendbuf, b->recvbuf, count, dt, b->comm, rq)
            : coll_all_to_all(b->sendbuf, b->recvbuf, count, dt, b->comm);
  }
  if (st == COLL_OK && rq != NULL) st = coll_request_wait(rq);
  return st == COLL_OK ? 0 : fail(b, bench_collective_name(b->args.collective), st);
}

static int run_once(struct bench *b, const void *send, void *recv, size_t count, int dtype,
                    int op) {
  coll_status_t st;
  if (b->args.collective != BENCH_ALL_REDUCE) return run_other(b, send, recv, count, dtype, op);
  if (b->args.blocking) {
    st = coll_all_reduce(send, recv, count, (coll_dtype_t)dtype, (coll_op_t)op, b->comm);
    if (st != COLL_OK) return fail(b, "coll_all_reduce", st);
    return 0;
  }
  coll_request_t *req = NULL;
  st = coll_all_reduce_async(send, recv, count, (coll_dtype_t)dtype, (coll_op_t)op, b->comm, &req);
  if (st != COLL_OK) return fail(b, "coll_all_reduce_async", st);
  st = coll_request_wait(&req);
  if (st != COLL_OK) return fail(b, "coll_request_wait", st);
  return 0;
}

/* The max over ranks of a per-rank value. */
static int max_over_ranks(struct bench *b, double *value) {
  return all_reduce_small(b, value, 1, COLL_FLOAT64, COLL_MAX, "max over ranks");
}

/* Median time of args.iters calls, each timed alone: the ranks first meet in a 4-byte
 * all-reduce so that no rank's clock starts while a peer is still in the previous call.
 * In-place runs restore the input first (untimed) so values never overflow. */
static int time_size(struct bench *b, size_t count, int dtype, int op, int in_place,
                     double *median_us) {
  size_t bytes = count * coll_dtype_size((coll_dtype_t)dtype);
  int32_t token = 0;
  for (int it = 0; it < b->args.iters; it++) {
    if (in_place) memcpy(b->recvbuf, b->sendbuf, bytes);
    if (all_reduce_small(b, &token, 1, COLL_INT32, COLL_SUM, "sync all-reduce") != 0) return -1;
    double t0 = now_us();
    if (run_once(b, in_place ? b->recvbuf : b->sendbuf, b->recvbuf, count, dtype, op) != 0)
      return -1;
    b->samples[it] = now_us() - t0;
  }
  *median_us = bench_median(b->samples, b->args.iters);
  return max_over_ranks(b, median_us);
}

/* One more call on poisoned output (so stale results from a previous size cannot pass),
 * then count wrong elements over all ranks. */
static int check_size(struct bench *b, size_t count, int dtype, int op, int in_place,
                      uint64_t seed, long long *wrong) {
  size_t bytes = count * coll_dtype_size((coll_dtype_t)dtype);
  if (in_place) memcpy(b->recvbuf, b->sendbuf, bytes);
  else memset(b->recvbuf, 0xa5, bytes);
  if (run_once(b, in_place ? b->recvbuf : b->sendbuf, b->recvbuf, count, dtype, op) != 0)
    return -1;
  int64_t local = (int64_t)bench_data_check(b->recvbuf, count, dtype, op, b->nranks, seed);
  if (all_reduce_small(b, &local, 1, COLL_INT64, COLL_SUM, "sum of wrong counts") != 0) return -1;
  *wrong = local;
  return 0;
}

static int bench_size(struct bench *b, size_t bytes, int dtype, int op, uint64_t seed,
                      bench_row_t *row) {
  size_t elem = coll_dtype_size((coll_dtype_t)dtype);
  size_t count = per_rank(b, bytes / elem), total = bytes / elem / count * count;
  if (count == 0) total = 0;
  *row = (bench_row_t){.bytes = total * elem, .count = total, .dtype = dtype, .op = op};
  for (int in_place = 0; in_place < 2; in_place++) {
    bench_result_t *r = in_place ? &row->ip : &row->oop;
    double median = 0.0;
    if (time_size(b, count, dtype, op, in_place, &median) != 0) return -1;
    bench_result_set(r, row->bytes, median, b->nranks);
    r->busbw = r->algbw * bench_collective_busbw_factor(b->args.collective, b->nranks);
    r->wrong = -1;
    /* The reference data is all-reduce's: other collectives are checked by the tests. */
    if (b->args.check && b->args.collective == BENCH_ALL_REDUCE &&
        check_size(b, count, dtype, op, in_place, seed, &r->wrong) != 0)
      return -1;
  }
  return 0;
}

/* nccl-tests warms up at the largest size, then at the smallest. */
static int warm_up(struct bench *b, int dtype, int op) {
  size_t elem = coll_dtype_size((coll_dtype_t)dtype);
  size_t sizes[2] = {per_rank(b, b->args.max_bytes / elem), per_rank(b, b->args.min_bytes / elem)};
  for (int s = 0; s < 2; s++)
    for (int it = 0; it < b->args.warmup; it++)
      if (run_once(b, b->sendbuf, b->recvbuf, sizes[s], dtype, op) != 0) return -1;
  return 0;
}

static size_t vmhwm_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  size_t kib = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %zu kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

/* Staging memory now and at its peak, and VmHWM: the max over ranks of each. */
static int memory_over_ranks(struct bench *b, size_t *staging, size_t *peak, size_t *hwm) {
  coll_mem_stats_t stats = {0};
  coll_status_t st = coll_comm_mem_stats(b->comm, &stats);
  if (st != COLL_OK) return fail(b, "coll_comm_mem_stats", st);
  uint64_t v[3] = {stats.staging_bytes, stats.staging_bytes_peak, vmhwm_kib()};
  if (all_reduce_small(b, v, 3, COLL_UINT64, COLL_MAX, "memory statistics") != 0) return -1;
  *staging = (size_t)v[0];
  *peak = (size_t)v[1];
  *hwm = (size_t)v[2];
  return 0;
}

/* Rank r writes its pid and host name into slot r, everyone else zeros: a byte-wise sum
 * all-reduce then acts as an all-gather (the API has no all-gather). */
static int gather_ranks(struct bench *b) {
  size_t slot = sizeof(uint32_t) + HOST_LEN;
  b->rank_info = calloc((size_t)b->nranks, slot);
  if (b->rank_info == NULL) {
    fprintf(stderr, "allreduce_bench: rank %d: out of memory\n", b->rank);
    return -1;
  }
  uint32_t pid = (uint32_t)getpid();
  char host[HOST_LEN] = {0};
  gethostname(host, sizeof host - 1);
  memcpy(b->rank_info + slot * (size_t)b->rank, &pid, sizeof pid);
  memcpy(b->rank_info + slot * (size_t)b->rank + sizeof pid, host, HOST_LEN);
  return all_reduce_small(b, b->rank_info, slot * (size_t)b->nranks, COLL_UINT8, COLL_SUM,
                          "rank list");
}

static void print_ranks(const struct bench *b) {
  size_t slot = sizeof(uint32_t) + HOST_LEN;
  printf("# Using ranks\n");
  for (int r = 0; r < b->nranks; r++) {
    uint32_t pid;
    char host[HOST_LEN];
    memcpy(&pid, b->rank_info + slot * (size_t)r, sizeof pid);
    memcpy(host, b->rank_info + slot * (size_t)r + sizeof pid, HOST_LEN);
    host[HOST_LEN - 1] = '\0';
    printf("#  Rank %2d Pid %6u on %10s\n", r, pid, host);
  }
}

static void print_header(const struct bench *b) {
  const bench_args_t *a = &b->args;
  const bench_meta_t *m = &b->meta;
  printf("# allreduce_bench (libcoll %s): coll_%s, columns as nccl-tests' %s_perf\n",
         COLL_VERSION, bench_collective_name(a->collective),
         bench_collective_name(a->collective));
  printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
         "validation: %d blocking: %d\n",
         b->nranks, a->min_bytes, a->max_bytes,
         a->step_factor > 1 ? (size_t)a->step_factor : a->step_bytes,
         a->step_factor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->check, a->blocking);
  printf("# algorithm: %s  transport: %s\n", m->algo, m->transport);
  if (a->local_register) {
    coll_mem_stats_t ms = {0};
    coll_comm_mem_stats(b->comm, &ms);
    printf("# buffers: coll_mem_alloc (-R 1), %s (%zu bytes of shared windows on rank 0)\n",
           ms.window_bytes > 0 ? "shared windows, zero-copy all-reduce" : "plain memory here",
           ms.window_bytes);
  }
  printf("# time: MEDIAN of the %d timed iterations (each timed alone, after a 4-byte "
         "all-reduce that aligns the ranks), max over ranks of the per-rank medians\n",
         a->iters);
  printf("# bandwidth: algbw = size / time, busbw = algbw * %s = algbw * %.3f "
         "(GB/s = 1e9 B/s)\n",
         a->collective == BENCH_ALL_REDUCE                              ? "2(n-1)/n"
         : a->collective == BENCH_BROADCAST || a->collective == BENCH_REDUCE ? "1"
                                                                        : "(n-1)/n",
         bench_collective_busbw_factor(a->collective, b->nranks));
  printf("# memory per rank: bench buffers %zu bytes (send %zu + recv %zu); libcoll staging "
         "%zu bytes after warm-up at maxBytes (max over ranks); peak RSS (VmHWM) %zu KiB "
         "(max over ranks, includes the bench buffers)\n",
         m->bench_buffer_bytes, b->buf_bytes, b->buf_bytes, m->staging_bytes, m->vmhwm_kib);
  printf("#\n");
  print_ranks(b);
  printf("#\n");
  bench_print_columns(stdout);
  fflush(stdout);
}

static int add_row(struct bench *b, const bench_row_t *row) {
  if (b->nrows == b->rows_cap) {
    size_t cap = b->rows_cap ? 2 * b->rows_cap : 64;
    bench_row_t *rows = realloc(b->rows, cap * sizeof *rows);
    if (rows == NULL) return -1;
    b->rows = rows;
    b->rows_cap = cap;
  }
  b->rows[b->nrows++] = *row;
  return 0;
}

static size_t next_size(const bench_args_t *a, size_t size) {
  if (a->step_factor > 1) return size == 0 ? 1 : size * (size_t)a->step_factor;
  return size + a->step_bytes;
}

/* Every size for one (type, op); the header goes out once the first warm-up has sized
 * the library's staging memory. */
static int bench_pair(struct bench *b, int dtype, int op, int *header_done) {
  uint64_t seed = (uint64_t)dtype * 16 + (uint64_t)op + 1;
  size_t elem = coll_dtype_size((coll_dtype_t)dtype);
  bench_data_fill(b->sendbuf, b->buf_bytes / elem, dtype, op, b->rank, b->nranks, seed);
  if (warm_up(b, dtype, op) != 0) return -1;
  if (!*header_done) {
    size_t peak = 0;
    if (memory_over_ranks(b, &b->meta.staging_bytes, &peak, &b->meta.vmhwm_kib) != 0) return -1;
    if (b->rank == 0) print_header(b);
    *header_done = 1;
  }
  for (size_t size = b->args.min_bytes; size <= b->args.max_bytes;) {
    bench_row_t row;
    if (bench_size(b, size, dtype, op, seed, &row) != 0) return -1;
    if (b->rank == 0) bench_print_row(stdout, &row);
    if (add_row(b, &row) != 0) {
      fprintf(stderr, "allreduce_bench: rank %d: out of memory\n", b->rank);
      return -1;
    }
    size_t next = next_size(&b->args, size);
    if (next <= size) break; /* step 0 with min == max, or overflow */
    size = next;
  }
  return 0;
}

/* The out-of-place busbw at the largest size, the lowest over the types and ops run. */
static double largest_size_busbw(const struct bench *b) {
  size_t largest = 0;
  double busbw = -1.0;
  for (size_t i = 0; i < b->nrows; i++)
    if (b->rows[i].bytes > largest) largest = b->rows[i].bytes;
  for (size_t i = 0; i < b->nrows; i++)
    if (b->rows[i].bytes == largest && (busbw < 0.0 || b->rows[i].oop.busbw < busbw))
      busbw = b->rows[i].oop.busbw;
  return busbw;
}

/* Closing lines (nccl-tests' two, then memory), the files, and the exit status. */
static int finish_run(struct bench *b) {
  double sum = 0.0;
  long long wrong = 0;
  for (size_t i = 0; i < b->nrows; i++) {
    sum += b->rows[i].oop.busbw + b->rows[i].ip.busbw;
    if (b->rows[i].oop.wrong > 0) wrong += b->rows[i].oop.wrong;
    if (b->rows[i].ip.wrong > 0) wrong += b->rows[i].ip.wrong;
  }
  b->meta.avg_busbw = b->nrows ? sum / (2.0 * (double)b->nrows) : 0.0;
  b->meta.wrong_total = wrong;
  size_t staging_now = 0;
  if (memory_over_ranks(b, &staging_now, &b->meta.staging_bytes_peak, &b->meta.vmhwm_kib) != 0)
    return 1;
  int status = wrong ? 1 : 0;
  if (b->rank != 0) return status;
  printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g \n", b->meta.avg_busbw);
  printf("# Memory at the end    : libcoll staging %zu bytes (peak %zu), peak RSS (VmHWM) %zu "
         "KiB, bench buffers %zu bytes (max over ranks)\n",
         staging_now, b->meta.staging_bytes_peak, b->meta.vmhwm_kib, b->meta.bench_buffer_bytes);
  if (b->args.min_busbw >= 0.0) {
    double busbw = largest_size_busbw(b);
    int ok = busbw >= b->args.min_busbw;
    printf("# Largest size busbw   : %.2f GB/s, required >= %g: %s\n", busbw, b->args.min_busbw,
           ok ? "OK" : "FAILED");
    if (!ok) status = 1;
  }
  printf("#\n");
  fflush(stdout);
  if (b->args.csv_path && bench_write_csv(b->args.csv_path, &b->meta, b->rows, b->nrows) != 0) {
    fprintf(stderr, "allreduce_bench: cannot write %s: %s\n", b->args.csv_path, strerror(errno));
    status = 1;
  }
  if (b->args.json_path && bench_write_json(b->args.json_path, &b->meta, b->rows, b->nrows) != 0) {
    fprintf(stderr, "allreduce_bench: cannot write %s: %s\n", b->args.json_path, strerror(errno));
    status = 1;
  }
  return status;
}

static void *alloc_buffer(size_t bytes) {
  void *p = NULL;
  /* 64-byte alignment like cudaMalloc'd buffers give nccl-tests; touched now so that
   * page faults never land in a timed iteration. */
  if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
  memset(p, 0, bytes ? bytes : 64);
  return p;
}

static int setup(struct bench *b) {
  coll_status_t st = coll_comm_init_env(&b->comm);
  if (st != COLL_OK) {
    fprintf(stderr, "allreduce_bench: coll_comm_init_env failed: %s (%s): %s\n",
            coll_status_name(st), coll_status_string(st), coll_last_error());
    return -1;
  }
  coll_comm_rank(b->comm, &b->rank);
  coll_comm_size(b->comm, &b->nranks);
  if (b->args.algo != BENCH_ALGO_UNSET) {
    st = coll_comm_set_algo(b->comm, (coll_algo_t)b->args.algo);
    if (st != COLL_OK) return fail(b, "coll_comm_set_algo", st);
  }
  b->buf_bytes = b->args.max_bytes;
  if (b->args.local_register) {
    /* Collective, same size on every rank; zeroed and mapped by every rank already. */
    st = coll_mem_alloc(b->comm, b->buf_bytes ? b->buf_bytes : 64, &b->sendbuf);
    if (st == COLL_OK) st = coll_mem_alloc(b->comm, b->buf_bytes ? b->buf_bytes : 64, &b->recvbuf);
    if (st != COLL_OK) return fail(b, "coll_mem_alloc", st);
  } else {
    b->sendbuf = alloc_buffer(b->buf_bytes);
    b->recvbuf = alloc_buffer(b->buf_bytes);
  }
  b->samples = calloc((size_t)b->args.iters, sizeof *b->samples);
  if (b->sendbuf == NULL || b->recvbuf == NULL || b->samples == NULL) {
    fprintf(stderr, "allreduce_bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
            b->buf_bytes);
    return -1;
  }
  const char *env_algo = getenv("COLL_ALGO");
  const char *env_transport = getenv("COLL_TRANSPORT");
  b->meta = (bench_meta_t){
    .nranks = b->nranks,
    .algo = b->args.algo != BENCH_ALGO_UNSET ? coll_algo_name((coll_algo_t)b->args.algo)
            : (env_algo && *env_algo)        ? env_algo
                                             : "auto",
    .transport = (env_transport && *env_transport) ? env_transport : "auto",
    .iters = b->args.iters,
    .warmup = b->args.warmup,
    .check = b->args.check,
    .blocking = b->args.blocking,
    .min_bytes = b->args.min_bytes,
    .max_bytes = b->args.max_bytes,
    .step_bytes = b->args.step_bytes,
    .step_factor = b->args.step_factor,
    .bench_buffer_bytes = 2 * b->buf_bytes,
  };
  return gather_ranks(b);
}

static int run_all(struct bench *b) {
  int header_done = 0;
  for (int dtype = 0; dtype < COLL_DTYPE_COUNT; dtype++) {
    if (b->args.dtype != BENCH_ALL && dtype != b->args.dtype) continue;
    for (int op = 0; op < COLL_OP_COUNT; op++) {
      if (b->args.op != BENCH_ALL && op != b->args.op) continue;
      /* Every op on every type: the bitwise ops on the integer types only (asked for
       * explicitly on a float type, the library's refusal is reported instead). */
      if (b->args.op == BENCH_ALL && !bench_op_applies(dtype, op)) continue;
      if (bench_pair(b, dtype, op, &header_done) != 0) return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  struct bench b = {0};
  char err[256];
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (bench_args_parse(argc, argv, &b.args, err, sizeof err) != 0) {
    fprintf(stderr, "allreduce_bench: %s\n", err);
    return 2;
  }
  if (b.args.help) {
    bench_args_usage(argv[0], stdout);
    return 0;
  }
  /* The transport is chosen at rendezvous, so it must be in the environment before init. */
  if (b.args.transport != NULL && setenv("COLL_TRANSPORT", b.args.transport, 1) != 0) {
    perror("allreduce_bench: setenv COLL_TRANSPORT");
    return 1;
  }
  int status = 1;
  if (setup(&b) == 0 && run_all(&b) == 0) status = finish_run(&b);
  else if (b.comm != NULL) coll_comm_abort(b.comm); /* peers fail fast, not at their timeout */
  if (b.args.local_register) { /* coll_comm_destroy would release them too */
    if (b.comm != NULL && b.sendbuf != NULL) coll_mem_free(b.comm, b.sendbuf);
    if (b.comm != NULL && b.recvbuf != NULL) coll_mem_free(b.comm, b.recvbuf);
  } else {
    free(b.sendbuf);
    free(b.recvbuf);
  }
  coll_comm_destroy(b.comm);
  free(b.samples);
  free(b.rows);
  free(b.rank_info);
  return status;
}
