/* libcoll's own store, the client side: one TCP connection, one request at a time, every
 * call bounded by its deadline. After a failed transfer the connection is closed and the
 * next call reconnects, so a late reply can never be mistaken for the answer to a later
 * request. It is one implementation of the store interface (store_tcp_ops, at the end;
 * store.c is what the rest of libcoll calls). */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/store_tcp.h"
#include "bootstrap/store_net.h"
#include "bootstrap/store_proto.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

enum {
  DEFAULT_TIMEOUT_MS = 30000,
  RETRY_FIRST_MS = 10,
  RETRY_MAX_MS = 500,
  SUBJECT_MAX = 320,
};

struct tcp_store {
  int fd; /* -1 between a failed call and the next one; set and closed under fd_mu */
  pthread_mutex_t fd_mu; /* so that store_client_interrupt never shuts a reused fd */
  atomic_bool interrupted;
  char *host;
  uint16_t port;
  char *token;
  store_limits_t limits; /* the server's, from its hello reply */
  char address[300];
};

/* A parsed reply; body owns the bytes the arguments point into. */
typedef struct {
  store_header_t header;
  uint8_t *body;
  store_arg_t args[STORE_REPLY_ARGS_MAX];
} reply_t;

/* What a call is about, for its messages: "set", "key 'rank/0/addr'". */
typedef struct {
  const char *op;
  char subject[SUBJECT_MAX];
  int timeout_ms;
} call_t;

static int effective_timeout(int timeout_ms) {
  return timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
}

static void format_duration(int ms, char *out, size_t size) {
  if (ms % 1000 == 0)
    snprintf(out, size, "%d s", ms / 1000);
  else
    snprintf(out, size, "%d ms", ms);
}

static void subject_key(call_t *call, const char *key) {
  snprintf(call->subject, sizeof call->subject, "key '%.256s'", key);
}

static void subject_keys(call_t *call, const char *const *keys, size_t nkeys) {
  size_t off = (size_t)snprintf(call->subject, sizeof call->subject, nkeys == 1 ? "key " : "keys ");
  size_t shown = 0;
  for (; shown < nkeys && off < 200; shown++) {
    int n = snprintf(call->subject + off, sizeof call->subject - off, "%s'%.64s'",
                     shown > 0 ? ", " : "", keys[shown] != NULL ? keys[shown] : "(null)");
    if (n < 0) break;
    off += (size_t)n;
  }
  if (shown < nkeys && off < sizeof call->subject)
    snprintf(call->subject + off, sizeof call->subject - off, " (+%zu more)", nkeys - shown);
}

static coll_status_t call_error(const tcp_store_t *c, const call_t *call, coll_status_t st,
                                const char *problem) {
  return coll_error(st, "%s: waiting for store at %s for %s: %s", call->op, c->address,
                    call->subject, problem);
}

static coll_status_t call_timeout(const tcp_store_t *c, const call_t *call,
                                  const char *server_note) {
  char took[32];
  format_duration(call->timeout_ms, took, sizeof took);
  char problem[1200];
  snprintf(problem, sizeof problem, "timed out after %s%s%s%s", took,
           server_note != NULL ? " (server: " : "", server_note != NULL ? server_note : "",
           server_note != NULL ? ")" : "");
  return call_error(c, call, COLL_ERR_TIMEOUT, problem);
}

static void disconnect(tcp_store_t *c) {
  pthread_mutex_lock(&c->fd_mu);
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  pthread_mutex_unlock(&c->fd_mu);
}

/* Adopt a new connection, unless the client was interrupted meanwhile. */
static bool adopt(tcp_store_t *c, int fd) {
  pthread_mutex_lock(&c->fd_mu);
  bool ok = !atomic_load(&c->interrupted);
  if (ok)
    c->fd = fd;
  else
    close(fd);
  pthread_mutex_unlock(&c->fd_mu);
  return ok;
}

static coll_status_t interrupted_error(const tcp_store_t *c) {
  return coll_error(COLL_ERR_ABORTED, "store client of %s: interrupted", c->address);
}

/* A transfer failed: the connection is in an unknown state, so drop it. */
static coll_status_t transfer_error(tcp_store_t *c, const call_t *call, store_net_result_t r,
                                    int err, const char *doing) {
  disconnect(c);
  if (r == NET_TIMEOUT) return call_timeout(c, call, NULL);
  char problem[256];
  if (r == NET_CLOSED)
    snprintf(problem, sizeof problem, "connection closed by the server while %s", doing);
  else
    snprintf(problem, sizeof problem, "%s failed: %s", doing, strerror(err));
  return call_error(c, call, COLL_ERR_REMOTE, problem);
}

