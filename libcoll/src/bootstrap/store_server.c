/* The store server: one thread, one epoll set, every client a non-blocking socket read one
 * frame at a time. Blocking get/wait requests are parked (not answered, not blocking the
 * thread) until their keys appear or their deadline passes. A client that breaks the
 * protocol is dropped with a logged reason; nobody else notices. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "bootstrap/store_net.h"
#include "bootstrap/store_proto.h"
#include "bootstrap/store_table.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

enum {
  DEFAULT_MAX_CLIENTS = 16384,
  DEFAULT_FRAME_TIMEOUT_MS = 30000,
  EVENTS_PER_WAIT = 256,
  FRAMES_PER_EVENT = 16, /* then let other clients have a turn */
  READ_CHUNK = 64 * 1024, /* body buffers grow by what has arrived, not by what is announced */
  LISTEN_PAUSE_MS = 100, /* after EMFILE: stop accepting for a moment instead of spinning */
};

typedef struct conn conn_t;
struct conn {
  int fd;
  bool dead; /* closed; freed at the end of the current batch of events */
  bool greeted; /* a valid hello was received */
  uint32_t events; /* current epoll interest */
  char peer[64];
  /* The frame being received. */
  uint8_t head[STORE_HEADER_SIZE];
  size_t head_have;
  bool have_header;
  store_header_t header;
  uint8_t *body;
  size_t body_have, body_cap;
  store_scan_t scan;
  int64_t last_byte_ns; /* progress of an unfinished frame; 0: between frames */
  store_arg_t *args; /* the complete request */
  /* A parked get/wait. */
  bool parked;
  int64_t park_deadline_ns;
  int64_t park_start_ns;
  conn_t *park_prev, *park_next;
  /* Reply bytes not yet written. */
  uint8_t *out;
  size_t out_len, out_off;
  conn_t *prev, *next; /* every live connection; graveyard link once dead */
};

struct store_server {
  int listen_fd;
  int epoll_fd;
  int wake_fd;
  uint16_t port;
  char *token; /* NULL: none required */
  size_t token_len;
  store_limits_t limits;
  int max_clients;
  int frame_timeout_ms;
  pthread_t thread;
  bool thread_started;
  atomic_bool stop;
  atomic_int client_count;
  /* Owned by the server thread once it runs. */
  store_table_t table;
  conn_t *conns;
  conn_t *parked;
  conn_t *graveyard;
  bool listen_paused;
  int64_t listen_resume_ns;
};

/* Distinct addresses for the two non-client entries of the epoll set. */
static const char listen_marker, wake_marker;

/* ---- connection bookkeeping ---- */

static void set_interest(store_server_t *s, conn_t *c) {
  if (c->dead) return;
  bool out_pending = c->out_off < c->out_len;
  uint32_t want = EPOLLRDHUP | (out_pending ? EPOLLOUT : 0);
  if (!c->parked && !out_pending) want |= EPOLLIN;
  if (want == c->events) return;
  struct epoll_event ev = {.events = want, .data.ptr = c};
  if (epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = want;
}

static void unpark(store_server_t *s, conn_t *c) {
  if (!c->parked) return;
  if (c->park_prev != NULL) c->park_prev->park_next = c->park_next;
  else s->parked = c->park_next;
  if (c->park_next != NULL) c->park_next->park_prev = c->park_prev;
  c->park_prev = c->park_next = NULL;
  c->parked = false;
}

static void reset_frame(conn_t *c) {
  free(c->body);
  free(c->args);
  c->body = NULL;
  c->args = NULL;
  c->body_have = c->body_cap = 0;
  c->head_have = 0;
  c->have_header = false;
  c->scan = (store_scan_t){0};
  c->last_byte_ns = 0;
}

static void drop(store_server_t *s, conn_t *c, coll_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void drop(store_server_t *s, conn_t *c, coll_log_level_t level, const char *fmt, ...) {
  if (c->dead) return;
  if (COLL_LOG_ENABLED(level)) {
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    coll_log(level, "store server :%u: dropped client %s: %s", (unsigned)s->port, c->peer,
             reason);
  }
  epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  c->dead = true;
  unpark(s, c);
  reset_frame(c);
  free(c->out);
  c->out = NULL;
  if (c->prev != NULL) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  c->prev = NULL;
  c->next = s->graveyard;
  s->graveyard = c;
  atomic_fetch_sub(&s->client_count, 1);
}

static void bury_dead(store_server_t *s) {
  while (s->graveyard != NULL) {
    conn_t *c = s->graveyard;
    s->graveyard = c->next;
    free(c);
  }
}

/* Write what is pending; false when the connection had to be dropped. */
static bool flush(store_server_t *s, conn_t *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    drop(s, c, COLL_LOG_WARN, "sending a reply failed: %s", n < 0 ? strerror(errno) : "closed");
    return false;
  }
  if (c->out_off == c->out_len) {
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
  }
  set_interest(s, c);
  return true;
}

/* Queue one reply frame and start writing it. */
static bool reply(store_server_t *s, conn_t *c, store_reply_t code, uint8_t flags,
                  const store_arg_t *args, uint32_t nargs) {
  uint32_t lens[STORE_REPLY_ARGS_MAX];
  for (uint32_t i = 0; i < nargs; i++) lens[i] = args[i].len;
  size_t size = store_proto_frame_size(lens, nargs);
  uint8_t *buf = malloc(size);
  if (buf == NULL) {
    drop(s, c, COLL_LOG_WARN, "out of memory for a %zu-byte reply", size);
    return false;
  }
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = (uint8_t)code, .flags = flags};
  store_proto_encode(buf, &h, args, nargs);
  free(c->out);
  c->out = buf;
  c->out_len = size;
  c->out_off = 0;
  return flush(s, c);
}

