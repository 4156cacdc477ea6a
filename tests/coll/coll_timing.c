/* A small timing program for developing the executor (not a test): forks N ranks,
 * runs float32 sum all-reduces of each size and prints the median time per call and the
 * bus bandwidth. Usage: coll_timing NRANKS ITERS SIZE_BYTES... (env COLL_* apply). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "coll.h"
#include "multiproc.h"

typedef struct {
  uint16_t port;
  int iters;
  int nsizes;
  size_t sizes[32];
} timing_t;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int rank_main(int rank, int nranks, void *arg) {
  const timing_t *t = arg;
  if (getenv("TIMING_PIN") != NULL) { /* rank r on CPU r mod ncpu */
    cpu_set_t all, one;
    sched_getaffinity(0, sizeof all, &all);
    int n = CPU_COUNT(&all), k = rank % n;
    CPU_ZERO(&one);
    for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &all) && seen++ == k) CPU_SET(c, &one);
    sched_setaffinity(0, sizeof one, &one);
  }
  coll_config_t cfg = {0};
  cfg.rank = rank;
  cfg.size = nranks;
  cfg.master_port = t->port;
  cfg.host_store = -1;
  coll_comm_t *comm;
  if (coll_comm_init_config(&cfg, &comm) != COLL_OK) {
    fprintf(stderr, "init: %s\n", coll_last_error());
    return 1;
  }
  double *times = calloc((size_t)t->iters, sizeof *times);
  for (int s = 0; s < t->nsizes; s++) {
    size_t count = t->sizes[s] / 4;
    float *buf = calloc(count + 1, 4);
    for (int w = 0; w < 3; w++) coll_all_reduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm);
    double cpu0 = cpu_us();
    for (int i = 0; i < t->iters; i++) {
      double t0 = now_us();
      coll_status_t st = coll_all_reduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm);
      times[i] = now_us() - t0;
      if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
        return 1;
      }
    }
    double cpu = (cpu_us() - cpu0) / t->iters;
    qsort(times, (size_t)t->iters, sizeof *times, cmp_double);
    double med = times[t->iters / 2];
    double busbw = (double)(count * 4) / med / 1e3 * 2.0 * (nranks - 1) / nranks;
    if (rank == 0 && getenv("TIMING_CPU") != NULL) printf("rank 0 on cpu %d\n", sched_getcpu());
    if (rank == 1 && getenv("TIMING_CPU") != NULL) printf("rank 1 on cpu %d\n", sched_getcpu());
    if (rank == 0)
      printf("%12zu bytes  median %10.2f us  min %10.2f us  busbw %6.2f GB/s  cpu %10.2f us\n",
             count * 4, med, times[0], busbw, cpu);
    free(buf);
  }
  free(times);
  coll_comm_destroy(comm);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s NRANKS ITERS SIZE_BYTES...\n", argv[0]);
    return 2;
  }
  timing_t t = {.port = mp_free_port(), .iters = atoi(argv[2])};
  for (int i = 3; i < argc && t.nsizes < 32; i++) t.sizes[t.nsizes++] = strtoull(argv[i], NULL, 0);
  return mp_run(atoi(argv[1]), 600000, rank_main, &t) == 0 ? 0 : 1;
}
