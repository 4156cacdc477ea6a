/* The COLL_TRACE writer: hooks append fixed-size binary records to a per-communicator
 * buffer (no formatting on the hot path); the records become Trace Event JSON in this
 * rank's file when the buffer fills and at destroy (docs/algorithms.md "See a real run").
 *
 * Tracks (pid = rank; tid = a thread or a channel):
 *  - the thread that ran the executor (caller or progress thread, real tids): one "X"
 *    per collective, local copies and reductions, waits; user spans as B/E pairs;
 *  - a caller's thread blocked in coll_request_wait: "request wait" slices;
 *  - one track per channel ("send to rank p", "recv from rank p"): one "X" per transfer.
 *    A channel moves its messages in order, so a transfer's span starts when it was
 *    posted or when the previous one on its channel finished, whichever is later
 *    ("posted_us" in args keeps the post time): spans on a channel never overlap;
 *  - schedule steps as async "b"/"e" events (cat "step"): with the executor's window
 *    steps overlap, which async tracks show and thread tracks cannot.
 * Every event is one line, so tests and scripts can read the file line by line too. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "trace/trace.h"

enum {
  TAG_MAX = 64,          /* a communicator tag (from its key prefix) */
  MAX_RECORDS = 16384,   /* records buffered before a write (about 1.5 MB) */
  NAME_MAX_LEN = 63,     /* user span names are cut here */
  MAX_NAMES = 64,        /* distinct span names per communicator; more share "(other)" */
  MAX_TIDS = 32,         /* threads named per file (more are traced, unnamed) */
  CHANNEL_TID = 1 << 30, /* + 2 * peer (+ 1 for receives): a channel's track */
};

typedef enum {
  REC_OP = 0,
  REC_COLL,
  REC_STEP,
  REC_WAIT,
  REC_REQUEST_WAIT,
  REC_BEGIN,
  REC_END,
  REC_THREAD
} rec_type_t;

/* One event. Field use by type:
 *  OP:     kind/buf/src_buf/peer = the sched_op_t, step, a = op index, b = offset,
 *          c = count, d = src_offset, posted = post time, elem = element size
 *  COLL:   kind = coll kind, buf = dtype, src_buf = op, peer = root, name = path,
 *          a = count, b = bytes, c = steps, d = ops, status
 *  STEP:   step, a = ops of the step traced
 *  WAIT, REQUEST_WAIT: ts and end only
 *  BEGIN/END: a = span name index
 *  THREAD: peer = 1 for the progress thread */
typedef struct {
  const char *name; /* OP: its phase (NULL: the op kind); COLL: the path or algorithm */
  int64_t ts;       /* ns, CLOCK_MONOTONIC */
  int64_t end;
  int64_t posted;
  uint64_t seq;
  uint64_t a, b, c, d;
  int32_t tid;
  int32_t peer;
  uint32_t step;
  uint32_t elem;
  int16_t status;
  uint8_t type, kind, buf, src_buf;
} rec_t;