static bool reply_message(store_server_t *s, conn_t *c, store_reply_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool reply_message(store_server_t *s, conn_t *c, store_reply_t code, const char *fmt,
                          ...) {
  char text[STORE_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  store_arg_t arg = {.data = (const uint8_t *)text, .len = (uint32_t)n};
  return reply(s, c, code, 0, &arg, 1);
}

/* Tell a misbehaving client why (best effort, one non-blocking send) and drop it. */
static void reject(store_server_t *s, conn_t *c, const char *why) {
  char text[256];
  int n = snprintf(text, sizeof text, "store server dropped this connection: %s", why);
  store_arg_t arg = {.data = (const uint8_t *)text, .len = (uint32_t)n};
  uint8_t frame[STORE_HEADER_SIZE + 4 + sizeof text];
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_REPLY_PROTOCOL};
  size_t size = store_proto_encode(frame, &h, &arg, 1);
  ssize_t sent = send(c->fd, frame, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)sent;
  if (c->have_header) {
    drop(s, c, COLL_LOG_WARN, "%s (in a %s frame, %zu of %u body bytes received)", why,
         store_op_name(c->header.code), c->body_have, (unsigned)c->header.body_len);
  } else {
    drop(s, c, COLL_LOG_WARN, "%s (in a frame header)", why);
  }
}

/* ---- requests ---- */

static store_arg_t key_arg(const conn_t *c, uint32_t i) { return c->args[i]; }

static store_entry_t *find(store_server_t *s, store_arg_t key) {
  return store_table_find(&s->table, key.data, key.len);
}

/* First key of a parked wait that is still missing, and how many are. */
static uint32_t missing_keys(store_server_t *s, const conn_t *c, uint32_t *first) {
  uint32_t missing = 0;
  for (uint32_t i = 0; i < c->header.nargs; i++) {
    if (find(s, key_arg(c, i)) != NULL) continue;
    if (missing == 0) *first = i;
    missing++;
  }
  return missing;
}

/* Answer a get/wait whose keys all exist; false when the connection was dropped. */
static bool answer_ready(store_server_t *s, conn_t *c) {
  bool ok;
  if (c->header.code == STORE_OP_GET) {
    store_entry_t *e = find(s, key_arg(c, 0));
    store_arg_t value = {.data = e->value, .len = (uint32_t)e->value_len};
    ok = reply(s, c, STORE_REPLY_OK, 0, &value, 1);
  } else {
    ok = reply(s, c, STORE_REPLY_OK, 0, NULL, 0);
  }
  if (ok) reset_frame(c);
  return ok;
}

static void park(store_server_t *s, conn_t *c) {
  int64_t now = coll_now_ns();
  c->parked = true;
  c->park_start_ns = now;
  c->park_deadline_ns = now + (int64_t)c->header.timeout_ms * 1000000LL;
  c->park_prev = NULL;
  c->park_next = s->parked;
  if (s->parked != NULL) s->parked->park_prev = c;
  s->parked = c;
  set_interest(s, c);
}

static void answer_timeout(store_server_t *s, conn_t *c) {
  uint32_t first = 0;
  uint32_t missing = missing_keys(s, c, &first);
  store_arg_t key = key_arg(c, first);
  int shown = key.len > 200 ? 200 : (int)key.len;
  unpark(s, c);
  bool ok = reply_message(s, c, STORE_REPLY_TIMEOUT, "%u of %u keys still missing, first '%.*s'",
                          (unsigned)missing, (unsigned)c->header.nargs, shown,
                          (const char *)key.data);
  if (ok) reset_frame(c);
}

/* A key was created: answer every parked request that no longer has to wait. */
static void key_appeared(store_server_t *s, const uint8_t *key, size_t key_len) {
  conn_t *c = s->parked;
  while (c != NULL) {
    conn_t *next = c->park_next;
    bool mentions = false;
    for (uint32_t i = 0; i < c->header.nargs && !mentions; i++) {
      store_arg_t k = key_arg(c, i);
      mentions = k.len == key_len && memcmp(k.data, key, key_len) == 0;
    }
    uint32_t first;
    if (mentions && missing_keys(s, c, &first) == 0) {
      unpark(s, c);
      answer_ready(s, c);
    }
    c = next;
  }
}

static bool parse_counter(const store_entry_t *e, int64_t *value) {
  char text[32];
  if (e->value_len == 0 || e->value_len >= sizeof text) return false;
  memcpy(text, e->value, e->value_len);
  text[e->value_len] = '\0';
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text) return false;
  *value = v;
  return true;
}