/* Receive one reply frame and parse it. */
static coll_status_t read_reply(tcp_store_t *c, const call_t *call, int64_t deadline_ns,
                                reply_t *rep) {
  uint8_t head[STORE_HEADER_SIZE];
  int err = 0;
  store_net_result_t r = store_net_recv_all(c->fd, head, sizeof head, deadline_ns, &err);
  if (r != NET_DONE) return transfer_error(c, call, r, err, "receiving the reply");
  const char *why = "malformed reply";
  if (store_proto_header(head, sizeof head, true, &c->limits, &rep->header, &why) !=
      STORE_PARSE_OK) {
    disconnect(c);
    return call_error(c, call, COLL_ERR_PROTOCOL, why);
  }
  rep->body = malloc(rep->header.body_len > 0 ? rep->header.body_len : 1);
  if (rep->body == NULL) {
    disconnect(c);
    return call_error(c, call, COLL_ERR_NO_MEMORY, "out of memory for the reply");
  }
  r = store_net_recv_all(c->fd, rep->body, rep->header.body_len, deadline_ns, &err);
  if (r != NET_DONE) {
    free(rep->body);
    rep->body = NULL;
    return transfer_error(c, call, r, err, "receiving the reply");
  }
  store_scan_t scan = {0};
  if (store_proto_body(&rep->header, true, rep->body, rep->header.body_len, &c->limits, &scan,
                       rep->args, &why) != STORE_PARSE_OK) {
    free(rep->body);
    rep->body = NULL;
    disconnect(c);
    return call_error(c, call, COLL_ERR_PROTOCOL, why);
  }
  return COLL_OK;
}

/* The text of an error reply's message argument. */
static void reply_text(const reply_t *rep, char *out, size_t size) {
  size_t n = rep->header.nargs > 0 ? rep->args[0].len : 0;
  if (n >= size) n = size - 1;
  if (n > 0) memcpy(out, rep->args[0].data, n);
  out[n] = '\0';
}

/* Send one request and read its reply. On OK the reply status was OK and rep->body must be
 * freed; a non-OK reply becomes a status with the server's message. */
static coll_status_t roundtrip(tcp_store_t *c, const call_t *call, int64_t deadline_ns,
                               store_header_t *h, const store_arg_t *args, uint32_t nargs,
                               reply_t *rep);

static coll_status_t hello(tcp_store_t *c, int64_t deadline_ns, int timeout_ms) {
  call_t call = {.op = "connect", .timeout_ms = timeout_ms};
  snprintf(call.subject, sizeof call.subject, "the hello reply");
  size_t token_len = c->token != NULL ? strlen(c->token) : 0;
  store_arg_t token = {.data = (const uint8_t *)c->token, .len = (uint32_t)token_len};
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_OP_HELLO};
  /* Until the server says otherwise, accept replies within the default limits. */
  c->limits = (store_limits_t){.key_max = STORE_KEY_MAX, .value_max = STORE_VALUE_MAX};
  reply_t rep = {0};
  coll_status_t st = roundtrip(c, &call, deadline_ns, &h, &token, 1, &rep);
  if (st != COLL_OK) return st;
  if (rep.header.nargs != 1 || rep.args[0].len != 8) {
    free(rep.body);
    disconnect(c);
    return call_error(c, &call, COLL_ERR_PROTOCOL, "hello reply without the server's limits");
  }
  c->limits.key_max = store_get_u32(rep.args[0].data);
  c->limits.value_max = store_get_u32(rep.args[0].data + 4);
  free(rep.body);
  return COLL_OK;
}

/* Connect and greet, retrying refused or failed attempts until the deadline: the server
 * may come up after its clients. A refused token is final. */
