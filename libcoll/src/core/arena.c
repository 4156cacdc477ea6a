/* The arena all-reduce: every rank of the communicator maps one shared segment holding,
 * per set, one slot per rank. The buffer is cut into rounds of C elements (C = one slot);
 * a round's C elements are cut into n slices, slice i reduced by rank i:
 *
 *        rank 0 input   rank 1 input   rank 2 input          (round t: elements [tC, tC+C))
 *        [s0|s1|s2]     [s0|s1|s2]     [s0|s1|s2]
 *   A_t     │ copy in (all slices but its own)
 *           ▼              ▼              ▼
 *   set t%3 slot 0        slot 1         slot 2        ── barrier ──
 *   B_t  rank i: acc = x0[si] OP x1[si] OP ... OP x(n-1)[si] (fixed rank order; its own
 *        xi read from its input), [AVG: / n], written to slot i's slice si and to its
 *        output's slice si                                ── barrier ──
 *   C_t  every rank copies slice sj of slot j, j != itself, into its output
 *
 * Bytes per rank for S bytes: A reads and writes (n-1)/n S, B reads S and writes 2 S/n,
 * C reads and writes (n-1)/n S: about 5 S of memory traffic at any n (the FIFO ring moves
 * 9 (n-1)/n S), each element reduced once, by one rank, so every rank gets the same bits.
 *
 * One barrier per round: with three slot sets the phases of consecutive rounds overlap as
 *   A_0 | B_0 A_1 | C_0 B_1 A_2 | C_1 B_2 A_3 | ... | C_{R-2} B_{R-1} | C_{R-1}
 * with a barrier at each '|' (R + 1 in all). Between two barriers A_{t+1} writes set
 * (t+1)%3, B_t reads and writes set t%3 (rank i writes only slice si of its own slot,
 * which nobody else reads before the next barrier) and C_{t-1} reads set (t-1)%3, so no
 * set is written while another rank reads it. The set index runs on across calls (the
 * next call's A_0 writes set R%3 while a slow rank may still be in C_{R-1}).
 *
 * Barrier: each rank publishes how many barriers it reached (its own cache line); a
 * waiter spins (COLL_PURE_SPIN_US, then yielding up to COLL_SPIN_US: with more ranks
 * than cores the rank we wait for needs this core), then sleeps on a futex word that the
 * rank completing a barrier bumps, in 10 ms slices so abort is seen; it checks every
 * 100 ms that the ranks it waits for still exist (their locks, arena_setup.c). A failing
 * rank (dead peer, abort) publishes its message in the header so the others stop at once;
 * a timeout is left to each rank, so that every one of them writes its hang report.
 * Fingerprints: each rank writes its call's exec_fp_t before the first barrier and
 * compares all of them after it. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "algo/algo_internal.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "core/arena.h"
#include "core/trace.h"
#include "mem/memops.h"

enum { WAIT_SLICE_MS = 10, ALIVE_CHECK_MS = 100 };
/* Trace ops of one round: A, B and C. */
enum { PH_IN = 0, PH_REDUCE, PH_OUT, PH_COUNT };

typedef struct {
  coll_comm_t *comm;
  arena_t *a;
  const exec_call_t *call;
  const unsigned char *in;
  unsigned char *out;
  size_t esz;
  size_t chunk; /* elements per round */
  size_t rounds;
  uint64_t round0; /* the arena's round count when this call began */
  mem_reduce_fn reduce;
  int dead; /* a rank found gone, -1: none */
  exec_cache_entry_t *trace_entry; /* NULL when not tracing */
} arun_t;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static inline bool reached(uint32_t arrived, uint32_t target) {
  return (int32_t)(arrived - target) >= 0;
}

