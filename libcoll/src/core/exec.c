/* The executor: runs one rank's schedule for one collective over the transports.
 *
 * Window rule: ops are considered in schedule order, from the oldest unfinished op `lo`
 * through the next EXEC_STEPS_AHEAD steps. An op starts as soon as
 *  - every earlier op on the same channel (sends to its peer, or receives from it) has
 *    started, so the k-th send still meets the k-th receive (schedule.h rule 2), and
 *  - every earlier op it has a memory hazard with has finished (it may not read bytes an
 *    unfinished op writes, nor write bytes an unfinished op reads or writes); the hazard
 *    lists are computed once per cached schedule (exec_deps.c).
 * Ops of the oldest unfinished step always start (the step-by-step semantics runs them
 * together: a step may hold a hundred sends and then the receives from the same peer).
 * Ops of later steps start only within EXEC_LOOKBACK ops of `lo` (how far back hazards
 * are tracked) and while fewer than MAX_INFLIGHT transfers are in flight. Local ops run
 * at once when they may start. Idle: spin on progress() for exec.spin_ns, then block in
 * transport_set_wait() in short slices (so abort is seen quickly); no progress for
 * timeout_ms is COLL_ERR_TIMEOUT naming the awaited peer. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "core/comm.h"
#include "core/trace.h"
#include "mem/memops.h"

enum { OP_IDLE = 0, OP_POSTED, OP_DONE };
enum { MAX_INFLIGHT = 64, WAIT_SLICE_MS = 10, SCRATCH_ALIGN = 64 };

/* Everything one run needs, resolved once. */
typedef struct {
  coll_comm_t *comm;
  const exec_call_t *call;
  exec_cache_entry_t *entry;
  char *base[3]; /* indexed by sched_buf_t */
  size_t esz;
  mem_reduce_fn reduce;
  size_t lo;    /* first op not done */
  size_t hi;    /* one past the last op ever started */
  int inflight; /* posted transfers not yet complete */
} run_t;

static const char *kind_name(coll_kind_t kind) {
  return kind == COLL_KIND_BROADCAST ? "broadcast" : "all_reduce";
}

static const char *op_kind_name(uint8_t kind) {
  switch (kind) {
    case SCHED_SEND:
      return "send";
    case SCHED_RECV_COPY:
      return "receive";
    case SCHED_RECV_REDUCE:
      return "receive-reduce";
    case SCHED_LOCAL_COPY:
      return "local copy";
    default:
      return "local reduce";
  }
}

static bool is_transfer(uint8_t kind) { return kind <= SCHED_RECV_REDUCE; }

static coll_status_t fail(run_t *run, coll_status_t st) {
  const exec_call_t *c = run->call;
  coll_error_prefix(st, "rank %d: %s of %zu %s (%s): ", run->comm->rank, kind_name(c->kind),
                    c->count, coll_dtype_name(c->dtype), coll_algo_name(run->entry->sched.algo));
  comm_mark_failed(run->comm, st);
  return st;
}

/* Start op i (its turn has come). */
static coll_status_t start_op(run_t *run, size_t i) {
  exec_cache_entry_t *e = run->entry;
  const sched_op_t *op = &e->sched.ops[i];
  char *dst = run->base[op->buf] + op->offset * run->esz;
  size_t len = op->count * run->esz;
  coll_status_t st = COLL_OK;
  trace_op_start(run->comm, i);
  switch (op->kind) {
    case SCHED_SEND: {
      exec_peer_t *p = &run->comm->exec.peers[op->peer];
      st = transport_post_send(transport_set_conn(run->comm->transports, op->peer), dst, len);
      e->seq[i] = p->sends_posted++;
      break;
    }
    case SCHED_RECV_COPY:
    case SCHED_RECV_REDUCE: {
      exec_peer_t *p = &run->comm->exec.peers[op->peer];
      transport_recv_t recv = {.dst = dst, .elem_size = run->esz, .len = len};
      if (op->kind == SCHED_RECV_REDUCE) {
        recv.operand = run->base[op->src_buf] + op->src_offset * run->esz;
        recv.reduce = run->reduce;
      }
      st = transport_post_recv(transport_set_conn(run->comm->transports, op->peer), &recv);
      e->seq[i] = p->recvs_posted++;
      break;
    }
    case SCHED_LOCAL_COPY:
      memmove(dst, run->base[op->src_buf] + op->src_offset * run->esz, len);
      e->state[i] = OP_DONE;
      trace_op_done(run->comm, e, i);
      return COLL_OK;
    default:
      run->reduce(dst, dst, run->base[op->src_buf] + op->src_offset * run->esz, op->count);
      e->state[i] = OP_DONE;
      trace_op_done(run->comm, e, i);
      return COLL_OK;
  }
  if (st != COLL_OK) return st;
  e->state[i] = OP_POSTED;
  run->inflight++;
  if (i + 1 > run->hi) run->hi = i + 1;
  return COLL_OK;
}

