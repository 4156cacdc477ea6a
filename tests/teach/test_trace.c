/* Check suite 'teach', real-run traces: what 4 real rank processes record with
 * COLL_TRACE equals the simulator's step table for every algorithm of every collective
 * (same ops, peers, offsets and steps per rank, per-channel order kept), the files are
 * Trace Event JSON for every rank (tools/trace_merge.py), a split communicator writes
 * files of its own, tracing off writes nothing, a bad path is an error, and a trainer
 * run shows its forward/backward/all-reduce/optimizer spans. */
#include <check.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo/schedule.h"
#include "coll.h"
#include "command.h"
#include "multiproc.h"
#include "sim/sim.h"
#include "suite_run.h"

enum { NRANKS = 4, MAX_OPS = 20000, LINE_MAX_LEN = 2048 };

typedef struct {
  uint16_t port;
  char dir[256];
  coll_kind_t kind;
  coll_algo_t algo;
  int root;
  int trace;             /* set COLL_TRACE */
  size_t chunk;          /* COLL_CHUNK_SIZE when > 0 */
  const char *transport; /* COLL_TRANSPORT when set */
  int hosts;             /* > 0: rank r on made-up host r % hosts (COLL_HOST_ID) */
} job_t;

/* The two calls every traced run makes: a pipelined size and an odd small one. */
static const size_t counts[] = {70001, 1001};
enum { NCALLS = sizeof counts / sizeof counts[0] };

static void make_dir(job_t *j) {
  snprintf(j->dir, sizeof j->dir, "/tmp/coll-trace-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(j->dir));
}

static void remove_dir(const job_t *j) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", j->dir);
  ck_assert_int_eq(system(cmd), 0);
}

static int init(const job_t *j, int rank, int nranks, coll_comm_t **comm) {
  unsetenv("COLL_ALGO");
  unsetenv("COLL_CHUNK_SIZE");
  unsetenv("COLL_TRANSPORT");
  unsetenv("COLL_TRACE");
  unsetenv("COLL_HOST_ID");
  if (j->transport != NULL) setenv("COLL_TRANSPORT", j->transport, 1);
  if (j->hosts > 0) {
    char host[32];
    snprintf(host, sizeof host, "trace-host-%d", rank % j->hosts);
    setenv("COLL_HOST_ID", host, 1);
  }
  if (j->chunk > 0) {
    char chunk[32];
    snprintf(chunk, sizeof chunk, "%zu", j->chunk);
    setenv("COLL_CHUNK_SIZE", chunk, 1);
  }
  if (j->trace) {
    char spec[300];
    snprintf(spec, sizeof spec, "%s/t.json", j->dir);
    setenv("COLL_TRACE", spec, 1);
  }
  coll_config_t cfg = {.rank = rank,
                       .size = nranks,
                       .local_rank = rank,
                       .master_addr = "127.0.0.1",
                       .master_port = j->port,
                       .host_store = -1,
                       .timeout_ms = 30000};
  coll_status_t st = coll_comm_init_config(&cfg, comm);
  if (st != COLL_OK) fprintf(stderr, "rank %d: init: %s\n", rank, coll_last_error());
  return st != COLL_OK;
}

/* The job's collective on count elements (in the schedule's sense) from in into out. */
static coll_status_t call_kind(const job_t *j, float *in, float *out, size_t n, coll_comm_t *comm) {
  switch (j->kind) {
    case COLL_KIND_BROADCAST:
      return coll_broadcast(out, n, COLL_FLOAT32, j->root, comm);
    case COLL_KIND_REDUCE:
      return coll_reduce(in, out, n, COLL_FLOAT32, COLL_SUM, j->root, comm);
    case COLL_KIND_ALL_GATHER:
      return coll_all_gather(in, out, n, COLL_FLOAT32, comm);
    case COLL_KIND_REDUCE_SCATTER:
      return coll_reduce_scatter(in, out, n, COLL_FLOAT32, COLL_SUM, comm);
    case COLL_KIND_ALL_TO_ALL:
      return coll_all_to_all(in, out, n, COLL_FLOAT32, comm);
    case COLL_KIND_GATHER:
      return coll_gather(in, out, n, COLL_FLOAT32, j->root, comm);
    case COLL_KIND_SCATTER:
      return coll_scatter(in, out, n, COLL_FLOAT32, j->root, comm);
    default:
      return coll_all_reduce(out, out, n, COLL_FLOAT32, COLL_SUM, comm);
  }
}

