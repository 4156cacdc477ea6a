/* Registered memory windows (coll_mem_alloc / coll_mem_free) and the zero-copy all-reduce
 * that runs on them: on a one-host shm communicator with an arena, each rank's window is
 * a shared segment every peer has mapped (window.c); an all-reduce whose buffers lie in
 * windows reduces straight from the peers' buffers (window_run.c). */
#ifndef COLL_CORE_WINDOW_H
#define COLL_CORE_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"

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

/* Free every window left at destroy. */
void window_close_all(coll_comm_t *comm);
/* Bytes of this rank's own shared windows. */
size_t window_bytes(const coll_comm_t *comm);
/* Api side: when the zero-copy path can serve this host all-reduce (arena present,
 * COLL_WINDOW on, both buffers in shared windows), fill the call's window fields and
 * return true. Same facts on every rank of a correct program, so the same choice. */
bool window_prepare_call(const coll_comm_t *comm, exec_call_t *call);
/* A window call's windows (ids + 1) and offsets in them, into its fingerprint, so that
 * ranks passing other windows or offsets are a mismatch; nothing for other calls. */
void window_note_fp(const exec_call_t *call, exec_fp_t *fp);
/* Run it (exec_run hands over calls with win_send set). */
coll_status_t window_run(coll_comm_t *comm, const exec_call_t *call);

#endif
