/* The COLL_TRACE writer: buffers Trace Event JSON per communicator and writes it to
 * this rank's file when the buffer fills and at destroy (format: see trace.h and
 * docs/algorithms.md "See a real run").
 *
 * Tracks (pid = rank; tid = a thread or a channel):
 *  - the thread that ran the executor (caller or progress thread, real tids): one "X"
 *    per collective, local copies and reductions, waits; user spans as B/E pairs;
 *  - one track per channel ("send to rank p", "recv from rank p"): one "X" per transfer.
 *    A channel moves its messages in order, so a transfer's span starts when it was
 *    posted or when the previous one on its channel finished, whichever is later
 *    ("posted_us" in args keeps the post time): spans on a channel never overlap;
 *  - schedule steps as async "b"/"e" events (cat "step"): with the executor's window
 *    steps overlap, which async tracks show and thread tracks cannot.
 * Every event is one line, so tests and scripts can read the file line by line too. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "core/trace.h"

enum {
  BUF_CAP = 1 << 20,     /* bytes of JSON buffered before a write */
  EVENT_MAX = 1024,      /* one event's JSON is shorter than this */
  NAME_MAX_LEN = 200,    /* user span names are cut here */
  MAX_TIDS = 32,         /* threads named per file (more are traced, unnamed) */
  CHANNEL_TID = 1 << 30, /* + 2 * peer (+ 1 for receives): a channel's track */
};

struct trace {
  coll_comm_t *comm;
  pthread_mutex_t mu; /* user spans come from the caller while the progress thread runs */
  FILE *file;
  char path[4096];
  char *buf;
  size_t len;
  bool first;
  int tids[MAX_TIDS];
  int ntids;
  /* The running collective (the executor runs one at a time per communicator). */
  uint64_t seq; /* collectives started so far: equal on every rank for the same call */
  int64_t coll_t0;
  int64_t wait_t0;
  int64_t *op_start; /* per op of the running schedule */
  int64_t *step_first;
  int64_t *step_last;
  size_t op_cap;
  size_t step_cap;
  int64_t *chan_free; /* 2 * nranks: when each channel finished its last transfer */
};

static const char *const buf_names[] = {
    [SCHED_BUF_INPUT] = "input", [SCHED_BUF_OUTPUT] = "output", [SCHED_BUF_SCRATCH] = "scratch"};

static const char *const op_names[] = {
    [SCHED_SEND] = "send",
    [SCHED_RECV_COPY] = "recv",
    [SCHED_RECV_REDUCE] = "recv_reduce",
    [SCHED_LOCAL_COPY] = "local_copy",
    [SCHED_LOCAL_REDUCE] = "local_reduce",
};

static double us(int64_t ns) { return (double)ns / 1000.0; }

/* Write the buffer out; on a write error the trace stops (the run goes on). */
static void flush_locked(trace_t *t) {
  if (t->file != NULL && t->len > 0 && fwrite(t->buf, 1, t->len, t->file) != t->len) {
    coll_log(COLL_LOG_WARN, "COLL_TRACE: writing %s failed (%s); tracing stops", t->path,
             strerror(errno));
    fclose(t->file);
    t->file = NULL;
  }
  t->len = 0;
}

/* Append one event (a JSON object, formatted by the caller) to the buffer. */
static void emit_locked(trace_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit_locked(trace_t *t, const char *fmt, ...) {
  if (t->file == NULL) return;
  if (BUF_CAP - t->len < EVENT_MAX) flush_locked(t);
  if (!t->first) t->buf[t->len++] = ',';
  t->buf[t->len++] = '\n';
  t->first = false;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, EVENT_MAX - 2, fmt, ap);
  va_end(ap);
  if (n > 0) t->len += (size_t)n < EVENT_MAX - 3 ? (size_t)n : EVENT_MAX - 3;
}