/* Each rank: the job's collective at both counts, then destroy. All-reduce and
 * broadcast results are checked here (the coll suite checks every collective). */
static int rank_calls(int rank, int nranks, void *arg) {
  const job_t *j = arg;
  coll_comm_t *comm;
  if (init(j, rank, nranks, &comm)) return 1;
  int fails = coll_comm_set_algo(comm, j->algo) != COLL_OK;
  if (coll_trace_enabled(comm) != j->trace) fails++;
  size_t in_max, out_max;
  sched_buffer_counts(j->kind, counts[0], nranks, &in_max, &out_max);
  float *in = calloc(in_max, sizeof *in), *out = malloc(out_max * sizeof *out);
  if (in == NULL || out == NULL) return 1;
  for (int c = 0; c < NCALLS && !fails; c++) {
    size_t n = counts[c];
    for (size_t i = 0; i < n; i++) out[i] = (float)(rank + 1) + (float)(i % 7);
    coll_status_t st = call_kind(j, in, out, n, comm);
    if (st != COLL_OK) {
      fprintf(stderr, "rank %d: call %d: %s\n", rank, c, coll_last_error());
      fails++;
      break;
    }
    if (j->kind != COLL_KIND_ALL_REDUCE && j->kind != COLL_KIND_BROADCAST) continue;
    float want = j->kind == COLL_KIND_BROADCAST
                     ? (float)(j->root + 1) + (float)((n - 1) % 7)
                     : (float)(nranks * (nranks + 1) / 2) + (float)nranks * (float)((n - 1) % 7);
    if (out[n - 1] != want) {
      fprintf(stderr, "rank %d: call %d: last element %g, want %g\n", rank, c, out[n - 1], want);
      fails++;
    }
  }
  if (coll_trace_span_begin(comm, "user span") != COLL_OK) fails++;
  if (coll_trace_span_end(comm, "user span") != COLL_OK) fails++;
  free(in);
  free(out);
  if (coll_comm_destroy(comm) != COLL_OK) fails++;
  return fails != 0;
}

/* ---- reading a trace: one event per line ---- */

static long long num(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  ck_assert_msg(p != NULL, "no %s in %s", key, line);
  return strtoll(p + strlen(pat), NULL, 10);
}

static double dnum(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  ck_assert_msg(p != NULL, "no %s in %s", key, line);
  return strtod(p + strlen(pat), NULL);
}

static void str(const char *line, const char *key, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(line, pat);
  ck_assert_msg(p != NULL, "no %s in %s", key, line);
  p += strlen(pat);
  size_t n = 0;
  while (p[n] != '"' && n + 1 < cap) n++;
  memcpy(out, p, n);
  out[n] = '\0';
}

typedef struct {
  sched_op_t op;
  size_t index;
  unsigned step;
  double ts, posted;
} traced_op_t;

typedef struct {
  char algo[32];
  size_t count;
  size_t nops;
  traced_op_t *ops; /* indexed by op index */
} traced_call_t;

static uint8_t kind_of(const char *s) {
  static const char *const names[] = {[SCHED_SEND] = "send",
                                      [SCHED_RECV_COPY] = "recv",
                                      [SCHED_RECV_REDUCE] = "recv_reduce",
                                      [SCHED_LOCAL_COPY] = "local_copy",
                                      [SCHED_LOCAL_REDUCE] = "local_reduce"};
  for (uint8_t k = 0; k < 5; k++)
    if (strcmp(s, names[k]) == 0) return k;
  ck_abort_msg("unknown op kind %s", s);
  return 0;
}

