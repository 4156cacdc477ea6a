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
 * look. P2P carries none (it involves two ranks and is not counted). The caller starts
 * a collective's fingerprint (base_begin_call) before the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "common/wait.h"
#include "exec/exec.h"
#include "mem/mem_cuda.h"
#include "mem/memops.h"
#include "trace/trace.h"

enum { OP_IDLE = 0, OP_POSTED, OP_DONE };
enum { MAX_INFLIGHT = 64, WAIT_SLICE_MS = 10, SCRATCH_ALIGN = 64, LIVENESS_MS = 250 };

/* Everything one run needs, resolved once. */
typedef struct {
  exec_t *x;
  exec_links_t *links;
  coll_base_t *base;
  const coll_call_t *call;
  exec_cache_entry_t *entry;
  char *buf[3]; /* the call's buffers, indexed by sched_buf_t */
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
} exec_run_t;

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

static coll_status_t fail(exec_run_t *run, coll_status_t st) {
  const coll_call_t *c = run->call;
  if (c->kind == COLL_KIND_ALL_TO_ALLV) /* its count is nranks, not elements */
    coll_error_prefix(st, "rank %d: all_to_allv of %s (%s): ", run->base->rank,
                      coll_dtype_name(c->dtype), coll_algo_name(run->entry->sched.algo));
  else
    coll_error_prefix(st, "rank %d: %s of %zu %s (%s): ", run->base->rank, kind_name(c->kind),
                      c->count, coll_dtype_name(c->dtype), coll_algo_name(run->entry->sched.algo));
  return failure_conclude(run->base, st, st == COLL_ERR_REMOTE ? run->err_peer : -1,
                          run->stopped_by_peer);
}

/* A local copy (reduce false) or reduction on device links: a kernel on the links'
 * stream, finished before the op counts as done. Broadcast's reductions are copies. */
static coll_status_t device_local(exec_run_t *run, void *dst, const void *src, size_t count,
                                  bool reduce) {
  const coll_call_t *call = run->call;
  void *stream = run->links->stream;
  coll_op_t op = call->kind == COLL_KIND_BROADCAST ? COLL_SUM : call->op;
  coll_status_t st =
      reduce ? mem_cuda_reduce_async(dst, dst, src, count, call->dtype, op, stream)
             : mem_cuda_copy_async(dst, src, count * coll_dtype_size(call->dtype), stream);
  return st == COLL_OK ? mem_cuda_stream_wait(stream, run->base->timeout_ms) : st;
}

/* The trace's record of op i (COLL_TRACE). */
static void trace_done(exec_run_t *run, size_t i) {
  if (!TRACE_ON(run->base->trace)) return;
  const exec_cache_entry_t *e = run->entry;
  const sched_op_t *op = &e->sched.ops[i];
  trace_op_t rec = {.kind = op->kind,
                    .buf = op->buf,
                    .src_buf = op->src_buf,
                    .peer = op->peer,
                    .step = e->op_step[i],
                    .offset = op->offset,
                    .count = op->count,
                    .src_offset = op->src_offset};
  trace_op_done_(run->base->trace, i, &rec);
}

