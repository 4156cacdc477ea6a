/* The store server's I/O and lifetime: one thread, one epoll set, every client a
 * non-blocking socket read one frame at a time (store_requests.c says what requests mean).
 * A client that breaks the protocol is dropped with a logged reason; nobody else notices. */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store_net.h"
#include "bootstrap/store_server_internal.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

enum {
  DEFAULT_MAX_CLIENTS = 16384,
  DEFAULT_FRAME_TIMEOUT_MS = 30000,
  EVENTS_PER_WAIT = 256,
  FRAMES_PER_EVENT = 16,  /* then let other clients have a turn */
  READ_CHUNK = 64 * 1024, /* body buffers grow by what has arrived, not by what is announced */
  LISTEN_PAUSE_MS = 100,  /* after EMFILE: stop accepting for a moment instead of spinning */
};

/* Distinct addresses for the two non-client entries of the epoll set. */
static const char listen_marker, wake_marker;

/* ---- connection bookkeeping ---- */

void store_conn_set_interest(store_server_t *s, conn_t *c) {
  if (c->dead) return;
  bool out_pending = c->out_off < c->out_len;
  uint32_t want = EPOLLRDHUP | (out_pending ? EPOLLOUT : 0);
  if (!c->parked && !out_pending) want |= EPOLLIN;
  if (want == c->events) return;
  struct epoll_event ev = {.events = want, .data.ptr = c};
  if (epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = want;
}

void store_conn_unpark(store_server_t *s, conn_t *c) {
  if (!c->parked) return;
  if (c->park_prev != NULL)
    c->park_prev->park_next = c->park_next;
  else
    s->parked = c->park_next;
  if (c->park_next != NULL) c->park_next->park_prev = c->park_prev;
  c->park_prev = c->park_next = NULL;
  c->parked = false;
}

void store_conn_reset_frame(conn_t *c) {
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

void store_conn_drop(store_server_t *s, conn_t *c, coll_log_level_t level, const char *fmt, ...) {
  if (c->dead) return;
  if (COLL_LOG_ENABLED(level)) {
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    coll_log(level, "store server :%u: dropped client %s: %s", (unsigned)s->port, c->peer, reason);
  }
  epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  c->dead = true;
  store_conn_forget_owned(s, c);
  store_conn_unpark(s, c);
  store_conn_reset_frame(c);
  free(c->out);
  c->out = NULL;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    s->conns = c->next;
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
      c->last_write_ns = coll_now_ns();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    store_conn_drop(s, c, COLL_LOG_WARN, "sending a reply failed: %s",
                    n < 0 ? strerror(errno) : "closed");
    return false;
  }
  if (c->out_off == c->out_len) {
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
  }
  store_conn_set_interest(s, c);
  return true;
}

/* Queue one reply frame and start writing it. */
bool store_conn_reply(store_server_t *s, conn_t *c, store_reply_t code, uint8_t flags,
                      const store_arg_t *args, uint32_t nargs) {
  uint32_t lens[STORE_REPLY_ARGS_MAX];
  for (uint32_t i = 0; i < nargs; i++) lens[i] = args[i].len;
  size_t size = store_proto_frame_size(lens, nargs);
  uint8_t *buf = malloc(size);
  if (buf == NULL) {
    store_conn_drop(s, c, COLL_LOG_WARN, "out of memory for a %zu-byte reply", size);
    return false;
  }
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = (uint8_t)code, .flags = flags};
  store_proto_encode(buf, &h, args, nargs);
  free(c->out);
  c->out = buf;
  c->out_len = size;
  c->out_off = 0;
  c->last_write_ns = coll_now_ns();
  return flush(s, c);
}

bool store_conn_reply_message(store_server_t *s, conn_t *c, store_reply_t code, const char *fmt,
                              ...) {
  char text[STORE_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  store_arg_t arg = {.data = (const uint8_t *)text, .len = (uint32_t)n};
  return store_conn_reply(s, c, code, 0, &arg, 1);
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
    store_conn_drop(s, c, COLL_LOG_WARN, "%s (in a %s frame, %zu of %u body bytes received)", why,
                    store_op_name(c->header.code), c->body_have, (unsigned)c->header.body_len);
  } else {
    store_conn_drop(s, c, COLL_LOG_WARN, "%s (in a frame header)", why);
  }
}

/* ---- reading ---- */