/* The first rank that has not reached barrier `target`, -1 when all have. */
static int laggard(const arena_t *a, uint32_t target) {
  for (int r = 0; r < a->nranks; r++)
    if (!reached(atomic_load(&a->ranks[r].arrived), target)) return r;
  return -1;
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

/* This rank reached the next barrier. Stores and loads are sequentially consistent: of
 * ranks arriving together at least one sees the barrier complete and rings (see the
 * waiter's side in wait_barrier). */
static void arrive(arena_t *a) {
  a->gen++;
  atomic_store(&a->ranks[a->rank].arrived, a->gen);
  if (laggard(a, a->gen) < 0) {
    atomic_fetch_add(&a->hdr->bell, 1);
    if (atomic_load(&a->hdr->sleepers) != 0) wake_all(a->hdr);
  }
}

static coll_status_t timed_out(arun_t *x, int lag, size_t step) {
  coll_comm_t *comm = x->comm;
  comm->exec.state = (exec_state_t){.kind = x->call->kind,
                                    .seq = comm->exec.fp_out.seq,
                                    .count = x->call->count,
                                    .dtype = x->call->dtype,
                                    .step = step,
                                    .nsteps = x->rounds + 1,
                                    .waiting_peer = lag,
                                    .waiting_what = "arena barrier"};
  return coll_error(COLL_ERR_TIMEOUT,
                    "no progress for %d ms, waiting for rank %d at arena barrier %zu of %zu",
                    comm->timeout_ms, lag, step, x->rounds + 1);
}

/* Wait until every rank reached barrier a->gen; `step` is the barrier's index within
 * this call (for the hang report). */
static coll_status_t wait_barrier(arun_t *x, size_t step) {
  coll_comm_t *comm = x->comm;
  arena_t *a = x->a;
  arena_hdr_t *h = a->hdr;
  uint32_t target = a->gen;
  int64_t start = coll_now_ns(), last_change = start, last_alive_check = start;
  int64_t timeout_ns = (int64_t)comm->timeout_ms * 1000000LL;
  int missing_before = a->nranks;
  for (;;) {
    int lag = laggard(a, target);
    if (lag < 0) return COLL_OK;
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed))
      return coll_error(COLL_ERR_ABORTED, "the communicator was aborted");
    int32_t failed = atomic_load(&h->failed);
    if (failed != 0)
      return coll_error(COLL_ERR_REMOTE, "rank %d failed: %.*s", failed - 1,
                        (int)sizeof h->failure, h->failure);
    int64_t now = coll_now_ns();
    if (now - start < comm->exec.pure_spin_ns) {
      cpu_relax();
      continue;
    }
    if (now - start < comm->exec.spin_ns) {
      sched_yield();
      continue;
    }
    int missing = 0;
    for (int r = 0; r < a->nranks; r++) missing += !reached(atomic_load(&a->ranks[r].arrived), target);
    if (missing < missing_before) {
      missing_before = missing;
      last_change = now;
      atomic_store_explicit(&comm->heartbeat_ns, now, memory_order_relaxed);
    }
    if (now - last_change > timeout_ns) return timed_out(x, lag, step);
    if (now - last_alive_check > (int64_t)ALIVE_CHECK_MS * 1000000LL) {
      last_alive_check = now;
      for (int r = 0; r < a->nranks; r++) {
        if (r == a->rank || reached(atomic_load(&a->ranks[r].arrived), target)) continue;
        if (arena_rank_alive(a, r)) continue;
        x->dead = r;
        return coll_error(COLL_ERR_REMOTE, "rank %d (pid %d) is gone: its process exited or it destroyed the communicator during the collective", r,
                            (int)a->ranks[r].pid);
      }
    }
    int64_t left_ms = (timeout_ns - (now - last_change)) / 1000000LL + 1;
    struct timespec ts = {.tv_sec = 0,
                          .tv_nsec = (left_ms < WAIT_SLICE_MS ? left_ms : WAIT_SLICE_MS) * 1000000L};
    atomic_fetch_add(&h->sleepers, 1);
    uint32_t seen = atomic_load(&h->bell);
    if (laggard(a, target) >= 0 && atomic_load(&h->failed) == 0) {
      trace_wait_begin(comm);
      syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
      trace_wait_end(comm);
    }
    atomic_fetch_sub(&h->sleepers, 1);
  }
}

static coll_status_t barrier(arun_t *x, size_t step) {
  arrive(x->a);
  return wait_barrier(x, step);
}

/* Round t: elements [t*chunk, t*chunk + len) of the buffer; slice i of it. */
static size_t round_start(const arun_t *x, size_t t) { return t * x->chunk; }
static size_t round_len(const arun_t *x, size_t t) {
  size_t s = round_start(x, t), c = x->call->count;
  return c - s < x->chunk ? c - s : x->chunk;
}

static unsigned char *slot(const arun_t *x, size_t t, int r) {
  size_t set = (size_t)((x->round0 + t) % ARENA_NSETS);
  return x->a->data + (set * (size_t)x->a->nranks + (size_t)r) * x->a->slot_bytes;
}

static void trace_phase(arun_t *x, int phase, size_t t) {
  if (x->trace_entry == NULL) return;
  sched_op_t *op = &x->trace_entry->sched.ops[phase];
  op->offset = round_start(x, t);
  op->src_offset = op->offset;
  op->count = round_len(x, t);
  trace_op_done(x->comm, x->trace_entry, (size_t)phase);
}

