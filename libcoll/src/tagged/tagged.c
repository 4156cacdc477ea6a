/* Tagged point to point: the operations (sends, receives by peer or from any source),
 * their matching with the messages that arrive (first posted receive first; unexpected
 * messages kept in arrival order), eager and rendezvous sends, deadlines, and who
 * progresses them: the caller while it waits, and a background thread started at the
 * first tagged call, so that pending operations move while the caller runs collectives
 * or computes. The messages on the wire are tagged_wire.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "common/wait.h"
#include "tagged/tagged_internal.h"

enum {
  EAGER_DEFAULT = 64 << 10,
  WAIT_SLICE_MS = 10,
  SWEEP_NS = 1000000,     /* deadlines and health are looked at every millisecond */
  THREAD_FAST_US = 50,    /* the background thread's first sleep after progress */
  THREAD_BUSY_US = 1000,  /* ... its longest while operations are pending */
  THREAD_IDLE_US = 10000, /* ... and while nothing is */
};

/* ---- lists ---- */

static void op_append(tagged_t *t, tagged_op_t *op) {
  op->listed = true;
  op->next = NULL;
  op->prev = t->ops_tail;
  if (t->ops_tail != NULL)
    t->ops_tail->next = op;
  else
    t->ops_head = op;
  t->ops_tail = op;
}

static void op_unlink(tagged_t *t, tagged_op_t *op) {
  if (!op->listed) return;
  op->listed = false;
  if (op->prev != NULL)
    op->prev->next = op->next;
  else
    t->ops_head = op->next;
  if (op->next != NULL)
    op->next->prev = op->prev;
  else
    t->ops_tail = op->prev;
  op->next = op->prev = NULL;
}

static void unexp_append(tagged_t *t, unexp_t *u) {
  u->next = NULL;
  u->in_list = true;
  if (t->unexp_tail != NULL)
    t->unexp_tail->next = u;
  else
    t->unexp_head = u;
  t->unexp_tail = u;
}

static void unexp_unlink(tagged_t *t, unexp_t *u, unexp_t *before) {
  if (before != NULL)
    before->next = u->next;
  else
    t->unexp_head = u->next;
  if (t->unexp_tail == u) t->unexp_tail = before;
  u->next = NULL;
  u->in_list = false;
}

static void unexp_free(unexp_t *u) {
  free(u->data);
  free(u);
}

/* ---- finishing operations ---- */

static const char *dir(const tagged_op_t *op) { return op->send ? "to" : "from"; }

/* "rank 3", or "any rank" for a receive from any source not matched yet. */
static const char *peer_text(const tagged_op_t *op, char *buf, size_t cap) {
  int peer = op->send || op->state == OP_UNMATCHED ? op->peer : op->source;
  if (peer == COLL_ANY_SOURCE) return "any rank";
  snprintf(buf, cap, "rank %d", peer);
  return buf;
}

/* The op's result (st != COLL_OK: the message is coll_last_error()); it leaves the
 * pending list and belongs to its waiter from now on. */
static void finish(tagged_t *t, tagged_op_t *op, coll_status_t st) {
  if (op->state == OP_DONE) return;
  op_unlink(t, op);
  op->status = st;
  if (st != COLL_OK)
    snprintf(op->message, sizeof op->message, "%s", coll_last_error());
  else if (!op->send && op->source_out != NULL)
    *op->source_out = op->source;
  op->state = OP_DONE;
}

/* The peer whose connection the op's payload is on (receives: the matched sender). */
static int transfer_peer(const tagged_op_t *op) { return op->send ? op->peer : op->source; }

/* Fail op with the message already set (coll_error). A payload moving in or out of the
 * user's buffer cannot be called back: that connection is not touched again. */
static void fail(tagged_t *t, tagged_op_t *op, coll_status_t st) {
  if (op->state == OP_DONE) return;
  bool bound = op->state == OP_MOVING && op->unexp == NULL;
  if (op->unexp != NULL) op->unexp->op = NULL; /* the message's buffer is freed on arrival */
  int peer = transfer_peer(op);
  char msg[BASE_MESSAGE_MAX];
  snprintf(msg, sizeof msg, "%s", coll_last_error());
  finish(t, op, st);
  if (bound) {
    char why[BASE_MESSAGE_MAX + 64];
    snprintf(why, sizeof why, "a transfer was given up: %s", msg);
    wire_break(t, peer, st, why);
  }
}

