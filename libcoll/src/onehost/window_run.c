/* The zero-copy window all-reduce: sendbuf and recvbuf lie in windows (window.c) that
 * every rank has mapped, at the same offsets on every rank (checked: they are part of the
 * call's fingerprint). Nothing is staged; slice i of the buffer is owned by rank i, which
 * reduces it from every rank's input and writes the result into every rank's output:
 *
 *     rank 0 window        rank 1 window        rank 2 window
 *     [s0|s1|s2]           [s0|s1|s2]           [s0|s1|s2]
 *   1  each rank: "ready R" (its input is written, it is inside call R); wait for all
 *   2  rank i, one 32 KiB tile of si at a time: acc = x0 OP x1 OP ... OP x(n-1) (read
 *      from the peers' windows, fixed rank order, AVG divided once) in a private tile,
 *      then acc -> out_0[si], out_1[si], ... out_(n-1)[si] (written into the peers'
 *      windows too)
 *   3  "done R" (slice si is everywhere, and we read nobody any more); wait for all
 *
 * Bytes per rank for S bytes: reads S (n slices of S/n), writes S: 2 S of memory traffic
 * at any n, and two waits (the arena moves about 5 S through its slots, 4 waits per
 * round). Each element is reduced once, by one rank, in a fixed order, so every rank gets
 * the same bits (and the arena's: it reduces in the same order).
 *
 * Hazards (who touches what, and why it is safe):
 *   - slice si of every window, input and output, is touched by rank i alone between
 *     "all ready R" and "done R": nobody else reads or writes it then;
 *   - in place, out_k[si] is x_k[si]: a tile's result is written only after every
 *     input of that tile was read into the private accumulator, and later tiles are
 *     other elements (with 2 ranks the sum goes straight into our own output, element
 *     by element, each read before it is written, and is copied from there into the
 *     peer's: one pass less, 1 MiB in place 50 against 60 us);
 *   - rank k wrote its whole input before "ready R", and writes nothing of its own
 *     window during the call but slice sk (item 1);
 *   - the caller may write its buffers as soon as the call returns, and the call must
 *     return the whole result: nobody returns before every rank is "done R", i.e. every
 *     slice is written and every read of its window is over. That wait also makes the
 *     next call's "ready" safe, and coll_mem_free needs no exchange.
 * Waiting, deadlines, dead peers and abort are the arena's (arena_wait); the counters
 * live in the arena's per-rank line; round R runs on across calls. */
#include <string.h>

#include "algo/algo_internal.h"
#include "common/error.h"
#include "mem/memops.h"
#include "onehost/arena.h"
#include "onehost/window.h"

enum { STEP_READY = 0, STEP_DONE, NSTEPS };

typedef struct {
  arena_t *a;
  arena_waiter_t w;
  const coll_call_t *call;
  const window_pair_t *pair;
  uint32_t round;
  size_t esz;
  size_t send_off, recv_off; /* the buffers' offsets in their windows (equal on every rank) */
  trace_t *trace;            /* NULL when not tracing */
} window_run_t;

static unsigned char *send_of(const window_run_t *run, int k) {
  return run->pair->send->peer[k] + run->send_off;
}
static unsigned char *recv_of(const window_run_t *run, int k) {
  return run->pair->recv->peer[k] + run->recv_off;
}

static void trace_done(window_run_t *run, int phase, size_t offset, size_t count) {
  arena_trace_phase(run->trace, phase, offset, count);
}

/* 2: our slice over every rank's input, a tile at a time, into every rank's output.
 * Writes start with our own window and go round, so ranks do not all write one window
 * at the same moment. */
