/* A tiny elastic "trainer" on coll.h alone, for collrun --elastic/--replace and the kill
 * harness (kill_trials.py): every step all-reduces a gradient made from its share of the
 * step's samples, agrees on the outcome, commits or shrinks and redoes the step, grows to
 * take replacements in (state sent by broadcast), logs every sample it used and prints
 * timestamped events. Gradients are integers held in doubles, so the final parameters
 * are bit-identical whatever the rank count or the failures.
 *
 * usage: elastic_worker --steps S --batch B --dim D [--step-ms MS] [--sample-log FILE]
 *                       [--out FILE] [--checkpoint FILE [--checkpoint-every K] [--resume]]
 * --checkpoint: rank 0 writes the step and parameters every K committed steps (write,
 * fsync, rename), and --resume starts from that file: the usual recovery, for comparison.
 * Sample log lines (one write each, O_APPEND):
 *   U <step> <attempt> <rank> <size> <first> <stride> <count>   before the step's all-reduce
 *   C <step> <attempt> <size>                                   after it was agreed on
 * Sample ids of a U line: first + k * stride, k < count. A step's attempt counts its
 * shrinks, so (step, attempt) names the same try on every member.
 * Events on stdout: "EV <unix time> <pid> <event> key=value...".
 * Exit codes: 0 done, 3 fenced (declared failed while alive), 4 a libcoll error. */
#include <coll.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_FENCED = 3, EXIT_COLL = 4 };

typedef struct {
  int64_t steps, batch, dim, step_ms;
  const char *sample_log;
  const char *out;
  const char *checkpoint;
  int64_t checkpoint_every;
  bool resume;
} args_t;

/* What a joiner receives: where the job is and the parameters. */
typedef struct {
  int64_t step;
  double *params;
} state_t;

static int log_fd = -1;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void event(const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  printf("EV %.6f %d %s\n", now_s(), (int)getpid(), text);
  fflush(stdout);
}

static void sample_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void sample_log(const char *fmt, ...) {
  if (log_fd < 0) return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0 && write(log_fd, line, (size_t)n) != n) perror("sample log");
}

static _Noreturn void fail(coll_status_t st, const char *what) {
  fprintf(stderr, "elastic_worker %d: %s: %s: %s\n", (int)getpid(), what, coll_status_name(st),
          coll_last_error());
  event("exit what=%s status=%s", what, coll_status_name(st));
  exit(st == COLL_ERR_FENCED ? EXIT_FENCED : EXIT_COLL);
}

static int64_t parse_arg(const char *text, const char *name) {
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) {
    fprintf(stderr, "elastic_worker: %s '%s' must be a non-negative integer\n", name, text);
    exit(2);
  }
  return v;
}

static args_t parse_args(int argc, char **argv) {
  args_t a = {.steps = 50, .batch = 64, .dim = 4096, .checkpoint_every = 10};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(argv[i], "--resume") == 0) {
      a.resume = true;
      continue;
    }
    if (strcmp(argv[i], "--steps") == 0)
      a.steps = parse_arg(v, argv[i]);
    else if (strcmp(argv[i], "--batch") == 0)
      a.batch = parse_arg(v, argv[i]);
    else if (strcmp(argv[i], "--dim") == 0)
      a.dim = parse_arg(v, argv[i]);
    else if (strcmp(argv[i], "--step-ms") == 0)
      a.step_ms = parse_arg(v, argv[i]);
    else if (strcmp(argv[i], "--sample-log") == 0)
      a.sample_log = v;
    else if (strcmp(argv[i], "--out") == 0)
      a.out = v;
    else if (strcmp(argv[i], "--checkpoint") == 0)
      a.checkpoint = v;
    else if (strcmp(argv[i], "--checkpoint-every") == 0)
      a.checkpoint_every = parse_arg(v, argv[i]);
    else {
      fprintf(stderr, "elastic_worker: unknown argument '%s'\n", argv[i]);
      exit(2);
    }
    i++;
  }
  if (a.batch < 1 || a.dim < 1 || a.checkpoint_every < 1) {
    fprintf(stderr, "elastic_worker: --batch, --dim and --checkpoint-every must be positive\n");
    exit(2);
  }
  return a;
}

