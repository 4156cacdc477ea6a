/* What the post operations of every transport share: the argument checks behind the
 * transport_post_* wrappers, and the growable ring of pending operations each connection
 * keeps, indexed by message number so completions in posting order are a counter. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "transport/transport.h"

coll_status_t transport_bad_send(const transport_conn_t *c, const void *buf, size_t len) {
  (void)buf;
  return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s send to rank %d: NULL buffer of %zu bytes",
                    c->ops->name, c->peer, len);
}

coll_status_t transport_bad_recv(const transport_conn_t *c, const transport_recv_t *r) {
  if (r == NULL || (r->dst == NULL && r->len > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s receive from rank %d: NULL destination",
                      c->ops->name, c->peer);
  return coll_error(COLL_ERR_INVALID_ARGUMENT,
                    "%s receive from rank %d: reduction needs a function and a power-of-two "
                    "element size dividing the length (%zu bytes, elem %zu)",
                    c->ops->name, c->peer, r->len, r->elem_size);
}

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