struct trace {
  int rank, nranks;
  char tag[TAG_MAX]; /* which communicator of the process (see comm_tag) */
  bool has_progress;
  pthread_t progress; /* the progress thread, named as such */
  pthread_mutex_t mu; /* user spans come from the caller while the progress thread runs */
  FILE *file;
  char path[4096];
  rec_t *recs;
  size_t nrecs;
  bool first;
  int tids[MAX_TIDS];
  int ntids;
  char names[MAX_NAMES][NAME_MAX_LEN + 1];
  int nnames;
  /* The running collective (the executor runs one at a time per communicator). */
  uint64_t seq; /* collectives started so far: equal on every rank for the same call */
  int64_t coll_t0;
  int64_t wait_t0;
  int64_t *op_start; /* per op of the running schedule */
  int64_t *step_first;
  int64_t *step_last;
  uint64_t *step_ops;
  size_t elem_size; /* of the running collective */
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

/* The kernel's thread id. Not cached in a thread-local: a child forked by a traced
 * process would inherit the parent's value. Transfers, the most frequent events, use
 * channel tracks and do not ask. */
static int current_tid(void) { return (int)gettid(); }

/* ---- writing ---- */

/* ns as microseconds with three decimals, without floating point (fast, exact). */
static void put_us(char *out, size_t cap, int64_t ns) {
  snprintf(out, cap, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void put_event(trace_t *t, const char *json) {
  fputs(t->first ? "\n" : ",\n", t->file);
  fputs(json, t->file);
  t->first = false;
}

static void format_record(trace_t *t, const rec_t *r, char *out, size_t cap) {
  int rank = t->rank;
  char ts[32], dur[32], posted[32];
  put_us(ts, sizeof ts, r->ts);
  put_us(dur, sizeof dur, r->end - r->ts);
  switch ((rec_type_t)r->type) {
    case REC_OP: {
      bool transfer = r->kind <= SCHED_RECV_REDUCE;
      char name[48];
      if (r->kind == SCHED_SEND)
        snprintf(name, sizeof name, "send to %d", (int)r->peer);
      else if (transfer)
        snprintf(name, sizeof name, "%s from %d", op_names[r->kind], (int)r->peer);
      else
        snprintf(name, sizeof name, "%s", r->name ? r->name : op_names[r->kind]);
      put_us(posted, sizeof posted, r->posted);
      snprintf(out, cap,
               "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%s,"
               "\"dur\":%s,\"args\":{\"seq\":%llu,\"step\":%u,\"op\":%llu,\"kind\":\"%s\","
               "\"peer\":%d,\"buf\":\"%s\",\"offset\":%llu,\"count\":%llu,\"bytes\":%llu,"
               "\"src_buf\":\"%s\",\"src_offset\":%llu,\"posted_us\":%s}}",
               name, transfer ? "transfer" : "local", rank, (int)r->tid, ts, dur,
               (unsigned long long)r->seq, (unsigned)r->step, (unsigned long long)r->a,
               op_names[r->kind], (int)r->peer, buf_names[r->buf], (unsigned long long)r->b,
               (unsigned long long)r->c, (unsigned long long)(r->c * r->elem),
               buf_names[r->src_buf], (unsigned long long)r->d, posted);
      return;
    }
    case REC_COLL: {
      const char *dtype = coll_dtype_name((coll_dtype_t)r->buf);
      const char *op =
          coll_kind_reduces((coll_kind_t)r->kind) ? coll_op_name((coll_op_t)r->src_buf) : NULL;
      snprintf(out, cap,
               "{\"name\":\"%s\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
               "\"ts\":%s,\"dur\":%s,\"args\":{\"seq\":%llu,\"count\":%llu,\"dtype\":\"%s\","
               "\"op\":\"%s\",\"root\":%d,\"algo\":\"%s\",\"bytes\":%llu,\"steps\":%llu,"
               "\"ops\":%llu,\"status\":\"%s\"}}",
               sched_kind_name((coll_kind_t)r->kind), rank, (int)r->tid, ts, dur,
               (unsigned long long)r->seq, (unsigned long long)r->a, dtype ? dtype : "?",
               op ? op : "none", (int)r->peer, r->name ? r->name : "?", (unsigned long long)r->b,
               (unsigned long long)r->c, (unsigned long long)r->d,
               coll_status_name((coll_status_t)r->status));
      return;
    }
    case REC_STEP: {
      char end[32];
      put_us(end, sizeof end, r->end);
      /* Two events on one line would break "one event per line": the caller splits. */
      snprintf(out, cap,
               "{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"b\",\"id\":\"r%d.%llu.%u\","
               "\"pid\":%d,\"tid\":%d,\"ts\":%s,\"args\":{\"seq\":%llu,\"step\":%u,"
               "\"ops\":%llu}}\n"
               "{\"name\":\"step\",\"cat\":\"step\",\"ph\":\"e\",\"id\":\"r%d.%llu.%u\","
               "\"pid\":%d,\"tid\":%d,\"ts\":%s}",
               rank, (unsigned long long)r->seq, (unsigned)r->step, rank, (int)r->tid, ts,
               (unsigned long long)r->seq, (unsigned)r->step, (unsigned long long)r->a, rank,
               (unsigned long long)r->seq, (unsigned)r->step, rank, (int)r->tid, end);
      return;
    }
    case REC_WAIT:
    case REC_REQUEST_WAIT:
      /* seq: the executor's collective at that time (a request wait may span several) */
      snprintf(out, cap,
               "{\"name\":\"%s\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
               "\"ts\":%s,\"dur\":%s,\"args\":{\"seq\":%llu}}",
               r->type == REC_WAIT ? "wait" : "request wait", rank, (int)r->tid, ts, dur,
               (unsigned long long)r->seq);
      return;
    case REC_BEGIN:
    case REC_END:
      snprintf(out, cap,
               "{\"name\":\"%s\",\"cat\":\"user\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,"
               "\"ts\":%s}",
               t->names[r->a], r->type == REC_BEGIN ? 'B' : 'E', rank, (int)r->tid, ts);
      return;
    case REC_THREAD:
      snprintf(out, cap,
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"name\":\"%s thread (tid %d)\"}}",
               rank, (int)r->tid, r->peer ? "progress" : "caller", (int)r->tid);
      return;
  }
}

/* Format the buffered records into the file; on a write error the trace stops (the run
 * goes on). */
static void flush_locked(trace_t *t) {
  char json[1024];
  for (size_t i = 0; i < t->nrecs && t->file != NULL; i++) {
    format_record(t, &t->recs[i], json, sizeof json);
    char *nl = strchr(json, '\n');
    if (nl != NULL) {
      *nl = '\0';
      put_event(t, json);
      put_event(t, nl + 1);
    } else {
      put_event(t, json);
    }
  }
  t->nrecs = 0;
  if (t->file != NULL && (fflush(t->file) != 0 || ferror(t->file))) {
    coll_log(COLL_LOG_WARN, "COLL_TRACE: writing %s failed (%s); tracing stops", t->path,
             strerror(errno));
    fclose(t->file);
    t->file = NULL;
  }
}

/* A slot for one record (flushing first when the buffer is full). */
static rec_t *append_locked(trace_t *t, rec_type_t type, int tid) {
  if (t->nrecs == MAX_RECORDS) flush_locked(t);
  rec_t *r = &t->recs[t->nrecs++];
  memset(r, 0, sizeof *r);
  r->type = (uint8_t)type;
  r->tid = tid;
  r->seq = t->seq;
  return r;
}

/* The calling thread's tid; names its track on first sight. */
static int thread_tid_locked(trace_t *t) {
  int tid = current_tid();
  for (int i = 0; i < t->ntids; i++)
    if (t->tids[i] == tid) return tid;
  if (t->ntids == MAX_TIDS) return tid;
  t->tids[t->ntids++] = tid;
  rec_t *r = append_locked(t, REC_THREAD, tid);
  r->peer = t->has_progress && pthread_equal(pthread_self(), t->progress);
  return tid;
}

static int channel_tid(int peer, bool recv) { return CHANNEL_TID + 2 * peer + (recv ? 1 : 0); }

/* ---- lifetime ---- */

/* Which communicator of the process this is, for file and process names: "" for the
 * first one on its store ("coll/c1/") and single-rank ones, else the key prefix without
 * "coll/" and with dots for slashes ("c2", "c1.s1-c0" for a split). */
static void comm_tag(char *out, size_t cap, const char *key_prefix) {
  const char *p = key_prefix;
  if (strncmp(p, "coll/", 5) == 0) p += 5;
  out[0] = '\0';
  if (strcmp(p, "c1/") == 0 || strcmp(p, "single/") == 0) return;
  size_t n = 0;
  for (; p[n] != '\0' && n + 1 < cap; n++) {
    char ch = p[n];
    bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_';
    out[n] = plain ? ch : '.';
  }
  while (n > 0 && out[n - 1] == '.') n--;
  out[n] = '\0';
}

/* FILE.json -> FILE[.<tag>].rank<r>.json (a name without .json gets it appended). */
static void make_path(char *out, size_t cap, const char *spec, const trace_t *t) {
  size_t n = strlen(spec);
  int stem = (int)(n >= 5 && strcmp(spec + n - 5, ".json") == 0 ? n - 5 : n);
  snprintf(out, cap, "%.*s%s%s.rank%d.json", stem, spec, t->tag[0] ? "." : "", t->tag, t->rank);
}

static void free_trace(trace_t *t) {
  free(t->recs);
  free(t->op_start);
  free(t->step_first);
  free(t->step_last);
  free(t->step_ops);
  free(t->chan_free);
  free(t);
}

/* Process and channel names, written at once. */
static void write_metadata(trace_t *t) {
  char json[256];
  const char *tag = t->tag;
  int rank = t->rank;
  fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", t->file);
  snprintf(json, sizeof json,
           "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
           "\"args\":{\"name\":\"rank %d%s%s%s\"}}",
           rank, rank, tag[0] ? " (communicator " : "", tag, tag[0] ? ")" : "");
  put_event(t, json);
  snprintf(json, sizeof json,
           "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
           "\"args\":{\"sort_index\":%d}}",
           rank, rank);
  put_event(t, json);
  for (int p = 0; p < t->nranks; p++) {
    if (p == rank) continue;
    for (int dir = 0; dir < 2; dir++) {
      snprintf(json, sizeof json,
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"name\":\"%s rank %d\"}}",
               rank, channel_tid(p, dir == 1), dir ? "recv from" : "send to", p);
      put_event(t, json);
    }
  }
}

coll_status_t trace_open(trace_t **out, int rank, int nranks, const char *key_prefix) {
  *out = NULL;
  const char *spec = coll_env_str("COLL_TRACE");
  if (spec == NULL || spec[0] == '\0') return COLL_OK;
  trace_t *t = calloc(1, sizeof *t);
  if (t == NULL) return coll_error(COLL_ERR_NO_MEMORY, "COLL_TRACE: out of memory");
  t->rank = rank;
  t->nranks = nranks;
  comm_tag(t->tag, sizeof t->tag, key_prefix);
  t->first = true;
  t->recs = malloc(MAX_RECORDS * sizeof *t->recs);
  t->chan_free = calloc(2 * (size_t)nranks, sizeof *t->chan_free);
  if (t->recs == NULL || t->chan_free == NULL) {
    free_trace(t);
    return coll_error(COLL_ERR_NO_MEMORY, "COLL_TRACE: out of memory");
  }
  make_path(t->path, sizeof t->path, spec, t);
  coll_status_t st;
  t->file = fopen(t->path, "w");
  if (t->file == NULL) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "COLL_TRACE: rank %d cannot write %s", rank,
                          t->path);
    free_trace(t);
    return st;
  }
  pthread_mutex_init(&t->mu, NULL);
  write_metadata(t);
  *out = t;
  coll_log(COLL_LOG_INFO, "COLL_TRACE: writing %s", t->path);
  return COLL_OK;
}

void trace_set_progress_thread(trace_t *t, pthread_t thread) {
  if (t == NULL) return;
  pthread_mutex_lock(&t->mu);
  t->progress = thread;
  t->has_progress = true;
  pthread_mutex_unlock(&t->mu);
}

void trace_close(trace_t **tp) {
  trace_t *t = *tp;
  if (t == NULL) return;
  *tp = NULL;
  pthread_mutex_lock(&t->mu);
  flush_locked(t);
  if (t->file != NULL) {
    fputs("\n]}\n", t->file);
    if (fclose(t->file) != 0)
      coll_log(COLL_LOG_WARN, "COLL_TRACE: closing %s failed (%s)", t->path, strerror(errno));
  }
  pthread_mutex_unlock(&t->mu);
  pthread_mutex_destroy(&t->mu);
  free_trace(t);
}

/* ---- the executor's hooks ---- */

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
    uint64_t *c = realloc(t->step_ops, nsteps * sizeof *c);
    if (c != NULL) t->step_ops = c;
    if (a == NULL || b == NULL || c == NULL) return false;
    t->step_cap = nsteps;
  }
  return true;
}