static coll_status_t reconnect(tcp_store_t *c, int64_t deadline_ns, int timeout_ms) {
  int backoff_ms = RETRY_FIRST_MS;
  char last[512] = "no attempt finished";
  for (;;) {
    if (atomic_load(&c->interrupted)) return interrupted_error(c);
    int err = 0;
    int fd = store_net_connect_once(c->host, c->port, deadline_ns, &err);
    if (fd >= 0) {
      if (!adopt(c, fd)) return interrupted_error(c);
      coll_status_t st = hello(c, deadline_ns, timeout_ms);
      if (st == COLL_OK) return st;
      disconnect(c);
      if (st == COLL_ERR_REFUSED) return st;
      /* An attempt cut short by the deadline says less than the failure before it. */
      if (st != COLL_ERR_TIMEOUT || strcmp(last, "no attempt finished") == 0)
        snprintf(last, sizeof last, "%s", coll_last_error());
    } else if (err == EMFILE && store_net_raise_nofile()) {
      continue;
    } else {
      snprintf(last, sizeof last, "%s", err < 0 ? gai_strerror(-err) : strerror(err));
    }
    int left = coll_ms_left(deadline_ns);
    if (left == 0) {
      char took[32];
      format_duration(timeout_ms, took, sizeof took);
      return coll_error(COLL_ERR_TIMEOUT,
                        "connecting to store at %s: timed out after %s (last attempt: %s)",
                        c->address, took, last);
    }
    int pause = backoff_ms < left ? backoff_ms : left;
    struct timespec ts = {.tv_sec = pause / 1000, .tv_nsec = (long)(pause % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    backoff_ms = backoff_ms * 2 < RETRY_MAX_MS ? backoff_ms * 2 : RETRY_MAX_MS;
  }
}

static coll_status_t roundtrip(tcp_store_t *c, const call_t *call, int64_t deadline_ns,
                               store_header_t *h, const store_arg_t *args, uint32_t nargs,
                               reply_t *rep) {
  if (c->fd < 0 && h->code != STORE_OP_HELLO) {
    coll_status_t st = reconnect(c, deadline_ns, call->timeout_ms);
    if (st != COLL_OK) return coll_error_prefix(st, "%s of %s: ", call->op, call->subject);
  }
  uint32_t lens[4];
  uint32_t *lenp = nargs <= 4 ? lens : malloc(sizeof *lenp * nargs);
  if (lenp == NULL) return call_error(c, call, COLL_ERR_NO_MEMORY, "out of memory");
  for (uint32_t i = 0; i < nargs; i++) lenp[i] = args[i].len;
  size_t size = store_proto_frame_size(lenp, nargs);
  if (lenp != lens) free(lenp);
  uint8_t *frame = malloc(size);
  if (frame == NULL) return call_error(c, call, COLL_ERR_NO_MEMORY, "out of memory");
  store_proto_encode(frame, h, args, nargs);
  int err = 0;
  store_net_result_t r = store_net_send_all(c->fd, frame, size, deadline_ns, &err);
  free(frame);
  if (r != NET_DONE) return transfer_error(c, call, r, err, "sending the request");
  coll_status_t st = read_reply(c, call, deadline_ns, rep);
  if (st != COLL_OK) return st;
  if (rep->header.code == STORE_REPLY_OK) return COLL_OK;
  char text[STORE_MESSAGE_MAX + 1];
  reply_text(rep, text, sizeof text);
  store_reply_t code = rep->header.code;
  free(rep->body);
  rep->body = NULL;
  switch (code) {
    case STORE_REPLY_TIMEOUT:
      /* For several keys the server's note says which one is still missing. */
      return call_timeout(c, call, strncmp(call->subject, "keys ", 5) == 0 ? text : NULL);
    case STORE_REPLY_REFUSED:
      disconnect(c);
      return coll_error(COLL_ERR_REFUSED,
                        "store at %s refused this client: %s (every rank and the launcher must "
                        "use the same job token, COLL_JOB_TOKEN)",
                        c->address, text);
    case STORE_REPLY_INVALID:
      return call_error(c, call, COLL_ERR_INVALID_ARGUMENT, text);
    default:
      disconnect(c);
      return call_error(c, call, COLL_ERR_PROTOCOL, text);
  }
}

/* ---- the calls ---- */

static void tcp_store_close(tcp_store_t *client);


coll_status_t tcp_store_connect(const char *host, uint16_t port, const char *token,
                                   int timeout_ms, tcp_store_t **client) {
  if (client == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_client_connect: client is NULL");
  *client = NULL;
  if (host == NULL || host[0] == '\0' || port == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "store_client_connect: need a host and a port (got '%s':%u)",
                      host != NULL ? host : "(null)", (unsigned)port);
  if (token != NULL && strlen(token) > STORE_TOKEN_MAX)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_client_connect: token longer than %u bytes",
                      STORE_TOKEN_MAX);
  tcp_store_t *c = calloc(1, sizeof *c);
  if (c == NULL) return coll_error(COLL_ERR_NO_MEMORY, "store_client_connect: out of memory");
  c->fd = -1;
  pthread_mutex_init(&c->fd_mu, NULL);
  atomic_init(&c->interrupted, false);
  c->port = port;
  c->host = strdup(host);
  c->token = token != NULL && token[0] != '\0' ? strdup(token) : NULL;
  if (c->host == NULL || (token != NULL && token[0] != '\0' && c->token == NULL)) {
    tcp_store_close(c);
    return coll_error(COLL_ERR_NO_MEMORY, "store_client_connect: out of memory");
  }
  if (strchr(host, ':') != NULL)
    snprintf(c->address, sizeof c->address, "[%.256s]:%u", host, (unsigned)port);
  else
    snprintf(c->address, sizeof c->address, "%.256s:%u", host, (unsigned)port);
  int ms = effective_timeout(timeout_ms);
  coll_status_t st = reconnect(c, coll_deadline_ns(ms), ms);
  if (st != COLL_OK) {
    tcp_store_close(c);
    return st;
  }
  coll_log(COLL_LOG_TRACE, "store client connected to %s", c->address);
  *client = c;
  return COLL_OK;
}

static void tcp_store_close(tcp_store_t *client) {
  if (client == NULL) return;
  disconnect(client);
  pthread_mutex_destroy(&client->fd_mu);
  free(client->host);
  free(client->token);
  free(client);
}

static void tcp_store_interrupt(tcp_store_t *client) {
  if (client == NULL) return;
  pthread_mutex_lock(&client->fd_mu);
  atomic_store(&client->interrupted, true);
  if (client->fd >= 0) shutdown(client->fd, SHUT_RDWR);
  pthread_mutex_unlock(&client->fd_mu);
}

void tcp_store_place(const tcp_store_t *client, const char **host, uint16_t *port,
                     const char **token) {
  if (host != NULL) *host = client->host;
  if (port != NULL) *port = client->port;
  if (token != NULL) *token = client->token != NULL ? client->token : "";
}

const char *tcp_store_address(const tcp_store_t *client) {
  return client != NULL ? client->address : "(no store)";
}

/* Validate a key argument against the server's limits. */
static coll_status_t check_key(const tcp_store_t *c, const char *op, const char *key) {
  if (key == NULL || key[0] == '\0')
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: empty or NULL key", op);
  size_t len = strlen(key);
  if (len > c->limits.key_max)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: key '%.64s...' is %zu bytes, over the store's limit of %u", op, key, len,
                      (unsigned)c->limits.key_max);
  return COLL_OK;
}

static coll_status_t check_value(const tcp_store_t *c, const char *op, const char *key,
                                 const void *value, size_t len) {
  if (value == NULL && len > 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s of key '%.256s': NULL value of %zu bytes", op,
                      key, len);
  if (len > c->limits.value_max)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s of key '%.256s': value of %zu bytes over the store's limit of %u", op,
                      key, len, (unsigned)c->limits.value_max);
  return COLL_OK;
}