static uint8_t buf_of(const char *s) {
  if (strcmp(s, "input") == 0) return SCHED_BUF_INPUT;
  if (strcmp(s, "output") == 0) return SCHED_BUF_OUTPUT;
  ck_assert_str_eq(s, "scratch");
  return SCHED_BUF_SCRATCH;
}

static FILE *open_trace(const job_t *j, int rank) {
  char path[320];
  snprintf(path, sizeof path, "%s/t.rank%d.json", j->dir, rank);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "rank %d wrote no %s", rank, path);
  return f;
}

/* Collectives and their ops from rank's file, by seq. */
static void read_calls(const job_t *j, int rank, traced_call_t *calls) {
  memset(calls, 0, NCALLS * sizeof *calls);
  for (int c = 0; c < NCALLS; c++) calls[c].ops = calloc(MAX_OPS, sizeof(traced_op_t));
  FILE *f = open_trace(j, rank);
  char line[LINE_MAX_LEN];
  while (fgets(line, sizeof line, f) != NULL) {
    bool coll = strstr(line, "\"cat\":\"collective\"") != NULL;
    bool op = strstr(line, "\"cat\":\"transfer\"") != NULL || strstr(line, "\"cat\":\"local\"");
    if (!coll && !op) continue;
    ck_assert_int_eq(num(line, "pid"), rank);
    long long seq = num(line, "seq");
    ck_assert_msg(seq >= 0 && seq < NCALLS, "rank %d: unexpected seq %lld", rank, seq);
    traced_call_t *call = &calls[seq];
    if (coll) {
      str(line, "algo", call->algo, sizeof call->algo);
      call->count = (size_t)num(line, "count");
      ck_assert_msg(strstr(line, "\"status\":\"COLL_OK\"") != NULL, "failed call: %s", line);
      continue;
    }
    size_t i = (size_t)num(line, "op");
    ck_assert_uint_lt(i, MAX_OPS);
    traced_op_t *t = &call->ops[i];
    ck_assert_msg(t->op.count == 0, "rank %d: op %zu of call %lld traced twice", rank, i, seq);
    char s[32];
    str(line, "kind", s, sizeof s);
    t->op.kind = kind_of(s);
    str(line, "buf", s, sizeof s);
    t->op.buf = buf_of(s);
    str(line, "src_buf", s, sizeof s);
    t->op.src_buf = buf_of(s);
    t->op.peer = (int32_t)num(line, "peer");
    t->op.offset = (size_t)num(line, "offset");
    t->op.src_offset = (size_t)num(line, "src_offset");
    t->op.count = (size_t)num(line, "count");
    t->step = (unsigned)num(line, "step");
    t->ts = dnum(line, "ts");
    t->posted = dnum(line, "posted_us");
    t->index = i;
    if (i + 1 > call->nops) call->nops = i + 1;
  }
  fclose(f);
}

static coll_algo_t algo_named(const char *name) {
  for (int a = 0; a < COLL_ALGO_COUNT; a++)
    if (strcmp(coll_algo_name((coll_algo_t)a), name) == 0) return (coll_algo_t)a;
  ck_abort_msg("unknown algorithm %s in the trace", name);
  return COLL_ALGO_AUTO;
}

