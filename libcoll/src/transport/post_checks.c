/* The argument errors of a post, reported here once for every transport: the checks of
 * the transport_post_* wrappers (transport.h) fail into these, so the post functions of
 * the transports may assume valid arguments. */
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
