/* Helpers of the store test suites (see store_test_util.h). */
#include "store_test_util.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

store_server_t *util_start_server(const store_server_options_t *opt) {
  store_server_options_t o = opt != NULL ? *opt : (store_server_options_t){0};
  if (o.bind_addr == NULL) o.bind_addr = "127.0.0.1";
  store_server_t *server = NULL;
  coll_status_t st = store_server_start(&o, &server);
  ck_assert_msg(st == COLL_OK, "store_server_start: %s", coll_last_error());
  ck_assert_uint_ne(store_server_port(server), 0);
  return server;
}

store_client_t *util_connect(store_server_t *server, const char *token) {
  store_client_t *client = NULL;
  coll_status_t st =
      store_client_connect("127.0.0.1", store_server_port(server), token, 5000, &client);
  ck_assert_msg(st == COLL_OK, "store_client_connect: %s", coll_last_error());
  return client;
}

int util_raw_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_msg(connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0, "connect: %s",
                strerror(errno));
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void util_raw_send(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    ck_assert_msg(n > 0, "send: %s", strerror(errno));
    p += n;
    len -= (size_t)n;
  }
}

size_t util_frame(uint8_t *out, uint8_t op, uint8_t flags, uint32_t timeout_ms,
                  const char *const *args, uint32_t nargs) {
  store_arg_t views[8];
  ck_assert_uint_le(nargs, 8);
  for (uint32_t i = 0; i < nargs; i++) {
    const char *a = args[i] != NULL ? args[i] : "";
    views[i] = (store_arg_t){.data = (const uint8_t *)a, .len = (uint32_t)strlen(a)};
  }
  store_header_t h = {
      .version = STORE_PROTO_VERSION, .code = op, .flags = flags, .timeout_ms = timeout_ms};
  return store_proto_encode(out, &h, views, nargs);
}

static bool recv_exact(int fd, void *buf, size_t len) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}

bool util_raw_reply(int fd, store_header_t *header) {
  uint8_t head[STORE_HEADER_SIZE];
  if (!recv_exact(fd, head, sizeof head)) return false;
  store_limits_t limits = {.key_max = STORE_KEY_MAX, .value_max = STORE_VALUE_MAX};
  if (store_proto_header(head, sizeof head, true, &limits, header, NULL) != STORE_PARSE_OK)
    return false;
  uint8_t skip[4096];
  size_t left = header->body_len;
  while (left > 0) {
    size_t n = left < sizeof skip ? left : sizeof skip;
    if (!recv_exact(fd, skip, n)) return false;
    left -= n;
  }
  return true;
}

void util_raw_hello(int fd, const char *token) {
  uint8_t frame[2048];
  const char *args[1] = {token};
  size_t n = util_frame(frame, STORE_OP_HELLO, 0, 0, args, 1);
  util_raw_send(fd, frame, n);
  store_header_t h;
  ck_assert_msg(util_raw_reply(fd, &h), "no hello reply");
  ck_assert_uint_eq(h.code, STORE_REPLY_OK);
}

bool util_raw_closed(int fd, int timeout_ms) {
  int64_t deadline = coll_deadline_ns(timeout_ms);
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int left = coll_ms_left(deadline);
    if (poll(&p, 1, left) <= 0) return false;
    uint8_t buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return errno == ECONNRESET;
  }
}

bool util_wait_clients(store_server_t *server, int expected, int timeout_ms) {
  int64_t deadline = coll_deadline_ns(timeout_ms);
  while (store_server_client_count(server) != expected) {
    if (coll_ms_left(deadline) == 0) return false;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return true;
}

store_server_t *the_server;
store_client_t *the_client;

void util_open_store(void) {
  the_server = util_start_server(NULL);
  the_client = util_connect(the_server, NULL);
}

void util_close_store(void) {
  store_client_close(the_client);
  store_server_stop(the_server);
}