/* The sim's events of one rank must be exactly the traced ops, op by op. */
static void compare(const job_t *j, int c, int rank, const traced_call_t *call,
                    const sim_result_t *res) {
  size_t matched = 0;
  unsigned last_step = 0;
  for (size_t k = 0; k < sim_event_count(res); k++) {
    const sim_event_t *ev = sim_event_at(res, k);
    if (ev->rank != rank) continue;
    ck_assert_msg(ev->step >= last_step, "sim: rank %d runs step %zu after %u", rank, ev->step,
                  last_step);
    last_step = (unsigned)ev->step;
    const char *what = coll_algo_name(j->algo);
    ck_assert_msg(ev->op_index < call->nops, "%s call %d rank %d: op %zu not in the trace", what, c,
                  rank, ev->op_index);
    const traced_op_t *t = &call->ops[ev->op_index];
    const sched_op_t *a = &ev->op, *b = &t->op;
    ck_assert_msg(t->step == ev->step && a->kind == b->kind && a->peer == b->peer &&
                      a->buf == b->buf && a->offset == b->offset && a->count == b->count,
                  "%s call %d rank %d op %zu: sim step %zu kind %d peer %d buf %d [%zu,+%zu), "
                  "trace step %u kind %d peer %d buf %d [%zu,+%zu)",
                  what, c, rank, ev->op_index, ev->step, a->kind, a->peer, a->buf, a->offset,
                  a->count, t->step, b->kind, b->peer, b->buf, b->offset, b->count);
    if (a->kind == SCHED_RECV_REDUCE || a->kind >= SCHED_LOCAL_COPY)
      ck_assert_msg(a->src_buf == b->src_buf && a->src_offset == b->src_offset,
                    "%s call %d rank %d op %zu: source differs", what, c, rank, ev->op_index);
    matched++;
  }
  ck_assert_msg(matched == call->nops, "rank %d call %d: sim ran %zu ops, the trace has %zu", rank,
                c, matched, call->nops);
}

/* On every channel the transfers ran in schedule order (schedule.h rule 2). */
static void check_channel_order(int rank, const traced_call_t *call) {
  for (int peer = 0; peer < NRANKS; peer++)
    for (int recv = 0; recv < 2; recv++) {
      double ts = 0, posted = 0;
      for (size_t i = 0; i < call->nops; i++) {
        const traced_op_t *t = &call->ops[i];
        if (t->op.peer != peer || t->op.kind > SCHED_RECV_REDUCE) continue;
        if ((t->op.kind != SCHED_SEND) != recv) continue;
        ck_assert_msg(t->ts >= ts && t->posted >= posted,
                      "rank %d: op %zu on the channel %s rank %d ran before an earlier one", rank,
                      i, recv ? "from" : "to", peer);
        ts = t->ts;
        posted = t->posted;
      }
    }
}

static const struct {
  coll_kind_t kind;
  coll_algo_t algo;
  const char *transport; /* NULL: the default (shm on one host) */
  int hosts;             /* made-up hosts, round-robin (job_t.hosts) */
} cases[] = {
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_RING},
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_TREE},
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_HD},
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_MASTER},
    {.kind = COLL_KIND_BROADCAST, .algo = COLL_ALGO_RING},
    {.kind = COLL_KIND_BROADCAST, .algo = COLL_ALGO_TREE},
    {.kind = COLL_KIND_BROADCAST, .algo = COLL_ALGO_HD},
    {.kind = COLL_KIND_BROADCAST, .algo = COLL_ALGO_MASTER},
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_TREE, .transport = "tcp"},
    {.kind = COLL_KIND_REDUCE, .algo = COLL_ALGO_RING},
    {.kind = COLL_KIND_REDUCE, .algo = COLL_ALGO_TREE},
    {.kind = COLL_KIND_ALL_GATHER, .algo = COLL_ALGO_RING},
    {.kind = COLL_KIND_ALL_GATHER, .algo = COLL_ALGO_HD},
    {.kind = COLL_KIND_REDUCE_SCATTER, .algo = COLL_ALGO_RING},
    {.kind = COLL_KIND_ALL_TO_ALL, .algo = COLL_ALGO_RING},
    {.kind = COLL_KIND_GATHER, .algo = COLL_ALGO_MASTER},
    {.kind = COLL_KIND_GATHER, .algo = COLL_ALGO_TREE},
    {.kind = COLL_KIND_SCATTER, .algo = COLL_ALGO_MASTER},
    {.kind = COLL_KIND_SCATTER, .algo = COLL_ALGO_TREE},
    /* the node-aware all-reduces on two hosts, ranks placed round-robin */
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_RING_NODES, .hosts = 2},
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_TWO_LEVEL, .hosts = 2},
    {.kind = COLL_KIND_ALL_REDUCE, .algo = COLL_ALGO_LEADERS, .hosts = 2},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