/* The peer closed (or reset) the connection: say in what state it left its frame. */
static void closed_by_peer(store_server_t *s, conn_t *c, bool reset) {
  const char *how = reset ? "vanished (connection reset)" : "closed";
  if (c->parked) {
    store_conn_drop(s, c, COLL_LOG_INFO, "%s while waiting in %s", how,
                    store_op_name(c->header.code));
  } else if (c->have_header) {
    store_conn_drop(s, c, COLL_LOG_WARN,
                    "%s mid-frame: %zu of %u body bytes of a %s frame received", how, c->body_have,
                    (unsigned)c->header.body_len, store_op_name(c->header.code));
  } else if (c->head_have > 0) {
    store_conn_drop(s, c, COLL_LOG_WARN, "%s mid-frame: %zu of %u header bytes received", how,
                    c->head_have, STORE_HEADER_SIZE);
  } else {
    store_conn_drop(s, c, reset ? COLL_LOG_WARN : COLL_LOG_INFO, "%s the connection", how);
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
    store_conn_drop(s, c, COLL_LOG_WARN, "receive failed: %s", strerror(errno));
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
    store_conn_drop(s, c, COLL_LOG_WARN, "out of memory for %u arguments",
                    (unsigned)c->header.nargs);
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
        store_conn_drop(s, c, COLL_LOG_WARN, "out of memory for a %zu-byte body", body_len);
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
  store_parse_t rc =
      store_proto_body(&c->header, false, c->body, c->body_have, &s->limits, &c->scan, NULL, &why);
  if (rc == STORE_PARSE_BAD) {
    reject(s, c, why);
    return false;
  }
  if (rc == STORE_PARSE_NEED_MORE) return true;
  store_scan_t fresh = {0};
  store_proto_body(&c->header, false, c->body, c->body_have, &s->limits, &fresh, c->args, &why);
  c->last_byte_ns = 0;
  store_serve(s, c);
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
    c->last_byte_ns = coll_now_ns(); /* the hello is due within the frame timeout */
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
      if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0)
        s->listen_paused = false;
      else
        s->listen_resume_ns = now + LISTEN_PAUSE_MS * 1000000LL;
    }
    if (s->listen_paused) next = s->listen_resume_ns;
  }
  for (conn_t *c = s->parked, *n; c != NULL; c = n) {
    n = c->park_next;
    if (now >= c->park_deadline_ns)
      store_serve_timeout(s, c);
    else if (c->park_deadline_ns < next)
      next = c->park_deadline_ns;
  }
  int64_t stall_ns = (int64_t)s->frame_timeout_ms * 1000000LL;
  for (conn_t *c = s->conns, *n; c != NULL; c = n) {
    n = c->next;
    /* Stalled halfway through sending a frame, or through reading our reply: both hold
     * buffers, so neither may last forever. */
    bool writing = c->out_off < c->out_len;
    if ((c->last_byte_ns == 0 || c->parked) && !writing) continue;
    int64_t limit = (writing ? c->last_write_ns : c->last_byte_ns) + stall_ns;
    if (now >= limit && writing) {
      store_conn_drop(s, c, COLL_LOG_WARN,
                      "read %zu of the %zu bytes of its reply, then nothing for %d ms", c->out_off,
                      c->out_len, s->frame_timeout_ms);
    } else if (now >= limit && !c->greeted && c->head_have == 0) {
      store_conn_drop(s, c, COLL_LOG_WARN, "connected but sent no hello for %d ms",
                      s->frame_timeout_ms);
    } else if (now >= limit) {
      size_t have = c->have_header ? STORE_HEADER_SIZE + c->body_have : c->head_have;
      store_conn_drop(s, c, COLL_LOG_WARN, "sent %zu bytes of a frame, then nothing for %d ms",
                      have, s->frame_timeout_ms);
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
        if (so_error == 0 || so_error == ECONNRESET)
          closed_by_peer(s, c, true);
        else
          store_conn_drop(s, c, COLL_LOG_WARN, "socket error: %s", strerror(so_error));
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

static void free_server(store_server_t *s) {
  while (s->conns != NULL) store_conn_drop(s, s->conns, COLL_LOG_TRACE, "server stopping");
  bury_dead(s);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->epoll_fd >= 0) close(s->epoll_fd);
  if (s->wake_fd >= 0) close(s->wake_fd);
  store_table_free(&s->table);
  free(s->token);
  free(s);
}

coll_status_t store_server_start(const store_server_options_t *options, store_server_t **server) {
  if (server == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_server_start: server is NULL");
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
  store_net_raise_nofile(); /* a store serving thousands of ranks needs more than 1024 */

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
