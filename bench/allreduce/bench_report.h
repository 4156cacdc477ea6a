/* Results of allreduce_bench: statistics (median, bandwidths) and output in nccl-tests'
 * text layout, CSV and JSON. */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  double time_us; /* median over iterations, max over ranks */
  double algbw; /* GB/s (1e9 bytes/s) */
  double busbw;
  long long wrong; /* wrong elements summed over ranks; -1: not checked */
} bench_result_t;

typedef struct {
  size_t bytes;
  size_t count;
  int dtype;
  int op;
  bench_result_t oop; /* out-of-place */
  bench_result_t ip; /* in-place */
} bench_row_t;

/* What the header and the machine-readable files say about the run. */
typedef struct {
  int nranks;
  const char *algo; /* "ring", ..., or "auto" */
  const char *transport; /* "shm", "tcp", or "auto" */
  int iters, warmup, check, blocking;
  size_t min_bytes, max_bytes, step_bytes;
  long step_factor;
  size_t bench_buffer_bytes; /* per rank: send + recv */
  size_t staging_bytes; /* libcoll's, after the first warm-up, max over ranks */
  size_t staging_bytes_peak; /* at the end of the run, max over ranks */
  size_t vmhwm_kib; /* peak resident size at the end of the run, max over ranks */
  double avg_busbw;
  long long wrong_total;
} bench_meta_t;

/* Median of n samples (sorts v in place); 0 for n == 0. */
double bench_median(double *v, int n);
/* nccl-tests' all-reduce bus factor 2(n-1)/n: 0 for a single rank (nothing crosses a
 * link), 1 for two. */
double bench_busbw_factor(int nranks);
/* Fill time, algbw and busbw of r from the bytes and the time. */
void bench_result_set(bench_result_t *r, size_t bytes, double time_us, int nranks);
/* nccl-tests' 7-character time: 7.2f below 100 us, 7.1f below 10 ms, 7.0f above. */
void bench_time_str(double us, char *buf, size_t len);

/* Text output, nccl-tests layout. */
void bench_print_columns(FILE *out);
void bench_print_row(FILE *out, const bench_row_t *row);

/* Machine-readable output of the whole run; 0 or -1 (errno set) when the file fails. */
int bench_write_csv(const char *path, const bench_meta_t *meta, const bench_row_t *rows,
                    size_t nrows);
int bench_write_json(const char *path, const bench_meta_t *meta, const bench_row_t *rows,
                     size_t nrows);

#ifdef __cplusplus
}
#endif
#endif
