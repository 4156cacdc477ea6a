/* calibrate: measures the cost model's constants (alpha, beta, gamma of
 * libcoll/src/algo/cost.c) for the transport the ranks use, and times the all-reduce
 * algorithms back to back (interleaved, median of rounds) so the model's choice can be
 * checked against the fastest measured one. Run one process per rank:
 *   collrun -n 2 build/bench/calibrate [-T shm|tcp] [-r ROUNDS] [-s SIZE]...
 * How each constant is measured (the model's formulas, see cost.c):
 *   gamma  local: dst[i] = a[i] + b[i] on float buffers of 16 MiB, seconds per byte of dst
 *   alpha  ring all-reduce of one float per rank: 2(n-1) steps, nothing else to pay
 *   beta   ring all-reduce of 64 MiB: t = steps alpha + 2(n-1)/n S beta + (n-1)/n S gamma,
 *          solved for beta (the ranks' CPUs both move and reduce the bytes, so the
 *          model adds the two)
 * With -H K the ranks are put on K made-up hosts, rank r on host r % K (COLL_HOST_ID, as a
 * round-robin launcher would): every link of the rank-order ring then joins two hosts, so
 * alpha and beta are the constants between nodes (cost.c's inter_alpha, inter_beta; tcp
 * between the made-up hosts, shm inside them), printed as such, and the table times the
 * node-aware all-reduces (ring_nodes, two_level, leaders) beside the ring. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

#define MAX_SIZES 16
#define MAX_ALGOS 4
static const coll_algo_t flat_algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD};
static const coll_algo_t node_algos[] = {COLL_ALGO_RING, COLL_ALGO_RING_NODES, COLL_ALGO_TWO_LEVEL,
                                         COLL_ALGO_LEADERS};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void check(coll_status_t st, const char *what) {
  if (st == COLL_OK) return;
  fprintf(stderr, "calibrate: %s: %s: %s\n", what, coll_status_name(st), coll_last_error());
  exit(1);
}

/* One all-reduce of `count` floats with `algo`, after a small one with the same algorithm
 * that lines the ranks up (and absorbs the check that follows a change of algorithm);
 * returns the slowest rank's time. */
static double timed(coll_comm_t *comm, coll_algo_t algo, float *send, float *recv, size_t count) {
  float sync = 0, slow;
  check(coll_comm_set_algo(comm, algo), "set_algo");
  check(coll_all_reduce(&sync, &slow, 1, COLL_FLOAT32, COLL_SUM, comm), "sync");
  double t0 = now_s();
  check(coll_all_reduce(send, recv, count, COLL_FLOAT32, COLL_SUM, comm), "all_reduce");
  double t = now_s() - t0;
  double tmax;
  check(coll_all_reduce(&t, &tmax, 1, COLL_FLOAT64, COLL_MAX, comm), "max");
  return tmax;
}

