/* Command-line options of allreduce_bench and the reference programs: nccl-tests'
 * all_reduce_perf options (same letters, same names, same defaults) plus our own. */
#ifndef BENCH_ARGS_H
#define BENCH_ARGS_H

#include <stddef.h>
#include <stdio.h>

#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -d all / -o all: run every type or every op. */
#define BENCH_ALL (-1)
/* -A not given: leave the algorithm to COLL_ALGO or the cost model. */
#define BENCH_ALGO_UNSET (-1)

typedef struct {
  size_t min_bytes; /* -b */
  size_t max_bytes; /* -e */
  size_t step_bytes; /* -i, used when step_factor <= 1 */
  long step_factor; /* -f */
  int iters; /* -n: timed iterations per size */
  int warmup; /* -w */
  int check; /* -c 0/1 */
  int blocking; /* -z 0: async call + wait; 1: blocking call */
  int local_register; /* -R 1: buffers from coll_mem_alloc (zero-copy windows) */
  int dtype; /* -d: coll_dtype_t or BENCH_ALL */
  int op; /* -o: coll_op_t or BENCH_ALL */
  int algo; /* -A: coll_algo_t or BENCH_ALGO_UNSET */
  int collective; /* -C: bench_collective_t (default all_reduce) */
  int root; /* -r: root of broadcast and reduce (default 0) */
  const char *transport; /* -T: shm|tcp|ib, NULL: library default */
  const char *csv_path; /* --csv */
  const char *json_path; /* --json */
  double min_busbw; /* --min-busbw GB/s; < 0: no threshold */
  int help; /* -h: print the usage and exit 0 */
} bench_args_t;

/* nccl-tests' defaults: 32 MiB only, step 1 MiB, 5 warm-up and 20 timed iterations,
 * check on, float sum, non-blocking. */
void bench_args_defaults(bench_args_t *args);

/* Parse argv (argv[0] is the program name). Returns 0, or -1 with a one-line message
 * naming the option and the bad value in err. Unknown options are errors. */
int bench_args_parse(int argc, char **argv, bench_args_t *args, char *err, size_t err_len);

/* "1024", "1K", "1.5M", "2G" (binary units, like nccl-tests). Returns 0 or -1. */
int bench_parse_size(const char *text, size_t *bytes);

/* nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16
 * (our names float16/float32/float64 are accepted too). -1 when unknown. */
int bench_dtype_from_name(const char *name);
const char *bench_dtype_name(int dtype);
/* Element size in bytes, 0 for an unknown type (same as coll_dtype_size, without the
 * library, so that unit tests and reference programs need not link it). */
size_t bench_dtype_size(int dtype);
/* sum prod max min avg; -1 when unknown. */
int bench_op_from_name(const char *name);
const char *bench_op_name(int op);

void bench_args_usage(const char *prog, FILE *out);

/* The collectives -C selects (nccl-tests' test names without "_perf"). */
typedef enum {
  BENCH_ALL_REDUCE = 0,
  BENCH_BROADCAST,
  BENCH_REDUCE,
  BENCH_ALL_GATHER,
  BENCH_REDUCE_SCATTER,
  BENCH_ALL_TO_ALL,
  BENCH_COLLECTIVE_COUNT
} bench_collective_t;
const char *bench_collective_name(int collective);
/* nccl-tests' bus-bandwidth factors: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
 * all_to_all (n-1)/n; broadcast and reduce 1. */
double bench_collective_busbw_factor(int collective, int nranks);

#ifdef __cplusplus
}
#endif
#endif
