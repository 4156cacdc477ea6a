/* The cache-line floor of a small all-reduce between two CPUs of this machine: two
 * processes, each bound to one CPU, share one page and pass a counter through it in
 * cache lines of their own, nothing else (no data, no reduction, no library).
 *
 *   line_ceiling [-c CPU,CPU] [-i rounds] [-r repeats]
 *
 * Two patterns, each timed over `rounds` rounds, `repeats` times, median printed:
 *   exchange: both write their line, then each waits for the other's (what a 2-rank
 *     all-reduce of one line does: its time can be no less than this);
 *   one way:  half of a ping-pong's round trip (one line's trip from one core to the other).
 * On a VM the figure depends on where the host runs the two virtual CPUs at the time,
 * which is why bench/compare/compare_sweep.sh measures it before each round. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_report.h"

enum { MAX_REPEATS = 101, SPIN_CHECK = 1 << 16 };
static const double TIMEOUT_S = 10.0; /* a peer that stops answering: give up, say so */

typedef struct {
  _Alignas(64) _Atomic uint64_t value;
} line_t;

typedef struct {
  line_t lines[2];         /* one per process */
  _Atomic uint64_t go;     /* the parent's start signal for each pattern and repeat */
  _Atomic int child_ready; /* the child is bound and spinning */
} shared_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spins until *v reaches want; false after TIMEOUT_S. */
static int wait_for(_Atomic uint64_t *v, uint64_t want) {
  double start = 0;
  for (unsigned long spins = 1;; spins++) {
    if (atomic_load_explicit(v, memory_order_acquire) >= want) return 1;
    if (spins % SPIN_CHECK == 0) {
      double t = now_s();
      if (start == 0)
        start = t;
      else if (t - start > TIMEOUT_S)
        return 0;
    }
  }
}

static int bind_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set);
}

/* One pattern, `rounds` rounds; `me` is 0 (parent) or 1 (child). Counters run on across
 * calls from `base`. Returns 0 on a timeout. */
static int exchange(shared_t *s, int me, uint64_t base, long rounds) {
  for (long i = 1; i <= rounds; i++) {
    atomic_store_explicit(&s->lines[me].value, base + (uint64_t)i, memory_order_release);
    if (!wait_for(&s->lines[1 - me].value, base + (uint64_t)i)) return 0;
  }
  return 1;
}

static int ping_pong(shared_t *s, int me, uint64_t base, long rounds) {
  for (long i = 1; i <= rounds; i++) {
    uint64_t v = base + (uint64_t)i;
    if (me == 0) {
      atomic_store_explicit(&s->lines[0].value, v, memory_order_release);
      if (!wait_for(&s->lines[1].value, v)) return 0;
    } else {
      if (!wait_for(&s->lines[0].value, v)) return 0;
      atomic_store_explicit(&s->lines[1].value, v, memory_order_release);
    }
  }
  return 1;
}

static void usage(FILE *to) {
  fprintf(to,
          "usage: line_ceiling [-c CPU,CPU] [-i rounds] [-r repeats]\n"
          "  -c  the two CPUs (default: the first two this process may run on)\n"
          "  -i  rounds per timing (default 100000)\n"
          "  -r  timings per pattern, median printed (default 5, at most %d)\n",
          MAX_REPEATS);
}

/* The first two CPUs of this process's affinity mask. */
static int default_cpus(const cpu_set_t *allowed, int cpus[2]) {
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, allowed)) cpus[n++] = c;
  return n == 2;
}