void trace_coll_begin_(trace_t *t, size_t nops, size_t nsteps, size_t elem_size) {
  t->coll_t0 = coll_now_ns();
  t->elem_size = elem_size;
  if (!reserve(t, nops, nsteps)) {
    t->op_cap = 0; /* marks "ops not traced" for this call */
    return;
  }
  memset(t->op_start, 0, nops * sizeof *t->op_start);
  memset(t->step_first, 0, nsteps * sizeof *t->step_first);
  memset(t->step_last, 0, nsteps * sizeof *t->step_last);
  memset(t->step_ops, 0, nsteps * sizeof *t->step_ops);
}

void trace_op_start_(trace_t *t, size_t i) {
  if (i < t->op_cap) t->op_start[i] = coll_now_ns();
}

void trace_op_done_(trace_t *t, size_t i, const trace_op_t *op) {
  if (i >= t->op_cap || op->step >= t->step_cap) return;
  int64_t end = coll_now_ns();
  int64_t posted = t->op_start[i];
  uint32_t step = op->step;
  if (t->step_first[step] == 0 || posted < t->step_first[step]) t->step_first[step] = posted;
  if (end > t->step_last[step]) t->step_last[step] = end;
  t->step_ops[step]++;
  bool transfer = op->kind <= SCHED_RECV_REDUCE;
  int64_t begin = posted;
  pthread_mutex_lock(&t->mu);
  int tid;
  if (transfer) {
    int64_t *chan = &t->chan_free[2 * (size_t)op->peer + (op->kind != SCHED_SEND)];
    if (*chan > begin) begin = *chan;
    if (begin > end) begin = end;
    *chan = end;
    tid = channel_tid(op->peer, op->kind != SCHED_SEND);
  } else {
    tid = thread_tid_locked(t);
  }
  rec_t *r = append_locked(t, REC_OP, tid);
  r->ts = begin;
  r->end = end;
  r->posted = posted;
  r->kind = op->kind;
  r->buf = op->buf;
  r->src_buf = op->src_buf;
  r->peer = op->peer;
  r->step = step;
  r->name = op->phase;
  r->elem = (uint32_t)t->elem_size;
  r->a = i;
  r->b = op->offset;
  r->c = op->count;
  r->d = op->src_offset;
  pthread_mutex_unlock(&t->mu);
}