static void mismatch(tagged_t *t, tagged_op_t *op, int peer, uint64_t theirs) {
  if (op->send)
    coll_error(COLL_ERR_MISMATCH,
               "rank %d: %s to rank %d (tag %d): the sizes differ: this send has %zu bytes, "
               "rank %d's receive expects %llu",
               t->base->rank, op->what, peer, op->tag, op->bytes, peer, (unsigned long long)theirs);
  else
    coll_error(COLL_ERR_MISMATCH,
               "rank %d: %s from rank %d (tag %d): the sizes differ: rank %d sent %llu bytes, "
               "this receive expects %zu",
               t->base->rank, op->what, peer, op->tag, peer, (unsigned long long)theirs, op->bytes);
  fail(t, op, COLL_ERR_MISMATCH);
}

/* Tell the sender of message id that its receive expects other than it sent. */
static void nack(tagged_t *t, int peer, int tag, uint64_t id, size_t expected) {
  wire_send(t, peer, WIRE_NACK, tag, expected, id, NULL, 0, false, NULL);
}

/* ---- matching ---- */

static bool recv_matches(const tagged_op_t *op, int peer, int64_t tag) {
  return !op->send && op->state == OP_UNMATCHED && op->tag == tag &&
         (op->peer == COLL_ANY_SOURCE || op->peer == peer);
}

static tagged_op_t *find(tagged_t *t, bool send, op_state_t state, int peer, uint64_t id) {
  for (tagged_op_t *op = t->ops_head; op != NULL; op = op->next)
    if (op->send == send && op->state == state && transfer_peer(op) == peer && op->id == id)
      return op;
  return NULL;
}

static coll_status_t discard(size_t len, rx_target_t *target) {
  void *p = malloc(len);
  if (p == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for %zu bytes of a dropped message", len);
  *target = (rx_target_t){.kind = RX_DISCARD, .discard = p, .dst = p, .len = len};
  return COLL_OK;
}

/* A receive meets a large message (RTS) from peer: ask for the data. */
static void accept_rts(tagged_t *t, tagged_op_t *r, int peer, uint64_t id) {
  r->state = OP_WAIT_DATA;
  r->source = peer;
  r->id = id;
  r->last_ns = coll_now_ns();
  wire_send(t, peer, WIRE_CTS, r->tag, r->bytes, id, NULL, 0, false, NULL);
}

static coll_status_t on_message(tagged_t *t, int peer, const wire_hdr_t *h, rx_target_t *target) {
  bool eager = h->kind == WIRE_EAGER;
  bool inlined = eager && h->bytes <= WIRE_INLINE_MAX; /* the payload is here already */
  tagged_op_t *r = t->ops_head;
  while (r != NULL && !recv_matches(r, peer, h->tag)) r = r->next;
  if (r == NULL) {
    unexp_t *u = calloc(1, sizeof *u);
    if (u != NULL && eager && h->bytes > 0) u->data = malloc(h->bytes);
    if (u == NULL || (eager && h->bytes > 0 && u->data == NULL)) {
      free(u);
      return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a message of %llu bytes",
                        (unsigned long long)h->bytes);
    }
    *u = (unexp_t){.peer = peer,
                   .tag = (int)h->tag,
                   .kind = h->kind,
                   .id = h->id,
                   .bytes = h->bytes,
                   .ready = inlined,
                   .data = u->data};
    if (inlined && h->bytes > 0) memcpy(u->data, h->inline_data, h->bytes);
    unexp_append(t, u);
    if (eager && !inlined)
      *target = (rx_target_t){.kind = RX_UNEXP, .u = u, .dst = u->data, .len = h->bytes};
    return COLL_OK;
  }
  if (r->bytes != h->bytes) {
    mismatch(t, r, peer, h->bytes);
    nack(t, peer, (int)h->tag, h->id, r->bytes);
    return eager && !inlined ? discard(h->bytes, target) : COLL_OK;
  }
  if (!eager) {
    accept_rts(t, r, peer, h->id);
    return COLL_OK;
  }
  r->source = peer;
  if (inlined) {
    if (h->bytes > 0) memcpy(r->buf, h->inline_data, h->bytes);
    finish(t, r, COLL_OK);
    return COLL_OK;
  }
  r->state = OP_MOVING;
  r->last_ns = coll_now_ns();
  *target = (rx_target_t){.kind = RX_OP, .op = r, .dst = r->buf, .len = h->bytes};
  return COLL_OK;
}