START_TEST(a_real_run_records_the_simulators_step_table_for_every_algorithm) {
  job_t j = {.port = mp_free_port(),
             .kind = cases[_i].kind,
             .algo = cases[_i].algo,
             .root = 1,
             .trace = 1,
             .chunk = 16384, /* pipelined: many segments per chunk */
             .transport = cases[_i].transport,
             .hosts = cases[_i].hosts};
  make_dir(&j);
  ck_assert_int_eq(mp_run(NRANKS, 60000, rank_calls, &j), 0);
  algo_topo_t map = {0};
  if (j.hosts > 0) ck_assert_int_eq(algo_topo_placed(&map, NRANKS, NRANKS / j.hosts, true), 0);
  for (int r = 0; r < NRANKS; r++) {
    traced_call_t calls[NCALLS];
    read_calls(&j, r, calls);
    for (int c = 0; c < NCALLS; c++) {
      ck_assert_msg(calls[c].count == counts[c], "rank %d: call %d not traced", r, c);
      ck_assert_msg(calls[c].nops > 0, "rank %d: call %d has no ops", r, c);
      coll_algo_t algo = algo_named(calls[c].algo);
      ck_assert_int_eq(algo, j.algo);
      sched_params_t p = {.collective = j.kind,
                          .count = counts[c],
                          .dtype = COLL_FLOAT32,
                          .nranks = NRANKS,
                          .root = j.root,
                          .segment_bytes = j.chunk,
                          .topo = j.hosts > 0 ? &map : NULL};
      sim_config_t cfg = {.dtype = COLL_FLOAT32, .op = COLL_SUM, .record_events = 1};
      sim_result_t res;
      ck_assert_msg(sim_run_algo(algo, &p, &cfg, &res) == COLL_OK, "sim: %s", coll_last_error());
      compare(&j, c, r, &calls[c], &res);
      check_channel_order(r, &calls[c]);
      sim_result_free(&res);
      free(calls[c].ops);
    }
  }
  algo_topo_free(&map);
  remove_dir(&j);
}
END_TEST

/* python3 and $TRACE_MERGE (set by meson) for the checks by tools/trace_merge.py. */
static bool have_python(void) {
  if (getenv("TRACE_MERGE") == NULL) {
    printf("TRACE_MERGE not set: skipping the checks by tools/trace_merge.py\n");
    return false;
  }
  if (command_exists("python3")) return true;
  printf("python3 not found: skipping the checks by tools/trace_merge.py\n");
  return false;
}