static store_arg_t str_arg(const char *s) {
  return (store_arg_t){.data = (const uint8_t *)s, .len = (uint32_t)strlen(s)};
}

static store_arg_t bytes_arg(const void *p, size_t len) {
  return (store_arg_t){.data = p, .len = (uint32_t)len};
}

/* The reply must carry `nargs` arguments, the first of `len0` bytes (SIZE_MAX: any). */
static coll_status_t expect(tcp_store_t *c, const call_t *call, reply_t *rep, uint32_t nargs,
                            size_t len0) {
  if (rep->header.nargs == nargs && (nargs == 0 || len0 == SIZE_MAX || rep->args[0].len == len0))
    return COLL_OK;
  free(rep->body);
  rep->body = NULL;
  disconnect(c);
  return call_error(c, call, COLL_ERR_PROTOCOL, "reply has the wrong shape for this operation");
}

static call_t start_call(const char *op, const char *key, int timeout_ms) {
  call_t call = {.op = op, .timeout_ms = effective_timeout(timeout_ms)};
  if (key != NULL) subject_key(&call, key);
  return call;
}

/* How long the server may park a get/wait: a fifth (at most 1 s) less than the client's own
 * deadline, so that the server's answer (which names the missing key) arrives before we
 * give up even on a loaded machine. */