coll_status_t tagged_on_header(tagged_t *t, int peer, const wire_hdr_t *h, rx_target_t *target) {
  switch (h->kind) {
    case WIRE_EAGER:
    case WIRE_RTS:
      return on_message(t, peer, h, target);
    case WIRE_DATA: {
      tagged_op_t *r = find(t, false, OP_WAIT_DATA, peer, h->id);
      if (r == NULL || r->bytes != h->bytes) return discard(h->bytes, target); /* given up */
      r->state = OP_MOVING;
      r->last_ns = coll_now_ns();
      *target = (rx_target_t){.kind = RX_OP, .op = r, .dst = r->buf, .len = h->bytes};
      return COLL_OK;
    }
    case WIRE_CTS: {
      tagged_op_t *s = find(t, true, OP_WAIT_CTS, peer, h->id);
      if (s == NULL) return COLL_OK; /* the send gave up (deadline, abort) */
      s->state = OP_MOVING;
      s->last_ns = coll_now_ns();
      wire_send(t, peer, WIRE_DATA, s->tag, s->bytes, s->id, s->buf, s->bytes, false, s);
      return COLL_OK;
    }
    default: { /* WIRE_NACK */
      tagged_op_t *s = find(t, true, OP_WAIT_CTS, peer, h->id);
      if (s != NULL) {
        mismatch(t, s, peer, h->bytes);
      } else {
        /* An eager send completed when its data was handed off; only its receive fails. */
        coll_log(COLL_LOG_WARN,
                 "tagged send to rank %d (tag %lld) had completed when that rank's receive "
                 "found it expects %llu bytes",
                 peer, (long long)h->tag, (unsigned long long)h->bytes);
      }
      return COLL_OK;
    }
  }
}

void tagged_on_payload(tagged_t *t, int peer, const rx_target_t *target) {
  (void)peer;
  if (target->kind == RX_OP) {
    finish(t, target->op, COLL_OK);
  } else if (target->kind == RX_DISCARD) {
    free(target->discard);
  } else if (target->kind == RX_UNEXP) {
    unexp_t *u = target->u;
    u->ready = true;
    if (u->op != NULL) {
      memcpy(u->op->buf, u->data, u->bytes);
      u->op->unexp = NULL;
      finish(t, u->op, COLL_OK);
      unexp_free(u);
    } else if (!u->in_list) {
      unexp_free(u); /* its receive gave up or did not fit */
    }
  }
}

void tagged_on_sent(tagged_t *t, tagged_op_t *op) { finish(t, op, COLL_OK); }

void tagged_on_broken(tagged_t *t, int peer) {
  const char *msg;
  coll_status_t st = wire_broken(t, peer, &msg);
  for (tagged_op_t *op = t->ops_head, *next; op != NULL; op = next) {
    next = op->next;
    bool hit = op->send                    ? op->peer == peer
               : op->state == OP_UNMATCHED ? op->peer == peer || op->peer == COLL_ANY_SOURCE
                                           : op->source == peer;
    if (!hit) continue;
    if (op->peer == COLL_ANY_SOURCE && op->state == OP_UNMATCHED)
      coll_error(st, "rank %d: %s from any rank (tag %d): rank %d failed: %s", t->base->rank,
                 op->what, op->tag, peer, msg);
    else
      coll_error(st, "rank %d: %s %s rank %d (tag %d): %s", t->base->rank, op->what, dir(op), peer,
                 op->tag, msg);
    if (op->unexp != NULL) op->unexp->op = NULL;
    if (st == COLL_ERR_REMOTE) op->dead_peer = peer;
    finish(t, op, st);
  }
  /* What never fully arrived from peer will not: a large message's header, a payload
   * still on its way (its buffer is freed with the connection's receives). */
  for (unexp_t *u = t->unexp_head, *before = NULL, *next; u != NULL; u = next) {
    next = u->next;
    if (u->peer != peer || u->ready) {
      before = u;
      continue;
    }
    unexp_unlink(t, u, before);
    if (u->kind == WIRE_RTS) unexp_free(u);
  }
}

/* ---- deadlines and health ---- */