/* The whole file: the header, one event per line, the closing brackets. */
static void check_layout(const job_t *j, int rank) {
  FILE *f = open_trace(j, rank);
  char line[LINE_MAX_LEN];
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  ck_assert_str_eq(line, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
  size_t events = 0;
  char prev[LINE_MAX_LEN] = "";
  while (fgets(line, sizeof line, f) != NULL) {
    if (strcmp(line, "]}\n") == 0) break;
    ck_assert_msg(line[0] == '{', "rank %d: line %s", rank, line);
    snprintf(prev, sizeof prev, "%s", line);
    events++;
  }
  ck_assert_str_eq(line, "]}\n");
  ck_assert_msg(strstr(prev, "},\n") == NULL, "the last event is followed by a comma");
  ck_assert_ptr_null(fgets(line, sizeof line, f));
  ck_assert_uint_gt(events, 10);
  fclose(f);
}

START_TEST(trace_files_are_trace_event_json_with_spans_for_every_rank) {
  job_t j = {.port = mp_free_port(),
             .kind = COLL_KIND_ALL_REDUCE,
             .algo = COLL_ALGO_RING,
             .root = 0,
             .trace = 1};
  make_dir(&j);
  ck_assert_int_eq(mp_run(NRANKS, 60000, rank_calls, &j), 0);
  for (int r = 0; r < NRANKS; r++) check_layout(&j, r);
  if (have_python()) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 '%s' -o '%s/merged.json' '%s/t.json' 2>&1",
             getenv("TRACE_MERGE"), j.dir, j.dir);
    int st;
    char *out = command_output(cmd, &st);
    ck_assert_msg(st == 0, "trace_merge: %s", out);
    for (int r = 0; r < NRANKS; r++) {
      char want[64];
      snprintf(want, sizeof want, "rank %d: ", r);
      const char *p = strstr(out, want);
      ck_assert_msg(p != NULL, "no %s in %s", want, out);
      char line[256];
      snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
      ck_assert_msg(strstr(line, " 2 collectives, ") != NULL && strstr(line, " 1 spans") != NULL,
                    "%s", line);
    }
    free(out);
    /* The step table of the first call, from the ranks' records: ring's first step. */
    snprintf(cmd, sizeof cmd, "python3 '%s' --steps 0 '%s/t.json' 2>&1", getenv("TRACE_MERGE"),
             j.dir);
    out = command_output(cmd, &st);
    ck_assert_msg(st == 0 && strstr(out, "all_reduce of 70001 x float32, algo ring, 6 steps") &&
                      strstr(out,
                             "step 0\n  rank 0 sends elements 0..17500 to rank 1; receives "
                             "and reduces elements 52501..70000 from rank 3\n"),
                  "steps: %s", out);
    free(out);
    /* A damaged file is refused with its name. */
    snprintf(cmd, sizeof cmd,
             "head -c 400 '%s/t.rank0.json' > '%s/cut.rank0.json' && "
             "python3 '%s' --check '%s/cut.rank0.json' 2>&1",
             j.dir, j.dir, getenv("TRACE_MERGE"), j.dir);
    out = command_output(cmd, &st);
    ck_assert_msg(st == 1 && strstr(out, "cut.rank0.json") != NULL, "cut file: %d %s", st, out);
    free(out);
  }
  remove_dir(&j);
}
END_TEST

START_TEST(without_coll_trace_nothing_is_written_and_spans_do_nothing) {
  job_t j = {.port = mp_free_port(),
             .kind = COLL_KIND_ALL_REDUCE,
             .algo = COLL_ALGO_HD,
             .root = 0,
             .trace = 0};
  make_dir(&j);
  ck_assert_int_eq(mp_run(2, 60000, rank_calls, &j), 0);
  DIR *d = opendir(j.dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)) != NULL) files += e->d_name[0] != '.';
  closedir(d);
  ck_assert_int_eq(files, 0);
  remove_dir(&j);
}
END_TEST