static uint32_t park_ms(int64_t deadline_ns) {
  int left = coll_ms_left(deadline_ns);
  int margin = left / 5 < 1000 ? left / 5 : 1000;
  return (uint32_t)(left - margin);
}

static coll_status_t set_with_flags(tcp_store_t *client, const char *key, const void *value,
                                    size_t len, int timeout_ms, uint8_t flags);

static coll_status_t tcp_store_set(tcp_store_t *client, const char *key, const void *value, size_t len,
                        int timeout_ms) {
  return set_with_flags(client, key, value, len, timeout_ms, 0);
}

static coll_status_t tcp_store_set_owned(tcp_store_t *client, const char *key, const void *value,
                              size_t len, int timeout_ms) {
  return set_with_flags(client, key, value, len, timeout_ms, STORE_FLAG_OWNED);
}

static coll_status_t set_with_flags(tcp_store_t *client, const char *key, const void *value,
                                    size_t len, int timeout_ms, uint8_t flags) {
  if (client == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_set: client is NULL");
  coll_status_t st = check_key(client, "set", key);
  if (st == COLL_OK) st = check_value(client, "set", key, value, len);
  if (st != COLL_OK) return st;
  call_t call = start_call("set", key, timeout_ms);
  int64_t deadline = coll_deadline_ns(call.timeout_ms);
  store_arg_t args[2] = {str_arg(key), bytes_arg(value, len)};
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_OP_SET, .flags = flags};
  reply_t rep = {0};
  st = roundtrip(client, &call, deadline, &h, args, 2, &rep);
  if (st == COLL_OK) st = expect(client, &call, &rep, 0, 0);
  free(rep.body);
  return st;
}

