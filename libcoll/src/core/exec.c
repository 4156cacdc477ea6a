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
 * timeout_ms is COLL_ERR_TIMEOUT naming the awaited peer, and the hang report (hang.c).
 *
 * Fingerprints (fp_agree.h): before the schedule's first op every rank posts the
 * receives of the agreement on its call's exec_fp_t (sequence number, collective, type,
 * op, count, root) and its first sends; they are the first messages of the call on their
 * channels, and a data send waits until the agreement's message to the same peer is
 * posted. Receives wait for the ring predecessor's fingerprint (a mismatched call's data
 * must not be read first). A call finishes only once the agreement is complete: a
 * mismatch found by any rank fails the call on every rank with COLL_ERR_MISMATCH and
 * the same message; a rank that knows of one starts no more data and finishes the
 * agreement. The failure watcher's mark (another rank failed) stops a run at its next
 * look. P2P carries none (it involves two ranks and is not counted). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/util.h"
#include "common/log.h"
#include "core/arena.h"
#include "core/comm.h"
#include "core/fp_agree.h"
#include "core/trace.h"
#include "core/window.h"
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
  char *const *op_base; /* P2P: op i's buffer (user memory), else NULL */
  bool fp_active;       /* the call's fingerprints are being agreed on (fp_agree.h) */
  bool fp_done;         /* the agreement is complete (fp_complete, kept once true) */
  bool stopped_by_peer; /* another rank's failure ended the call (failure_watch.c) */
  int err_peer;         /* the peer whose connection failed, -1: none */
  size_t lo;            /* first op not done */
  size_t hi;            /* one past the last op ever started */
  int inflight;         /* posted transfers not yet complete */
} run_t;

static const char *kind_name(coll_kind_t kind) { return sched_kind_name(kind); }

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
  return failure_conclude(run->comm, st, st == COLL_ERR_REMOTE ? run->err_peer : -1,
                          run->stopped_by_peer);
}

/* Start op i (its turn has come). */
static coll_status_t start_op(run_t *run, size_t i) {
  exec_cache_entry_t *e = run->entry;
  const sched_op_t *op = &e->sched.ops[i];
  char *dst = run->op_base ? run->op_base[i] : run->base[op->buf] + op->offset * run->esz;
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
      if (run->call->on_device)
        st = exec_cuda_local(run->comm, run->call, dst,
                             run->base[op->src_buf] + op->src_offset * run->esz, op->count, false);
      else
        memmove(dst, run->base[op->src_buf] + op->src_offset * run->esz, len);
      if (st != COLL_OK) return st;
      e->state[i] = OP_DONE;
      trace_op_done(run->comm, e, i);
      return COLL_OK;
    default:
      if (run->call->on_device)
        st = exec_cuda_local(run->comm, run->call, dst,
                             run->base[op->src_buf] + op->src_offset * run->esz, op->count, true);
      else
        run->reduce(dst, dst, run->base[op->src_buf] + op->src_offset * run->esz, op->count);
      if (st != COLL_OK) return st;
      e->state[i] = OP_DONE;
      trace_op_done(run->comm, e, i);
      return COLL_OK;
  }
  if (st != COLL_OK) {
    run->err_peer = op->peer;
    return st;
  }
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
    /* Receives wait for the predecessor's fingerprint (round 0): a mismatched call's
     * data (its length differs) must not be read first. Sends go ahead, but never
     * before a round's message to the same peer, which must come first on its channel. */
    if (transfer && run->fp_active) {
      if (op->kind != SCHED_SEND && run->comm->exec.fpa.checked == 0) ok = false;
      if (op->kind == SCHED_SEND && !fpa_may_send_to(&run->comm->exec.fpa, op->peer)) ok = false;
    }
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