static double local_gamma(int rounds) {
  size_t n = (size_t)4 << 20; /* 16 MiB of floats per buffer: out of cache, like the data */
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *d = malloc(n * sizeof *d);
  if (a == NULL || b == NULL || d == NULL) exit(1);
  for (size_t i = 0; i < n; i++) a[i] = (float)i, b[i] = 1.0f, d[i] = 0.0f;
  double *t = calloc((size_t)rounds, sizeof *t);
  for (int r = 0; r < rounds; r++) {
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
    t[r] = now_s() - t0;
    __asm__ __volatile__("" : : "r"(d) : "memory"); /* keep the loop */
  }
  double g = median(t, rounds) / (double)(n * sizeof *d);
  free(t), free(a), free(b), free(d);
  return g;
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char **argv) {
  int rounds = 9, hosts = 1;
  size_t sizes[MAX_SIZES];
  int nsizes = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
      setenv("COLL_TRANSPORT", argv[++i], 1);
    } else if (strcmp(argv[i], "-H") == 0 && i + 1 < argc) {
      hosts = atoi(argv[++i]);
    } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc && nsizes < MAX_SIZES) {
      sizes[nsizes++] = parse_size(argv[++i]);
    } else {
      fprintf(stderr, "usage: collrun -n N %s [-T shm|tcp] [-H HOSTS] [-r ROUNDS] [-s SIZE]...\n",
              argv[0]);
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  if (nsizes == 0) {
    static const size_t dflt[] = {8, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (; nsizes < (int)(sizeof dflt / sizeof dflt[0]); nsizes++) sizes[nsizes] = dflt[nsizes];
  }
  const coll_algo_t *algos = hosts > 1 ? node_algos : flat_algos;
  int nalgos = hosts > 1 ? 4 : 3;
  const char *rank_env = getenv("RANK");
  if (hosts > 1 && rank_env != NULL) {
    char host[32];
    snprintf(host, sizeof host, "calibrate-host-%d", atoi(rank_env) % hosts);
    setenv("COLL_HOST_ID", host, 1);
  }
  coll_comm_t *comm;
  check(coll_comm_init_env(&comm), "init");
  int rank, n;
  coll_comm_rank(comm, &rank);
  coll_comm_size(comm, &n);
  size_t big = (size_t)64 << 20;
  for (int i = 0; i < nsizes; i++) big = sizes[i] > big ? sizes[i] : big;
  float *send = malloc(big), *recv = malloc(big);
  if (send == NULL || recv == NULL) return 1;
  for (size_t i = 0; i < big / sizeof(float); i++) send[i] = (float)(i % 1000);
  double *t = calloc((size_t)rounds, sizeof *t);
  const char *tp = getenv("COLL_TRANSPORT");

  /* alpha: one float per rank, ring, many samples (each is microseconds); warm up first
   * (connections, first touch). */
  enum { ALPHA_SAMPLES = 201 };
  double *ta = calloc(ALPHA_SAMPLES, sizeof *ta);
  if (ta == NULL) return 1;
  for (int w = 0; w < 20; w++) timed(comm, COLL_ALGO_RING, send, recv, (size_t)n);
  for (int r = 0; r < ALPHA_SAMPLES; r++)
    ta[r] = timed(comm, COLL_ALGO_RING, send, recv, (size_t)n);
  double alpha = median(ta, ALPHA_SAMPLES) / (2.0 * (n - 1));
  free(ta);
  double gamma = local_gamma(rounds);
  /* beta from the 64 MiB ring (default 512 KiB segments). */
  size_t S = (size_t)64 << 20, count = S / sizeof(float);
  timed(comm, COLL_ALGO_RING, send, recv, count);
  for (int r = 0; r < rounds; r++) t[r] = timed(comm, COLL_ALGO_RING, send, recv, count);
  double tr = median(t, rounds);
  double seg = 512.0 * 1024, chunk = ceil((double)count / n) * 4;
  double steps = 2.0 * (n - 1) * fmax(1.0, ceil(chunk / seg));
  double bytes = 2.0 * (n - 1) / n * (double)S, reduced = (double)(n - 1) / n * (double)S;
  double beta = (tr - steps * alpha - reduced * gamma) / bytes;
  if (rank == 0) {
    printf("# calibrate: %d ranks, transport %s, %d rounds (medians)%s\n", n, tp ? tp : "auto",
           rounds, hosts > 1 ? ", round-robin on made-up hosts: constants between nodes" : "");
    printf("%s %.3g s (%.2f us)  %s %.3g s/B (1/%.2f GB/s)  gamma %.3g s/B (1/%.2f GB/s)\n",
           hosts > 1 ? "inter_alpha" : "alpha", alpha, alpha * 1e6,
           hosts > 1 ? "inter_beta" : "beta", beta, 1e-9 / beta, gamma, 1e-9 / gamma);
    if (hosts > 1 && alpha > 0 && beta > 0)
      printf("# to use them: COLL_INTER_COST=%.3g,%.3g (latency us, GB/s)\n", alpha * 1e6,
             1e-9 / beta);
    printf("# %10s", "bytes");
    for (int a = 0; a < nalgos; a++) printf(" %10s us", coll_algo_name(algos[a]));
    printf(" %10s us   busbw GB/s: the same order\n", "auto");
  }
  /* The algorithms back to back: round-robin, so load changes hit all of them alike. */
  for (int s = 0; s < nsizes; s++) {
    size_t c = sizes[s] / sizeof(float);
    if (c == 0) c = 1;
    double med[MAX_ALGOS + 1];
    double *all = calloc((size_t)rounds * (MAX_ALGOS + 1), sizeof *all);
    if (all == NULL) return 1;
    for (int a = 0; a <= nalgos; a++)
      timed(comm, a < nalgos ? algos[a] : COLL_ALGO_AUTO, send, recv, c);
    for (int r = 0; r < rounds; r++)
      for (int a = 0; a <= nalgos; a++)
        all[a * rounds + r] = timed(comm, a < nalgos ? algos[a] : COLL_ALGO_AUTO, send, recv, c);
    for (int a = 0; a <= nalgos; a++) med[a] = median(all + a * rounds, rounds);
    free(all);
    if (rank == 0) {
      double f = (double)(c * 4) * 2.0 * (n - 1) / n * 1e-9;
      printf("  %10zu", c * 4);
      for (int a = 0; a <= nalgos; a++) printf(" %13.1f", med[a] * 1e6);
      printf("  ");
      for (int a = 0; a <= nalgos; a++) printf(" %.2f", f / med[a]);
      printf("\n");
    }
  }
  free(t), free(send), free(recv);
  check(coll_comm_destroy(comm), "destroy");
  return 0;
}
