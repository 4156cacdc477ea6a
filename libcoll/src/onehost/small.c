/* The arena's small-message all-reduce: one step, no messages, no separate handshake.
 *
 *   rank r, round t:  buffer b = t % 2 of its own lines in the arena segment
 *     line l = [ round | digest | 56 data bytes: elements [56 l, 56 l + 56) of its input ]
 *   1. write every line: data and digest first, then `round` = t (a release store)
 *   2. for each line l, for every other rank k (starting with r + 1): poll k's line l
 *      until its round is t; its digest must equal ours (else COLL_ERR_MISMATCH, both
 *      calls named); then out[l] = x0[l] OP x1[l] OP ... OP x(n-1)[l] in rank order
 *      (x_r read from the input), [AVG: / n]
 *
 * A barrier is a one-byte MAX all-reduce (its call is one). A broadcast: only the root
 * writes data lines, the others write line 0 alone (round and digest: "I am in round
 * t"); they copy the root's lines out, and the root waits for every line 0.
 *
 * Every rank reduces the whole message in the same order, so every rank gets the same
 * bits. Cost for S bytes: one synchronisation (the ring needs 2 (n-1)), each rank reads
 * (n-1) S and reduces (n-1) S; the arena's three phases and the schedules' fingerprint
 * round trip are gone: the digest of the call's fingerprint (exec_fp_t) rides in every
 * line, so a peer in a different call is seen on its first line.
 *
 * Why two buffers suffice, with no wait before writing: rank r writes round t into
 * buffer t % 2, last used by round t - 2. Rank r finished round t - 1, so it saw every
 * rank's round t - 1 lines; each rank wrote those after it finished round t - 2, that is
 * after it had read all of buffer t % 2. Round numbers run on across calls (uint32,
 * wrapping; counted in arena_t.small_round, equal on every rank because every rank
 * takes this path for the same calls). Lines start at round 0; the first call is round 1,
 * and round 0 after a wrap finds round 2^32 - 2 in its buffer, which is not "reached".
 *
 * Waiting is arena_wait's (spin, yield, the futex bell in slices, abort, published
 * failures, dead peers, the deadline, the awaited rank's fingerprint). A writer rings
 * the bell only when some rank sleeps on it: a seq_cst fence after the last line, then
 * the sleeper count (the waiter counts itself in before it looks at the line again). */
#include <stdio.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "algo/schedule.h"
#include "common/error.h"
#include "mem/memops.h"
#include "onehost/small.h"

bool small_fits(const arena_t *a, const coll_call_t *call) {
  if (a == NULL || a->small_lines == 0) return false;
  if (call->kind != COLL_KIND_ALL_REDUCE && call->kind != COLL_KIND_BARRIER &&
      call->kind != COLL_KIND_BROADCAST)
    return false;
  /* Sizes compared in bytes (count is at most small_bytes before it is multiplied), not
   * counts: a 64-bit division here was a twentieth of an 8-byte call. */
  size_t esz = coll_dtype_size(call->dtype);
  if (esz == 0 || SMALL_LINE_DATA % esz != 0 || call->count > a->small_bytes) return false;
  size_t bytes = call->count * esz;
  return bytes <= a->small_bytes &&
         (call->kind != COLL_KIND_BROADCAST || bytes <= algo_small_broadcast_max_bytes(a->nranks));
}

static small_line_t *lines_of(const arena_t *a, int rank, uint32_t round) {
  size_t buf = (size_t)rank * SMALL_NBUFS + (round % SMALL_NBUFS);
  return (small_line_t *)a->small_base + buf * a->small_lines;
}

/* The fingerprint hashed eight bytes at a time (FNV-1a's step on 64-bit words, then a
 * final mix; byte by byte it was a third of an 8-byte call on a quiet machine): equal
 * calls give equal digests; a differing one is confirmed (and described) from the full
 * fingerprints in the arena. */
static uint32_t fp_digest(const exec_fp_t *fp) {
  _Static_assert(sizeof *fp % 8 == 0, "exec_fp_t is hashed in 8-byte words");
  const unsigned char *p = (const unsigned char *)fp;
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < sizeof *fp; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, sizeof w);
    h = (h ^ w) * 0x100000001b3u;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdu;
  h ^= h >> 33;
  return (uint32_t)h;
}

static coll_status_t digest_differs(const arena_t *a, int k) {
  coll_status_t st = arena_check_peer_fp(a, k);
  if (st != COLL_OK) return st;
  /* The fingerprints read equal: a digest from another process's view of the same call
   * cannot differ, so the line is not this call's. */
  return coll_error(COLL_ERR_PROTOCOL, "rank %d's small-message line carries another call's digest",
                    k);
}