/* Post the agreement's next messages that are due: round k once k rounds were taken in. */
static coll_status_t fp_send_next(run_t *run) {
  coll_comm_t *comm = run->comm;
  exec_t *x = &comm->exec;
  fpa_t *a = &x->fpa;
  while (fpa_send_due(a)) {
    int k = a->sent, peer = fpa_send_peer(a, k);
    const fpa_msg_t *m = fpa_message(a, k);
    coll_status_t st =
        transport_post_send(transport_set_conn(comm->transports, peer), m, fpa_message_bytes(a));
    if (st != COLL_OK) {
      run->err_peer = peer;
      return st;
    }
    a->send_seq[k] = x->peers[peer].sends_posted++;
    a->sent++;
  }
  return COLL_OK;
}

/* Post the receive of every round of the fingerprint agreement and round 0's send:
 * they are the first messages of the collective on their channels (a later round's
 * send goes out before any data to its peer, see scan). */
static coll_status_t fp_post(run_t *run) {
  coll_comm_t *comm = run->comm;
  exec_t *x = &comm->exec;
  const exec_call_t *c = run->call;
  x->seq++;
  x->fp_out = (exec_fp_t){.seq = x->seq,
                          .count = c->count,
                          .kind = (uint32_t)c->kind,
                          .dtype = (uint32_t)c->dtype,
                          .op = (uint32_t)c->op,
                          .root = c->root};
  arena_note_call(comm, &x->fp_out); /* an arena call waiting for us can compare */
  fpa_t *a = &x->fpa;
  fpa_begin(a, &x->fp_out);
  run->fp_active = true;
  for (int k = 0; k < a->rounds; k++) {
    int peer = fpa_recv_peer(a, k);
    transport_recv_t recv = {.dst = &a->in[k], .elem_size = 1, .len = fpa_message_bytes(a)};
    coll_status_t st = transport_post_recv(transport_set_conn(comm->transports, peer), &recv);
    if (st != COLL_OK) {
      run->err_peer = peer;
      return st;
    }
    a->recv_seq[k] = x->peers[peer].recvs_posted++;
  }
  return fp_send_next(run);
}

