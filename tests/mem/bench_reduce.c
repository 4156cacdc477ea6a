/* Throughput of the host reductions (not a test): GB/s counting bytes read and written,
 * for a += b over 8 MiB of float32 and a few other types. Usage: bench_reduce [MiB]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem/memops.h"

static double now_s(void) {
  struct timespec ts;
  /* CPU time of this thread: the machine is often shared, and time spent descheduled
   * says nothing about the loops. */
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void bench(const char *name, coll_dtype_t t, size_t esize, coll_op_t op, size_t bytes) {
  size_t n = bytes / esize;
  char *a = malloc(bytes), *b = malloc(bytes), *d = malloc(bytes);
  if (!a || !b || !d) exit(1);
  memset(a, 0, bytes);
  memset(b, 0, bytes);
  memset(d, 0, bytes);
  mem_reduce_fn fn = mem_host_reduce_fn(t, op);
  int reps = 20;
  fn(a, a, b, n);
  double t0 = now_s();
  for (int r = 0; r < reps; r++) fn(a, a, b, n);
  double inplace = (double)(3 * bytes) * reps / (now_s() - t0) / 1e9;
  t0 = now_s();
  for (int r = 0; r < reps; r++) fn(d, a, b, n);
  double outplace = (double)(3 * bytes) * reps / (now_s() - t0) / 1e9;
  printf("%-10s %s: a=a+b %.1f GB/s, d=a+b %.1f GB/s\n", name, op == COLL_SUM ? "sum" : "max",
         inplace, outplace);
  free(a);
  free(b);
  free(d);
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 8;
  size_t bytes = mib << 20;
  bench("float32", COLL_FLOAT32, 4, COLL_SUM, bytes);
  bench("float32", COLL_FLOAT32, 4, COLL_MAX, bytes);
  bench("float64", COLL_FLOAT64, 8, COLL_SUM, bytes);
  bench("int32", COLL_INT32, 4, COLL_SUM, bytes);
  bench("int8", COLL_INT8, 1, COLL_SUM, bytes);
  bench("float16", COLL_FLOAT16, 2, COLL_SUM, bytes);
  bench("bfloat16", COLL_BFLOAT16, 2, COLL_SUM, bytes);
  bench("float8_e4m3", COLL_FLOAT8E4M3, 1, COLL_SUM, bytes);
  bench("float8_e5m2", COLL_FLOAT8E5M2, 1, COLL_MAX, bytes);
  return 0;
}