static void reduce_and_push(window_run_t *run) {
  const coll_call_t *call = run->call;
  int n = run->a->nranks, r = run->a->rank;
  size_t esz = run->esz;
  size_t off = algo_part_start(call->count, (size_t)n, (size_t)r) * esz;
  size_t bytes = algo_part_len(call->count, (size_t)n, (size_t)r) * esz;
  mem_reduce_fn reduce = mem_host_reduce_fn(call->dtype, call->op);
  unsigned char *acc = run->a->tile;
  size_t tile = ARENA_TILE_BYTES / esz * esz;
  for (size_t done = 0; done < bytes; done += tile) {
    size_t b = bytes - done < tile ? bytes - done : tile, cnt = b / esz;
    if (n == 2) {
      /* Straight into our own output (each element is read before it is written, so in
       * place is fine), then from there into the peer's: one pass less. */
      unsigned char *own = recv_of(run, r) + off + done;
      reduce(own, send_of(run, 0) + off + done, send_of(run, 1) + off + done, cnt);
      if (call->op == COLL_AVG) mem_host_finish_avg(own, cnt, call->dtype, n);
      memcpy(recv_of(run, 1 - r) + off + done, own, b);
      continue;
    }
    reduce(acc, send_of(run, 0) + off + done, send_of(run, 1) + off + done, cnt);
    for (int k = 2; k < n; k++) reduce(acc, acc, send_of(run, k) + off + done, cnt);
    if (call->op == COLL_AVG) mem_host_finish_avg(acc, cnt, call->dtype, n);
    for (int i = 0; i < n; i++) memcpy(recv_of(run, (r + i) % n) + off + done, acc, b);
  }
}

static coll_status_t run_call(window_run_t *run) {
  arena_rank_t *me = &run->a->ranks[run->a->rank];
  trace_op_start(run->trace, ARENA_PH_IN);
  arena_publish(run->a, &me->win_ready, run->round);
  coll_status_t st = arena_wait_all(&run->w, offsetof(arena_rank_t, win_ready), run->round,
                                    "its input in its window", STEP_READY);
  /* All are in this call and none can leave it before we are done: compare all. */
  if (st == COLL_OK) st = arena_check_fingerprints(run->a);
  if (st != COLL_OK) return st;
  trace_done(run, ARENA_PH_IN, 0, 0);
  trace_op_start(run->trace, ARENA_PH_REDUCE);
  reduce_and_push(run);
  trace_done(run, ARENA_PH_REDUCE, 0, run->call->count / (size_t)run->a->nranks);
  arena_publish(run->a, &me->win_done, run->round);
  trace_op_start(run->trace, ARENA_PH_OUT);
  st = arena_wait_all(&run->w, offsetof(arena_rank_t, win_done), run->round,
                      "its slice in every window", STEP_DONE);
  trace_done(run, ARENA_PH_OUT, 0, run->call->count);
  return st;
}

coll_status_t window_run(arena_t *a, const coll_call_t *call, const window_pair_t *pair) {
  if (a == NULL || call->kind != COLL_KIND_ALL_REDUCE || pair->send == NULL || pair->recv == NULL ||
      pair->send->peer == NULL || pair->recv->peer == NULL)
    return coll_error(COLL_ERR_INTERNAL, "%s: the window path cannot run this call",
                      sched_kind_name(call->kind));
  size_t esz = coll_dtype_size(call->dtype);
  window_run_t run = {
      .a = a,
      .trace = a->base->trace,
      .w = {.a = a, .call = call, .nsteps = NSTEPS, .dead = -1, .label = "window"},
      .call = call,
      .round = ++a->win_round,
      .esz = esz,
      .pair = pair,
      .send_off = (size_t)((const unsigned char *)call->sendbuf - pair->send->base),
      .recv_off = (size_t)((const unsigned char *)call->recvbuf - pair->recv->base),
  };
  trace_coll_begin(run.trace, ARENA_PH_COUNT, ARENA_PH_COUNT, esz);
  coll_status_t st = run_call(&run);
  arena_trace_end(run.trace, call, "window", st);
  return st == COLL_OK ? COLL_OK : arena_fail(&run.w, st, "zero-copy window");
}