void small_claim_lines(const arena_t *a, size_t bytes) {
  if (a == NULL || a->small_lines == 0 || bytes > a->small_bytes) return;
  const small_line_t *mine = lines_of(a, a->rank, a->small_round + 1);
  size_t nl = bytes == 0 ? 1 : small_lines_for(bytes);
  for (size_t l = 0; l < nl; l++) {
#if defined(__x86_64__) || defined(__i386__)
    /* PREFETCHW: GCC emits it for the builtin only with -mprfchw; older CPUs run a NOP. */
    __asm__ volatile("prefetchw %0" : : "m"(mine[l]));
#else
    __builtin_prefetch(&mine[l], 1);
#endif
  }
}

/* Step 1: this rank's input into its lines. */
static void write_lines(arena_t *a, const unsigned char *in, size_t bytes, uint32_t round,
                        uint32_t digest) {
  small_line_t *mine = lines_of(a, a->rank, round);
  if (bytes == 0) { /* a broadcast's non-root: line 0 says it is in this round */
    mine[0].digest = digest;
    atomic_store_explicit(&mine[0].round, round, memory_order_release);
  }
  for (size_t off = 0, l = 0; off < bytes; off += SMALL_LINE_DATA, l++) {
    if (bytes - off >= SMALL_LINE_DATA) /* a fixed-size copy: a few vector moves */
      memcpy(mine[l].data, in + off, SMALL_LINE_DATA);
    else
      memcpy(mine[l].data, in + off, bytes - off);
    mine[l].digest = digest;
    atomic_store_explicit(&mine[l].round, round, memory_order_release);
  }
  atomic_thread_fence(memory_order_seq_cst);
  arena_wake_sleepers(a);
}

/* Lines handled together: their readiness checked first, then each peer's data gathered
 * into one contiguous block so that one reduction call covers them all. */
enum { BLOCK_LINES = 16, BLOCK_BYTES = BLOCK_LINES * SMALL_LINE_DATA };

static inline bool reached(uint32_t value, uint32_t target) {
  return (int32_t)(value - target) >= 0;
}

/* Rank k's lines [l0, l0 + nl) of this round are written and carry our digest. */
static coll_status_t await_block(arena_t *a, arena_waiter_t *w, const small_line_t *lines, int k,
                                 size_t l0, size_t nl, uint32_t round, uint32_t digest) {
  for (size_t l = l0; l < l0 + nl; l++) {
    _Atomic uint32_t *flag = (_Atomic uint32_t *)&lines[l].round;
    if (!reached(atomic_load_explicit(flag, memory_order_acquire), round)) {
      coll_status_t st = arena_wait(w, k, flag, round, "its small-message lines", 1);
      if (st != COLL_OK) return st;
    }
    if (lines[l].digest != digest) return digest_differs(a, k);
  }
  return COLL_OK;
}

/* Whole lines with a fixed-size copy (a few vector moves; the variable-length one was
 * an 8-byte loop, half of a 4 KiB call), then the tail. */
static void gather(unsigned char *dst, const small_line_t *lines, size_t l0, size_t len) {
  size_t off = 0, l = l0;
  for (; off + SMALL_LINE_DATA <= len; off += SMALL_LINE_DATA, l++)
    memcpy(dst + off, lines[l].data, SMALL_LINE_DATA);
  if (off < len) memcpy(dst + off, lines[l].data, len - off);
}

/* Step 2: block by block, once every rank wrote it, reduced in rank order into out. */
static coll_status_t reduce_lines(arena_t *a, arena_waiter_t *w, const coll_call_t *call,
                                  uint32_t round, uint32_t digest) {
  int n = a->nranks, r = a->rank;
  size_t esz = coll_dtype_size(call->dtype), bytes = call->count * esz;
  const unsigned char *in = call->sendbuf;
  unsigned char *out = call->recvbuf;
  mem_reduce_fn reduce = mem_host_reduce_fn(call->dtype, call->op);
  _Alignas(64) unsigned char acc[BLOCK_BYTES], first[BLOCK_BYTES], next[BLOCK_BYTES];
  for (size_t off = 0; off < bytes; off += BLOCK_BYTES) {
    size_t l0 = off / SMALL_LINE_DATA, len = bytes - off < BLOCK_BYTES ? bytes - off : BLOCK_BYTES;
    size_t nl = algo_div_up(len, SMALL_LINE_DATA), cnt = len / esz;
    for (int i = 1; i < n; i++) {
      int k = (r + i) % n;
      coll_status_t st = await_block(a, w, lines_of(a, k, round), k, l0, nl, round, digest);
      if (st != COLL_OK) return st;
    }
    /* acc = x0 OP x1 OP ... OP x(n-1); the last reduction writes out (after its input
     * was read: in place is fine, the reductions allow dst to alias a source). */
    const unsigned char *src = in + off;
    if (r != 0) gather(first, lines_of(a, 0, round), l0, len), src = first;
    for (int k = 1; k < n; k++) {
      const unsigned char *x = in + off;
      if (k != r) gather(next, lines_of(a, k, round), l0, len), x = next;
      unsigned char *dst = k == n - 1 ? out + off : acc;
      reduce(dst, src, x, cnt);
      src = acc;
    }
    if (call->op == COLL_AVG) mem_host_finish_avg(out + off, cnt, call->dtype, n);
  }
  return COLL_OK;
}