/* The gradient of sample `id` at coordinate j: a small integer, so sums are exact. */
static double sample_grad(int64_t id, int64_t j) {
  return (double)(((uint64_t)id * 2654435761u + (uint64_t)j * 40503u) % 1009u);
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Replace *comm by the communicator without the agreement's failed ranks. A shrink that
 * fails (another member died during it) leaves *comm: the caller agrees on it again, and
 * that agreement finds the new failure. */
static void shrink(coll_comm_t **comm, const coll_agreement_t *a) {
  coll_comm_t *smaller = NULL;
  coll_status_t st = coll_comm_shrink(*comm, a->failed, a->nfailed, &smaller);
  if (st == COLL_ERR_FENCED) fail(st, "shrink");
  if (st != COLL_OK) {
    event("shrink_failed status=%s", coll_status_name(st));
    fprintf(stderr, "elastic_worker: shrink: %s\n", coll_last_error());
    coll_comm_revoke(*comm);
    return;
  }
  coll_comm_destroy(*comm);
  *comm = smaller;
  int n = 0, r = 0;
  coll_comm_size(*comm, &n);
  coll_comm_rank(*comm, &r);
  event("shrunk size=%d rank=%d nfailed=%d first_failed=%d", n, r, a->nfailed,
        a->nfailed > 0 ? a->failed[0] : -1);
}

/* After a grow or a join: rank 0 sends the state; agreed on, else shrink and send again. */
static void transfer_state(coll_comm_t **comm, state_t *s, int64_t dim) {
  for (;;) {
    coll_status_t st = coll_broadcast(&s->step, 1, COLL_INT64, 0, *comm);
    if (st == COLL_OK) st = coll_broadcast(s->params, (size_t)dim, COLL_FLOAT64, 0, *comm);
    coll_agreement_t a = {.flag = st == COLL_OK};
    coll_status_t ast = coll_comm_agree(*comm, &a);
    if (ast != COLL_OK) fail(ast, "agree after the state transfer");
    if (a.flag && a.nfailed == 0) return;
    shrink(comm, &a);
  }
}

static void grow(coll_comm_t **comm, int joiners, state_t *s, int64_t dim) {
  coll_comm_t *bigger = NULL;
  coll_status_t st = coll_comm_grow(*comm, joiners, &bigger);
  if (st != COLL_OK) {
    /* The old communicator stays usable; the joiners are lost to this grow. */
    event("grow_failed joiners=%d", joiners);
    fprintf(stderr, "elastic_worker: grow: %s\n", coll_last_error());
    return;
  }
  coll_comm_destroy(*comm);
  *comm = bigger;
  transfer_state(comm, s, dim);
  int n = 0;
  coll_comm_size(*comm, &n);
  event("grown size=%d step=%lld", n, (long long)s->step);
}

static void write_params(const char *path, const double *params, int64_t dim) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(params, sizeof *params, (size_t)dim, f) != (size_t)dim) {
    perror(path);
    exit(2);
  }
  fclose(f);
}

static void save_checkpoint(const char *path, const state_t *s, int64_t dim) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL || fwrite(&s->step, sizeof s->step, 1, f) != 1 ||
      fwrite(s->params, sizeof *s->params, (size_t)dim, f) != (size_t)dim || fflush(f) != 0 ||
      fsync(fileno(f)) != 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    perror(path);
    exit(2);
  }
  event("checkpoint step=%lld", (long long)s->step);
}

