/* Tagged point to point, the messages on each connection of the engine's own transport
 * set: every message is a header (tagged_internal.h), and EAGER and DATA headers are
 * followed by their payload. A receiver always has the next header's receive posted and
 * posts a payload's receive (then the next header's) as soon as its header arrives, so
 * both ends of a connection post in the same order (transport.h, rule 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "tagged/tagged_internal.h"

/* Receives outstanding on a connection: at most a payload and the next header. */
enum { RX_RING = 4, PROGRESS_ROUNDS = 16 };

typedef struct tx_entry {
  struct tx_entry *next;
  uint64_t last_seq; /* the connection's send number of its last message */
  tagged_op_t *op;   /* DATA from user memory: done when sent; NULL: engine memory only */
  wire_hdr_t hdr;
  unsigned char data[]; /* an EAGER payload's copy */
} tx_entry_t;

struct wire_peer {
  transport_conn_t *conn; /* NULL for this rank */
  coll_status_t broken;
  char broken_msg[BASE_MESSAGE_MAX];
  uint64_t sends_posted, sends_done;
  tx_entry_t *tx_head, *tx_tail;
  uint64_t recvs_posted, recvs_done;
  rx_target_t rx[RX_RING]; /* by receive number mod RX_RING */
  wire_hdr_t hdr_in;
};

static coll_status_t post_recv(tagged_t *t, int peer, const rx_target_t *target) {
  wire_peer_t *w = &t->peers[peer];
  transport_recv_t r = {.dst = target->dst, .elem_size = 1, .len = target->len};
  coll_status_t st = transport_post_recv(w->conn, &r);
  if (st != COLL_OK) return st;
  w->rx[w->recvs_posted % RX_RING] = *target;
  w->recvs_posted++;
  return COLL_OK;
}

static coll_status_t post_header_recv(tagged_t *t, int peer) {
  wire_peer_t *w = &t->peers[peer];
  rx_target_t target = {.kind = RX_HEADER, .dst = &w->hdr_in, .len = sizeof w->hdr_in};
  return post_recv(t, peer, &target);
}