/* Take in every round whose message arrived, posting the next round's send after each. */
static coll_status_t fp_advance(run_t *run) {
  exec_t *x = &run->comm->exec;
  fpa_t *a = &x->fpa;
  while (!fpa_all_taken(a) &&
         x->peers[fpa_recv_peer(a, a->checked)].recvs_done > a->recv_seq[a->checked]) {
    fpa_take(a);
    coll_status_t st = fp_send_next(run);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

/* Every round taken in and every round's send complete (its buffer is the agreement's).
 * Asked at every turn of the run's loop: the answer is kept once it is yes. */
static bool fp_complete(run_t *run) {
  if (run->fp_done) return true;
  const exec_t *x = &run->comm->exec;
  const fpa_t *a = &x->fpa;
  if (!fpa_all_taken(a) || a->sent < a->rounds) return false;
  for (int k = 0; k < a->rounds; k++)
    if (x->peers[fpa_send_peer(a, k)].sends_done <= a->send_seq[k]) return false;
  run->fp_done = true;
  return true;
}

/* A transport error before the agreement is complete may come from a mismatched call (a
 * message of the wrong length from a rank that called something else): finish the
 * agreement on the other connections for a moment; a mismatch is then the better
 * explanation (when the broken connection carried the deciding fingerprint, the other
 * ranks' record of the mismatch arrives instead, and failure_record reports its status). */
static coll_status_t fp_salvage(run_t *run, coll_status_t st) {
  if (!run->fp_active || st == COLL_ERR_ABORTED || fp_complete(run)) return st;
  coll_comm_t *comm = run->comm;
  exec_t *x = &comm->exec;
  int broken = run->err_peer;
  char saved[COMM_MESSAGE_MAX];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  int64_t until = coll_now_ns() + 200 * 1000000LL;
  /* Until the agreement answers, or another rank's record (the failure watcher) does. */
  while (!fpa_mismatch(&x->fpa) && !fpa_all_taken(&x->fpa) && coll_now_ns() < until &&
         atomic_load_explicit(&comm->failed, memory_order_acquire) == 0) {
    for (int p = 0; p < comm->nranks; p++) {
      exec_peer_t *peer = &x->peers[p];
      if (p == broken || p == comm->rank) continue;
      if (peer->sends_done == peer->sends_posted && peer->recvs_done == peer->recvs_posted)
        continue;
      uint64_t sd = peer->sends_done, rd = peer->recvs_done;
      if (transport_progress(transport_set_conn(comm->transports, p), &sd, &rd) != COLL_OK) {
        broken = p;
        continue;
      }
      peer->sends_done = sd;
      peer->recvs_done = rd;
    }
    if (fp_advance(run) != COLL_OK) break;
  }
  /* A failed channel's counters may lag: a filled-in round-0 fingerprint tells. */
  if (!fpa_mismatch(&x->fpa) && x->fpa.checked == 0 && x->fpa.in[0].fp.seq != 0) fpa_take(&x->fpa);
  if (fpa_mismatch(&x->fpa)) return fpa_error(&x->fpa);
  return coll_error(st, "%s", saved);
}

static bool finished(run_t *run) {
  return run->lo >= run->entry->sched.nops && (!run->fp_active || fp_complete(run));
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
    if (st != COLL_OK) {
      run->err_peer = p;
      return fp_salvage(run, st);
    }
    if (sd != peer->sends_done || rd != peer->recvs_done) *any = true;
    peer->sends_done = sd;
    peer->recvs_done = rd;
  }
  if (!*any) return COLL_OK;
  if (run->fp_active) {
    coll_status_t st = fp_advance(run);
    if (st != COLL_OK) return st;
  }
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

/* Record where this rank is stuck in exec.state (for the hang report); returns the
 * op it waits for, NULL when it waits for a round of the fingerprint agreement. */
static const sched_op_t *note_state(run_t *run) {
  exec_cache_entry_t *e = run->entry;
  exec_state_t *state = &run->comm->exec.state;
  const sched_op_t *waiting = NULL;
  for (size_t i = run->lo; i < run->hi && waiting == NULL; i++)
    if (e->state[i] == OP_POSTED) waiting = &e->sched.ops[i];
  *state = (exec_state_t){.kind = run->call->kind,
                          .seq = run->fp_active ? run->comm->exec.fp_out.seq : 0,
                          .count = run->call->count,
                          .dtype = run->call->dtype,
                          .step = run->lo < e->sched.nops ? e->op_step[run->lo] : e->sched.nsteps,
                          .nsteps = e->sched.nsteps,
                          .waiting_peer = -1};
  const fpa_t *a = &run->comm->exec.fpa;
  if (run->fp_active && !fpa_all_taken(a) && (waiting == NULL || a->checked == 0)) {
    state->waiting_peer = fpa_recv_peer(a, a->checked);
    state->waiting_what = "its fingerprint: it has not started this collective";
    return NULL;
  }
  if (waiting != NULL) {
    state->waiting_peer = waiting->peer;
    state->waiting_what = op_kind_name(waiting->kind);
  }
  return waiting;
}

/* This rank's deadline passed: note where it is stuck and fail. */
static coll_status_t timed_out(run_t *run) {
  const sched_op_t *waiting = note_state(run);
  int peer = run->comm->exec.state.waiting_peer;
  if (waiting == NULL && peer >= 0)
    return coll_error(COLL_ERR_TIMEOUT,
                      "no progress for %d ms, waiting for rank %d to start the collective",
                      run->comm->timeout_ms, peer);
  if (waiting == NULL)
    return coll_error(COLL_ERR_TIMEOUT, "no progress for %d ms", run->comm->timeout_ms);
  return coll_error(
      COLL_ERR_TIMEOUT, "no progress for %d ms, waiting for rank %d (%s of %zu bytes)",
      run->comm->timeout_ms, waiting->peer, op_kind_name(waiting->kind), waiting->count * run->esz);
}

/* The failure watcher (failure_watch.c) marked the communicator failed: another rank
 * failed first. Stop, with its message; a timeout's hang report counts us in. */
static coll_status_t stopped_by_peer(run_t *run, coll_status_t failed) {
  run->stopped_by_peer = true;
  if (failed == COLL_ERR_TIMEOUT) note_state(run);
  return coll_error(failed, "stopped: %s", run->comm->failed_message);
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
  while (!finished(run)) {
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed))
      return coll_error(COLL_ERR_ABORTED, "rank %d: %s of %zu %s: the communicator was aborted",
                        comm->rank, kind_name(run->call->kind), run->call->count,
                        coll_dtype_name(run->call->dtype));
    int failed = atomic_load_explicit(&comm->failed, memory_order_acquire);
    if (failed != 0) return stopped_by_peer(run, (coll_status_t)failed);
    /* A known mismatch: start no more data, finish the agreement (the others learn it
     * through our later rounds), then fail. */
    bool mismatch = run->fp_active && fpa_mismatch(&comm->exec.fpa);
    if (mismatch && fp_complete(run)) break;
    coll_status_t st;
    if (dirty) {
      if (run->lo < nops && !mismatch) {
        st = scan(run);
        if (st != COLL_OK) return fp_salvage(run, st);
      }
      dirty = false;
      if (finished(run)) break;
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
        coll_cpu_relax();
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
  if (run->fp_active && fpa_mismatch(&comm->exec.fpa)) return fpa_error(&comm->exec.fpa);
  return COLL_OK;
}

/* Reject schedules that would touch memory outside the call's buffers: a bug in an
 * algorithm must become an error, not a corruption. */
static coll_status_t validate_schedule(const sched_t *s, int nranks, int rank) {
  for (size_t i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    size_t limit[3] = {s->in_count, s->out_count, s->scratch_count};
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

/* P2P: one step with every transfer of the call, each on its own element range of a
 * byte-typed INPUT (sends) or OUTPUT (receives), so no two look like a hazard; the
 * executor maps op i to the user's buffer (run_t.op_base). Not cached. */
static coll_status_t p2p_build(coll_comm_t *comm, const exec_call_t *call, sched_t *s) {
  if (call->kind != COLL_KIND_P2P) return COLL_OK;
  sched_params_t p = {.collective = COLL_KIND_P2P,
                      .count = call->count,
                      .dtype = COLL_UINT8,
                      .rank = comm->rank,
                      .nranks = comm->nranks};
  sched_init(s, &p, COLL_ALGO_RING);
  const exec_p2p_t *ops = call->p2p ? call->p2p : &call->one;
  size_t nops = call->p2p ? call->np2p : 1, off = 0;
  coll_status_t st = sched_begin_step(s);
  for (size_t i = 0; i < nops && st == COLL_OK; i++) {
    /* The API drops zero-byte transfers on both sides. */
    st = ops[i].send ? sched_send(s, ops[i].peer, SCHED_BUF_INPUT, off, ops[i].bytes)
                     : sched_recv_copy(s, ops[i].peer, SCHED_BUF_OUTPUT, off, ops[i].bytes);
    off += ops[i].bytes;
  }
  return st;
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
  coll_status_t st = p2p_build(comm, call, &e->sched);
  if (call->kind != COLL_KIND_P2P) st = algo_build(call->algo, &p, &e->sched);
  if (st == COLL_ERR_UNSUPPORTED && call->kind != COLL_KIND_ALL_REDUCE) {
    /* A forced algorithm without a form for this collective: use the cost model's
     * choice, which every rank makes alike. */
    sched_free(&e->sched);
    st = algo_build(algo_select(&p, &comm->cost), &p, &e->sched);
  }
  if (st != COLL_OK) {
    sched_free(&e->sched);
    return st;
  }
  e->valid = true;
  st = validate_schedule(&e->sched, comm->nranks, comm->rank);
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
    if (e->valid && call->kind != COLL_KIND_P2P && e->kind == call->kind &&
        e->count == call->count && e->dtype == call->dtype && e->root == call->root &&
        e->algo == call->algo && e->segment_bytes == comm->segment_bytes &&
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
  if (call->on_device && !call->device_ready) return exec_cuda_run(comm, call);
  size_t esz = coll_dtype_size(call->dtype);
  if (comm->nranks == 1) {
    if (call->sendbuf != call->recvbuf) memcpy(call->recvbuf, call->sendbuf, call->count * esz);
    return COLL_OK; /* AVG over one rank divides by 1 */
  }
  /* The arena has its own loop (arena.c); api_call.c chose it only where it runs. */
  if (call->algo == COLL_ALGO_ARENA && call->kind == COLL_KIND_ALL_REDUCE)
    return call->win_send != NULL ? window_run(comm, call) : arena_run(comm, call);
  exec_cache_entry_t *e;
  st = cache_get(comm, call, &e);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: building the %s schedule of %s: ", comm->rank,
                             coll_algo_name(call->algo), kind_name(call->kind));
  /* A cuda_ipc run (exec_cuda.c) has device scratch swapped in: exec_cuda sizes it. */
  st = call->on_device ? exec_cuda_scratch(comm, e->sched.scratch_count * esz)
                       : ensure_scratch(comm, e->sched.scratch_count * esz);
  if (st != COLL_OK) return st;
  char **op_base = NULL;
  if (call->kind == COLL_KIND_P2P) {
    op_base = malloc(e->sched.nops * sizeof *op_base);
    if (op_base == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a group");
    for (size_t i = 0; i < e->sched.nops; i++)
      op_base[i] = call->p2p ? call->p2p[i].buf : call->one.buf;
  }
  bool reduces = coll_kind_reduces(call->kind) || call->kind == COLL_KIND_BARRIER;
  run_t run = {
      .comm = comm,
      .call = call,
      .entry = e,
      .base = {[SCHED_BUF_INPUT] = (char *)(uintptr_t)call->sendbuf,
               [SCHED_BUF_OUTPUT] = call->recvbuf,
               [SCHED_BUF_SCRATCH] = comm->exec.scratch},
      .op_base = op_base,
      .err_peer = -1,
      .esz = esz,
      .reduce = mem_host_reduce_fn(call->dtype, reduces ? call->op : COLL_SUM),
  };
  trace_coll_begin(comm, call, e);
  if (call->kind != COLL_KIND_P2P) st = fp_post(&run);
  if (st == COLL_OK) st = run_schedule(&run);
  free(op_base);
  trace_coll_end(comm, call, e, st);
  if (st != COLL_OK) return st == COLL_ERR_ABORTED ? st : fail(&run, st);
  if (call->op == COLL_AVG && coll_kind_output_averaged(call->kind, call->root, comm->rank))
    mem_host_finish_avg(call->recvbuf, call->count, call->dtype, comm->nranks);
  return COLL_OK;
}

coll_status_t exec_init(exec_t *exec, int rank, int nranks) {
  memset(exec, 0, sizeof *exec);
  exec->peers = calloc((size_t)nranks, sizeof *exec->peers);
  exec->chan_blocked = calloc(2 * (size_t)nranks, 1);
  if (exec->peers == NULL || exec->chan_blocked == NULL ||
      fpa_init(&exec->fpa, rank, nranks) != COLL_OK) {
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
  fpa_free(&exec->fpa);
  memset(exec, 0, sizeof *exec);
}

size_t exec_scratch_bytes(const exec_t *exec) { return exec->scratch_bytes; }

const char *exec_transport_name(coll_comm_t *comm) {
  if (comm->nranks == 1 || comm->transports == NULL) return "none";
  transport_conn_t *c = transport_set_conn(comm->transports, (comm->rank + 1) % comm->nranks);
  return c != NULL ? c->ops->name : "none";
}