/* Broadcast, step 2: a non-root copies the root's lines out as they come; the root
 * waits for every other rank's line 0 (so that all of them keep the buffer rule above:
 * each rank's line of round t says it finished round t - 1). */
static coll_status_t broadcast_lines(arena_t *a, arena_waiter_t *w, const coll_call_t *call,
                                     uint32_t round, uint32_t digest) {
  int n = a->nranks, r = a->rank, root = call->root;
  size_t bytes = call->count * coll_dtype_size(call->dtype);
  if (r == root) {
    for (int i = 1; i < n; i++) {
      int k = (r + i) % n;
      coll_status_t st = await_block(a, w, lines_of(a, k, round), k, 0, 1, round, digest);
      if (st != COLL_OK) return st;
    }
    return COLL_OK;
  }
  const small_line_t *lines = lines_of(a, root, round);
  unsigned char *out = call->recvbuf;
  for (size_t off = 0; off < bytes; off += BLOCK_BYTES) {
    size_t l0 = off / SMALL_LINE_DATA, len = bytes - off < BLOCK_BYTES ? bytes - off : BLOCK_BYTES;
    coll_status_t st =
        await_block(a, w, lines, root, l0, algo_div_up(len, SMALL_LINE_DATA), round, digest);
    if (st != COLL_OK) return st;
    gather(out + off, lines, l0, len);
  }
  /* Every rank's line 0 too: a peer in another call is a mismatch here, not later. */
  for (int i = 1; i < n; i++) {
    int k = (r + i) % n;
    if (k == root) continue;
    coll_status_t st = await_block(a, w, lines_of(a, k, round), k, 0, 1, round, digest);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

coll_status_t small_run(arena_t *a, const coll_call_t *call) {
  if (!small_fits(a, call))
    return coll_error(COLL_ERR_INTERNAL, "%s: the small-message path cannot run this call",
                      sched_kind_name(call->kind));
  size_t esz = coll_dtype_size(call->dtype), bytes = call->count * esz;
  trace_t *trace = a->base->trace;
  /* A rank that failed in this call before we arrived may have written its lines
   * already: refuse, as a wait would have (arena_wait). */
  int32_t failed = atomic_load(&a->hdr->failed);
  if (failed != 0) {
    arena_waiter_t w0 = {.a = a, .call = call, .nsteps = 2, .dead = -1, .label = "small"};
    coll_error(COLL_ERR_REMOTE, "rank %d failed: %.*s", failed - 1, (int)sizeof a->hdr->failure,
               a->hdr->failure);
    return arena_fail(&w0, COLL_ERR_REMOTE, "small");
  }
  uint32_t round = ++a->small_round;
  uint32_t digest = fp_digest(&a->ranks[a->rank].fp);
  arena_waiter_t w = {.a = a, .call = call, .nsteps = 2, .dead = -1, .label = "small"};
  trace_coll_begin(trace, ARENA_PH_COUNT, ARENA_PH_COUNT, esz);
  trace_op_start(trace, ARENA_PH_IN);
  bool bcast = call->kind == COLL_KIND_BROADCAST;
  write_lines(a, call->sendbuf, bcast && a->rank != call->root ? 0 : bytes, round, digest);
  arena_trace_phase(trace, ARENA_PH_IN, 0, call->count);
  trace_op_start(trace, ARENA_PH_REDUCE);
  coll_status_t st = bcast ? broadcast_lines(a, &w, call, round, digest)
                           : reduce_lines(a, &w, call, round, digest);
  if (st == COLL_OK) arena_trace_phase(trace, ARENA_PH_REDUCE, 0, call->count);
  arena_trace_end(trace, call, "small", st);
  return st == COLL_OK ? COLL_OK : arena_fail(&w, st, "small");
}
