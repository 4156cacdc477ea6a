/* Tagged point to point (coll_send_tagged, coll_recv_tagged and their _async forms): an
 * engine per communicator with its own transport set, which matches messages by (peer,
 * tag) or from any source, outside the request queue's one-at-a-time order. */
#ifndef COLL_TAGGED_TAGGED_H
#define COLL_TAGGED_TAGGED_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "coll.h"
#include "transport/transport.h"

typedef struct tagged tagged_t;
typedef struct tagged_op tagged_op_t;

/* Connect the engine's transport set (collective: every rank at init, after the main
 * set; setup->key_prefix must differ from the main set's). */
coll_status_t tagged_open(tagged_t **out, coll_base_t *base, const transport_setup_t *setup);
/* Destroy has begun: peers closing their connections from now on is no failure. The
 * background thread keeps moving what is queued until tagged_stop. NULL: nothing. */
void tagged_closing(tagged_t *t);
/* Stop the background progress thread (destroy, after the final barrier). NULL: none. */
void tagged_stop(tagged_t *t);
/* Free the engine: unexpected messages, pending operations, the transport set. */
void tagged_close(tagged_t *t);

/* Post a send (to peer) or a receive (from peer, or COLL_ANY_SOURCE); what names the
 * call in messages. On COLL_OK *op is pending or already done; wait or test it. */
coll_status_t tagged_post(tagged_t *t, const char *what, bool send, void *buf, size_t bytes,
                          int peer, int tag, int *source, tagged_op_t **op);
/* Wait for op (the communicator's deadline applies), free it, return its result with
 * its message as coll_last_error(). */
coll_status_t tagged_wait(tagged_t *t, tagged_op_t *op);
/* Whether op is done; when it is, free it and return its result in *status. */
bool tagged_test(tagged_t *t, tagged_op_t *op, coll_status_t *status);

/* Inside coll_group_start/end: a blocking call's op, waited for by tagged_group_wait at
 * the outermost coll_group_end (which returns the first error). t may be NULL there. */
void tagged_group_add(tagged_t *t, tagged_op_t *op);
coll_status_t tagged_group_wait(tagged_t *t);

#endif