static coll_status_t tcp_store_get(tcp_store_t *client, const char *key, void **value, size_t *len,
                        int timeout_ms) {
  if (client == NULL || value == NULL || len == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_get: client, value or len is NULL");
  *value = NULL;
  *len = 0;
  coll_status_t st = check_key(client, "get", key);
  if (st != COLL_OK) return st;
  call_t call = start_call("get", key, timeout_ms);
  int64_t deadline = coll_deadline_ns(call.timeout_ms);
  store_arg_t arg = str_arg(key);
  store_header_t h = {
      .version = STORE_PROTO_VERSION, .code = STORE_OP_GET, .timeout_ms = park_ms(deadline)};
  reply_t rep = {0};
  st = roundtrip(client, &call, deadline, &h, &arg, 1, &rep);
  if (st == COLL_OK) st = expect(client, &call, &rep, 1, SIZE_MAX);
  if (st != COLL_OK) return st;
  /* Hand the body itself to the caller, value moved to its start: no second copy. */
  size_t n = rep.args[0].len;
  memmove(rep.body, rep.args[0].data, n);
  *value = rep.body;
  *len = n;
  return COLL_OK;
}

static coll_status_t tcp_store_add(tcp_store_t *client, const char *key, int64_t delta, int64_t *new_value,
                        int timeout_ms) {
  if (client == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_add: client is NULL");
  coll_status_t st = check_key(client, "add", key);
  if (st != COLL_OK) return st;
  call_t call = start_call("add", key, timeout_ms);
  int64_t deadline = coll_deadline_ns(call.timeout_ms);
  uint8_t raw[8];
  store_put_i64(raw, delta);
  store_arg_t args[2] = {str_arg(key), bytes_arg(raw, 8)};
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_OP_ADD};
  reply_t rep = {0};
  st = roundtrip(client, &call, deadline, &h, args, 2, &rep);
  if (st == COLL_OK) st = expect(client, &call, &rep, 1, 8);
  if (st == COLL_OK && new_value != NULL) *new_value = store_get_i64(rep.args[0].data);
  free(rep.body);
  return st;
}

static coll_status_t tcp_store_compare_set(tcp_store_t *client, const char *key, const void *expected,
                                size_t expected_len, const void *desired, size_t desired_len,
                                void **current, size_t *current_len, int timeout_ms) {
  if (client == NULL || current == NULL || current_len == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "store_compare_set: client, current or current_len is NULL");
  *current = NULL;
  *current_len = 0;
  coll_status_t st = check_key(client, "compare_set", key);
  if (st == COLL_OK && expected != NULL)
    st = check_value(client, "compare_set", key, expected, expected_len);
  if (st == COLL_OK) st = check_value(client, "compare_set", key, desired, desired_len);
  if (st != COLL_OK) return st;
  call_t call = start_call("compare_set", key, timeout_ms);
  int64_t deadline = coll_deadline_ns(call.timeout_ms);
  store_arg_t args[3] = {str_arg(key), bytes_arg(expected, expected != NULL ? expected_len : 0),
                         bytes_arg(desired, desired_len)};
  store_header_t h = {.version = STORE_PROTO_VERSION,
                      .code = STORE_OP_COMPARE_SET,
                      .flags = expected == NULL ? STORE_FLAG_ABSENT : 0};
  reply_t rep = {0};
  st = roundtrip(client, &call, deadline, &h, args, 3, &rep);
  if (st == COLL_OK) st = expect(client, &call, &rep, 1, SIZE_MAX);
  if (st != COLL_OK) return st;
  if (rep.header.flags & STORE_FLAG_ABSENT) {
    free(rep.body);
    return COLL_OK;
  }
  size_t n = rep.args[0].len;
  memmove(rep.body, rep.args[0].data, n);
  *current = rep.body;
  *current_len = n;
  return COLL_OK;
}

/* wait and check share the key-list request. */
static coll_status_t keys_request(tcp_store_t *client, const char *op, store_op_t code,
                                  const char *const *keys, size_t nkeys, int timeout_ms,
                                  reply_t *rep, call_t *call) {
  if (nkeys > STORE_KEYS_MAX)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: %zu keys, over the limit of %u", op, nkeys,
                      STORE_KEYS_MAX);
  size_t body = 0;
  for (size_t i = 0; i < nkeys; i++) {
    coll_status_t st = check_key(client, op, keys[i]);
    if (st != COLL_OK) return st;
    body += 4 + strlen(keys[i]);
  }
  if (body > STORE_KEYLIST_BODY_MAX)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: the %zu keys take %zu bytes, over the limit of %u", op, nkeys, body,
                      STORE_KEYLIST_BODY_MAX);
  *call = start_call(op, NULL, timeout_ms);
  subject_keys(call, keys, nkeys);
  int64_t deadline = coll_deadline_ns(call->timeout_ms);
  store_arg_t *args = malloc(sizeof *args * nkeys);
  if (args == NULL) return coll_error(COLL_ERR_NO_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < nkeys; i++) args[i] = str_arg(keys[i]);
  store_header_t h = {.version = STORE_PROTO_VERSION,
                      .code = (uint8_t)code,
                      .timeout_ms = code == STORE_OP_WAIT ? park_ms(deadline) : 0};
  coll_status_t st = roundtrip(client, call, deadline, &h, args, (uint32_t)nkeys, rep);
  free(args);
  return st;
}