void trace_coll_end_(trace_t *t, const trace_coll_t *c, coll_status_t status) {
  int64_t end = coll_now_ns();
  pthread_mutex_lock(&t->mu);
  int tid = thread_tid_locked(t);
  for (size_t k = 0; k < c->nsteps && k < t->step_cap && t->op_cap >= c->nops; k++) {
    if (t->step_first[k] == 0) continue;
    rec_t *r = append_locked(t, REC_STEP, tid);
    r->ts = t->step_first[k];
    r->end = t->step_last[k];
    r->step = (uint32_t)k;
    r->a = t->step_ops[k];
  }
  rec_t *r = append_locked(t, REC_COLL, tid);
  r->ts = t->coll_t0;
  r->end = end;
  r->kind = (uint8_t)c->kind;
  r->buf = (uint8_t)c->dtype;
  r->src_buf = (uint8_t)c->op;
  r->peer = coll_kind_rooted((coll_kind_t)c->kind) ? c->root : -1;
  r->name = c->path;
  r->a = c->count;
  r->b = c->count * c->elem_size;
  r->c = c->nsteps;
  r->d = c->nops;
  r->status = (int16_t)status;
  t->seq++;
  pthread_mutex_unlock(&t->mu);
}

void trace_wait_begin_(trace_t *t) { t->wait_t0 = coll_now_ns(); }