/* Start op i (its turn has come). */
static coll_status_t start_op(exec_run_t *run, size_t i) {
  exec_cache_entry_t *e = run->entry;
  const sched_op_t *op = &e->sched.ops[i];
  char *dst = run->op_base ? run->op_base[i] : run->buf[op->buf] + op->offset * run->esz;
  size_t len = op->count * run->esz;
  coll_status_t st = COLL_OK;
  trace_op_start(run->base->trace, i);
  switch (op->kind) {
    case SCHED_SEND: {
      exec_peer_t *p = &run->links->peers[op->peer];
      st = transport_post_send(transport_set_conn(run->links->transports, op->peer), dst, len);
      e->seq[i] = p->sends_posted++;
      break;
    }
    case SCHED_RECV_COPY:
    case SCHED_RECV_REDUCE: {
      exec_peer_t *p = &run->links->peers[op->peer];
      transport_recv_t recv = {.dst = dst, .elem_size = run->esz, .len = len};
      if (op->kind == SCHED_RECV_REDUCE) {
        recv.operand = run->buf[op->src_buf] + op->src_offset * run->esz;
        recv.reduce = run->reduce;
      }
      st = transport_post_recv(transport_set_conn(run->links->transports, op->peer), &recv);
      e->seq[i] = p->recvs_posted++;
      break;
    }
    case SCHED_LOCAL_COPY:
      if (run->links->device)
        st = device_local(run, dst, run->buf[op->src_buf] + op->src_offset * run->esz, op->count,
                          false);
      else
        memmove(dst, run->buf[op->src_buf] + op->src_offset * run->esz, len);
      if (st != COLL_OK) return st;
      e->state[i] = OP_DONE;
      trace_done(run, i);
      return COLL_OK;
    default:
      if (run->links->device)
        st = device_local(run, dst, run->buf[op->src_buf] + op->src_offset * run->esz, op->count,
                          true);
      else
        run->reduce(dst, dst, run->buf[op->src_buf] + op->src_offset * run->esz, op->count);
      if (st != COLL_OK) return st;
      e->state[i] = OP_DONE;
      trace_done(run, i);
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

static void advance_lo(exec_run_t *run) {
  exec_cache_entry_t *e = run->entry;
  while (run->lo < e->sched.nops && e->state[run->lo] == OP_DONE) run->lo++;
}

/* Start every op of the window whose turn has come (see the rule at the top). */
static coll_status_t scan(exec_run_t *run) {
  exec_cache_entry_t *e = run->entry;
  const sched_op_t *ops = e->sched.ops;
  uint8_t *blocked = run->x->chan_blocked;
  memset(blocked, 0, 2 * (size_t)run->base->nranks);
  size_t lo = run->lo;
  uint32_t oldest = e->op_step[lo];
  for (size_t i = lo; i < e->sched.nops && e->op_step[i] < oldest + EXEC_STEPS_AHEAD; i++) {
    bool later = e->op_step[i] != oldest;
    if (later && i - lo >= EXEC_LOOKBACK) break;
    if (e->state[i] != OP_IDLE) continue;
    const sched_op_t *op = &ops[i];
    bool transfer = op->kind <= SCHED_RECV_REDUCE;
    uint8_t *chan = transfer ? &blocked[2 * (size_t)op->peer + (op->kind != SCHED_SEND)] : NULL;
    bool ok = chan == NULL || !*chan;
    if (transfer && later && run->inflight >= MAX_INFLIGHT) ok = false;
    /* Receives wait for the predecessor's fingerprint (round 0): a mismatched call's
     * data (its length differs) must not be read first. Sends go ahead, but never
     * before a round's message to the same peer, which must come first on its channel. */
    if (transfer && run->fp_active) {
      if (op->kind != SCHED_SEND && run->x->fpa.checked == 0) ok = false;
      if (op->kind == SCHED_SEND && !fpa_may_send_to(&run->x->fpa, op->peer)) ok = false;
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
static coll_status_t fp_send_next(exec_run_t *run) {
  exec_t *x = run->x;
  fpa_t *a = &x->fpa;
  while (fpa_send_due(a)) {
    int k = a->sent, peer = fpa_send_peer(a, k);
    const fpa_msg_t *m = fpa_message(a, k);
    coll_status_t st = transport_post_send(transport_set_conn(run->links->transports, peer), m,
                                           fpa_message_bytes(a));
    if (st != COLL_OK) {
      run->err_peer = peer;
      return st;
    }
    a->send_seq[k] = run->links->peers[peer].sends_posted++;
    a->sent++;
  }
  return COLL_OK;
}

/* Post the receive of every round of the fingerprint agreement and round 0's send:
 * they are the first messages of the collective on their channels (a later round's
 * send goes out before any data to its peer, see scan). */
static coll_status_t fp_post(exec_run_t *run) {
  coll_base_t *base = run->base;
  exec_t *x = run->x;
  fpa_t *a = &x->fpa;
  fpa_begin(a, &base->fp_out); /* begun by the caller (base_begin_call) */
  run->fp_active = true;
  for (int k = 0; k < a->rounds; k++) {
    int peer = fpa_recv_peer(a, k);
    transport_recv_t recv = {.dst = &a->in[k], .elem_size = 1, .len = fpa_message_bytes(a)};
    coll_status_t st = transport_post_recv(transport_set_conn(run->links->transports, peer), &recv);
    if (st != COLL_OK) {
      run->err_peer = peer;
      return st;
    }
    a->recv_seq[k] = run->links->peers[peer].recvs_posted++;
  }
  return fp_send_next(run);
}

/* Take in every round whose message arrived, posting the next round's send after each. */
static coll_status_t fp_advance(exec_run_t *run) {
  exec_t *x = run->x;
  fpa_t *a = &x->fpa;
  while (!fpa_all_taken(a) &&
         run->links->peers[fpa_recv_peer(a, a->checked)].recvs_done > a->recv_seq[a->checked]) {
    fpa_take(a);
    coll_status_t st = fp_send_next(run);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

/* Every round taken in and every round's send complete (its buffer is the agreement's).
 * Asked at every turn of the run's loop: the answer is kept once it is yes. */
static bool fp_complete(exec_run_t *run) {
  if (run->fp_done) return true;
  const exec_t *x = run->x;
  const fpa_t *a = &x->fpa;
  if (!fpa_all_taken(a) || a->sent < a->rounds) return false;
  for (int k = 0; k < a->rounds; k++)
    if (run->links->peers[fpa_send_peer(a, k)].sends_done <= a->send_seq[k]) return false;
  run->fp_done = true;
  return true;
}

/* A transport error before the agreement is complete may come from a mismatched call (a
 * message of the wrong length from a rank that called something else): finish the
 * agreement on the other connections for a moment; a mismatch is then the better
 * explanation (when the broken connection carried the deciding fingerprint, the other
 * ranks' record of the mismatch arrives instead, and failure_record reports its status). */
static coll_status_t fp_salvage(exec_run_t *run, coll_status_t st) {
  if (!run->fp_active || st == COLL_ERR_ABORTED || fp_complete(run)) return st;
  coll_base_t *base = run->base;
  exec_t *x = run->x;
  int broken = run->err_peer;
  char saved[BASE_MESSAGE_MAX];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  int64_t until = coll_now_ns() + 200 * 1000000LL;
  /* Until the agreement answers, or another rank's record (the failure watcher) does. */
  while (!fpa_mismatch(&x->fpa) && !fpa_all_taken(&x->fpa) && coll_now_ns() < until &&
         base_failed(base) == 0) {
    for (int p = 0; p < base->nranks; p++) {
      exec_peer_t *peer = &run->links->peers[p];
      if (p == broken || p == base->rank) continue;
      if (peer->sends_done == peer->sends_posted && peer->recvs_done == peer->recvs_posted)
        continue;
      uint64_t sd = peer->sends_done, rd = peer->recvs_done;
      if (transport_progress(transport_set_conn(run->links->transports, p), &sd, &rd) != COLL_OK) {
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

static bool finished(exec_run_t *run) {
  return run->lo >= run->entry->sched.nops && (!run->fp_active || fp_complete(run));
}

/* Ask the transports what finished; mark those ops done. Returns whether any did. */
static coll_status_t poll(exec_run_t *run, bool *any) {
  coll_base_t *base = run->base;
  exec_cache_entry_t *e = run->entry;
  *any = false;
  for (int p = 0; p < base->nranks; p++) {
    exec_peer_t *peer = &run->links->peers[p];
    if (peer->sends_done == peer->sends_posted && peer->recvs_done == peer->recvs_posted) continue;
    uint64_t sd = peer->sends_done, rd = peer->recvs_done;
    coll_status_t st = transport_progress(transport_set_conn(run->links->transports, p), &sd, &rd);
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
    const exec_peer_t *peer = &run->links->peers[op->peer];
    uint64_t done = op->kind == SCHED_SEND ? peer->sends_done : peer->recvs_done;
    if (e->seq[i] < done) {
      e->state[i] = OP_DONE;
      run->inflight--;
      trace_done(run, i);
    }
  }
  advance_lo(run);
  return COLL_OK;
}

/* Record where this rank is stuck in base->where (for the hang report); returns the
 * op it waits for, NULL when it waits for a round of the fingerprint agreement. */
static const sched_op_t *note_state(exec_run_t *run) {
  exec_cache_entry_t *e = run->entry;
  base_where_t *state = &run->base->where;
  const sched_op_t *waiting = NULL;
  for (size_t i = run->lo; i < run->hi && waiting == NULL; i++)
    if (e->state[i] == OP_POSTED) waiting = &e->sched.ops[i];
  *state = (base_where_t){.kind = run->call->kind,
                          .seq = run->fp_active ? run->base->fp_out.seq : 0,
                          .count = run->call->count,
                          .dtype = run->call->dtype,
                          .step = run->lo < e->sched.nops ? e->op_step[run->lo] : e->sched.nsteps,
                          .nsteps = e->sched.nsteps,
                          .waiting_peer = -1};
  const fpa_t *a = &run->x->fpa;
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

/* The peer this rank waits for first (note_state's, without recording it): the first
 * posted op's, or the fingerprint agreement's; -1 when none. The transports block on its
 * link where they mix kinds (transport_set_wait_for). */
static int awaited_peer(const exec_run_t *run) {
  const exec_cache_entry_t *e = run->entry;
  const fpa_t *a = &run->x->fpa;
  size_t i = run->lo;
  while (i < run->hi && e->state[i] != OP_POSTED) i++;
  if (run->fp_active && !fpa_all_taken(a) && (i == run->hi || a->checked == 0))
    return fpa_recv_peer(a, a->checked);
  return i < run->hi ? e->sched.ops[i].peer : -1;
}

/* This rank's deadline passed: note where it is stuck and fail. */
static coll_status_t timed_out(exec_run_t *run) {
  const sched_op_t *waiting = note_state(run);
  int peer = run->base->where.waiting_peer;
  if (waiting == NULL && peer >= 0)
    return coll_error(COLL_ERR_TIMEOUT,
                      "no progress for %d ms, waiting for rank %d to start the collective",
                      run->base->timeout_ms, peer);
  if (waiting == NULL)
    return coll_error(COLL_ERR_TIMEOUT, "no progress for %d ms", run->base->timeout_ms);
  return coll_error(
      COLL_ERR_TIMEOUT, "no progress for %d ms, waiting for rank %d (%s of %zu bytes)",
      run->base->timeout_ms, waiting->peer, op_kind_name(waiting->kind), waiting->count * run->esz);
}

/* The failure watcher (failure_watch.c) marked the communicator failed: another rank
 * failed first. Stop, with its message; a timeout's hang report counts us in. */
static coll_status_t stopped_by_peer(exec_run_t *run, coll_status_t failed) {
  run->stopped_by_peer = true;
  if (failed == COLL_ERR_TIMEOUT) note_state(run);
  return coll_error(failed, "stopped: %s", run->base->failed_message);
}

/* A transport that cannot see its peer die (ib: a queue pair to a dead process just goes
 * quiet) would wait for the deadline. So after every LIVENESS_MS without progress, look
 * up the awaited peer's liveness in the store (base/liveness.c: its owned key missing twice
 * in a row, or its lease standing still), and when it is dead fail now, naming it. Costs
 * nothing while data moves. */
static coll_status_t check_awaited_alive(exec_run_t *run, int64_t now, int64_t *last_look,
                                         liveness_tracker_t *tracker) {
  if (now - *last_look < (int64_t)LIVENESS_MS * 1000000LL) return COLL_OK;
  *last_look = now;
  int peer = awaited_peer(run);
  if (peer < 0) return COLL_OK;
  if (liveness_peer_alive(run->base, peer, tracker) != 0) return COLL_OK;
  run->err_peer = peer;
  return coll_error(COLL_ERR_REMOTE,
                    "rank %d died: its process is gone (%s) while this rank waited for it", peer,
                    store_client_owns_keys(run->base->store)
                        ? "the store dropped its liveness key"
                        : "its lease in the store stopped moving");
}

static coll_status_t run_schedule(exec_run_t *run) {
  coll_base_t *base = run->base;
  exec_t *x = run->x;
  exec_cache_entry_t *e = run->entry;
  size_t nops = e->sched.nops;
  memset(e->state, OP_IDLE, nops);
  int64_t now = coll_now_ns();
  int64_t last_progress = now;
  int64_t idle_since = 0;
  int64_t last_liveness = now; /* check_awaited_alive's last look */
  liveness_tracker_t tracker = {0};
  int64_t timeout_ns = (int64_t)base->timeout_ms * 1000000LL;
  bool dirty = true;
  while (!finished(run)) {
    if (base_aborted(base))
      return coll_error(COLL_ERR_ABORTED, "rank %d: %s of %zu %s: the communicator was aborted",
                        base->rank, kind_name(run->call->kind), run->call->count,
                        coll_dtype_name(run->call->dtype));
    int failed = base_failed(base);
    if (failed != 0) return stopped_by_peer(run, (coll_status_t)failed);
    /* A known mismatch: start no more data, finish the agreement (the others learn it
     * through our later rounds), then fail. */
    bool mismatch = run->fp_active && fpa_mismatch(&x->fpa);
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
      last_liveness = last_progress; /* the next look only after LIVENESS_MS of silence */
      tracker.started = false;
      base_heartbeat(base, last_progress);
      continue;
    }
    now = coll_now_ns();
    if (idle_since == 0) idle_since = now;
    if (coll_wait_spin(now - idle_since, base->spin_ns, base->pure_spin_ns)) continue;
    if (now - last_progress > timeout_ns) return timed_out(run);
    st = check_awaited_alive(run, now, &last_liveness, &tracker);
    if (st != COLL_OK) return st;
    int64_t left_ms = (timeout_ns - (now - last_progress)) / 1000000LL + 1;
    trace_wait_begin(base->trace);
    st = transport_set_wait_for(run->links->transports, awaited_peer(run),
                                left_ms < WAIT_SLICE_MS ? (int)left_ms : WAIT_SLICE_MS);
    trace_wait_end(base->trace);
    if (st != COLL_OK && st != COLL_ERR_TIMEOUT) return st;
  }
  if (run->fp_active && fpa_mismatch(&x->fpa)) return fpa_error(&x->fpa);
  return COLL_OK;
}

/* Host links grow their scratch here; device links come sized (exec_scratch_needed). */
static coll_status_t ensure_scratch(exec_links_t *links, size_t bytes) {
  if (bytes <= links->scratch_bytes) return COLL_OK;
  if (links->device)
    return coll_error(COLL_ERR_INTERNAL, "device scratch of %zu bytes needed, %zu given", bytes,
                      links->scratch_bytes);
  size_t rounded = coll_round_up(bytes, SCRATCH_ALIGN);
  void *p = aligned_alloc(SCRATCH_ALIGN, rounded);
  if (p == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", rounded);
  free(links->scratch);
  links->scratch = p;
  links->scratch_bytes = rounded;
  return COLL_OK;
}

static void trace_end(exec_run_t *run, coll_status_t st) {
  if (!TRACE_ON(run->base->trace)) return;
  const coll_call_t *call = run->call;
  const sched_t *s = &run->entry->sched;
  size_t count = call->count;
  if (call->kind == COLL_KIND_ALL_TO_ALLV) { /* its count is nranks: record what it sends */
    count = 0;
    for (int p = 0; p < run->base->nranks; p++)
      count += sched_v(call->vcounts, run->base->nranks, SCHED_V_SENDCOUNTS, p);
  }
  trace_coll_t rec = {.kind = call->kind,
                      .dtype = call->dtype,
                      .op = call->op,
                      .root = call->root,
                      .count = count,
                      .elem_size = s->elem_size,
                      .path = coll_algo_name(s->algo),
                      .nsteps = s->nsteps,
                      .nops = s->nops};
  trace_coll_end_(run->base->trace, &rec, st);
}

coll_status_t exec_scratch_needed(exec_t *x, const coll_call_t *call, size_t *bytes) {
  exec_cache_entry_t *e;
  coll_status_t st = exec_cache_get(x, call, &e);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: building the %s schedule of %s: ", x->base->rank,
                             coll_algo_name(call->algo), kind_name(call->kind));
  *bytes = e->sched.scratch_count * coll_dtype_size(call->dtype);
  return COLL_OK;
}

coll_status_t exec_run(exec_t *x, exec_links_t *links, const coll_call_t *call) {
  coll_base_t *base = x->base;
  size_t esz = coll_dtype_size(call->dtype);
  exec_cache_entry_t *e;
  coll_status_t st = exec_cache_get(x, call, &e);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: building the %s schedule of %s: ", base->rank,
                             coll_algo_name(call->algo), kind_name(call->kind));
  st = ensure_scratch(links, e->sched.scratch_count * esz);
  if (st != COLL_OK) return st;
  char **op_base = NULL;
  if (call->kind == COLL_KIND_P2P) {
    op_base = malloc(e->sched.nops * sizeof *op_base);
    if (op_base == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a group");
    for (size_t i = 0; i < e->sched.nops; i++)
      op_base[i] = call->p2p ? call->p2p[i].buf : call->one.buf;
  }
  bool reduces = coll_kind_reduces(call->kind) || call->kind == COLL_KIND_BARRIER;
  exec_run_t run = {
      .x = x,
      .links = links,
      .base = base,
      .call = call,
      .entry = e,
      .buf = {[SCHED_BUF_INPUT] = (char *)(uintptr_t)call->sendbuf,
              [SCHED_BUF_OUTPUT] = call->recvbuf,
              [SCHED_BUF_SCRATCH] = links->scratch},
      .op_base = op_base,
      .err_peer = -1,
      .esz = esz,
      .reduce = mem_host_reduce_fn(call->dtype, reduces ? call->op : COLL_SUM),
  };
  trace_coll_begin(base->trace, e->sched.nops, e->sched.nsteps, e->sched.elem_size);
  if (call->kind != COLL_KIND_P2P) st = fp_post(&run);
  if (st == COLL_OK) st = run_schedule(&run);
  free(op_base);
  trace_end(&run, st);
  if (st != COLL_OK) return st == COLL_ERR_ABORTED ? st : fail(&run, st);
  /* Device links: the CUDA path divides on the device. */
  if (!links->device && call->op == COLL_AVG &&
      coll_kind_output_averaged(call->kind, call->root, base->rank))
    mem_host_finish_avg(call->recvbuf, call->count, call->dtype, base->nranks);
  return COLL_OK;
}

coll_status_t exec_init(exec_t *x, coll_base_t *base, const algo_cost_t *cost) {
  memset(x, 0, sizeof *x);
  x->base = base;
  x->cost = cost;
  x->chan_blocked = calloc(2 * (size_t)base->nranks, 1);
  if (x->chan_blocked == NULL || fpa_init(&x->fpa, base->rank, base->nranks) != COLL_OK) {
    exec_free(x);
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for the executor of %d ranks",
                      base->nranks);
  }
  return COLL_OK;
}

void exec_free(exec_t *x) {
  exec_cache_clear(x);
  free(x->chan_blocked);
  fpa_free(&x->fpa);
  memset(x, 0, sizeof *x);
}

coll_status_t exec_links_init(exec_links_t *links, transport_set_t *transports, int nranks) {
  memset(links, 0, sizeof *links);
  links->transports = transports;
  links->peers = calloc((size_t)nranks, sizeof *links->peers);
  if (links->peers == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for the links to %d ranks", nranks);
  return COLL_OK;
}

void exec_links_free(exec_links_t *links) {
  free(links->peers);
  if (!links->device) free(links->scratch);
  memset(links, 0, sizeof *links);
}
