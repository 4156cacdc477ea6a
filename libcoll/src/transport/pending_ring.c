/* The ring of pending operations every connection keeps (shm, tcp, ib): sends or
 * receives indexed by message number mod a power-of-two capacity, so that completions in
 * posting order are a counter; this file grows it. */
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

bool transport_queue_grow(void **queue, uint64_t *cap, uint64_t done, uint64_t posted,
                          size_t entry_size) {
  uint64_t ncap = *cap == 0 ? 16 : *cap * 2;
  unsigned char *fresh = malloc((size_t)ncap * entry_size);
  if (fresh == NULL) return false;
  unsigned char *old = *queue;
  for (uint64_t m = done; m < posted; m++)
    memcpy(fresh + (m & (ncap - 1)) * entry_size, old + (m & (*cap - 1)) * entry_size, entry_size);
  free(old);
  *queue = fresh;
  *cap = ncap;
  return true;
}