START_TEST(an_unwritable_trace_path_fails_init_with_its_name) {
  setenv("COLL_TRACE", "/nonexistent-coll-dir/t.json", 1);
  coll_config_t cfg = {
      .rank = 0, .size = 1, .local_rank = 0, .master_port = 29500, .host_store = -1};
  coll_comm_t *comm = NULL;
  ck_assert_int_eq(coll_comm_init_config(&cfg, &comm), COLL_ERR_SYSTEM);
  ck_assert_ptr_null(comm);
  ck_assert_msg(strstr(coll_last_error(), "COLL_TRACE") != NULL &&
                    strstr(coll_last_error(), "/nonexistent-coll-dir/t.rank0.json") != NULL,
                "message: %s", coll_last_error());
  unsetenv("COLL_TRACE");
  ck_assert_int_eq(coll_trace_span_begin(NULL, "x"), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(coll_comm_init_config(&cfg, &comm), COLL_OK);
  ck_assert_int_eq(coll_trace_span_begin(comm, NULL), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(coll_trace_enabled(comm), 0);
  ck_assert_int_eq(coll_comm_destroy(comm), COLL_OK);
}
END_TEST

/* Each rank: a traced all-reduce on the world and on its half (color rank % 2). */
static int rank_split(int rank, int nranks, void *arg) {
  const job_t *j = arg;
  coll_comm_t *comm, *half = NULL;
  if (init(j, rank, nranks, &comm)) return 1;
  float x = 1.0f;
  int fails = coll_all_reduce(&x, &x, 1, COLL_FLOAT32, COLL_SUM, comm) != COLL_OK;
  if (coll_comm_split(comm, rank % 2, rank, &half) != COLL_OK) return 1;
  fails += coll_all_reduce(&x, &x, 1, COLL_FLOAT32, COLL_SUM, half) != COLL_OK;
  fails += x != (float)nranks * 2.0f;
  fails += coll_comm_destroy(half) != COLL_OK;
  fails += coll_comm_destroy(comm) != COLL_OK;
  return fails != 0;
}

static int count_lines(const char *path, const char *const *parts);

START_TEST(a_split_communicator_traces_into_files_of_its_own) {
  job_t j = {.port = mp_free_port(), .trace = 1};
  make_dir(&j);
  ck_assert_int_eq(mp_run(NRANKS, 60000, rank_split, &j), 0);
  DIR *d = opendir(j.dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  int world = 0, halves = 0;
  char tags[2][128] = {"", ""};
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int rank = -1, end = 0;
    if (sscanf(e->d_name, "t.rank%d.json%n", &rank, &end) == 1 && e->d_name[end] == '\0') {
      world++;
      continue;
    }
    /* t.<tag>.rank<r>.json with r in the half's ranks {0, 1} */
    const char *dot = strstr(e->d_name, ".rank");
    ck_assert_msg(strncmp(e->d_name, "t.", 2) == 0 && dot != NULL &&
                      sscanf(dot, ".rank%d.json%n", &rank, &end) == 1 && dot[end] == '\0' &&
                      (rank == 0 || rank == 1),
                  "unexpected file %s", e->d_name);
    char tag[128];
    snprintf(tag, sizeof tag, "%.*s", (int)(dot - e->d_name - 2), e->d_name + 2);
    int slot = tags[0][0] == '\0' || strcmp(tags[0], tag) == 0 ? 0 : 1;
    if (tags[slot][0] == '\0') snprintf(tags[slot], sizeof tags[slot], "%s", tag);
    ck_assert_msg(strcmp(tags[slot], tag) == 0, "a third communicator: %s", e->d_name);
    char path[600], pid[32], name[200];
    snprintf(path, sizeof path, "%s/%s", j.dir, e->d_name);
    snprintf(pid, sizeof pid, "\"pid\":%d,", rank);
    snprintf(name, sizeof name, "\"name\":\"rank %d (communicator %s)\"", rank, tag);
    const char *coll[] = {"\"cat\":\"collective\"", pid, NULL}, *proc[] = {name, NULL};
    ck_assert_int_eq(count_lines(path, coll), 1);
    ck_assert_msg(count_lines(path, proc) == 1, "%s does not name its process %s", path, name);
    halves++;
  }
  closedir(d);
  ck_assert_int_eq(world, NRANKS);
  ck_assert_int_eq(halves, NRANKS);
  ck_assert_str_ne(tags[0], tags[1]);
  remove_dir(&j);
}
END_TEST

/* --overlap on a hand-written trace: a 2 ms collective half inside a span. */
START_TEST(trace_merge_measures_collective_time_inside_spans) {
  if (!have_python()) return;
  job_t j = {0};
  make_dir(&j);
  char path[320];
  snprintf(path, sizeof path, "%s/h.rank0.json", j.dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(
      "{\"traceEvents\":[\n"
      "{\"name\":\"backward\",\"cat\":\"user\",\"ph\":\"B\",\"pid\":0,\"tid\":7,\"ts\":1000},\n"
      "{\"name\":\"backward\",\"cat\":\"user\",\"ph\":\"E\",\"pid\":0,\"tid\":7,\"ts\":3000},\n"
      "{\"name\":\"all_reduce\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":0,\"tid\":8,"
      "\"ts\":2000,\"dur\":2000}\n]}\n",
      f);
  fclose(f);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "python3 '%s' --overlap backward '%s/h.json' 2>&1",
           getenv("TRACE_MERGE"), j.dir);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0 && strcmp(out,
                                  "rank 0: 1 collectives, 2.00 ms, of which 1.00 ms (50%) "
                                  "during 1 'backward' spans\n") == 0,
                "overlap: %s", out);
  free(out);
  remove_dir(&j);
}
END_TEST

/* Lines of `path` that contain every one of the strings (NULL-terminated). */
static int count_lines(const char *path, const char *const *parts) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "no %s", path);
  char line[LINE_MAX_LEN];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    bool all = true;
    for (const char *const *p = parts; *p != NULL && all; p++) all = strstr(line, *p) != NULL;
    n += all;
  }
  fclose(f);
  return n;
}