static void op_add(store_server_t *s, conn_t *c) {
  store_arg_t key = key_arg(c, 0);
  int64_t delta = store_get_i64(c->args[1].data);
  int64_t value = 0;
  store_entry_t *e = find(s, key);
  int shown = key.len > 200 ? 200 : (int)key.len;
  if (e != NULL && !parse_counter(e, &value)) {
    reply_message(s, c, STORE_REPLY_INVALID, "add: the value of key '%.*s' is not an integer",
                  shown, (const char *)key.data);
    return;
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    reply_message(s, c, STORE_REPLY_INVALID, "add: counter '%.*s' would overflow", shown,
                  (const char *)key.data);
    return;
  }
  char text[32];
  int n = snprintf(text, sizeof text, "%lld", (long long)value);
  if (store_table_put(&s->table, key.data, key.len, (const uint8_t *)text, (size_t)n) == NULL) {
    reply_message(s, c, STORE_REPLY_INVALID, "add: store server out of memory");
    return;
  }
  uint8_t raw[8];
  store_put_i64(raw, value);
  store_arg_t result = {.data = raw, .len = 8};
  /* Waiters first: the key lives in c's frame, which a failed reply would free. */
  if (e == NULL) key_appeared(s, key.data, key.len);
  reply(s, c, STORE_REPLY_OK, 0, &result, 1);
}

static void op_compare_set(store_server_t *s, conn_t *c) {
  store_arg_t key = key_arg(c, 0), expected = c->args[1], desired = c->args[2];
  store_entry_t *e = find(s, key);
  bool want_absent = (c->header.flags & STORE_FLAG_ABSENT) != 0;
  bool match = want_absent ? e == NULL
                           : e != NULL && e->value_len == expected.len &&
                                 (expected.len == 0 || memcmp(e->value, expected.data, expected.len) == 0);
  if (match) {
    e = store_table_put(&s->table, key.data, key.len, desired.data, desired.len);
    if (e == NULL) {
      reply_message(s, c, STORE_REPLY_INVALID, "compare_set: store server out of memory");
      return;
    }
    if (want_absent) key_appeared(s, key.data, key.len);
    reply(s, c, STORE_REPLY_OK, 0, &desired, 1);
    return;
  }
  if (e == NULL) {
    store_arg_t none = {.data = NULL, .len = 0};
    reply(s, c, STORE_REPLY_OK, STORE_FLAG_ABSENT, &none, 1);
    return;
  }
  store_arg_t current = {.data = e->value, .len = (uint32_t)e->value_len};
  reply(s, c, STORE_REPLY_OK, 0, &current, 1);
}