static void advance_lo(run_t *run) {
  exec_cache_entry_t *e = run->entry;
  while (run->lo < e->sched.nops && e->state[run->lo] == OP_DONE) run->lo++;
}

/* Start every op of the window whose turn has come (see the rule at the top). */
static coll_status_t scan(run_t *run) {
  exec_cache_entry_t *e = run->entry;
  const sched_op_t *ops = e->sched.ops;
  uint8_t *blocked = run->comm->exec.chan_blocked;
  memset(blocked, 0, 2 * (size_t)run->comm->nranks);
  size_t lo = run->lo;
  uint32_t oldest = e->op_step[lo];
  for (size_t i = lo; i < e->sched.nops && e->op_step[i] < oldest + EXEC_STEPS_AHEAD; i++) {
    bool later = e->op_step[i] != oldest;
    if (later && i - lo >= EXEC_LOOKBACK) break;
    if (e->state[i] != OP_IDLE) continue;
    const sched_op_t *op = &ops[i];
    bool transfer = is_transfer(op->kind);
    uint8_t *chan = transfer ? &blocked[2 * (size_t)op->peer + (op->kind != SCHED_SEND)] : NULL;
    bool ok = chan == NULL || !*chan;
    if (transfer && later && run->inflight >= MAX_INFLIGHT) ok = false;
    for (uint32_t d = e->dep_start[i]; ok && d < e->dep_start[i + 1]; d++)
      if (e->state[e->deps[d]] != OP_DONE) ok = false;
    if (!ok) {
      if (chan != NULL) *chan = 1;
      continue;
    }
    coll_status_t st = start_op(run, i);
    if (st != COLL_OK) return st;
  }
  advance_lo(run);
  return COLL_OK;
}

/* Ask the transports what finished; mark those ops done. Returns whether any did. */
static coll_status_t poll(run_t *run, bool *any) {
  coll_comm_t *comm = run->comm;
  exec_cache_entry_t *e = run->entry;
  *any = false;
  for (int p = 0; p < comm->nranks; p++) {
    exec_peer_t *peer = &comm->exec.peers[p];
    if (peer->sends_done == peer->sends_posted && peer->recvs_done == peer->recvs_posted) continue;
    uint64_t sd = peer->sends_done, rd = peer->recvs_done;
    coll_status_t st = transport_progress(transport_set_conn(comm->transports, p), &sd, &rd);
    if (st != COLL_OK) return st;
    if (sd != peer->sends_done || rd != peer->recvs_done) *any = true;
    peer->sends_done = sd;
    peer->recvs_done = rd;
  }
  if (!*any) return COLL_OK;
  for (size_t i = run->lo; i < run->hi; i++) {
    if (e->state[i] != OP_POSTED) continue;
    const sched_op_t *op = &e->sched.ops[i];
    const exec_peer_t *peer = &comm->exec.peers[op->peer];
    uint64_t done = op->kind == SCHED_SEND ? peer->sends_done : peer->recvs_done;
    if (e->seq[i] < done) {
      e->state[i] = OP_DONE;
      run->inflight--;
      trace_op_done(comm, e, i);
    }
  }
  advance_lo(run);
  return COLL_OK;
}

