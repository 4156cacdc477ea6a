/* The arena all-reduce: every rank of the communicator maps one shared segment holding,
 * per set, one slot per rank. The buffer is cut into rounds of C elements (C = one slot);
 * a round's C elements are cut into n slices, slice i reduced by rank i:
 *
 *        rank 0 input   rank 1 input   rank 2 input          (round t: elements [tC, tC+C))
 *        [s0|s1|s2]     [s0|s1|s2]     [s0|s1|s2]
 *   A_t     | copy in (all slices but its own)
 *           v              v              v
 *   set t%4 slot 0        slot 1         slot 2         --> "filled t"
 *   B_t  rank i, once every rank filled t: acc = x0[si] OP x1[si] OP ... OP x(n-1)[si]
 *        (fixed rank order; its own xi read from its input), [AVG: / n], written to slot
 *        i's slice si and to its output's slice si       --> "reduced t"
 *   C_t  rank i copies slice sj of slot j into its output as soon as rank j reduced t,
 *        for every j != i                                 --> "drained t"
 *
 * Bytes per rank for S bytes: A reads and writes (n-1)/n S, B reads S and writes 2 S/n,
 * C reads and writes (n-1)/n S: about 4.5 S of memory traffic at n = 4 and at most 5 S
 * at any n (the FIFO ring moves 9 (n-1)/n S); each element is reduced once, by one rank,
 * in a fixed order, so every rank gets the same bits.
 *
 * No barriers: each rank publishes, in its own cache line, the last round it filled,
 * reduced and drained, and waits only for what the next step reads. Rank i runs
 *   A_0 | A_1 B_0 | A_2 B_1 C_0 | ... | A_t B_(t-1) C_(t-2) | ... | C_(R-1)
 * where A_t first waits until every rank drained round t-4 (the set is free again: all
 * B and C reads of round t-4 are done), B_t until every rank filled round t, C_t (per
 * slice) until its owner reduced round t. Each of these is work the others do in their
 * previous step at the latest, A_t's even two steps back, so a rank that was descheduled
 * (more ranks than cores) delays the others by part of a step, not by a barrier's worth.
 * Rank i writes only its own slot: all of it in A_t but slice i, slice i in B_t, after
 * every reader of round t-4 in that set is done; nobody reads slot i's slice i of round
 * t before "reduced t". Round numbers run on across calls (a uint32 that wraps; set =
 * round % 4), so a call's first rounds wait for the previous call's stragglers only
 * where they share a set, and no rank waits at the end of a call.
 *
 * Waiting: spin (COLL_PURE_SPIN_US), then yield up to COLL_SPIN_US (with more ranks than
 * cores the rank we wait for needs this core), then sleep on the futex word `bell` that
 * every publication bumps (waking sleepers only when there are some), in 10 ms slices so
 * abort is seen; every 100 ms check that the awaited rank still holds its lock on the
 * segment (arena_setup.c). A failing rank (dead peer, abort) publishes its message in
 * the header so the others stop at once; a timeout is left to each rank, so that every
 * one of them writes its hang report. Fingerprints: each rank writes its call's exec_fp_t
 * before A_0 and compares all of them once every rank filled round 0 (before any B, so
 * no rank has left the call, nor written its next fingerprint); every other collective
 * writes its fingerprint there too (exec.c), and a waiter compares the awaited rank's,
 * so a rank that started something else is a mismatch at once, not a timeout. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "algo/algo_internal.h"
#include "common/cheap_clock.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/wait.h"
#include "mem/memops.h"
#include "onehost/arena.h"

enum { WAIT_SLICE_MS = 10, ALIVE_CHECK_MS = 100 };
/* Trace ops of one round: A, B and C. */
enum { PH_IN = ARENA_PH_IN, PH_REDUCE = ARENA_PH_REDUCE, PH_OUT = ARENA_PH_OUT, PH_COUNT };

typedef struct {
  arena_t *a;
  arena_waiter_t w;
  const coll_call_t *call;
  const unsigned char *in;
  unsigned char *out;
  size_t esz;
  size_t chunk; /* elements per round */
  size_t rounds;
  uint32_t round0; /* the arena's round count when this call began */
  mem_reduce_fn reduce;
  trace_t *trace; /* NULL when not tracing */
} arena_run_t;