static void op_hello(store_server_t *s, conn_t *c) {
  store_arg_t token = c->args[0];
  if (s->token != NULL &&
      (token.len != s->token_len || memcmp(token.data, s->token, s->token_len) != 0)) {
    const char *why = token.len == 0 ? "this store requires a job token and none was sent"
                                     : "job token mismatch";
    reply_message(s, c, STORE_REPLY_REFUSED, "%s", why);
    drop(s, c, COLL_LOG_WARN, "refused: %s", why);
    return;
  }
  c->greeted = true;
  uint8_t raw[8];
  store_put_u32(raw, s->limits.key_max);
  store_put_u32(raw + 4, s->limits.value_max);
  store_arg_t limits = {.data = raw, .len = 8};
  reply(s, c, STORE_REPLY_OK, 0, &limits, 1);
}

/* Serve the complete request in c->args. */
static void serve(store_server_t *s, conn_t *c) {
  store_arg_t key = c->header.nargs > 0 ? key_arg(c, 0) : (store_arg_t){0};
  switch ((store_op_t)c->header.code) {
    case STORE_OP_HELLO:
      op_hello(s, c);
      break;
    case STORE_OP_SET: {
      bool existed = find(s, key) != NULL;
      if (store_table_put(&s->table, key.data, key.len, c->args[1].data, c->args[1].len) == NULL) {
        reply_message(s, c, STORE_REPLY_INVALID, "set: store server out of memory");
        break;
      }
      if (!existed) key_appeared(s, key.data, key.len);
      reply(s, c, STORE_REPLY_OK, 0, NULL, 0);
      break;
    }
    case STORE_OP_GET:
    case STORE_OP_WAIT: {
      uint32_t first;
      if (missing_keys(s, c, &first) == 0) {
        answer_ready(s, c);
        return; /* answer_ready reset the frame */
      }
      park(s, c);
      if (c->header.timeout_ms == 0) answer_timeout(s, c);
      return; /* the frame stays until the request is answered */
    }
    case STORE_OP_ADD:
      op_add(s, c);
      break;
    case STORE_OP_COMPARE_SET:
      op_compare_set(s, c);
      break;
    case STORE_OP_DELETE: {
      uint8_t deleted = store_table_delete(&s->table, key.data, key.len) ? 1 : 0;
      store_arg_t result = {.data = &deleted, .len = 1};
      reply(s, c, STORE_REPLY_OK, 0, &result, 1);
      break;
    }
    case STORE_OP_NUM_KEYS: {
      uint8_t raw[8];
      store_put_i64(raw, (int64_t)s->table.count);
      store_arg_t result = {.data = raw, .len = 8};
      reply(s, c, STORE_REPLY_OK, 0, &result, 1);
      break;
    }
    case STORE_OP_CHECK: {
      uint32_t first;
      uint8_t all = missing_keys(s, c, &first) == 0 ? 1 : 0;
      store_arg_t result = {.data = &all, .len = 1};
      reply(s, c, STORE_REPLY_OK, 0, &result, 1);
      break;
    }
    case STORE_OP_END:
      break; /* the parser never lets it through */
  }
  if (!c->dead) reset_frame(c);
}

/* ---- reading ---- */

/* The peer closed (or reset) the connection: say in what state it left its frame. */
static void closed_by_peer(store_server_t *s, conn_t *c, bool reset) {
  const char *how = reset ? "vanished (connection reset)" : "closed";
  if (c->parked) {
    drop(s, c, COLL_LOG_INFO, "%s while waiting in %s", how, store_op_name(c->header.code));
  } else if (c->have_header) {
    drop(s, c, COLL_LOG_WARN, "%s mid-frame: %zu of %u body bytes of a %s frame received", how,
         c->body_have, (unsigned)c->header.body_len, store_op_name(c->header.code));
  } else if (c->head_have > 0) {
    drop(s, c, COLL_LOG_WARN, "%s mid-frame: %zu of %u header bytes received", how,
         c->head_have, STORE_HEADER_SIZE);
  } else {
    drop(s, c, reset ? COLL_LOG_WARN : COLL_LOG_INFO, "%s the connection", how);
  }
}