/* The calling thread's tid; names its track on first sight. */
static int thread_tid_locked(trace_t *t) {
  int tid = (int)gettid();
  for (int i = 0; i < t->ntids; i++)
    if (t->tids[i] == tid) return tid;
  if (t->ntids == MAX_TIDS) return tid;
  t->tids[t->ntids++] = tid;
  coll_comm_t *c = t->comm;
  bool progress = c->thread_started && pthread_equal(pthread_self(), c->thread);
  emit_locked(t,
              "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
              "\"args\":{\"name\":\"%s thread (tid %d)\"}}",
              c->rank, tid, progress ? "progress" : "caller", tid);
  return tid;
}

static int channel_tid(int peer, bool recv) { return CHANNEL_TID + 2 * peer + (recv ? 1 : 0); }

/* FILE.json -> FILE[.c<k>].rank<r>.json; k is the communicator's number on its store
 * when it is not the first (several communicators in one process). */
static void make_path(char *out, size_t cap, const char *spec, const coll_comm_t *comm) {
  char comm_part[32] = "";
  long long k = 0;
  if (sscanf(comm->key_prefix, "coll/c%lld/", &k) == 1 && k > 1)
    snprintf(comm_part, sizeof comm_part, ".c%lld", k);
  size_t n = strlen(spec);
  int stem = (int)(n >= 5 && strcmp(spec + n - 5, ".json") == 0 ? n - 5 : n);
  snprintf(out, cap, "%.*s%s.rank%d.json", stem, spec, comm_part, comm->rank);
}

coll_status_t trace_open(coll_comm_t *comm) {
  comm->trace = NULL;
  const char *spec = coll_env_str("COLL_TRACE");
  if (spec == NULL || spec[0] == '\0') return COLL_OK;
  trace_t *t = calloc(1, sizeof *t);
  if (t == NULL) return coll_error(COLL_ERR_NO_MEMORY, "COLL_TRACE: out of memory");
  t->comm = comm;
  t->first = true;
  t->buf = malloc(BUF_CAP);
  t->chan_free = calloc(2 * (size_t)comm->nranks, sizeof *t->chan_free);
  if (t->buf == NULL || t->chan_free == NULL) {
    free(t->buf);
    free(t->chan_free);
    free(t);
    return coll_error(COLL_ERR_NO_MEMORY, "COLL_TRACE: out of memory");
  }
  make_path(t->path, sizeof t->path, spec, comm);
  t->file = fopen(t->path, "w");
  if (t->file == NULL) {
    int err = errno;
    free(t->buf);
    free(t->chan_free);
    free(t);
    return coll_error_errno(COLL_ERR_SYSTEM, err, "COLL_TRACE: rank %d cannot write %s",
                            comm->rank, spec);
  }
  pthread_mutex_init(&t->mu, NULL);
  fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", t->file);
  emit_locked(t,
              "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
              "\"args\":{\"name\":\"rank %d\"}}",
              comm->rank, comm->rank);
  emit_locked(t,
              "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
              "\"args\":{\"sort_index\":%d}}",
              comm->rank, comm->rank);
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank) continue;
    for (int dir = 0; dir < 2; dir++)
      emit_locked(t,
                  "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                  "\"args\":{\"name\":\"%s rank %d\"}}",
                  comm->rank, channel_tid(p, dir == 1), dir ? "recv from" : "send to", p);
  }
  comm->trace = t;
  coll_log(COLL_LOG_INFO, "COLL_TRACE: writing %s", t->path);
  return COLL_OK;
}

void trace_close(coll_comm_t *comm) {
  trace_t *t = comm->trace;
  if (t == NULL) return;
  comm->trace = NULL;
  pthread_mutex_lock(&t->mu);
  flush_locked(t);
  if (t->file != NULL) {
    fputs("\n]}\n", t->file);
    if (fclose(t->file) != 0)
      coll_log(COLL_LOG_WARN, "COLL_TRACE: closing %s failed (%s)", t->path, strerror(errno));
  }
  pthread_mutex_unlock(&t->mu);
  pthread_mutex_destroy(&t->mu);
  free(t->buf);
  free(t->op_start);
  free(t->step_first);
  free(t->step_last);
  free(t->chan_free);
  free(t);
}

/* Grow the per-op and per-step arrays to the schedule; false when out of memory (the
 * collective is then traced without its ops). */
