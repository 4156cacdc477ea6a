/* ref_mpi: the reference all-reduce, MPI_Allreduce, timed exactly like allreduce_bench
 * (median of separately timed iterations after a barrier, max over ranks) and printed in
 * the same columns (out-of-place only), so bench/compare/compare.sh can join the two. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_args.h"
#include "bench_data.h"
#include "bench_report.h"

static MPI_Datatype mpi_type(int dtype) {
  switch (dtype) {
  case COLL_INT8: return MPI_INT8_T;
  case COLL_UINT8: return MPI_UINT8_T;
  case COLL_INT32: return MPI_INT32_T;
  case COLL_UINT32: return MPI_UINT32_T;
  case COLL_INT64: return MPI_INT64_T;
  case COLL_UINT64: return MPI_UINT64_T;
  case COLL_FLOAT32: return MPI_FLOAT;
  case COLL_FLOAT64: return MPI_DOUBLE;
  default: return MPI_DATATYPE_NULL; /* MPI has no half or bfloat16 */
  }
}

static MPI_Op mpi_op(int op) {
  switch (op) {
  case COLL_SUM: return MPI_SUM;
  case COLL_PROD: return MPI_PROD;
  case COLL_MIN: return MPI_MIN;
  case COLL_MAX: return MPI_MAX;
  case COLL_BAND: return MPI_BAND;
  case COLL_BOR: return MPI_BOR;
  case COLL_BXOR: return MPI_BXOR;
  default: return MPI_OP_NULL; /* no average in MPI */
  }
}

/* Median over iterations, max over ranks, of one size; wrong elements summed (-1: off). */
static int run_size(const bench_args_t *a, int nranks, void *send, void *recv, size_t count,
                    double *samples, double *time_us, long long *wrong) {
  MPI_Datatype type = mpi_type(a->dtype);
  MPI_Op op = mpi_op(a->op);
  for (int it = 0; it < a->iters; it++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (MPI_Allreduce(send, recv, (int)count, type, op, MPI_COMM_WORLD) != MPI_SUCCESS) return -1;
    samples[it] = (MPI_Wtime() - t0) * 1e6;
  }
  double median = bench_median(samples, a->iters);
  MPI_Allreduce(&median, time_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  *wrong = -1;
  if (a->check) {
    long long local = (long long)bench_data_check(recv, count, a->dtype, a->op, nranks, 1);
    MPI_Allreduce(&local, wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  return 0;
}

int main(int argc, char **argv) {
  bench_args_t a;
  char err[256];
  if (bench_args_parse(argc, argv, &a, err, sizeof err) != 0) {
    fprintf(stderr, "ref_mpi: %s\n", err);
    return 2;
  }
  if (a.help) {
    printf("ref_mpi: MPI_Allreduce with allreduce_bench's options (-b -e -f -i -n -w -c -d -o);\n"
           "types int8..uint64, float, double; ops sum, prod, min, max (band, bor, bxor\n"
           "on the integer types). Run with mpirun.\n");
    return 0;
  }
  if (a.dtype < 0 || a.op < 0 || mpi_type(a.dtype) == MPI_DATATYPE_NULL ||
      mpi_op(a.op) == MPI_OP_NULL || !bench_op_applies(a.dtype, a.op)) {
    fprintf(stderr, "ref_mpi: one type and one op MPI supports, please (no half, bfloat16, "
                    "avg, all, or bitwise op on a float type)\n");
    return 2;
  }
  if (a.max_bytes / bench_dtype_size(a.dtype) > (size_t)INT32_MAX) {
    fprintf(stderr, "ref_mpi: -e too large for an MPI count\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t elem = bench_dtype_size(a.dtype);
  void *send = malloc(a.max_bytes + 64);
  void *recv = malloc(a.max_bytes + 64);
  double *samples = calloc((size_t)a.iters, sizeof *samples);
  if (send == NULL || recv == NULL || samples == NULL) {
    fprintf(stderr, "ref_mpi: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(recv, 0, a.max_bytes);
  bench_data_fill(send, a.max_bytes / elem, a.dtype, a.op, rank, nranks, 1);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(version, &len);
  char *nl = strchr(version, '\n');
  if (nl) *nl = '\0';
  int status = 0;
  for (int it = 0; it < a.warmup; it++)
    MPI_Allreduce(send, recv, (int)(a.max_bytes / elem), mpi_type(a.dtype), mpi_op(a.op),
                  MPI_COMM_WORLD);
  if (rank == 0) {
    printf("# ref_mpi: MPI_Allreduce (%s), nRanks %d, out-of-place\n", version, nranks);
    printf("# time: MEDIAN of %d iterations, each timed alone after MPI_Barrier, max over "
           "ranks; busbw = algbw * 2(n-1)/n\n",
           a.iters);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong");
  }
  double sum_busbw = 0.0;
  int rows = 0;
  for (size_t size = a.min_bytes; size <= a.max_bytes;) {
    size_t count = size / elem;
    double time_us = 0.0;
    long long wrong = -1;
    if (run_size(&a, nranks, send, recv, count, samples, &time_us, &wrong) != 0) {
      fprintf(stderr, "ref_mpi: rank %d: MPI_Allreduce failed\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    bench_result_t r;
    bench_result_set(&r, count * elem, time_us, nranks);
    if (wrong > 0) status = 1;
    if (rank == 0) {
      char t[32];
      bench_time_str(time_us, t, sizeof t);
      printf("%12zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5lld\n", count * elem, count,
             bench_dtype_name(a.dtype), bench_op_name(a.op), -1, t, r.algbw, r.busbw, wrong);
    }
    sum_busbw += r.busbw;
    rows++;
    size_t next = a.step_factor > 1 ? (size ? size * (size_t)a.step_factor : 1) : size + a.step_bytes;
    if (next <= size) break;
    size = next;
  }
  if (rank == 0) printf("# Avg bus bandwidth    : %g \n#\n", rows ? sum_busbw / rows : 0.0);
  free(send);
  free(recv);
  free(samples);
  MPI_Finalize();
  return status;
}