/* A_t: this round's input, every slice but our own, into our slot. */
static void phase_in(arun_t *x, size_t t) {
  if (x->trace_entry) trace_op_start(x->comm, PH_IN);
  int n = x->a->nranks, r = x->a->rank;
  size_t len = round_len(x, t), esz = x->esz;
  const unsigned char *src = x->in + round_start(x, t) * esz;
  unsigned char *dst = slot(x, t, r);
  size_t mine = algo_part_start(len, (size_t)n, (size_t)r);
  size_t mine_end = algo_part_start(len, (size_t)n, (size_t)r + 1);
  if (mine > 0) memcpy(dst, src, mine * esz);
  if (len > mine_end) memcpy(dst + mine_end * esz, src + mine_end * esz, (len - mine_end) * esz);
  trace_phase(x, PH_IN, t);
}

/* B_t: our slice, reduced over all ranks in rank order, one tile at a time. */
static void phase_reduce(arun_t *x, size_t t) {
  if (x->trace_entry) trace_op_start(x->comm, PH_REDUCE);
  int n = x->a->nranks, r = x->a->rank;
  size_t len = round_len(x, t), esz = x->esz;
  size_t off = algo_part_start(len, (size_t)n, (size_t)r) * esz;
  size_t bytes = algo_part_len(len, (size_t)n, (size_t)r) * esz;
  const unsigned char *own = x->in + round_start(x, t) * esz + off;
  unsigned char *out = x->out + round_start(x, t) * esz + off;
  unsigned char *mine = slot(x, t, r) + off;
  unsigned char *acc = x->a->tile;
  size_t tile = ARENA_TILE_BYTES / esz * esz;
  for (size_t done = 0; done < bytes; done += tile) {
    size_t b = bytes - done < tile ? bytes - done : tile, cnt = b / esz;
    const unsigned char *src0 = r == 0 ? own + done : slot(x, t, 0) + off + done;
    const unsigned char *src1 = r == 1 ? own + done : slot(x, t, 1) + off + done;
    x->reduce(acc, src0, src1, cnt);
    for (int k = 2; k < n; k++)
      x->reduce(acc, acc, k == r ? own + done : slot(x, t, k) + off + done, cnt);
    if (x->call->op == COLL_AVG) mem_host_finish_avg(acc, cnt, x->call->dtype, n);
    memcpy(mine + done, acc, b);
    memcpy(out + done, acc, b); /* after its input was read: in place is fine */
  }
  trace_phase(x, PH_REDUCE, t);
}

/* C_t: the other ranks' reduced slices into our output. */
static void phase_out(arun_t *x, size_t t) {
  if (x->trace_entry) trace_op_start(x->comm, PH_OUT);
  int n = x->a->nranks, r = x->a->rank;
  size_t len = round_len(x, t), esz = x->esz;
  unsigned char *dst = x->out + round_start(x, t) * esz;
  for (int k = 0; k < n; k++) {
    if (k == r) continue;
    size_t s = algo_part_start(len, (size_t)n, (size_t)k) * esz;
    size_t b = algo_part_len(len, (size_t)n, (size_t)k) * esz;
    if (b > 0) memcpy(dst + s, slot(x, t, k) + s, b);
  }
  trace_phase(x, PH_OUT, t);
}

static coll_status_t check_fingerprints(arun_t *x) {
  const arena_t *a = x->a;
  const exec_fp_t *mine = &a->ranks[a->rank].fp;
  for (int k = 0; k < a->nranks; k++) {
    exec_fp_t theirs = a->ranks[k].fp;
    if (memcmp(&theirs, mine, sizeof theirs) == 0) continue;
    char t[128], m[128];
    exec_fp_describe(&theirs, t, sizeof t);
    exec_fp_describe(mine, m, sizeof m);
    return coll_error(COLL_ERR_MISMATCH, "rank %d called %s #%llu, rank %d called %s #%llu", k, t,
                      (unsigned long long)theirs.seq, a->rank, m, (unsigned long long)mine->seq);
  }
  return COLL_OK;
}

static coll_status_t run_rounds(arun_t *x) {
  phase_in(x, 0);
  coll_status_t st = barrier(x, 0);
  if (st == COLL_OK) st = check_fingerprints(x);
  for (size_t t = 0; t < x->rounds && st == COLL_OK; t++) {
    if (t > 0) phase_out(x, t - 1);
    phase_reduce(x, t);
    if (t + 1 < x->rounds) phase_in(x, t + 1);
    st = barrier(x, t + 1);
  }
  if (st == COLL_OK) phase_out(x, x->rounds - 1);
  return st;
}

