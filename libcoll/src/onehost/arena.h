/* The arena all-reduce (COLL_ALGO_ARENA): one shared-memory segment per communicator
 * whose ranks all live on one host, where every rank has a slot; each chunk is copied in
 * once, reduced once by the rank that owns its slice, and copied out by everyone
 * (docs/algorithms.md, "Arena"). arena_setup.c makes and maps the segment at init;
 * arena.c runs a call; window_run.c shares its waits for the zero-copy window path. */
#ifndef COLL_ONEHOST_ARENA_H
#define COLL_ONEHOST_ARENA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/call.h"
#include "trace/trace.h"

#define ARENA_MAGIC 0x3161726e65726e41ull /* "Anrenra1" */
/* Slot sets used round-robin: a rank may fill round t+1 and reduce round t while the
 * others still copy out round t-1 and t-2 (arena.c explains why four let every wait be
 * on work the others do early in their previous round). */
#define ARENA_NSETS 4
/* The reducing rank accumulates this many bytes at a time in private memory (fits L1). */
#define ARENA_TILE_BYTES ((size_t)32 << 10)

/* Shared header, first page of the segment. */
typedef struct {
  uint64_t magic;
  uint32_t nranks;
  uint32_t nsets;
  uint64_t slot_bytes;
  uint64_t data_offset;                   /* from the segment's start to set 0, slot 0 */
  _Alignas(64) _Atomic uint32_t bell;     /* bumped at every published step and failure */
  _Alignas(64) _Atomic uint32_t sleepers; /* ranks blocked (or about to) on bell */
  _Alignas(64) _Atomic int32_t failed;    /* 0, or 1 + the rank that failed first */
  uint32_t window_ok;                     /* rank 0's COLL_WINDOW: zero-copy windows */
  uint32_t small_lines;                   /* lines per buffer of the small path (0: none) */
  uint32_t small_bytes;                   /* the largest message it takes (COLL_SMALL_BYTES) */
  uint64_t small_offset;                  /* from the segment's start to its lines */
  char failure[256];                      /* its message, written before `failed` */
} arena_hdr_t;

/* Per rank, after the header: a cache line with the last round (a count that runs on
 * across calls, wrapping) whose phase this rank has finished, then the lines of its
 * call's fingerprint. */
typedef struct {
  _Alignas(64) _Atomic uint32_t filled; /* its input is in its slot (A) */
  _Atomic uint32_t reduced;             /* its slice is reduced, in its slot (B) */
  _Atomic uint32_t drained;             /* it copied every slice out (C): the set is free */
  int32_t pid;
  /* The zero-copy window all-reduce's rounds (window_run.c): input ready; own slice
   * written into every window (and done reading the others). */
  _Atomic uint32_t win_ready, win_done;
  /* 1 + the CPU it ran on when it noted its last call (0: unknown): a waiter that finds
   * the rank it waits for on its own CPU yields at once instead of spinning first. Read
   * at every wait, so it is stored only when it changes and shares no line with fp:
   * the line then stays in both caches, instead of moving at every call. */
  _Atomic int32_t cpu;
  /* The collective this rank is in, arena or not (mismatch detection): fp is valid when
   * fp_stamp is even and unchanged around the read (2 seq + 1 while it is written).
   * Written at every call, read only by a waiter past its spin and by mismatch checks. */
  _Alignas(64) _Atomic uint64_t fp_stamp;
  exec_fp_t fp;
} arena_rank_t;

typedef struct arena {
  coll_base_t *base; /* the communicator's identity and health */
  arena_hdr_t *hdr;
  arena_rank_t *ranks;
  unsigned char *data;
  size_t map_len;
  size_t slot_bytes;
  int fd; /* kept open: this rank's byte-range lock on it says it is alive */
  int rank, nranks;
  uint32_t round;     /* rounds run so far: names the next one and its slot set */
  uint32_t win_round; /* window all-reduces run so far (window_run.c) */
  void *tile;         /* private accumulator of the reduction, ARENA_TILE_BYTES */
  /* The small-message path (small.c): every rank's lines, lines per buffer, rounds run. */
  unsigned char *small_base;
  uint32_t small_lines;
  uint32_t small_bytes;
  uint32_t small_round;
} arena_t;