static coll_status_t tcp_store_wait(tcp_store_t *client, const char *const *keys, size_t nkeys,
                         int timeout_ms) {
  if (client == NULL || (keys == NULL && nkeys > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_wait: client or keys is NULL");
  if (nkeys == 0) return COLL_OK;
  reply_t rep = {0};
  call_t call;
  coll_status_t st =
      keys_request(client, "wait", STORE_OP_WAIT, keys, nkeys, timeout_ms, &rep, &call);
  if (st == COLL_OK) st = expect(client, &call, &rep, 0, 0);
  free(rep.body);
  return st;
}

static coll_status_t tcp_store_check(tcp_store_t *client, const char *const *keys, size_t nkeys,
                          bool *all_exist, int timeout_ms) {
  if (client == NULL || all_exist == NULL || (keys == NULL && nkeys > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_check: client, keys or all_exist is NULL");
  *all_exist = true;
  if (nkeys == 0) return COLL_OK;
  reply_t rep = {0};
  call_t call;
  coll_status_t st =
      keys_request(client, "check", STORE_OP_CHECK, keys, nkeys, timeout_ms, &rep, &call);
  if (st == COLL_OK) st = expect(client, &call, &rep, 1, 1);
  if (st == COLL_OK) *all_exist = rep.args[0].data[0] != 0;
  free(rep.body);
  return st;
}

static coll_status_t tcp_store_delete(tcp_store_t *client, const char *key, bool *deleted, int timeout_ms) {
  if (client == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_delete: client is NULL");
  coll_status_t st = check_key(client, "delete", key);
  if (st != COLL_OK) return st;
  call_t call = start_call("delete", key, timeout_ms);
  int64_t deadline = coll_deadline_ns(call.timeout_ms);
  store_arg_t arg = str_arg(key);
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_OP_DELETE};
  reply_t rep = {0};
  st = roundtrip(client, &call, deadline, &h, &arg, 1, &rep);
  if (st == COLL_OK) st = expect(client, &call, &rep, 1, 1);
  if (st == COLL_OK && deleted != NULL) *deleted = rep.args[0].data[0] != 0;
  free(rep.body);
  return st;
}

coll_status_t tcp_store_num_keys(tcp_store_t *client, int64_t *count, int timeout_ms) {
  if (client == NULL || count == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_num_keys: client or count is NULL");
  call_t call = start_call("num_keys", NULL, timeout_ms);
  snprintf(call.subject, sizeof call.subject, "the number of keys");
  int64_t deadline = coll_deadline_ns(call.timeout_ms);
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_OP_NUM_KEYS};
  reply_t rep = {0};
  coll_status_t st = roundtrip(client, &call, deadline, &h, NULL, 0, &rep);
  if (st == COLL_OK) st = expect(client, &call, &rep, 1, 8);
  if (st == COLL_OK) *count = store_get_i64(rep.args[0].data);
  free(rep.body);
  return st;
}

/* ---- as the store interface (coll.h's coll_store_ops_t) ---- */

static coll_status_t ops_set(void *store, const char *key, const void *value, size_t len,
                             int timeout_ms) {
  return tcp_store_set(store, key, value, len, timeout_ms);
}

static coll_status_t ops_set_owned(void *store, const char *key, const void *value, size_t len,
                                   int timeout_ms) {
  return tcp_store_set_owned(store, key, value, len, timeout_ms);
}

static coll_status_t ops_get(void *store, const char *key, void **value, size_t *len,
                             int timeout_ms) {
  return tcp_store_get(store, key, value, len, timeout_ms);
}

static coll_status_t ops_add(void *store, const char *key, int64_t delta, int64_t *new_value,
                             int timeout_ms) {
  return tcp_store_add(store, key, delta, new_value, timeout_ms);
}

static coll_status_t ops_compare_set(void *store, const char *key, const void *expected,
                                     size_t expected_len, const void *desired, size_t desired_len,
                                     void **current, size_t *current_len, int timeout_ms) {
  return tcp_store_compare_set(store, key, expected, expected_len, desired, desired_len, current,
                               current_len, timeout_ms);
}

static coll_status_t ops_check(void *store, const char *const *keys, size_t nkeys, int *all_exist,
                               int timeout_ms) {
  bool all = false;
  coll_status_t st = tcp_store_check(store, keys, nkeys, &all, timeout_ms);
  *all_exist = all;
  return st;
}

static coll_status_t ops_delete(void *store, const char *key, int *deleted, int timeout_ms) {
  bool d = false;
  coll_status_t st = tcp_store_delete(store, key, &d, timeout_ms);
  if (deleted != NULL) *deleted = d;
  return st;
}

static coll_status_t ops_wait(void *store, const char *const *keys, size_t nkeys, int timeout_ms) {
  return tcp_store_wait(store, keys, nkeys, timeout_ms);
}

static coll_status_t ops_num_keys(void *store, int64_t *count, int timeout_ms) {
  return tcp_store_num_keys(store, count, timeout_ms);
}

/* Another connection to the same server, with the same token. */
static coll_status_t ops_clone(void *store, int timeout_ms, void **copy) {
  const tcp_store_t *c = store;
  tcp_store_t *out = NULL;
  coll_status_t st = tcp_store_connect(c->host, c->port, c->token, timeout_ms, &out);
  *copy = out;
  return st;
}

static void ops_release(void *store) { tcp_store_close(store); }

static void ops_interrupt(void *store) { tcp_store_interrupt(store); }

static const char *ops_describe(void *store) { return tcp_store_address(store); }

const coll_store_ops_t store_tcp_ops = {
    .version = COLL_STORE_OPS_VERSION,
    .set = ops_set,
    .get = ops_get,
    .add = ops_add,
    .compare_set = ops_compare_set,
    .check = ops_check,
    .delete_key = ops_delete,
    .clone = ops_clone,
    .release = ops_release,
    .set_owned = ops_set_owned,
    .interrupt = ops_interrupt,
    .describe = ops_describe,
    .wait = ops_wait,
    .num_keys = ops_num_keys,
};