coll_status_t wire_init(tagged_t *t) {
  int n = t->base->nranks;
  t->peers = calloc((size_t)n, sizeof *t->peers);
  if (t->peers == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for tagged point to point");
  for (int p = 0; p < n; p++) {
    if (p == t->base->rank) continue;
    t->peers[p].conn = transport_set_conn(t->set, p);
    coll_status_t st = post_header_recv(t, p);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

void wire_free(tagged_t *t) {
  if (t->peers == NULL) return;
  for (int p = 0; p < t->base->nranks; p++) {
    wire_peer_t *w = &t->peers[p];
    for (tx_entry_t *e = w->tx_head, *next; e != NULL; e = next) {
      next = e->next;
      free(e);
    }
    /* Buffers of receives still outstanding; an unexpected message still in the list
     * is freed with the list. */
    for (uint64_t k = w->recvs_done; k < w->recvs_posted; k++) {
      rx_target_t *r = &w->rx[k % RX_RING];
      if (r->kind == RX_DISCARD) free(r->discard);
      if (r->kind == RX_UNEXP && !r->u->in_list) {
        free(r->u->data);
        free(r->u);
      }
    }
  }
  free(t->peers);
  t->peers = NULL;
}

coll_status_t wire_broken(const tagged_t *t, int peer, const char **msg) {
  const wire_peer_t *w = &t->peers[peer];
  if (msg != NULL) *msg = w->broken_msg;
  return w->broken;
}

void wire_break(tagged_t *t, int peer, coll_status_t st, const char *msg) {
  wire_peer_t *w = &t->peers[peer];
  if (w->broken != COLL_OK) return;
  w->broken = st;
  snprintf(w->broken_msg, sizeof w->broken_msg, "%s", msg);
  if (!atomic_load(&t->closing))
    coll_log(COLL_LOG_WARN, "tagged point to point with rank %d stops: %s", peer, msg);
  tagged_on_broken(t, peer);
}

coll_status_t wire_send(tagged_t *t, int peer, uint32_t kind, int64_t tag, uint64_t bytes,
                        uint64_t id, const void *payload, size_t len, bool copy,
                        tagged_op_t *complete_op) {
  wire_peer_t *w = &t->peers[peer];
  if (w->broken != COLL_OK) return coll_error(w->broken, "%s", w->broken_msg);
  bool inlined = kind == WIRE_EAGER && len <= WIRE_INLINE_MAX; /* in the header */
  tx_entry_t *e = malloc(sizeof *e + (copy && !inlined ? len : 0));
  if (e == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a message of %zu bytes to rank %d",
                      len, peer);
  e->next = NULL;
  e->op = complete_op;
  e->hdr = (wire_hdr_t){.magic = WIRE_MAGIC, .kind = kind, .tag = tag, .bytes = bytes, .id = id};
  if (inlined && len > 0)
    memcpy(e->hdr.inline_data, payload, len);
  else if (copy && len > 0)
    memcpy(e->data, payload, len);
  coll_status_t st = transport_post_send(w->conn, &e->hdr, sizeof e->hdr);
  if (st == COLL_OK) w->sends_posted++;
  if (st == COLL_OK && len > 0 && !inlined) {
    st = transport_post_send(w->conn, copy ? e->data : payload, len);
    if (st == COLL_OK) w->sends_posted++;
  }
  e->last_seq = w->sends_posted - 1;
  /* Queued even on failure: the transport may hold the header's address. */
  if (w->tx_tail != NULL)
    w->tx_tail->next = e;
  else
    w->tx_head = e;
  w->tx_tail = e;
  if (st != COLL_OK) {
    char msg[BASE_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s", coll_last_error());
    wire_break(t, peer, st, msg);
    return coll_error(st, "%s", msg);
  }
  return COLL_OK;
}

/* The header just received from peer: match it, post its payload's receive (if any)
 * and the next header's. */
static coll_status_t take_header(tagged_t *t, int peer) {
  wire_peer_t *w = &t->peers[peer];
  wire_hdr_t h = w->hdr_in;
  if (h.magic != WIRE_MAGIC || h.kind < WIRE_EAGER || h.kind > WIRE_NACK)
    return coll_error(COLL_ERR_PROTOCOL,
                      "rank %d: tagged point to point: malformed header from rank %d (magic "
                      "%#x, kind %u)",
                      t->base->rank, peer, h.magic, h.kind);
  rx_target_t target = {.kind = RX_HEADER};
  coll_status_t st = tagged_on_header(t, peer, &h, &target);
  if (st != COLL_OK) return st;
  if (w->broken != COLL_OK) return COLL_OK;
  if (target.len > 0) {
    st = post_recv(t, peer, &target);
    if (st != COLL_OK) {
      if (target.kind == RX_DISCARD) free(target.discard);
      return st;
    }
  }
  return post_header_recv(t, peer);
}

/* Sends and receives the transport reports complete, in order; true when any were. */
static coll_status_t retire(tagged_t *t, int peer, uint64_t sends_done, uint64_t recvs_done,
                            bool *any) {
  wire_peer_t *w = &t->peers[peer];
  while (w->tx_head != NULL && w->tx_head->last_seq < sends_done) {
    tx_entry_t *e = w->tx_head;
    w->tx_head = e->next;
    if (w->tx_head == NULL) w->tx_tail = NULL;
    if (e->op != NULL) tagged_on_sent(t, e->op);
    free(e);
    *any = true;
  }
  w->sends_done = sends_done;
  while (w->recvs_done < recvs_done && w->broken == COLL_OK) {
    rx_target_t r = w->rx[w->recvs_done % RX_RING];
    w->recvs_done++;
    *any = true;
    if (r.kind == RX_HEADER) {
      coll_status_t st = take_header(t, peer);
      if (st != COLL_OK) return st;
    } else {
      tagged_on_payload(t, peer, &r);
    }
  }
  return COLL_OK;
}

bool wire_progress(tagged_t *t) {
  bool moved = false;
  for (int p = 0; p < t->base->nranks; p++) {
    wire_peer_t *w = &t->peers[p];
    for (int round = 0; round < PROGRESS_ROUNDS && w->conn != NULL && w->broken == COLL_OK;
         round++) {
      uint64_t sd = w->sends_done, rd = w->recvs_done;
      coll_status_t st = transport_progress(w->conn, &sd, &rd);
      bool any = false;
      if (st == COLL_OK) st = retire(t, p, sd, rd, &any);
      if (st != COLL_OK) {
        char msg[BASE_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", coll_last_error());
        wire_break(t, p, st, msg);
        moved = true;
        break;
      }
      if (!any) break;
      moved = true;
    }
  }
  return moved;
}

bool wire_busy(const tagged_t *t) {
  for (int p = 0; p < t->base->nranks; p++)
    if (t->peers[p].tx_head != NULL && t->peers[p].broken == COLL_OK) return true;
  return false;
}