int main(int argc, char **argv) {
  int cpus[2] = {-1, -1};
  long rounds = 100000, repeats = 5;
  int opt;
  while ((opt = getopt(argc, argv, "c:i:r:h")) != -1) {
    char *end = NULL;
    switch (opt) {
      case 'c':
        if (sscanf(optarg, "%d,%d", &cpus[0], &cpus[1]) != 2 || cpus[0] < 0 || cpus[1] < 0 ||
            cpus[0] == cpus[1]) {
          fprintf(stderr, "line_ceiling: -c wants two different CPUs as A,B, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 'i':
        rounds = strtol(optarg, &end, 10);
        if (*end != '\0' || rounds < 1 || rounds > 100000000) {
          fprintf(stderr, "line_ceiling: -i wants 1 to 100000000 rounds, got '%s'\n", optarg);
          return 2;
        }
        break;
      case 'r':
        repeats = strtol(optarg, &end, 10);
        if (*end != '\0' || repeats < 1 || repeats > MAX_REPEATS) {
          fprintf(stderr, "line_ceiling: -r wants 1 to %d repeats, got '%s'\n", MAX_REPEATS,
                  optarg);
          return 2;
        }
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "line_ceiling: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    fprintf(stderr, "line_ceiling: sched_getaffinity: %s\n", strerror(errno));
    return 1;
  }
  if (cpus[0] < 0 && !default_cpus(&allowed, cpus)) {
    fprintf(stderr, "line_ceiling: this process may run on fewer than two CPUs\n");
    return 2;
  }
  for (int k = 0; k < 2; k++)
    if (cpus[k] >= CPU_SETSIZE || !CPU_ISSET(cpus[k], &allowed)) {
      fprintf(stderr, "line_ceiling: CPU %d is not one this process may run on (-c)\n", cpus[k]);
      return 2;
    }

  shared_t *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) {
    fprintf(stderr, "line_ceiling: mmap: %s\n", strerror(errno));
    return 1;
  }
  memset(s, 0, sizeof *s);

  enum { PATTERNS = 2 };
  pid_t child = fork();
  if (child < 0) {
    fprintf(stderr, "line_ceiling: fork: %s\n", strerror(errno));
    return 1;
  }
  int me = child == 0 ? 1 : 0;
  if (bind_to(cpus[me]) != 0) {
    fprintf(stderr, "line_ceiling: cannot bind to CPU %d: %s\n", cpus[me], strerror(errno));
    if (me == 1) _exit(1);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 1;
  }
  if (me == 1) atomic_store(&s->child_ready, 1);

  double times[PATTERNS][MAX_REPEATS];
  uint64_t base = 0;
  int ok = 1, status = 0;
  if (me == 0) {
    double start = now_s();
    while (!atomic_load(&s->child_ready)) {
      if (waitpid(child, &status, WNOHANG) == child) {
        fprintf(stderr, "line_ceiling: the process for CPU %d ended before it started\n", cpus[1]);
        return 1;
      }
      if (now_s() - start > TIMEOUT_S) {
        ok = 0;
        break;
      }
    }
  }
  for (int p = 0; p < PATTERNS && ok; p++) {
    for (long r = 0; r < repeats && ok; r++) {
      uint64_t step = (uint64_t)(p * repeats + r) + 1;
      /* Start together: the parent says go, the child waits for it. */
      if (me == 0)
        atomic_store(&s->go, step);
      else if (!wait_for(&s->go, step)) {
        ok = 0;
        break;
      }
      double t0 = now_s();
      ok = p == 0 ? exchange(s, me, base, rounds) : ping_pong(s, me, base, rounds);
      times[p][r] = now_s() - t0;
      base += (uint64_t)rounds;
    }
  }
  if (me == 1) _exit(ok ? 0 : 1);

  if (!ok) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "line_ceiling: no answer from the other CPU within %.0f s\n", TIMEOUT_S);
    return 1;
  }
  double median[PATTERNS];
  for (int p = 0; p < PATTERNS; p++)
    median[p] = bench_median(times[p], (int)repeats) / (double)rounds * 1e9;
  printf("cpus %d,%d  exchange %.0f ns  one way %.0f ns  (median of %ld timings of %ld rounds)\n",
         cpus[0], cpus[1], median[0], median[1] / 2, repeats, rounds);
  return 0;
}
