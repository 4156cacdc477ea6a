/* A small rank program for the collrun tests. It reads its rank from RANK and, depending
 * on the mode in argv[1], prints its environment, fails in a chosen way, sleeps, or prints
 * many long lines:
 *   env                       one line with every variable collrun sets
 *   exit R CODE [ignore-term] rank R prints 7 lines and exits CODE; the others sleep
 *   kill R                    rank R kills itself with SIGKILL; the others sleep
 *   sleep [grandchild]        print PID= (and CHILD= of a forked sleeping child), sleep
 *   lines COUNT WIDTH         COUNT lines of WIDTH payload bytes (and some on stderr)
 *   cpus                      "RANK=<r> CPUS=<list>": the kernel's Cpus_allowed_list
 *   elastic R HOW MS          (collrun --elastic) rank R (-1: every rank, -2: all but 0) fails by
 * HOW: kill (SIGKILL), exit3, or late5 (exit 5 after 3*MS); the others print DONE after MS ms and
 * exit 0; a replacement (COLL_ELASTIC_JOIN=1) prints JOINER and its variables, exits 0 after MS ms
 * Sleeping ranks print "PID=<pid>" first, so a test knows whom to look for afterwards. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SLEEP_S = 60 };

static const char *env_or_dash(const char *name) {
  const char *v = getenv(name);
  return v != NULL ? v : "-";
}

static void print_env(void) {
  static const char *const names[] = {
      "RANK",           "WORLD_SIZE",        "LOCAL_RANK",      "LOCAL_WORLD_SIZE",
      "GROUP_RANK",     "GROUP_WORLD_SIZE",  "MASTER_ADDR",     "MASTER_PORT",
      "COLL_JOB_TOKEN", "COLL_STORE_HOSTED", "OMP_NUM_THREADS",
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    printf("%s=%s ", names[i], env_or_dash(names[i]));
  printf("STDIN_EOF=%d PID=%d\n", getchar() == EOF ? 1 : 0, (int)getpid());
}

/* The CPUs this process may run on, as the kernel reports them in /proc/self/status. */
static int print_cpus(int rank) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return 101;
  char line[4096];
  int rc = 102;
  while (fgets(line, sizeof line, f) != NULL) {
    const char *key = "Cpus_allowed_list:";
    if (strncmp(line, key, strlen(key)) != 0) continue;
    const char *list = line + strlen(key);
    list += strspn(list, " \t");
    printf("RANK=%d CPUS=%s", rank, list); /* the line ends with its own newline */
    rc = 0;
    break;
  }
  fclose(f);
  return rc;
}

static int sleep_forever(void) {
  printf("PID=%d\n", (int)getpid());
  fflush(stdout);
  sleep(SLEEP_S);
  return 0;
}

static int run_lines(int rank, long count, long width) {
  char *payload = malloc((size_t)width + 1);
  if (payload == NULL) return 1;
  memset(payload, 'a' + rank % 26, (size_t)width);
  payload[width] = '\0';
  for (long i = 0; i < count; i++) {
    printf("r%d i%ld %s\n", rank, i, payload);
    if (i % 10 == 0) fprintf(stderr, "e%d i%ld %s\n", rank, i, payload);
  }
  printf("r%d end", rank); /* no newline: collrun must still write it as a line */
  free(payload);
  return 0;
}

static int run_elastic(int rank, char **argv) {
  const char *join = getenv("COLL_ELASTIC_JOIN");
  if (join != NULL) {
    printf("JOINER RANK=%d COLL_ELASTIC_JOIN=%s WORLD_SIZE=%s LOCAL_RANK=%s MASTER_PORT=%s\n", rank,
           join, env_or_dash("WORLD_SIZE"), env_or_dash("LOCAL_RANK"), env_or_dash("MASTER_PORT"));
    fflush(stdout);
    usleep((useconds_t)(atol(argv[4]) * 1000));
    return 0;
  }
  int victim = atoi(argv[2]);
  const char *how = argv[3];
  long ms = atol(argv[4]);
  if (victim == rank || victim == -1 || (victim == -2 && rank != 0)) {
    printf("VICTIM PID=%d\n", (int)getpid());
    fflush(stdout);
    if (strcmp(how, "kill") == 0) raise(SIGKILL);
    if (strcmp(how, "exit3") == 0) return 3;
    usleep((useconds_t)(3 * ms * 1000));
    return 5;
  }
  usleep((useconds_t)(ms * 1000));
  printf("DONE\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 100;
  int rank = atoi(getenv("RANK") != NULL ? getenv("RANK") : "-1");
  const char *mode = argv[1];
  if (strcmp(mode, "env") == 0) {
    print_env();
    return 0;
  }
  if (strcmp(mode, "exit") == 0 && argc >= 4) {
    bool ignore_term = argc >= 5 && strcmp(argv[4], "ignore-term") == 0;
    if (rank == atoi(argv[2])) {
      /* Let the others start sleeping first (and ignore SIGTERM, when asked). */
      usleep((ignore_term ? 500 : 100) * 1000);
      for (int i = 1; i <= 7; i++) fprintf(i % 2 ? stdout : stderr, "rank %d line %d\n", rank, i);
      return atoi(argv[3]);
    }
    if (ignore_term) signal(SIGTERM, SIG_IGN);
    return sleep_forever();
  }
  if (strcmp(mode, "kill") == 0 && argc >= 3) {
    if (rank == atoi(argv[2])) {
      usleep(100 * 1000);
      printf("rank %d about to die\n", rank);
      fflush(stdout);
      raise(SIGKILL);
    }
    return sleep_forever();
  }
  if (strcmp(mode, "sleep") == 0) {
    if (argc >= 3 && strcmp(argv[2], "grandchild") == 0) {
      fflush(stdout);
      pid_t child = fork();
      if (child == 0) {
        sleep(SLEEP_S);
        _exit(0);
      }
      printf("CHILD=%d\n", (int)child);
    }
    return sleep_forever();
  }
  if (strcmp(mode, "cpus") == 0) return print_cpus(rank);
  if (strcmp(mode, "elastic") == 0 && argc >= 5) return run_elastic(rank, argv);
  if (strcmp(mode, "lines") == 0 && argc >= 4) return run_lines(rank, atol(argv[2]), atol(argv[3]));
  return 100;
}