/* recv into buf; > 0 bytes read, 0 when nothing is there now, -1 when c was dropped. */
static ssize_t receive(store_server_t *s, conn_t *c, void *buf, size_t len) {
  for (;;) {
    ssize_t n = recv(c->fd, buf, len, 0);
    if (n > 0) {
      c->last_byte_ns = coll_now_ns();
      return n;
    }
    if (n == 0 || errno == ECONNRESET) {
      closed_by_peer(s, c, n != 0);
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    drop(s, c, COLL_LOG_WARN, "receive failed: %s", strerror(errno));
    return -1;
  }
}

/* Read the header; false when nothing more can be done now. */
static bool read_header(store_server_t *s, conn_t *c) {
  ssize_t n = receive(s, c, c->head + c->head_have, STORE_HEADER_SIZE - c->head_have);
  if (n <= 0) return false;
  c->head_have += (size_t)n;
  const char *why = NULL;
  store_parse_t rc = store_proto_header(c->head, c->head_have, false, &s->limits, &c->header, &why);
  if (rc == STORE_PARSE_BAD) {
    reject(s, c, why);
    return false;
  }
  if (rc == STORE_PARSE_NEED_MORE) return true;
  if (!c->greeted && c->header.code != STORE_OP_HELLO) {
    reject(s, c, "the first frame must be a hello");
    return false;
  }
  if (c->greeted && c->header.code == STORE_OP_HELLO) {
    reject(s, c, "a second hello on one connection");
    return false;
  }
  c->have_header = true;
  c->args = malloc(sizeof *c->args * (c->header.nargs > 0 ? c->header.nargs : 1));
  if (c->args == NULL) {
    drop(s, c, COLL_LOG_WARN, "out of memory for %u arguments", (unsigned)c->header.nargs);
    return false;
  }
  return true;
}

/* Read body bytes and check them as they come; false when nothing more can be done now. */
static bool read_body(store_server_t *s, conn_t *c) {
  size_t body_len = c->header.body_len;
  if (c->body_have < body_len) {
    if (c->body_have == c->body_cap) {
      size_t cap = c->body_cap * 2;
      if (cap < c->body_have + READ_CHUNK) cap = c->body_have + READ_CHUNK;
      if (cap > body_len) cap = body_len;
      uint8_t *grown = realloc(c->body, cap);
      if (grown == NULL) {
        drop(s, c, COLL_LOG_WARN, "out of memory for a %zu-byte body", body_len);
        return false;
      }
      c->body = grown;
      c->body_cap = cap;
    }
    ssize_t n = receive(s, c, c->body + c->body_have, c->body_cap - c->body_have);
    if (n <= 0) return false;
    c->body_have += (size_t)n;
  }
  const char *why = NULL;
  store_parse_t rc = store_proto_body(&c->header, false, c->body, c->body_have, &s->limits,
                                      &c->scan, NULL, &why);
  if (rc == STORE_PARSE_BAD) {
    reject(s, c, why);
    return false;
  }
  if (rc == STORE_PARSE_NEED_MORE) return true;
  store_scan_t fresh = {0};
  store_proto_body(&c->header, false, c->body, c->body_have, &s->limits, &fresh, c->args, &why);
  c->last_byte_ns = 0;
  serve(s, c);
  return !c->dead;
}

static void read_frames(store_server_t *s, conn_t *c) {
  int frames = 0;
  while (!c->dead && !c->parked && c->out_off == c->out_len && frames < FRAMES_PER_EVENT) {
    bool more = c->have_header ? read_body(s, c) : read_header(s, c);
    if (!more) return;
    if (!c->have_header && c->head_have == 0) frames++;
  }
}

/* ---- accepting ---- */

static void accept_clients(store_server_t *s) {
  for (;;) {
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    int fd = accept4(s->listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        coll_log(COLL_LOG_WARN, "store server :%u: cannot accept more clients now: %s",
                 (unsigned)s->port, strerror(errno));
        epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL);
        s->listen_paused = true;
        s->listen_resume_ns = coll_now_ns() + LISTEN_PAUSE_MS * 1000000LL;
      }
      return;
    }
    char peer[64];
    store_net_format_addr((struct sockaddr *)&addr, len, peer, sizeof peer);
    if (atomic_load(&s->client_count) >= s->max_clients) {
      coll_log(COLL_LOG_WARN, "store server :%u: refused client %s: already %d clients",
               (unsigned)s->port, peer, s->max_clients);
      close(fd);
      continue;
    }
    conn_t *c = calloc(1, sizeof *c);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    if (c == NULL || epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      coll_log(COLL_LOG_WARN, "store server :%u: cannot take client %s: %s", (unsigned)s->port,
               peer, c == NULL ? "out of memory" : strerror(errno));
      free(c);
      close(fd);
      continue;
    }
    store_net_tune(fd);
    c->fd = fd;
    c->events = ev.events;
    memcpy(c->peer, peer, sizeof peer);
    c->next = s->conns;
    if (s->conns != NULL) s->conns->prev = c;
    s->conns = c;
    atomic_fetch_add(&s->client_count, 1);
    coll_log(COLL_LOG_TRACE, "store server :%u: client %s connected", (unsigned)s->port, peer);
  }
}