static void time_out(tagged_t *t, tagged_op_t *op) {
  int rank = t->base->rank, ms = t->base->timeout_ms;
  if (op->state == OP_UNMATCHED && op->peer == COLL_ANY_SOURCE)
    coll_error(COLL_ERR_TIMEOUT, "rank %d: %s from any rank (tag %d): no message within %d ms",
               rank, op->what, op->tag, ms);
  else if (op->state == OP_UNMATCHED)
    coll_error(COLL_ERR_TIMEOUT, "rank %d: %s from rank %d (tag %d): no message within %d ms", rank,
               op->what, op->peer, op->tag, ms);
  else if (op->state == OP_WAIT_CTS)
    coll_error(COLL_ERR_TIMEOUT,
               "rank %d: %s to rank %d (tag %d, %zu bytes): rank %d posted no matching receive "
               "within %d ms",
               rank, op->what, op->peer, op->tag, op->bytes, op->peer, ms);
  else
    coll_error(COLL_ERR_TIMEOUT,
               "rank %d: %s %s rank %d (tag %d, %zu bytes): the data did not move for %d ms", rank,
               op->what, dir(op), transfer_peer(op), op->tag, op->bytes, ms);
  fail(t, op, COLL_ERR_TIMEOUT);
}

/* Abort, the communicator's failure and each pending operation's deadline. */
static void sweep(tagged_t *t) {
  int64_t now = coll_now_ns();
  if (now - t->last_sweep_ns < SWEEP_NS && !base_aborted(t->base)) return;
  t->last_sweep_ns = now;
  int failed = base_failed(t->base);
  int64_t limit = (int64_t)t->base->timeout_ms * 1000000LL;
  for (tagged_op_t *op = t->ops_head, *next; op != NULL; op = next) {
    next = op->next; /* fail() may break a connection and finish more ops: restart then */
    if (base_aborted(t->base)) {
      coll_error(COLL_ERR_ABORTED, "rank %d: %s: the communicator was aborted", t->base->rank,
                 op->what);
      fail(t, op, COLL_ERR_ABORTED);
    } else if (failed != 0) {
      char buf[32];
      coll_error((coll_status_t)failed, "rank %d: %s %s %s (tag %d): stopped: %s", t->base->rank,
                 op->what, dir(op), peer_text(op, buf, sizeof buf), op->tag,
                 t->base->failed_message);
      fail(t, op, (coll_status_t)failed);
    } else if (now - op->last_ns > limit) {
      time_out(t, op);
    } else {
      continue;
    }
    next = t->ops_head;
  }
}

static bool progress(tagged_t *t) {
  bool moved = wire_progress(t);
  sweep(t);
  return moved;
}

/* ---- the background thread ---- */

static void *engine_main(void *arg) {
  tagged_t *t = arg;
  coll_log_set_rank(t->base->rank);
  int64_t sleep_us = THREAD_FAST_US;
  while (!atomic_load(&t->stop)) {
    pthread_mutex_lock(&t->mu);
    bool moved = progress(t);
    bool busy = t->ops_head != NULL || wire_busy(t);
    pthread_mutex_unlock(&t->mu);
    int64_t cap = busy ? THREAD_BUSY_US : THREAD_IDLE_US;
    sleep_us = moved ? THREAD_FAST_US : sleep_us * 2;
    if (sleep_us > cap) sleep_us = cap;
    usleep((useconds_t)sleep_us);
  }
  return NULL;
}

static coll_status_t start_thread(tagged_t *t) {
  if (t->thread_started) return COLL_OK;
  int rc = pthread_create(&t->thread, NULL, engine_main, t);
  if (rc != 0)
    return coll_error_errno(COLL_ERR_SYSTEM, rc,
                            "rank %d: creating the tagged point-to-point thread", t->base->rank);
  t->thread_started = true;
  return COLL_OK;
}

/* ---- lifetime ---- */

