/* What the tagged point-to-point engine's two files share: tagged.c (operations,
 * matching, waits, the background thread) and tagged_wire.c (the messages on each
 * peer's connection: headers, payloads, their order and completion). */
#ifndef COLL_TAGGED_TAGGED_INTERNAL_H
#define COLL_TAGGED_TAGGED_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/base.h"
#include "tagged/tagged.h"

#define WIRE_MAGIC 0x54414744u /* "TAGD" */

/* Every message on a connection of the engine's set starts with a header (always
 * sizeof(wire_hdr_t) bytes); EAGER and DATA are followed by a payload message of `bytes`
 * bytes, except an EAGER one of at most WIRE_INLINE_MAX bytes, which travels inside its
 * header (one message for a small send). */
#define WIRE_INLINE_MAX 224
enum {
  WIRE_EAGER = 1, /* tag, bytes, id: a small message, its payload follows (or is inline) */
  WIRE_RTS,       /* tag, bytes, id: a large message waits for a receive */
  WIRE_CTS,       /* id: the receive for the sender's message `id` is posted */
  WIRE_DATA,      /* id, bytes: the payload of message `id` follows */
  WIRE_NACK,      /* id, bytes: the receive matched message `id` but expects `bytes` */
};

typedef struct {
  uint32_t magic;
  uint32_t kind;
  int64_t tag;
  uint64_t bytes;
  uint64_t id;
  unsigned char inline_data[WIRE_INLINE_MAX]; /* EAGER of at most WIRE_INLINE_MAX bytes */
} wire_hdr_t;

typedef enum {
  OP_UNMATCHED, /* a receive waiting for a message */
  OP_WAIT_CTS,  /* a large send whose header went out, waiting for the receive */
  OP_WAIT_DATA, /* a receive that matched a large message and asked for its data */
  OP_MOVING,    /* the payload is moving (into or out of the user's buffer, or an
                   unexpected message's buffer still filling: `unexp`) */
  OP_DONE,
} op_state_t;

typedef struct unexp unexp_t;

struct tagged_op {
  tagged_op_t *next, *prev; /* the engine's pending list, in posting order */
  const char *what;         /* the API call, for messages */
  bool send;
  bool listed;   /* in the engine's pending list (every op until it is done) */
  bool in_group; /* a blocking call inside a group: the group's list owns it too */
  int peer;      /* COLL_ANY_SOURCE for such receives */
  int source;    /* the matched sender (receives) */
  int dead_peer; /* the peer whose death (COLL_ERR_REMOTE) failed it, else -1 */
  int tag;
  void *buf;
  size_t bytes;
  int *source_out;
  uint64_t id; /* sends: this message's id; matched receives: the sender's id */
  op_state_t state;
  unexp_t *unexp;  /* OP_MOVING receive copying from an unexpected message */
  int64_t last_ns; /* posted or last advanced: the deadline counts from here */
  coll_status_t status;
  char message[BASE_MESSAGE_MAX];
};

/* A message that arrived before its receive, in arrival order. */
struct unexp {
  unexp_t *next;
  int peer;
  int tag;
  uint32_t kind; /* WIRE_EAGER (data below) or WIRE_RTS */
  uint64_t id;
  size_t bytes;
  bool in_list;    /* still in the unexpected list */
  bool ready;      /* EAGER: the payload has arrived */
  tagged_op_t *op; /* matched before its payload arrived */
  unsigned char *data;
};

typedef struct wire_peer wire_peer_t; /* tagged_wire.c */

struct tagged {
  coll_base_t *base;
  transport_set_t *set;
  pthread_mutex_t mu; /* everything below, and every use of `set` */
  wire_peer_t *peers; /* nranks */
  size_t eager_max;   /* sends up to this many bytes go eagerly (COLL_P2P_EAGER_BYTES) */
  uint64_t next_id;
  tagged_op_t *ops_head, *ops_tail; /* pending operations */
  unexp_t *unexp_head, *unexp_tail;
  tagged_op_t **group; /* blocking calls of the open group */
  size_t group_n, group_cap;
  int64_t last_sweep_ns;
  pthread_t thread;
  bool thread_started;
  atomic_int stop;
  atomic_int closing; /* destroy has begun (tagged_closing) */
};

/* Where a payload goes, decided by tagged.c when its header arrives. */
typedef enum { RX_HEADER, RX_OP, RX_UNEXP, RX_DISCARD } rx_kind_t;
typedef struct {
  rx_kind_t kind;
  tagged_op_t *op;
  unexp_t *u;
  void *discard;
  void *dst;
  size_t len;
} rx_target_t;

/* ---- tagged_wire.c (called with mu held) ---- */
coll_status_t wire_init(tagged_t *t);
void wire_free(tagged_t *t);
/* Queue a header (and a payload: `payload` bytes of len; copied when copy) to peer;
 * complete_op: an op finished once the payload is sent. Errors mark the peer broken. */
coll_status_t wire_send(tagged_t *t, int peer, uint32_t kind, int64_t tag, uint64_t bytes,
                        uint64_t id, const void *payload, size_t len, bool copy,
                        tagged_op_t *complete_op);
/* Move what can move on every connection; true when anything did. */
bool wire_progress(tagged_t *t);
/* The connection to peer failed or must not be touched again (a transfer into or out of
 * user memory was given up): COLL_OK, or its status with the message in *msg. */
coll_status_t wire_broken(const tagged_t *t, int peer, const char **msg);
void wire_break(tagged_t *t, int peer, coll_status_t st, const char *msg);
/* Sends still queued in the transport (the background thread polls faster then). */
bool wire_busy(const tagged_t *t);

/* ---- tagged.c, called by tagged_wire.c ---- */
/* A header arrived from peer: match it and say where its payload goes. */
coll_status_t tagged_on_header(tagged_t *t, int peer, const wire_hdr_t *h, rx_target_t *target);
/* A payload arrived (target as tagged_on_header gave it). */
void tagged_on_payload(tagged_t *t, int peer, const rx_target_t *target);
/* A DATA payload from user memory is sent. */
void tagged_on_sent(tagged_t *t, tagged_op_t *op);
/* The connection to peer broke: fail its operations. */
void tagged_on_broken(tagged_t *t, int peer);

#endif