void trace_wait_end_(trace_t *t) {
  int64_t end = coll_now_ns();
  pthread_mutex_lock(&t->mu);
  rec_t *r = append_locked(t, REC_WAIT, thread_tid_locked(t));
  r->ts = t->wait_t0;
  r->end = end;
  pthread_mutex_unlock(&t->mu);
}

void trace_request_wait_(trace_t *t, int64_t t0) {
  int64_t end = coll_now_ns();
  pthread_mutex_lock(&t->mu);
  rec_t *r = append_locked(t, REC_REQUEST_WAIT, thread_tid_locked(t));
  r->ts = t0;
  r->end = end;
  pthread_mutex_unlock(&t->mu);
}

/* ---- user spans ---- */

/* The index of name in the span-name table (added, JSON-safe, on first use). */
static int name_index_locked(trace_t *t, const char *name) {
  char clean[NAME_MAX_LEN + 1];
  size_t n = 0;
  for (; name[n] != '\0' && n < NAME_MAX_LEN; n++) {
    unsigned char ch = (unsigned char)name[n];
    clean[n] = ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f ? '_' : (char)ch;
  }
  clean[n] = '\0';
  for (int i = 0; i < t->nnames; i++)
    if (strcmp(t->names[i], clean) == 0) return i;
  if (t->nnames == MAX_NAMES - 1) { /* the last slot is the shared "(other)" */
    snprintf(t->names[MAX_NAMES - 1], sizeof t->names[0], "(other)");
    return MAX_NAMES - 1;
  }
  memcpy(t->names[t->nnames], clean, n + 1);
  return t->nnames++;
}

void trace_span(trace_t *t, const char *name, bool begin) {
  if (t == NULL) return;
  int64_t now = coll_now_ns();
  pthread_mutex_lock(&t->mu);
  rec_t *r = append_locked(t, begin ? REC_BEGIN : REC_END, thread_tid_locked(t));
  r->ts = now;
  r->a = (uint64_t)name_index_locked(t, name);
  pthread_mutex_unlock(&t->mu);
}