/* A three-op stand-in schedule for COLL_TRACE: the phases show as local ops (copy in:
 * INPUT -> SCRATCH, i.e. the slot; reduce; copy out), one record per round. */
typedef struct {
  exec_cache_entry_t entry;
  sched_op_t ops[PH_COUNT];
  sched_step_t steps[PH_COUNT];
  uint32_t op_step[PH_COUNT];
} trace_sched_t;

static void trace_sched_init(trace_sched_t *ts, const coll_comm_t *comm, const exec_call_t *call) {
  memset(ts, 0, sizeof *ts);
  static const uint8_t kinds[PH_COUNT] = {SCHED_LOCAL_COPY, SCHED_LOCAL_REDUCE, SCHED_LOCAL_COPY};
  static const uint8_t bufs[PH_COUNT] = {SCHED_BUF_SCRATCH, SCHED_BUF_OUTPUT, SCHED_BUF_OUTPUT};
  static const uint8_t srcs[PH_COUNT] = {SCHED_BUF_INPUT, SCHED_BUF_SCRATCH, SCHED_BUF_SCRATCH};
  for (int i = 0; i < PH_COUNT; i++) {
    ts->ops[i] = (sched_op_t){.kind = kinds[i], .buf = bufs[i], .src_buf = srcs[i], .peer = -1};
    ts->steps[i] = (sched_step_t){.first_op = (uint32_t)i, .nops = 1};
    ts->op_step[i] = (uint32_t)i;
  }
  sched_t *s = &ts->entry.sched;
  s->collective = call->kind;
  s->algo = COLL_ALGO_ARENA;
  s->rank = comm->rank;
  s->nranks = comm->nranks;
  s->count = s->in_count = s->out_count = call->count;
  s->elem_size = coll_dtype_size(call->dtype);
  s->ops = ts->ops;
  s->nops = PH_COUNT;
  s->steps = ts->steps;
  s->nsteps = PH_COUNT;
  ts->entry.valid = true;
  ts->entry.kind = call->kind;
  ts->entry.count = call->count;
  ts->entry.dtype = call->dtype;
  ts->entry.algo = COLL_ALGO_ARENA;
  ts->entry.op_step = ts->op_step;
}

coll_status_t arena_run(coll_comm_t *comm, const exec_call_t *call) {
  arena_t *a = comm->arena;
  const char *kind = sched_kind_name(call->kind);
  if (a == NULL || call->kind != COLL_KIND_ALL_REDUCE || call->on_device)
    return coll_error(COLL_ERR_INTERNAL, "rank %d: %s: the arena cannot run this call", comm->rank,
                      kind);
  exec_t *ex = &comm->exec;
  ex->seq++;
  ex->fp_out = (exec_fp_t){.seq = ex->seq,
                           .count = call->count,
                           .kind = (uint32_t)call->kind,
                           .dtype = (uint32_t)call->dtype,
                           .op = (uint32_t)call->op,
                           .root = call->root};
  a->ranks[a->rank].fp = ex->fp_out;
  size_t esz = coll_dtype_size(call->dtype);
  arun_t x = {
      .comm = comm,
      .a = a,
      .call = call,
      .in = call->sendbuf,
      .out = call->recvbuf,
      .esz = esz,
      .chunk = a->slot_bytes / esz,
      .round0 = a->round,
      .reduce = mem_host_reduce_fn(call->dtype, call->op),
      .dead = -1,
  };
  x.rounds = algo_div_up(call->count, x.chunk);
  a->round += x.rounds;
  trace_sched_t ts;
  if (TRACE_ON(comm)) {
    trace_sched_init(&ts, comm, call);
    x.trace_entry = &ts.entry;
  }
  trace_coll_begin(comm, call, x.trace_entry);
  coll_status_t st = run_rounds(&x);
  trace_coll_end(comm, call, x.trace_entry, st);
  if (st == COLL_OK) return COLL_OK;
  if (st != COLL_ERR_TIMEOUT && st != COLL_ERR_MISMATCH) {
    /* The others stop at once instead of waiting for their deadline. */
    char message[COMM_MESSAGE_MAX];
    snprintf(message, sizeof message, "rank %d: %s", comm->rank, coll_last_error());
    publish_failure(a, message);
  }
  coll_error_prefix(st, "rank %d: %s of %zu %s (arena): ", comm->rank, kind, call->count,
                    coll_dtype_name(call->dtype));
  if (st == COLL_ERR_TIMEOUT) hang_report(comm);
  if (st == COLL_ERR_ABORTED) return st;
  comm_mark_failed(comm, st);
  failure_record(comm, st, x.dead);
  return st;
}