/* ---- timers ---- */

/* Expire parked requests and stalled frames; return ms until the next timer (-1: none). */
static int run_timers(store_server_t *s) {
  int64_t now = coll_now_ns();
  int64_t next = INT64_MAX;
  if (s->listen_paused) {
    if (now >= s->listen_resume_ns) {
      struct epoll_event ev = {.events = EPOLLIN, .data.ptr = (void *)&listen_marker};
      if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0) s->listen_paused = false;
      else s->listen_resume_ns = now + LISTEN_PAUSE_MS * 1000000LL;
    }
    if (s->listen_paused) next = s->listen_resume_ns;
  }
  for (conn_t *c = s->parked, *n; c != NULL; c = n) {
    n = c->park_next;
    if (now >= c->park_deadline_ns) answer_timeout(s, c);
    else if (c->park_deadline_ns < next) next = c->park_deadline_ns;
  }
  int64_t stall_ns = (int64_t)s->frame_timeout_ms * 1000000LL;
  for (conn_t *c = s->conns, *n; c != NULL; c = n) {
    n = c->next;
    if (c->last_byte_ns == 0 || c->parked) continue;
    int64_t limit = c->last_byte_ns + stall_ns;
    if (now >= limit) {
      size_t have = c->have_header ? STORE_HEADER_SIZE + c->body_have : c->head_have;
      drop(s, c, COLL_LOG_WARN, "sent %zu bytes of a frame, then nothing for %d ms", have,
           s->frame_timeout_ms);
    } else if (limit < next) {
      next = limit;
    }
  }
  if (next == INT64_MAX) return -1;
  return coll_ms_left(next);
}

static void *server_main(void *arg) {
  store_server_t *s = arg;
  struct epoll_event events[EVENTS_PER_WAIT];
  while (!atomic_load(&s->stop)) {
    int timeout = run_timers(s);
    bury_dead(s);
    int n = epoll_wait(s->epoll_fd, events, EVENTS_PER_WAIT, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      coll_log(COLL_LOG_WARN, "store server :%u: epoll_wait failed: %s", (unsigned)s->port,
               strerror(errno));
      break;
    }
    for (int i = 0; i < n; i++) {
      void *ptr = events[i].data.ptr;
      if (ptr == &listen_marker) {
        accept_clients(s);
        continue;
      }
      if (ptr == &wake_marker) continue; /* the stop flag is checked by the loop */
      conn_t *c = ptr;
      uint32_t ev = events[i].events;
      if (c->dead) continue;
      if (ev & EPOLLOUT) flush(s, c);
      if (!c->dead && (ev & EPOLLIN)) read_frames(s, c);
      if (!c->dead && (ev & EPOLLERR)) {
        int so_error = 0;
        socklen_t len = sizeof so_error;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error == 0 || so_error == ECONNRESET) closed_by_peer(s, c, true);
        else drop(s, c, COLL_LOG_WARN, "socket error: %s", strerror(so_error));
      }
      /* A hangup while we are not reading (parked, or a reply pending) is noticed here;
       * while reading, recv() reports it with the exact state of the frame. */
      if (!c->dead && (ev & (EPOLLHUP | EPOLLRDHUP)) && !(c->events & EPOLLIN))
        closed_by_peer(s, c, (ev & EPOLLERR) != 0);
    }
    bury_dead(s);
  }
  return NULL;
}

/* ---- lifetime ---- */

