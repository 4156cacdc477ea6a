/* Registered memory windows (coll_mem_alloc / coll_mem_free) and the zero-copy all-reduce
 * that runs on them: on a one-host shm communicator with an arena, each rank's window is
 * a shared segment every peer has mapped (window.c); an all-reduce whose buffers lie in
 * windows reduces straight from the peers' buffers (window_run.c). */
#ifndef COLL_ONEHOST_WINDOW_H
#define COLL_ONEHOST_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/call.h"
#include "onehost/arena.h"

typedef struct window {
  struct window *next;
  uint64_t id;          /* allocations so far on this communicator: equal on every rank */
  size_t bytes;         /* as asked */
  size_t map_len;       /* bytes rounded up to pages */
  unsigned char *base;  /* this rank's window (what coll_mem_alloc returned) */
  unsigned char **peer; /* [nranks] every rank's window as mapped here; NULL: not shared */
  bool heap;            /* base came from aligned_alloc (else it is our mapped segment) */
} window_t;

typedef struct window_set {
  window_t *head;
  uint64_t next_id;
} window_set_t;

/* The windows a zero-copy all-reduce's sendbuf and recvbuf lie in (both NULL: not a
 * window call); valid while the call runs (freeing them is the caller's error). */
typedef struct {
  const window_t *send, *recv;
} window_pair_t;

/* Whether a new window is shared with the peers (an arena with COLL_WINDOW on, more than
 * one rank): then window_alloc talks to the store, so no other call may run meanwhile. */
bool window_shares(const coll_base_t *base, const arena_t *arena);
/* A window of `bytes` (> 0) in *set (created on first use); collective over the ranks
 * when window_shares. */
coll_status_t window_alloc(window_set_t **set, coll_base_t *base, const arena_t *arena,
                           size_t bytes, void **ptr);
/* Free the window starting at ptr; an argument error when set holds none. */
coll_status_t window_free(window_set_t *set, coll_base_t *base, void *ptr);
/* Free every window left at destroy. */
void window_close_all(window_set_t **set, const coll_base_t *base);
/* Bytes of this rank's own shared windows. */
size_t window_bytes(const window_set_t *set);
/* Api side: when the zero-copy path can serve this host all-reduce (arena present,
 * COLL_WINDOW on, both buffers in shared windows), fill *pair and return true (the call
 * then runs as COLL_ALGO_ARENA). Same facts on every rank of a correct program, so the
 * same choice. */
bool window_prepare_call(const window_set_t *set, const arena_t *arena, coll_call_t *call,
                         window_pair_t *pair);
/* A window call's windows (ids + 1) and offsets in them, into its fingerprint, so that
 * ranks passing other windows or offsets are a mismatch; nothing for other calls. */
void window_note_fp(const window_pair_t *pair, const coll_call_t *call, exec_fp_t *fp);
/* Run it (the dispatch hands over calls with a window pair, fingerprint started). */
coll_status_t window_run(arena_t *a, const coll_call_t *call, const window_pair_t *pair);

#endif