static coll_status_t timed_out(run_t *run) {
  exec_cache_entry_t *e = run->entry;
  const sched_op_t *waiting = NULL;
  for (size_t i = run->lo; i < run->hi && waiting == NULL; i++)
    if (e->state[i] == OP_POSTED) waiting = &e->sched.ops[i];
  if (waiting == NULL)
    return coll_error(COLL_ERR_TIMEOUT, "no progress for %d ms", run->comm->timeout_ms);
  return coll_error(
      COLL_ERR_TIMEOUT, "no progress for %d ms, waiting for rank %d (%s of %zu bytes)",
      run->comm->timeout_ms, waiting->peer, op_kind_name(waiting->kind), waiting->count * run->esz);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static coll_status_t run_schedule(run_t *run) {
  coll_comm_t *comm = run->comm;
  exec_cache_entry_t *e = run->entry;
  size_t nops = e->sched.nops;
  memset(e->state, OP_IDLE, nops);
  int64_t now = coll_now_ns();
  int64_t last_progress = now;
  int64_t idle_since = 0;
  int64_t timeout_ns = (int64_t)comm->timeout_ms * 1000000LL;
  bool dirty = true;
  while (run->lo < nops) {
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed))
      return coll_error(COLL_ERR_ABORTED, "rank %d: %s of %zu %s: the communicator was aborted",
                        comm->rank, kind_name(run->call->kind), run->call->count,
                        coll_dtype_name(run->call->dtype));
    coll_status_t st;
    if (dirty) {
      st = scan(run);
      if (st != COLL_OK) return st;
      dirty = false;
      if (run->lo >= nops) break;
    }
    bool any;
    st = poll(run, &any);
    if (st != COLL_OK) return st;
    if (any) {
      dirty = true;
      idle_since = 0;
      last_progress = coll_now_ns();
      atomic_store_explicit(&comm->heartbeat_ns, last_progress, memory_order_relaxed);
      continue;
    }
    now = coll_now_ns();
    if (idle_since == 0) idle_since = now;
    if (now - idle_since < comm->exec.spin_ns) {
      /* Past the first microseconds, yield while spinning: with more ranks than cores
       * the peer we wait for may need this core; with an idle core it costs little. */
      if (now - idle_since > comm->exec.pure_spin_ns)
        sched_yield();
      else
        cpu_relax();
      continue;
    }
    if (now - last_progress > timeout_ns) return timed_out(run);
    int64_t left_ms = (timeout_ns - (now - last_progress)) / 1000000LL + 1;
    trace_wait_begin(comm);
    st = transport_set_wait(comm->transports,
                            left_ms < WAIT_SLICE_MS ? (int)left_ms : WAIT_SLICE_MS);
    trace_wait_end(comm);
    if (st != COLL_OK && st != COLL_ERR_TIMEOUT) return st;
  }
  return COLL_OK;
}

/* Reject schedules that would touch memory outside the call's buffers: a bug in an
 * algorithm must become an error, not a corruption. */
static coll_status_t validate_schedule(const sched_t *s, int nranks, int rank, size_t count) {
  for (size_t i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    size_t limit[3] = {count, count, s->scratch_count};
    if (op->buf > SCHED_BUF_SCRATCH || op->src_buf > SCHED_BUF_SCRATCH ||
        op->kind > SCHED_LOCAL_REDUCE)
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu has a bad buffer or kind", i);
    if (op->offset > limit[op->buf] || op->count > limit[op->buf] - op->offset)
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu is out of its buffer", i);
    bool uses_src = op->kind == SCHED_RECV_REDUCE || op->kind >= SCHED_LOCAL_COPY;
    if (uses_src &&
        (op->src_offset > limit[op->src_buf] || op->count > limit[op->src_buf] - op->src_offset))
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu reads out of its buffer", i);
    if (is_transfer(op->kind) && (op->peer < 0 || op->peer >= nranks || op->peer == rank))
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu has bad peer %d", i, (int)op->peer);
  }
  return COLL_OK;
}

static void entry_clear(exec_cache_entry_t *e) {
  if (e->valid) sched_free(&e->sched);
  free(e->op_step);
  free(e->state);
  free(e->seq);
  free(e->dep_start);
  free(e->deps);
  memset(e, 0, sizeof *e);
}