/* Up to the hard limit: a store serving thousands of ranks needs more than the usual 1024. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static void free_server(store_server_t *s) {
  while (s->conns != NULL) drop(s, s->conns, COLL_LOG_TRACE, "server stopping");
  bury_dead(s);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->epoll_fd >= 0) close(s->epoll_fd);
  if (s->wake_fd >= 0) close(s->wake_fd);
  store_table_free(&s->table);
  free(s->token);
  free(s);
}

coll_status_t store_server_start(const store_server_options_t *options, store_server_t **server) {
  if (server == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_server_start: server is NULL");
  *server = NULL;
  store_server_options_t opt = options != NULL ? *options : (store_server_options_t){0};
  size_t key_max = opt.key_max != 0 ? opt.key_max : STORE_KEY_MAX;
  size_t value_max = opt.value_max != 0 ? opt.value_max : STORE_VALUE_MAX;
  if (key_max > STORE_KEYLIST_BODY_MAX || value_max > UINT32_MAX / 4)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "store_server_start: limits too large (key_max %zu, value_max %zu)", key_max,
                      value_max);
  if (opt.max_clients < 0 || opt.frame_timeout_ms < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "store_server_start: negative max_clients or frame_timeout_ms");
  if (opt.token != NULL && strlen(opt.token) > STORE_TOKEN_MAX)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_server_start: token longer than %u bytes",
                      STORE_TOKEN_MAX);
  raise_nofile();

  store_server_t *s = calloc(1, sizeof *s);
  if (s == NULL) return coll_error(COLL_ERR_NO_MEMORY, "store_server_start: out of memory");
  s->listen_fd = s->epoll_fd = s->wake_fd = -1;
  s->limits = (store_limits_t){.key_max = (uint32_t)key_max, .value_max = (uint32_t)value_max};
  s->max_clients = opt.max_clients != 0 ? opt.max_clients : DEFAULT_MAX_CLIENTS;
  s->frame_timeout_ms = opt.frame_timeout_ms != 0 ? opt.frame_timeout_ms : DEFAULT_FRAME_TIMEOUT_MS;
  atomic_init(&s->stop, false);
  atomic_init(&s->client_count, 0);
  coll_status_t st = COLL_OK;
  if (opt.token != NULL && opt.token[0] != '\0') {
    s->token = strdup(opt.token);
    s->token_len = strlen(opt.token);
    if (s->token == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "store_server_start: out of memory");
      goto fail;
    }
  }
  if (!store_table_init(&s->table)) {
    st = coll_error(COLL_ERR_NO_MEMORY, "store_server_start: out of memory");
    goto fail;
  }
  st = store_net_listen(opt.bind_addr, opt.port, &s->listen_fd, &s->port);
  if (st != COLL_OK) goto fail;
  s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->epoll_fd < 0 || s->wake_fd < 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "store server: epoll_create1/eventfd");
    goto fail;
  }
  struct epoll_event lev = {.events = EPOLLIN, .data.ptr = (void *)&listen_marker};
  struct epoll_event wev = {.events = EPOLLIN, .data.ptr = (void *)&wake_marker};
  if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &lev) != 0 ||
      epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->wake_fd, &wev) != 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "store server: epoll_ctl");
    goto fail;
  }
  int err = pthread_create(&s->thread, NULL, server_main, s);
  if (err != 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, err, "store server: pthread_create");
    goto fail;
  }
  s->thread_started = true;
  coll_log(COLL_LOG_INFO, "store server listening on %s:%u%s",
           opt.bind_addr != NULL ? opt.bind_addr : "0.0.0.0", (unsigned)s->port,
           s->token != NULL ? " (job token required)" : "");
  *server = s;
  return COLL_OK;
fail:
  free_server(s);
  return st;
}

uint16_t store_server_port(const store_server_t *server) {
  return server != NULL ? server->port : 0;
}

int store_server_client_count(store_server_t *server) {
  return server != NULL ? atomic_load(&server->client_count) : 0;
}

void store_server_stop(store_server_t *server) {
  if (server == NULL) return;
  if (server->thread_started) {
    atomic_store(&server->stop, true);
    uint64_t one = 1;
    ssize_t w = write(server->wake_fd, &one, sizeof one);
    (void)w;
    pthread_join(server->thread, NULL);
  }
  free_server(server);
}