static inline bool reached(uint32_t value, uint32_t target) {
  return (int32_t)(value - target) >= 0;
}

static void wake_all(arena_hdr_t *h) {
  syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Tell the other ranks this one failed (first failure wins), with its message. */
static void publish_failure(arena_t *a, const char *message) {
  int32_t none = 0;
  arena_hdr_t *h = a->hdr;
  if (atomic_load(&h->failed) == 0) {
    /* Racing writers of the text are harmless: `failed` names whose it is. */
    snprintf(h->failure, sizeof h->failure, "%.*s", (int)sizeof h->failure - 1, message);
    atomic_compare_exchange_strong(&h->failed, &none, a->rank + 1);
  }
  atomic_fetch_add(&h->bell, 1);
  wake_all(h);
}

/* Publish this rank's progress. Sequentially consistent with the waiter's side (see
 * wait_for): either the waiter sees the new value, or we see it counted in sleepers. */
void arena_publish(arena_t *a, _Atomic uint32_t *counter, uint32_t round) {
  atomic_store(counter, round);
  atomic_fetch_add(&a->hdr->bell, 1);
  if (atomic_load(&a->hdr->sleepers) != 0) wake_all(a->hdr);
}

void arena_wake_sleepers(arena_t *a) {
  if (atomic_load(&a->hdr->sleepers) == 0) return;
  atomic_fetch_add(&a->hdr->bell, 1);
  wake_all(a->hdr);
}

static const char *const phase_names[PH_COUNT] = {[PH_IN] = "its input in the arena",
                                                  [PH_REDUCE] = "its reduced slice",
                                                  [PH_OUT] = "its copy-out"};

/* Where each phase's counter lies in a rank's line. */
static const size_t counter_offsets[PH_COUNT] = {[PH_IN] = offsetof(arena_rank_t, filled),
                                                 [PH_REDUCE] = offsetof(arena_rank_t, reduced),
                                                 [PH_OUT] = offsetof(arena_rank_t, drained)};

static _Atomic uint32_t *counter_at(arena_t *a, int rank, size_t offset) {
  return (_Atomic uint32_t *)((unsigned char *)&a->ranks[rank] + offset);
}

void arena_note_call(arena_t *a, const exec_fp_t *fp) {
  if (a == NULL) return;
  arena_rank_t *me = &a->ranks[a->rank];
  atomic_store(&me->fp_stamp, 2 * fp->seq + 1);
  me->fp = *fp;
  atomic_store(&me->fp_stamp, 2 * fp->seq);
  /* Stored only when it changed: a store at every call took the line from the peer that
   * read it in its last wait, and gave it back at the peer's next wait (a tenth of an
   * 8-byte call at 2 ranks, perf). */
  int32_t cpu = sched_getcpu() + 1;
  if (atomic_load_explicit(&me->cpu, memory_order_relaxed) != cpu)
    atomic_store_explicit(&me->cpu, cpu, memory_order_relaxed);
}

/* Rank k's fingerprint, when it can be read whole right now. */
static bool read_fp(const arena_t *a, int k, exec_fp_t *out) {
  arena_rank_t *r = &a->ranks[k];
  uint64_t before = atomic_load(&r->fp_stamp);
  if (before & 1) return false;
  *out = r->fp;
  return atomic_load(&r->fp_stamp) == before;
}

static coll_status_t mismatch(const arena_t *a, int k, const exec_fp_t *theirs) {
  const exec_fp_t *mine = &a->ranks[a->rank].fp;
  char t[128], m[128];
  exec_fp_describe(theirs, t, sizeof t);
  exec_fp_describe(mine, m, sizeof m);
  return coll_error(COLL_ERR_MISMATCH, "rank %d called %s #%llu, rank %d called %s #%llu", k, t,
                    (unsigned long long)theirs->seq, a->rank, m, (unsigned long long)mine->seq);
}

/* Rank k is in this call's collective number, or an earlier one, and if it is in this
 * one it called the same (while waiting for it). */
static coll_status_t check_peer_call(const arena_t *a, int k) {
  exec_fp_t theirs;
  const exec_fp_t *mine = &a->ranks[a->rank].fp;
  if (!read_fp(a, k, &theirs) || theirs.seq != mine->seq) return COLL_OK;
  return memcmp(&theirs, mine, sizeof theirs) == 0 ? COLL_OK : mismatch(a, k, &theirs);
}

/* Once every rank filled round 0 all have written this call's fingerprint (before
 * their first copy), and none can write its next one before we reduce: compare all. */
coll_status_t arena_check_fingerprints(const arena_t *a) {
  const exec_fp_t *mine = &a->ranks[a->rank].fp;
  for (int k = 0; k < a->nranks; k++) {
    exec_fp_t theirs = a->ranks[k].fp;
    if (memcmp(&theirs, mine, sizeof theirs) != 0) return mismatch(a, k, &theirs);
  }
  return COLL_OK;
}

coll_status_t arena_check_peer_fp(const arena_t *a, int k) {
  exec_fp_t theirs;
  int tries = 0; /* a writer is a few stores from done, unless it died there */
  while (!read_fp(a, k, &theirs))
    if (++tries > 1000000)
      return coll_error(COLL_ERR_MISMATCH, "rank %d is in another call than rank %d's", k, a->rank);
    else
      coll_cpu_relax();
  const exec_fp_t *mine = &a->ranks[a->rank].fp;
  return memcmp(&theirs, mine, sizeof theirs) == 0 ? COLL_OK : mismatch(a, k, &theirs);
}

/* Where this rank is stuck, for the hang report. */
static void note_state(arena_waiter_t *w, int peer, const char *what, size_t step) {
  w->a->base->where = (base_where_t){.kind = w->call->kind,
                                     .seq = w->a->base->fp_out.seq,
                                     .count = w->call->count,
                                     .dtype = w->call->dtype,
                                     .step = step,
                                     .nsteps = w->nsteps,
                                     .waiting_peer = peer,
                                     .waiting_what = what};
}

static coll_status_t timed_out(arena_waiter_t *w, int peer, const char *what, size_t step) {
  const coll_base_t *base = w->a->base;
  note_state(w, peer, what, step);
  return coll_error(COLL_ERR_TIMEOUT,
                    "no progress for %d ms, waiting for rank %d (%s, %s step %zu of %zu)",
                    base->timeout_ms, peer, what, w->label ? w->label : "arena", step, w->nsteps);
}

coll_status_t arena_wait(arena_waiter_t *w, int peer, _Atomic uint32_t *counter, uint32_t target,
                         const char *what, size_t step) {
  arena_t *a = w->a;
  coll_base_t *base = a->base;
  arena_hdr_t *h = a->hdr;
  if (reached(atomic_load(counter), target)) return COLL_OK;
  /* The spin measures itself on the cheap clock (about 11 ns a reading against 25-50 for
   * clock_gettime in this VM: a shorter turn sees the peer's line sooner); the deadline's
   * clock is read once the spin is over. */
  int64_t spin_start = coll_cheap_now_ns();
  int64_t last_change = 0, last_alive_check = 0; /* set when the spin is over */
  int64_t timeout_ns = (int64_t)base->timeout_ms * 1000000LL;
  uint32_t last_bell = atomic_load(&h->bell);
  /* Unbound ranks may share a CPU (the scheduler put them there, or other work holds the
   * rest): spinning then only delays the rank we wait for by the spin, on every wait
   * (measured unbound on the busy 2-CPU machine: 8-byte all-reduces at 22-23 us; with
   * this, 12 us; going straight to the futex instead measured 13-17 us). Yield at once. */
  int64_t pure_spin_ns = base->pure_spin_ns;
  int32_t peer_cpu = atomic_load_explicit(&a->ranks[peer].cpu, memory_order_relaxed);
  if (peer_cpu != 0 && peer_cpu == sched_getcpu() + 1) pure_spin_ns = 0;
  for (;;) {
    if (reached(atomic_load(counter), target)) return COLL_OK;
    if (base_aborted(base)) return coll_error(COLL_ERR_ABORTED, "the communicator was aborted");
    int32_t failed = atomic_load(&h->failed);
    if (failed != 0)
      return coll_error(COLL_ERR_REMOTE, "rank %d failed: %.*s", failed - 1, (int)sizeof h->failure,
                        h->failure);
    int comm_failed = base_failed(base);
    if (comm_failed != 0) { /* the failure watcher: another rank failed first */
      w->stopped_by_peer = true;
      if (comm_failed == COLL_ERR_TIMEOUT) note_state(w, peer, what, step);
      return coll_error((coll_status_t)comm_failed, "stopped: %s", base->failed_message);
    }
    int64_t spun = coll_cheap_now_ns() - spin_start;
    if (coll_wait_spin(spun, base->spin_ns, pure_spin_ns)) continue;
    int64_t now = coll_now_ns();
    if (last_change == 0) last_change = last_alive_check = now - spun; /* the wait's start */
    uint32_t bell = atomic_load(&h->bell);
    if (bell != last_bell) { /* some rank moved on: the job is alive */
      last_bell = bell;
      last_change = now;
      base_heartbeat(base, now);
    }
    if (now - last_change > timeout_ns) return timed_out(w, peer, what, step);
    coll_status_t st = check_peer_call(a, peer);
    if (st != COLL_OK) return st;
    if (now - last_alive_check > (int64_t)ALIVE_CHECK_MS * 1000000LL) {
      last_alive_check = now;
      if (!arena_rank_alive(a, peer)) {
        w->dead = peer;
        return coll_error(COLL_ERR_REMOTE,
                          "rank %d (pid %d) is gone: its process exited or it destroyed the "
                          "communicator during the collective",
                          peer, (int)a->ranks[peer].pid);
      }
    }
    int64_t left_ms = (timeout_ns - (now - last_change)) / 1000000LL + 1;
    struct timespec ts = {
        .tv_sec = 0, .tv_nsec = (left_ms < WAIT_SLICE_MS ? left_ms : WAIT_SLICE_MS) * 1000000L};
    atomic_fetch_add(&h->sleepers, 1);
    uint32_t seen = atomic_load(&h->bell);
    if (!reached(atomic_load(counter), target) && atomic_load(&h->failed) == 0) {
      trace_wait_begin(base->trace);
      syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
      trace_wait_end(base->trace);
    }
    atomic_fetch_sub(&h->sleepers, 1);
  }
}

coll_status_t arena_wait_all(arena_waiter_t *w, size_t counter_offset, uint32_t target,
                             const char *what, size_t step) {
  arena_t *a = w->a;
  coll_status_t st = COLL_OK;
  for (int i = 1; i < a->nranks && st == COLL_OK; i++) {
    int k = (a->rank + i) % a->nranks;
    st = arena_wait(w, k, counter_at(a, k, counter_offset), target, what, step);
  }
  return st;
}

/* Wait until rank `peer` finished `phase` of round `target` (or a later one). */
static coll_status_t wait_for(arena_run_t *run, int peer, int phase, uint32_t target, size_t step) {
  return arena_wait(&run->w, peer, counter_at(run->a, peer, counter_offsets[phase]), target,
                    phase_names[phase], step);
}

/* Every rank but this one finished `phase` of round `target`. */
static coll_status_t wait_all(arena_run_t *run, int phase, uint32_t target, size_t step) {
  return arena_wait_all(&run->w, counter_offsets[phase], target, phase_names[phase], step);
}

/* Round t: elements [t*chunk, t*chunk + len) of the buffer; slice i of it. */
static size_t round_start(const arena_run_t *run, size_t t) { return t * run->chunk; }
static size_t round_len(const arena_run_t *run, size_t t) {
  size_t s = round_start(run, t), c = run->call->count;
  return c - s < run->chunk ? c - s : run->chunk;
}

/* The round number of this call's round t, as published (1-based, wrapping). */
static uint32_t round_id(const arena_run_t *run, size_t t) {
  return run->round0 + (uint32_t)t + 1u;
}

static unsigned char *slot(const arena_run_t *run, size_t t, int r) {
  size_t set = (size_t)((run->round0 + (uint32_t)t) % ARENA_NSETS);
  return run->a->data + (set * (size_t)run->a->nranks + (size_t)r) * run->a->slot_bytes;
}

static void trace_phase(arena_run_t *run, int phase, size_t t) {
  arena_trace_phase(run->trace, phase, round_start(run, t), round_len(run, t));
}

/* A_t: this round's input, every slice but our own, into our slot, once every rank is
 * done with round t-4 of this set. */
static coll_status_t phase_in(arena_run_t *run, size_t t, size_t step) {
  coll_status_t st = wait_all(run, PH_OUT, round_id(run, t) - ARENA_NSETS, step);
  if (st != COLL_OK) return st;
  trace_op_start(run->trace, PH_IN);
  int n = run->a->nranks, r = run->a->rank;
  size_t len = round_len(run, t), esz = run->esz;
  const unsigned char *src = run->in + round_start(run, t) * esz;
  unsigned char *dst = slot(run, t, r);
  size_t mine = algo_part_start(len, (size_t)n, (size_t)r);
  size_t mine_end = algo_part_start(len, (size_t)n, (size_t)r + 1);
  if (mine > 0) memcpy(dst, src, mine * esz);
  if (len > mine_end) memcpy(dst + mine_end * esz, src + mine_end * esz, (len - mine_end) * esz);
  trace_phase(run, PH_IN, t);
  arena_publish(run->a, &run->a->ranks[r].filled, round_id(run, t));
  return COLL_OK;
}

/* B_t: our slice, reduced over all ranks in rank order, one tile at a time, once every
 * rank filled round t (the first time in a call, check the fingerprints then). */
static coll_status_t phase_reduce(arena_run_t *run, size_t t, size_t step) {
  coll_status_t st = wait_all(run, PH_IN, round_id(run, t), step);
  if (st == COLL_OK && t == 0) st = arena_check_fingerprints(run->a);
  if (st != COLL_OK) return st;
  trace_op_start(run->trace, PH_REDUCE);
  int n = run->a->nranks, r = run->a->rank;
  size_t len = round_len(run, t), esz = run->esz;
  size_t off = algo_part_start(len, (size_t)n, (size_t)r) * esz;
  size_t bytes = algo_part_len(len, (size_t)n, (size_t)r) * esz;
  const unsigned char *own = run->in + round_start(run, t) * esz + off;
  unsigned char *out = run->out + round_start(run, t) * esz + off;
  unsigned char *mine = slot(run, t, r) + off;
  unsigned char *acc = run->a->tile;
  size_t tile = ARENA_TILE_BYTES / esz * esz;
  for (size_t done = 0; done < bytes; done += tile) {
    size_t b = bytes - done < tile ? bytes - done : tile, cnt = b / esz;
    const unsigned char *src0 = r == 0 ? own + done : slot(run, t, 0) + off + done;
    const unsigned char *src1 = r == 1 ? own + done : slot(run, t, 1) + off + done;
    run->reduce(acc, src0, src1, cnt);
    for (int k = 2; k < n; k++)
      run->reduce(acc, acc, k == r ? own + done : slot(run, t, k) + off + done, cnt);
    if (run->call->op == COLL_AVG) mem_host_finish_avg(acc, cnt, run->call->dtype, n);
    memcpy(mine + done, acc, b);
    memcpy(out + done, acc, b); /* after its input was read: in place is fine */
  }
  trace_phase(run, PH_REDUCE, t);
  arena_publish(run->a, &run->a->ranks[r].reduced, round_id(run, t));
  return COLL_OK;
}

/* C_t: the other ranks' reduced slices into our output, each once its owner is done. */
static coll_status_t phase_out(arena_run_t *run, size_t t, size_t step) {
  int n = run->a->nranks, r = run->a->rank;
  size_t len = round_len(run, t), esz = run->esz;
  unsigned char *dst = run->out + round_start(run, t) * esz;
  trace_op_start(run->trace, PH_OUT);
  for (int i = 1; i < n; i++) {
    int k = (r + i) % n;
    coll_status_t st = wait_for(run, k, PH_REDUCE, round_id(run, t), step);
    if (st != COLL_OK) return st;
    size_t s = algo_part_start(len, (size_t)n, (size_t)k) * esz;
    size_t b = algo_part_len(len, (size_t)n, (size_t)k) * esz;
    if (b > 0) memcpy(dst + s, slot(run, t, k) + s, b);
  }
  trace_phase(run, PH_OUT, t);
  arena_publish(run->a, &run->a->ranks[r].drained, round_id(run, t));
  return COLL_OK;
}

/* Step s: A_s, B_(s-1), C_(s-2), where they exist (see the top of the file). */
static coll_status_t run_rounds(arena_run_t *run) {
  coll_status_t st = COLL_OK;
  for (size_t s = 0; s < run->rounds + 2 && st == COLL_OK; s++) {
    if (s < run->rounds) st = phase_in(run, s, s);
    if (st == COLL_OK && s >= 1 && s <= run->rounds) st = phase_reduce(run, s - 1, s);
    if (st == COLL_OK && s >= 2) st = phase_out(run, s - 2, s);
  }
  return st;
}

void arena_trace_phase(trace_t *t, int phase, size_t offset, size_t count) {
  if (!TRACE_ON(t)) return;
  static const uint8_t kinds[PH_COUNT] = {SCHED_LOCAL_COPY, SCHED_LOCAL_REDUCE, SCHED_LOCAL_COPY};
  static const uint8_t bufs[PH_COUNT] = {SCHED_BUF_SCRATCH, SCHED_BUF_OUTPUT, SCHED_BUF_OUTPUT};
  static const uint8_t srcs[PH_COUNT] = {SCHED_BUF_INPUT, SCHED_BUF_SCRATCH, SCHED_BUF_SCRATCH};
  static const char *const names[PH_COUNT] = {"copy in", "reduce", "copy out"};
  trace_op_t rec = {.kind = kinds[phase],
                    .buf = bufs[phase],
                    .src_buf = srcs[phase],
                    .peer = -1,
                    .step = (uint32_t)phase,
                    .offset = offset,
                    .count = count,
                    .src_offset = offset,
                    .phase = names[phase]};
  trace_op_done_(t, (size_t)phase, &rec);
}

void arena_trace_end(trace_t *t, const coll_call_t *call, const char *path, coll_status_t st) {
  trace_coll_end(t,
                 &(trace_coll_t){.kind = call->kind,
                                 .dtype = call->dtype,
                                 .op = call->op,
                                 .root = call->root,
                                 .count = call->count,
                                 .elem_size = coll_dtype_size(call->dtype),
                                 .path = path,
                                 .nsteps = PH_COUNT,
                                 .nops = PH_COUNT},
                 st);
}

coll_status_t arena_run(arena_t *a, const coll_call_t *call) {
  const char *kind = sched_kind_name(call->kind);
  if (a == NULL || call->kind != COLL_KIND_ALL_REDUCE)
    return coll_error(COLL_ERR_INTERNAL, "%s: the arena cannot run this call", kind);
  size_t esz = coll_dtype_size(call->dtype);
  arena_run_t run = {
      .a = a,
      .trace = a->base->trace,
      .call = call,
      .in = call->sendbuf,
      .out = call->recvbuf,
      .esz = esz,
      .chunk = a->slot_bytes / esz,
      .round0 = a->round,
      .reduce = mem_host_reduce_fn(call->dtype, call->op),
  };
  run.rounds = algo_div_up(call->count, run.chunk);
  run.w = (arena_waiter_t){.a = a, .call = call, .nsteps = run.rounds + 2, .dead = -1};
  a->round += (uint32_t)run.rounds;
  trace_coll_begin(run.trace, PH_COUNT, PH_COUNT, esz);
  coll_status_t st = run_rounds(&run);
  arena_trace_end(run.trace, call, "arena", st);
  return st == COLL_OK ? COLL_OK : arena_fail(&run.w, st, "arena");
}

coll_status_t arena_fail(const arena_waiter_t *w, coll_status_t st, const char *label) {
  arena_t *a = w->a;
  coll_base_t *base = a->base;
  const coll_call_t *call = w->call;
  if (st != COLL_ERR_TIMEOUT && st != COLL_ERR_MISMATCH && !w->stopped_by_peer) {
    /* The others stop at once instead of waiting for their deadline. */
    char message[BASE_MESSAGE_MAX];
    snprintf(message, sizeof message, "rank %d: %s", base->rank, coll_last_error());
    publish_failure(a, message);
  }
  coll_error_prefix(st, "rank %d: %s of %zu %s (%s): ", base->rank, sched_kind_name(call->kind),
                    call->count, coll_dtype_name(call->dtype), label);
  return failure_conclude(base, st, w->dead, w->stopped_by_peer);
}