static bool reserve(trace_t *t, size_t nops, size_t nsteps) {
  if (nops > t->op_cap) {
    int64_t *p = realloc(t->op_start, nops * sizeof *p);
    if (p == NULL) return false;
    t->op_start = p;
    t->op_cap = nops;
  }
  if (nsteps > t->step_cap) {
    int64_t *a = realloc(t->step_first, nsteps * sizeof *a);
    if (a != NULL) t->step_first = a;
    int64_t *b = realloc(t->step_last, nsteps * sizeof *b);
    if (b != NULL) t->step_last = b;
    if (a == NULL || b == NULL) return false;
    t->step_cap = nsteps;
  }
  return true;
}

void trace_coll_begin_(trace_t *t, const exec_call_t *call, const exec_cache_entry_t *e) {
  (void)call;
  t->coll_t0 = coll_now_ns();
  const sched_t *s = &e->sched;
  if (!reserve(t, s->nops, s->nsteps)) {
    t->op_cap = 0; /* marks "ops not traced" for this call */
    return;
  }
  memset(t->op_start, 0, s->nops * sizeof *t->op_start);
  memset(t->step_first, 0, s->nsteps * sizeof *t->step_first);
  memset(t->step_last, 0, s->nsteps * sizeof *t->step_last);
}

void trace_op_start_(trace_t *t, size_t i) {
  if (i < t->op_cap) t->op_start[i] = coll_now_ns();
}

void trace_op_done_(trace_t *t, const exec_cache_entry_t *e, size_t i) {
  if (i >= t->op_cap) return;
  int64_t end = coll_now_ns();
  int64_t posted = t->op_start[i];
  const sched_op_t *op = &e->sched.ops[i];
  uint32_t step = e->op_step[i];
  if (t->step_first[step] == 0 || posted < t->step_first[step]) t->step_first[step] = posted;
  if (end > t->step_last[step]) t->step_last[step] = end;
  const coll_comm_t *c = t->comm;
  size_t esz = e->sched.elem_size;
  pthread_mutex_lock(&t->mu);
  bool transfer = op->kind <= SCHED_RECV_REDUCE;
  int tid;
  int64_t begin = posted;
  if (transfer) {
    int64_t *chan = &t->chan_free[2 * (size_t)op->peer + (op->kind != SCHED_SEND)];
    if (*chan > begin) begin = *chan;
    if (begin > end) begin = end;
    *chan = end;
    tid = channel_tid(op->peer, op->kind != SCHED_SEND);
  } else {
    tid = thread_tid_locked(t);
  }
  char name[48];
  if (op->kind == SCHED_SEND)
    snprintf(name, sizeof name, "send to %d", (int)op->peer);
  else if (transfer)
    snprintf(name, sizeof name, "%s from %d", op_names[op->kind], (int)op->peer);
  else
    snprintf(name, sizeof name, "%s", op_names[op->kind]);
  emit_locked(t,
              "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
              "\"dur\":%.3f,\"args\":{\"seq\":%llu,\"step\":%u,\"op\":%zu,\"kind\":\"%s\","
              "\"peer\":%d,\"buf\":\"%s\",\"offset\":%zu,\"count\":%zu,\"bytes\":%zu,"
              "\"src_buf\":\"%s\",\"src_offset\":%zu,\"posted_us\":%.3f}}",
              name, transfer ? "transfer" : "local", c->rank, tid, us(begin), us(end - begin),
              (unsigned long long)t->seq, (unsigned)step, i, op_names[op->kind], (int)op->peer,
              buf_names[op->buf], op->offset, op->count, op->count * esz, buf_names[op->src_buf],
              op->src_offset, us(posted));
  pthread_mutex_unlock(&t->mu);
}