static coll_status_t entry_build(coll_comm_t *comm, const exec_call_t *call,
                                 exec_cache_entry_t *e) {
  sched_params_t p = {
      .collective = call->kind,
      .count = call->count,
      .dtype = call->dtype,
      .rank = comm->rank,
      .nranks = comm->nranks,
      .root = call->root,
      .segment_bytes = comm->segment_bytes,
  };
  coll_status_t st = algo_build(call->algo, &p, &e->sched);
  if (st == COLL_ERR_UNSUPPORTED && call->kind == COLL_KIND_BROADCAST) {
    /* A forced all-reduce algorithm without a broadcast form: use the cost model's
     * choice, which every rank makes alike. */
    sched_free(&e->sched);
    st = algo_build(algo_select(&p, &comm->cost), &p, &e->sched);
  }
  if (st != COLL_OK) {
    sched_free(&e->sched);
    return st;
  }
  e->valid = true;
  st = validate_schedule(&e->sched, comm->nranks, comm->rank, call->count);
  if (st != COLL_OK) return st;
  size_t n = e->sched.nops ? e->sched.nops : 1;
  e->op_step = malloc(n * sizeof *e->op_step);
  e->state = malloc(n);
  e->seq = malloc(n * sizeof *e->seq);
  if (e->op_step == NULL || e->state == NULL || e->seq == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a schedule of %zu ops", n);
  for (size_t s = 0; s < e->sched.nsteps; s++)
    for (uint32_t k = 0; k < e->sched.steps[s].nops; k++)
      e->op_step[e->sched.steps[s].first_op + k] = (uint32_t)s;
  bool in_place = call->sendbuf == call->recvbuf;
  st = exec_deps_build(e, in_place);
  if (st != COLL_OK) return st;
  e->in_place = in_place;
  e->kind = call->kind;
  e->count = call->count;
  e->dtype = call->dtype;
  e->root = call->root;
  e->algo = call->algo;
  e->segment_bytes = comm->segment_bytes;
  return COLL_OK;
}

/* The cached schedule for call, built on a miss (least recently used entry evicted). */
static coll_status_t cache_get(coll_comm_t *comm, const exec_call_t *call,
                               exec_cache_entry_t **out) {
  exec_t *x = &comm->exec;
  exec_cache_entry_t *victim = &x->cache[0];
  for (int k = 0; k < EXEC_CACHE_SIZE; k++) {
    exec_cache_entry_t *e = &x->cache[k];
    if (e->valid && e->kind == call->kind && e->count == call->count && e->dtype == call->dtype &&
        e->root == call->root && e->algo == call->algo && e->segment_bytes == comm->segment_bytes &&
        e->in_place == (call->sendbuf == call->recvbuf)) {
      e->last_use = ++x->use_clock;
      *out = e;
      return COLL_OK;
    }
    if (!e->valid || (victim->valid && e->last_use < victim->last_use)) victim = e;
  }
  entry_clear(victim);
  coll_status_t st = entry_build(comm, call, victim);
  if (st != COLL_OK) {
    entry_clear(victim);
    return st;
  }
  victim->last_use = ++x->use_clock;
  *out = victim;
  return COLL_OK;
}

static coll_status_t ensure_scratch(coll_comm_t *comm, size_t bytes) {
  exec_t *x = &comm->exec;
  if (bytes <= x->scratch_bytes) return COLL_OK;
  size_t rounded = (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
  void *p = aligned_alloc(SCRATCH_ALIGN, rounded);
  if (p == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", rounded);
  free(x->scratch);
  x->scratch = p;
  x->scratch_bytes = rounded;
  comm_update_staging_peak(comm);
  return COLL_OK;
}

coll_status_t exec_run(coll_comm_t *comm, const exec_call_t *call) {
  coll_status_t st = comm_check_usable(comm, kind_name(call->kind));
  if (st != COLL_OK || call->count == 0) return st;
  size_t esz = coll_dtype_size(call->dtype);
  if (comm->nranks == 1) {
    if (call->sendbuf != call->recvbuf) memcpy(call->recvbuf, call->sendbuf, call->count * esz);
    return COLL_OK; /* AVG over one rank divides by 1 */
  }
  exec_cache_entry_t *e;
  st = cache_get(comm, call, &e);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: building the %s schedule of %s: ", comm->rank,
                             coll_algo_name(call->algo), kind_name(call->kind));
  st = ensure_scratch(comm, e->sched.scratch_count * esz);
  if (st != COLL_OK) return st;
  run_t run = {
      .comm = comm,
      .call = call,
      .entry = e,
      .base = {[SCHED_BUF_INPUT] = (char *)(uintptr_t)call->sendbuf,
               [SCHED_BUF_OUTPUT] = call->recvbuf,
               [SCHED_BUF_SCRATCH] = comm->exec.scratch},
      .esz = esz,
      .reduce =
          mem_host_reduce_fn(call->dtype, call->kind == COLL_KIND_BROADCAST ? COLL_SUM : call->op),
  };
  trace_coll_begin(comm, call, e);
  st = run_schedule(&run);
  trace_coll_end(comm, call, e, st);
  if (st != COLL_OK) return st == COLL_ERR_ABORTED ? st : fail(&run, st);
  if (call->kind == COLL_KIND_ALL_REDUCE && call->op == COLL_AVG)
    mem_host_finish_avg(call->recvbuf, call->count, call->dtype, comm->nranks);
  return COLL_OK;
}

coll_status_t exec_init(exec_t *exec, int nranks) {
  memset(exec, 0, sizeof *exec);
  exec->peers = calloc((size_t)nranks, sizeof *exec->peers);
  exec->chan_blocked = calloc(2 * (size_t)nranks, 1);
  if (exec->peers == NULL || exec->chan_blocked == NULL) {
    exec_free(exec);
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for the executor of %d ranks", nranks);
  }
  exec->spin_ns = 20000;
  return COLL_OK;
}

void exec_free(exec_t *exec) {
  for (int k = 0; k < EXEC_CACHE_SIZE; k++) entry_clear(&exec->cache[k]);
  free(exec->peers);
  free(exec->chan_blocked);
  free(exec->scratch);
  memset(exec, 0, sizeof *exec);
}

size_t exec_scratch_bytes(const exec_t *exec) { return exec->scratch_bytes; }

const char *exec_transport_name(coll_comm_t *comm) {
  if (comm->nranks == 1 || comm->transports == NULL) return "none";
  transport_conn_t *c = transport_set_conn(comm->transports, (comm->rank + 1) % comm->nranks);
  return c != NULL ? c->ops->name : "none";
}