coll_status_t tagged_open(tagged_t **out, coll_base_t *base, const transport_setup_t *setup) {
  *out = NULL;
  int64_t eager;
  coll_status_t st = coll_env_int("COLL_P2P_EAGER_BYTES", 0, 16 << 20, EAGER_DEFAULT, &eager);
  if (st != COLL_OK) return st;
  tagged_t *t = calloc(1, sizeof *t);
  if (t == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for tagged point to point");
  t->base = base;
  t->eager_max = (size_t)eager;
  t->next_id = 1;
  pthread_mutex_init(&t->mu, NULL);
  atomic_init(&t->stop, 0);
  atomic_init(&t->closing, 0);
  transport_setup_t quiet = *setup; /* the main set's INFO lines name each pair's transport */
  quiet.quiet = true;
  st = transport_set_connect(&quiet, &t->set);
  if (st == COLL_OK) st = wire_init(t);
  if (st != COLL_OK) {
    tagged_close(t);
    return coll_error_prefix(st, "rank %d: connecting for tagged point to point: ", base->rank);
  }
  *out = t;
  return COLL_OK;
}

void tagged_closing(tagged_t *t) {
  if (t != NULL) atomic_store(&t->closing, 1);
}

void tagged_stop(tagged_t *t) {
  if (t == NULL || !t->thread_started) return;
  atomic_store(&t->stop, 1);
  pthread_join(t->thread, NULL);
  t->thread_started = false;
}

void tagged_close(tagged_t *t) {
  if (t == NULL) return;
  tagged_stop(t);
  wire_free(t); /* first: it frees the unexpected messages no longer in the list */
  for (unexp_t *u = t->unexp_head, *next; u != NULL; u = next) {
    next = u->next;
    unexp_free(u);
  }
  for (tagged_op_t *op = t->ops_head, *next; op != NULL; op = next) {
    next = op->next;
    if (!op->in_group) free(op); /* a request nobody waited for (after abort) */
  }
  for (size_t i = 0; i < t->group_n; i++) free(t->group[i]);
  free(t->group);
  transport_set_close(t->set);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* ---- posting ---- */

/* A receive meets an unexpected message u (already out of the list). */
static void take_unexpected(tagged_t *t, tagged_op_t *r, unexp_t *u) {
  r->source = u->peer;
  r->id = u->id;
  if (u->bytes != r->bytes) {
    nack(t, u->peer, u->tag, u->id, r->bytes);
    mismatch(t, r, u->peer, u->bytes);
    if (u->kind == WIRE_RTS || u->ready) unexp_free(u); /* else freed when it arrives */
    return;
  }
  if (u->kind == WIRE_RTS) {
    accept_rts(t, r, u->peer, u->id);
    unexp_free(u);
  } else if (u->ready) {
    if (u->bytes > 0) memcpy(r->buf, u->data, u->bytes);
    finish(t, r, COLL_OK);
    unexp_free(u);
  } else {
    r->state = OP_MOVING;
    r->unexp = u;
    u->op = r;
  }
}

static coll_status_t post_recv(tagged_t *t, tagged_op_t *r) {
  op_append(t, r);
  for (unexp_t *u = t->unexp_head, *before = NULL; u != NULL; before = u, u = u->next) {
    if (u->tag != r->tag || (r->peer != COLL_ANY_SOURCE && u->peer != r->peer)) continue;
    unexp_unlink(t, u, before);
    take_unexpected(t, r, u);
    return COLL_OK;
  }
  return COLL_OK;
}

static coll_status_t post_send(tagged_t *t, tagged_op_t *s) {
  s->id = t->next_id++;
  op_append(t, s);
  if (s->bytes <= t->eager_max) {
    coll_status_t st =
        wire_send(t, s->peer, WIRE_EAGER, s->tag, s->bytes, s->id, s->buf, s->bytes, true, NULL);
    if (st != COLL_OK) return st;
    finish(t, s, COLL_OK); /* the data is the engine's now */
    return COLL_OK;
  }
  s->state = OP_WAIT_CTS;
  return wire_send(t, s->peer, WIRE_RTS, s->tag, s->bytes, s->id, NULL, 0, false, NULL);
}

coll_status_t tagged_post(tagged_t *t, const char *what, bool send, void *buf, size_t bytes,
                          int peer, int tag, int *source, tagged_op_t **out) {
  *out = NULL;
  tagged_op_t *op = calloc(1, sizeof *op);
  if (op == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "rank %d: %s: out of memory", t->base->rank, what);
  *op = (tagged_op_t){.what = what,
                      .send = send,
                      .peer = peer,
                      .source = peer,
                      .tag = tag,
                      .buf = buf,
                      .bytes = bytes,
                      .source_out = source,
                      .dead_peer = -1,
                      .state = OP_UNMATCHED,
                      .last_ns = coll_now_ns()};
  pthread_mutex_lock(&t->mu);
  coll_status_t st = start_thread(t);
  const char *msg = NULL;
  if (st == COLL_OK && peer != COLL_ANY_SOURCE && wire_broken(t, peer, &msg) != COLL_OK)
    st = coll_error(wire_broken(t, peer, NULL), "rank %d: %s %s rank %d (tag %d): %s",
                    t->base->rank, what, send ? "to" : "from", peer, tag, msg);
  if (st == COLL_OK) st = send ? post_send(t, op) : post_recv(t, op);
  if (st == COLL_OK) progress(t);
  if (st != COLL_OK) op_unlink(t, op);
  pthread_mutex_unlock(&t->mu);
  if (st != COLL_OK) {
    free(op);
    return st;
  }
  *out = op;
  return COLL_OK;
}

/* ---- waiting ---- */

/* The op's result on the caller's thread, which may use the store: a dead peer is then
 * recorded and leaves the communicator failed, as a collective that met it would (the
 * other ranks learn it through their failure watchers; base/failure.c). */
static coll_status_t result(tagged_t *t, tagged_op_t *op) {
  coll_status_t st = op->status;
  if (st != COLL_OK)
    coll_error(st, "%s", op->message);
  else
    coll_error_clear();
  if (op->dead_peer >= 0 && base_failed(t->base) == 0 && !atomic_load(&t->closing))
    st = failure_conclude(t->base, st, op->dead_peer, false);
  free(op);
  return st;
}

coll_status_t tagged_wait(tagged_t *t, tagged_op_t *op) {
  int64_t idle_since = coll_now_ns();
  for (;;) {
    pthread_mutex_lock(&t->mu);
    bool moved = progress(t);
    bool done = op->state == OP_DONE;
    pthread_mutex_unlock(&t->mu);
    if (done) break;
    int64_t now = coll_now_ns();
    if (moved) idle_since = now;
    if (coll_wait_spin(now - idle_since, t->base->spin_ns, t->base->pure_spin_ns)) continue;
    /* Blocks with the engine's lock: nobody else may use the set meanwhile, and the
     * background thread has nothing to do while this waiter progresses. */
    pthread_mutex_lock(&t->mu);
    if (op->state != OP_DONE) transport_set_wait(t->set, WAIT_SLICE_MS);
    pthread_mutex_unlock(&t->mu);
  }
  return result(t, op);
}

bool tagged_test(tagged_t *t, tagged_op_t *op, coll_status_t *status) {
  pthread_mutex_lock(&t->mu);
  progress(t);
  bool done = op->state == OP_DONE;
  pthread_mutex_unlock(&t->mu);
  if (done) *status = result(t, op);
  return done;
}

void tagged_group_add(tagged_t *t, tagged_op_t *op) {
  pthread_mutex_lock(&t->mu);
  if (t->group_n == t->group_cap) {
    size_t cap = t->group_cap ? t->group_cap * 2 : 16;
    tagged_op_t **g = realloc(t->group, cap * sizeof *g);
    if (g == NULL) {
      /* Out of memory for the list: the call waits now instead of at the group's end. */
      pthread_mutex_unlock(&t->mu);
      coll_status_t st = tagged_wait(t, op);
      if (st != COLL_OK) coll_log(COLL_LOG_WARN, "%s", coll_last_error());
      return;
    }
    t->group = g;
    t->group_cap = cap;
  }
  op->in_group = true;
  t->group[t->group_n++] = op;
  pthread_mutex_unlock(&t->mu);
}

coll_status_t tagged_group_wait(tagged_t *t) {
  if (t == NULL) return COLL_OK;
  coll_status_t first = COLL_OK;
  char message[BASE_MESSAGE_MAX] = "";
  pthread_mutex_lock(&t->mu);
  size_t n = t->group_n;
  tagged_op_t **ops = t->group;
  t->group = NULL;
  t->group_n = t->group_cap = 0;
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < n; i++) {
    ops[i]->in_group = false;
    coll_status_t st = tagged_wait(t, ops[i]);
    if (st != COLL_OK && first == COLL_OK) {
      first = st;
      snprintf(message, sizeof message, "%s", coll_last_error());
    }
  }
  free(ops);
  if (first != COLL_OK) return coll_error(first, "%s", message);
  coll_error_clear();
  return COLL_OK;
}
