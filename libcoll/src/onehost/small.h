/* The arena's small-message all-reduce: each rank writes its input into cache lines of
 * its own in the arena segment, every line carrying the round it belongs to and the
 * call's fingerprint digest beside 56 bytes of data; every rank polls the others' lines
 * and reduces them as it reads them, in one step (small.c explains the protocol). */
#ifndef COLL_ONEHOST_SMALL_H
#define COLL_ONEHOST_SMALL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onehost/arena.h"

/* Data bytes per line: a 64-byte cache line less its round and digest. 56 is a multiple
 * of every element size (1, 2, 4, 8), so no element straddles two lines. */
#define SMALL_LINE_DATA 56
/* Two buffers per rank, used by round parity (small.c says why two suffice). */
#define SMALL_NBUFS 2

typedef struct {
  _Alignas(64) _Atomic uint32_t round; /* the round whose data the line holds; written last */
  uint32_t digest;                     /* that call's fingerprint digest */
  unsigned char data[SMALL_LINE_DATA];
} small_line_t;

/* Bytes of the segment that the small path needs for nranks ranks and lines per buffer
 * (inline: arena_setup.c sizes the segment with it). */
static inline size_t small_region_bytes(int nranks, uint32_t lines) {
  return (size_t)nranks * SMALL_NBUFS * (size_t)lines * sizeof(small_line_t);
}
/* Lines per buffer that carry max_bytes of data. */
static inline uint32_t small_lines_for(size_t max_bytes) {
  return (uint32_t)((max_bytes + SMALL_LINE_DATA - 1) / SMALL_LINE_DATA);
}

/* The call is a host all-reduce the arena's small path can carry (it has the region,
 * the message fits, the element size divides a line). */
bool small_fits(const arena_t *a, const coll_call_t *call);
/* Ask for this rank's lines of its next round in exclusive state, before the call's
 * other work (the dispatch calls it first for an arena call of `bytes`): the peers hold
 * those lines shared since they read them two rounds ago, and the fence after the lines
 * are written waits for their copies to be invalidated; asked early, that overlaps the
 * fingerprint's work. A hint only: nothing without an arena or when the call is larger. */
void small_claim_lines(const arena_t *a, size_t bytes);
/* Run it (the dispatch hands it over, fingerprint started and noted in the arena); AVG
 * is divided here. Errors mark the communicator failed, as the arena does. */
coll_status_t small_run(arena_t *a, const coll_call_t *call);

#endif