static void load_checkpoint(const char *path, state_t *s, int64_t dim) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return; /* none yet: from the start */
  if (fread(&s->step, sizeof s->step, 1, f) != 1 ||
      fread(s->params, sizeof *s->params, (size_t)dim, f) != (size_t)dim) {
    fprintf(stderr, "elastic_worker: %s is damaged\n", path);
    exit(2);
  }
  fclose(f);
  event("resumed step=%lld", (long long)s->step);
}

int main(int argc, char **argv) {
  args_t args = parse_args(argc, argv);
  if (args.sample_log != NULL) {
    log_fd = open(args.sample_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      perror(args.sample_log);
      return 2;
    }
  }
  state_t s = {.params = calloc((size_t)args.dim, sizeof(double))};
  double *grad = calloc((size_t)args.dim, sizeof(double));
  if (s.params == NULL || grad == NULL) return 2;
  const char *join = getenv("COLL_ELASTIC_JOIN");
  bool joiner = join != NULL && strcmp(join, "1") == 0;
  event("start joiner=%d env_rank=%s", joiner, getenv("RANK") ? getenv("RANK") : "?");
  coll_comm_t *comm = NULL;
  coll_status_t st = joiner ? coll_comm_join(NULL, 0, &comm) : coll_comm_init_env(&comm);
  if (st != COLL_OK) fail(st, joiner ? "join" : "init");
  if (args.resume && args.checkpoint != NULL) load_checkpoint(args.checkpoint, &s, args.dim);
  if (joiner) {
    int r = 0;
    coll_comm_rank(comm, &r);
    event("joined rank=%d", r);
    transfer_state(&comm, &s, args.dim);
    event("state_received step=%lld", (long long)s.step);
  }
  int64_t attempt = 0;
  while (s.step < args.steps) {
    int n = 0, r = 0;
    coll_comm_size(comm, &n);
    coll_comm_rank(comm, &r);
    int64_t first = s.step * args.batch + r;
    int64_t count = r < args.batch ? (args.batch - r + n - 1) / n : 0;
    sample_log("U %lld %lld %d %d %lld %d %lld\n", (long long)s.step, (long long)attempt, r, n,
               (long long)first, n, (long long)count);
    for (int64_t j = 0; j < args.dim; j++) {
      double g = 0;
      for (int64_t k = 0; k < count; k++) g += sample_grad(first + k * n, j);
      grad[j] = g;
    }
    if (args.step_ms > 0) sleep_ms(args.step_ms); /* the forward and backward passes */
    st = coll_all_reduce(grad, grad, (size_t)args.dim, COLL_FLOAT64, COLL_SUM, comm);
    if (st != COLL_OK)
      event("detect what=all_reduce status=%s step=%lld", coll_status_name(st), (long long)s.step);
    coll_agreement_t a = {.flag = st == COLL_OK};
    coll_status_t ast = coll_comm_agree(comm, &a);
    if (ast != COLL_OK) fail(ast, "agree");
    if (a.nfailed > 0 || !a.flag) {
      event("agreed nfailed=%d flag=%u step=%lld", a.nfailed, a.flag, (long long)s.step);
      shrink(&comm, &a);
      attempt++;
      continue;
    }
    for (int64_t j = 0; j < args.dim; j++) s.params[j] += grad[j];
    sample_log("C %lld %lld %d\n", (long long)s.step, (long long)attempt, n);
    event("commit step=%lld size=%d", (long long)s.step, n);
    s.step++;
    attempt = 0;
    if (r == 0 && args.checkpoint != NULL && s.step % args.checkpoint_every == 0)
      save_checkpoint(args.checkpoint, &s, args.dim);
    if (a.joiners > 0 && s.step < args.steps) grow(&comm, a.joiners, &s, args.dim);
  }
  int r = 0;
  coll_comm_rank(comm, &r);
  if (r == 0 && args.out != NULL) write_params(args.out, s.params, args.dim);
  event("done rank=%d", r);
  coll_comm_destroy(comm);
  free(grad);
  free(s.params);
  return 0;
}