void trace_coll_end_(trace_t *t, const exec_call_t *call, const exec_cache_entry_t *e,
                     coll_status_t status) {
  int64_t end = coll_now_ns();
  const coll_comm_t *c = t->comm;
  const sched_t *s = &e->sched;
  pthread_mutex_lock(&t->mu);
  int tid = thread_tid_locked(t);
  for (size_t k = 0; k < s->nsteps && k < t->step_cap && t->op_cap >= s->nops; k++) {
    if (t->step_first[k] == 0) continue;
    emit_locked(t,
                "{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"b\",\"id\":\"r%d.%llu.%zu\","
                "\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"args\":{\"seq\":%llu,\"step\":%zu,"
                "\"ops\":%u}}",
                c->rank, (unsigned long long)t->seq, k, c->rank, tid, us(t->step_first[k]),
                (unsigned long long)t->seq, k, (unsigned)s->steps[k].nops);
    emit_locked(t,
                "{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"e\",\"id\":\"r%d.%llu.%zu\","
                "\"pid\":%d,\"tid\":%d,\"ts\":%.3f}",
                c->rank, (unsigned long long)t->seq, k, c->rank, tid, us(t->step_last[k]));
  }
  bool reduce = call->kind == COLL_KIND_ALL_REDUCE;
  bool bcast = call->kind == COLL_KIND_BROADCAST;
  emit_locked(t,
              "{\"name\":\"%s\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
              "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%llu,\"count\":%zu,\"dtype\":\"%s\","
              "\"op\":\"%s\",\"root\":%d,\"algo\":\"%s\",\"bytes\":%zu,\"steps\":%zu,"
              "\"ops\":%zu,\"status\":\"%s\"}}",
              reduce ? "all_reduce" : bcast ? "broadcast" : "collective", c->rank, tid, us(t->coll_t0),
              us(end - t->coll_t0), (unsigned long long)t->seq, call->count,
              coll_dtype_name(call->dtype), reduce ? coll_op_name(call->op) : "none",
              bcast ? call->root : -1, coll_algo_name(s->algo), call->count * s->elem_size,
              s->nsteps, s->nops, coll_status_name(status));
  t->seq++;
  pthread_mutex_unlock(&t->mu);
}

void trace_wait_begin_(trace_t *t) { t->wait_t0 = coll_now_ns(); }

void trace_wait_end_(trace_t *t) {
  int64_t end = coll_now_ns();
  pthread_mutex_lock(&t->mu);
  int tid = thread_tid_locked(t);
  emit_locked(t,
              "{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
              "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%llu}}",
              t->comm->rank, tid, us(t->wait_t0), us(end - t->wait_t0),
              (unsigned long long)t->seq);
  pthread_mutex_unlock(&t->mu);
}

/* User spans: JSON-escape the name by replacing what would need escaping. */
static coll_status_t span(coll_comm_t *comm, const char *name, char phase, const char *what) {
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  if (name == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: name is NULL", what);
  trace_t *t = comm->trace;
  if (t == NULL) return COLL_OK;
  char clean[NAME_MAX_LEN + 1];
  size_t n = 0;
  for (; name[n] != '\0' && n < NAME_MAX_LEN; n++) {
    unsigned char ch = (unsigned char)name[n];
    clean[n] = ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f ? '_' : (char)ch;
  }
  clean[n] = '\0';
  int64_t now = coll_now_ns();
  pthread_mutex_lock(&t->mu);
  int tid = thread_tid_locked(t);
  emit_locked(t,
              "{\"name\":\"%s\",\"cat\":\"user\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,"
              "\"ts\":%.3f}",
              clean, phase, comm->rank, tid, us(now));
  pthread_mutex_unlock(&t->mu);
  return COLL_OK;
}

coll_status_t coll_trace_span_begin(coll_comm_t *comm, const char *name) {
  coll_status_t st = span(comm, name, 'B', "coll_trace_span_begin");
  if (st == COLL_OK) coll_error_clear();
  return st;
}

coll_status_t coll_trace_span_end(coll_comm_t *comm, const char *name) {
  coll_status_t st = span(comm, name, 'E', "coll_trace_span_end");
  if (st == COLL_OK) coll_error_clear();
  return st;
}

int coll_trace_enabled(const coll_comm_t *comm) {
  return comm != NULL && comm->magic == COMM_MAGIC && comm->trace != NULL;
}