/* At init, after the transports (collective over all ranks): when every rank is on one
 * host and the pairs use shm, rank 0 creates the segment (COLL_ARENA_SLOT_BYTES per slot,
 * rank 0's value), everyone maps it and locks its byte, rank 0 unlinks the name once all
 * have mapped it. *out stays NULL otherwise, or with COLL_ARENA=0 on rank 0. */
coll_status_t arena_open(arena_t **out, coll_base_t *base, bool one_host,
                         const char *forced_transport);
void arena_close(arena_t **a);
/* This rank's share of the segment (its size / nranks), counted as staging; 0 for NULL. */
size_t arena_staging_bytes(const arena_t *a);
/* false when the process of `rank` no longer exists (its lock is gone). */
bool arena_rank_alive(const arena_t *a, int rank);

/* Every collective of a communicator with an arena records its fingerprint there (the
 * dispatch does, once base_begin_call started it; a = NULL does nothing): an arena call
 * waiting for a rank that started a different collective fails at once with
 * COLL_ERR_MISMATCH. */
void arena_note_call(arena_t *a, const exec_fp_t *fp);

/* Run an all-reduce of host buffers through the arena (the dispatch hands such calls
 * over, fingerprint started); AVG is divided here. Errors mark the communicator failed,
 * as the executor does. */
coll_status_t arena_run(arena_t *a, const coll_call_t *call);

/* ---- shared with the window all-reduce (window_run.c) ---- */
/* Who waits, for timeouts and hang reports; dead is set to a rank found gone. */
typedef struct {
  arena_t *a;
  const coll_call_t *call;
  size_t nsteps;
  int dead;
  const char *label;    /* in timeout messages: "arena" when NULL */
  bool stopped_by_peer; /* another rank's failure ended the wait (failure_watch.c) */
} arena_waiter_t;
/* Wait until *counter (rank peer's) reached target: spin, yield, sleep on the bell;
 * abort, a published failure, a mismatching peer, a dead peer and the deadline end it
 * with an error (`what` names what we wait for in messages). */
coll_status_t arena_wait(arena_waiter_t *w, int peer, _Atomic uint32_t *counter, uint32_t target,
                         const char *what, size_t step);
/* arena_wait on every rank but this one, for the counter at counter_offset in its
 * arena_rank_t (starting with the next rank, so ranks do not all wait on one). */
coll_status_t arena_wait_all(arena_waiter_t *w, size_t counter_offset, uint32_t target,
                             const char *what, size_t step);
/* Store value in this rank's counter and wake the waiters. */
void arena_publish(arena_t *a, _Atomic uint32_t *counter, uint32_t value);
/* Every rank's fingerprint equals ours (once none can have moved on). */
coll_status_t arena_check_fingerprints(const arena_t *a);
/* Rank k's fingerprint equals ours (read whole, retrying while it is being written):
 * COLL_ERR_MISMATCH naming both calls otherwise. For a peer that cannot move on. */
coll_status_t arena_check_peer_fp(const arena_t *a, int k);
/* Wake the ranks asleep on the bell, if any (after a seq_cst fence that follows what
 * they wait for; arena_publish does both for a counter). */
void arena_wake_sleepers(arena_t *a);
/* The error tail of a call: tell the others, prefix the message with `label`, then
 * failure_conclude (failure record, hang report, the communicator marked failed).
 * Returns st. */
coll_status_t arena_fail(const arena_waiter_t *w, coll_status_t st, const char *label);

/* The phases of a round, as COLL_TRACE shows them: local ops with their own names (copy
 * in: INPUT -> the slot; reduce; copy out), op i = step i = phase i, one record per
 * round, on elements [offset, offset + count) of the buffer. */
enum { ARENA_PH_IN = 0, ARENA_PH_REDUCE, ARENA_PH_OUT, ARENA_PH_COUNT };
void arena_trace_phase(trace_t *t, int phase, size_t offset, size_t count);
/* The call's record, named after its path ("arena", "window"), once its phases ran. */
void arena_trace_end(trace_t *t, const coll_call_t *call, const char *path, coll_status_t st);

#endif