START_TEST(a_trainer_run_shows_forward_backward_all_reduce_and_optimizer_spans) {
  const char *train = getenv("COLL_TRAIN"), *collrun = getenv("COLL_COLLRUN");
  const char *data = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  if (train == NULL || collrun == NULL || access(data, R_OK) != 0) {
    printf("no trainer or no Fashion-MNIST: skipping the trainer trace\n");
    return;
  }
  job_t j = {0};
  make_dir(&j);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "COLL_TRACE='%s/t.json' '%s' -n 2 '%s' --max-steps 4 --epochs 1 --no-eval "
           "--hidden 128,64 --bucket-mb 0.01 2>&1",
           j.dir, collrun, train);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0, "train: %s", out);
  free(out);
  for (int r = 0; r < 2; r++) {
    char path[320], pid[32];
    snprintf(path, sizeof path, "%s/t.rank%d.json", j.dir, r);
    snprintf(pid, sizeof pid, "\"pid\":%d,", r);
    static const char *const spans[] = {"forward", "backward", "ddp wait + optimizer", "step"};
    for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
      char name[64];
      snprintf(name, sizeof name, "{\"name\":\"%s\",\"cat\":\"user\"", spans[k]);
      const char *b[] = {name, "\"ph\":\"B\"", pid, NULL}, *e[] = {name, "\"ph\":\"E\"", pid, NULL};
      ck_assert_msg(count_lines(path, b) == 4, "rank %d: %d %s begins", r, count_lines(path, b),
                    spans[k]);
      ck_assert_int_eq(count_lines(path, e), 4);
    }
    /* Several buckets per step, each an all-reduce of a part of the gradients. */
    const char *ar[] = {"{\"name\":\"all_reduce\",\"cat\":\"collective\"", pid, NULL};
    ck_assert_msg(count_lines(path, ar) >= 2 * 4, "rank %d: %d all-reduces", r,
                  count_lines(path, ar));
  }
  if (have_python()) {
    snprintf(cmd, sizeof cmd, "python3 '%s' --check '%s/t.json' 2>&1", getenv("TRACE_MERGE"),
             j.dir);
    out = command_output(cmd, &st);
    ck_assert_msg(st == 0 && strstr(out, "rank 1: ") != NULL, "trace_merge: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "python3 '%s' --overlap backward '%s/t.json' 2>&1",
             getenv("TRACE_MERGE"), j.dir);
    out = command_output(cmd, &st);
    ck_assert_msg(st == 0 && strstr(out, "during 4 'backward' spans\nrank 1: ") != NULL,
                  "overlap: %s", out);
    free(out);
  }
  remove_dir(&j);
}
END_TEST

SUITE_MAIN("trace",
           suite_loop_tests("real runs", 120, 0, NCASES,
                            a_real_run_records_the_simulators_step_table_for_every_algorithm),
           suite_tests("real runs", 120, trace_files_are_trace_event_json_with_spans_for_every_rank,
                       a_split_communicator_traces_into_files_of_its_own,
                       trace_merge_measures_collective_time_inside_spans,
                       without_coll_trace_nothing_is_written_and_spans_do_nothing,
                       an_unwritable_trace_path_fails_init_with_its_name,
                       a_trainer_run_shows_forward_backward_all_reduce_and_optimizer_spans))
