/* The server against broken peers: malformed, truncated, oversized and half-sent frames and
 * clients that vanish mid-frame. Each case checks that the bad client is dropped, that a
 * well-behaved client keeps being served, and that the client count returns to normal. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "bootstrap/store_proto.h"
#include "common/clock.h"
#include "store_test_util.h"
#include "suite_run.h"

/* A server plus one well-behaved client that stays connected through the test. */
typedef struct {
  store_server_t *server;
  store_client_t *good;
  uint16_t port;
} fixture_t;

static fixture_t setup(int frame_timeout_ms) {
  store_server_options_t opt = {.frame_timeout_ms = frame_timeout_ms};
  fixture_t f = {.server = util_start_server(&opt)};
  f.port = store_server_port(f.server);
  f.good = util_connect(f.server, NULL);
  ck_assert(util_wait_clients(f.server, 1, 2000));
  return f;
}

/* The good client still works, and only it is connected. */
static void assert_served_and_alone(fixture_t *f) {
  int64_t v = 0;
  coll_status_t st = store_add(f->good, "still-served", 1, &v, 2000);
  ck_assert_msg(st == COLL_OK, "good client: %s", coll_last_error());
  ck_assert_msg(util_wait_clients(f->server, 1, 3000), "client count is %d, want 1",
                store_server_client_count(f->server));
}

static void teardown(fixture_t *f) {
  store_client_close(f->good);
  store_server_stop(f->server);
}

static void header_bytes(uint8_t *out, uint8_t version, uint8_t op, uint8_t flags, uint32_t nargs,
                         uint32_t body_len) {
  memset(out, 0, STORE_HEADER_SIZE);
  out[0] = version;
  out[1] = op;
  out[2] = flags;
  store_put_u32(out + 4, nargs);
  store_put_u32(out + 12, body_len);
}

/* Send bytes after a proper hello and expect the server to hang up on us. */
static void assert_dropped_after(fixture_t *f, const void *bytes, size_t len, bool greet) {
  int fd = util_raw_connect(f->port);
  if (greet) util_raw_hello(fd, NULL);
  util_raw_send(fd, bytes, len);
  ck_assert_msg(util_raw_closed(fd, 3000), "server did not drop the client");
  close(fd);
  assert_served_and_alone(f);
}

START_TEST(bad_version_byte_drops_only_that_client) {
  fixture_t f = setup(0);
  uint8_t h[STORE_HEADER_SIZE];
  header_bytes(h, 2, STORE_OP_GET, 0, 1, 5);
  assert_dropped_after(&f, h, sizeof h, true);
  assert_dropped_after(&f, "GET / HTTP/1.1\r\n\r\n", 18, false); /* a stray HTTP client */
  teardown(&f);
}
END_TEST

START_TEST(unknown_operation_drops_only_that_client) {
  fixture_t f = setup(0);
  uint8_t h[STORE_HEADER_SIZE];
  header_bytes(h, STORE_PROTO_VERSION, 200, 0, 0, 0);
  assert_dropped_after(&f, h, sizeof h, true);
  header_bytes(h, STORE_PROTO_VERSION, 0, 0, 0, 0);
  assert_dropped_after(&f, h, sizeof h, true);
  teardown(&f);
}
END_TEST

START_TEST(a_reply_explains_why_the_client_was_dropped) {
  fixture_t f = setup(0);
  int fd = util_raw_connect(f.port);
  util_raw_hello(fd, NULL);
  uint8_t h[STORE_HEADER_SIZE];
  header_bytes(h, STORE_PROTO_VERSION, 77, 0, 0, 0);
  util_raw_send(fd, h, sizeof h);
  store_header_t reply;
  ck_assert(util_raw_reply(fd, &reply));
  ck_assert_uint_eq(reply.code, STORE_REPLY_PROTOCOL);
  ck_assert(util_raw_closed(fd, 3000));
  close(fd);
  assert_served_and_alone(&f);
  teardown(&f);
}
END_TEST

START_TEST(requests_before_hello_and_bad_headers_are_refused) {
  fixture_t f = setup(0);
  uint8_t frame[256];
  const char *args[] = {"k", "v"};
  size_t n = util_frame(frame, STORE_OP_SET, 0, 0, args, 2);
  assert_dropped_after(&f, frame, n, false); /* no hello first */
  n = util_frame(frame, STORE_OP_SET, 0x80, 0, args, 2);
  assert_dropped_after(&f, frame, n, true); /* unknown flag */
  n = util_frame(frame, STORE_OP_SET, 0, 0, args, 1);
  assert_dropped_after(&f, frame, n, true); /* wrong argument count */
  n = util_frame(frame, STORE_OP_SET, 0, 0, args, 2);
  frame[3] = 1;
  assert_dropped_after(&f, frame, n, true); /* reserved byte set */
  n = util_frame(frame, STORE_OP_SET, 0, 0, args, 2);
  store_put_u32(frame + 12, store_get_u32(frame + 12) + 3); /* body longer than its args */
  memcpy(frame + n, "xyz", 3);
  assert_dropped_after(&f, frame, n + 3, true);
  teardown(&f);
}
END_TEST

START_TEST(oversized_key_is_refused_as_soon_as_its_length_arrives) {
  fixture_t f = setup(0);
  /* Header of a set whose body could hold it, then only the key's length prefix. */
  uint8_t frame[STORE_HEADER_SIZE + 4];
  header_bytes(frame, STORE_PROTO_VERSION, STORE_OP_SET, 0, 2, 4 + 5000 + 4 + 10);
  store_put_u32(frame + STORE_HEADER_SIZE, 5000);
  assert_dropped_after(&f, frame, sizeof frame, true);
  /* A get whose body alone is longer than any key. */
  header_bytes(frame, STORE_PROTO_VERSION, STORE_OP_GET, 0, 1, 4 + STORE_KEY_MAX + 1);
  assert_dropped_after(&f, frame, STORE_HEADER_SIZE, true);
  teardown(&f);
}
END_TEST

START_TEST(oversized_value_length_is_refused_without_reading_the_value) {
  fixture_t f = setup(0);
  /* Body length over the limit: refused on the header. */
  uint8_t frame[STORE_HEADER_SIZE + 16];
  header_bytes(frame, STORE_PROTO_VERSION, STORE_OP_SET, 0, 2, 0xFFFFFFF0u);
  assert_dropped_after(&f, frame, STORE_HEADER_SIZE, true);
  /* Body length within the limit, value length one past it: refused on the prefix. */
  header_bytes(frame, STORE_PROTO_VERSION, STORE_OP_SET, 0, 2, 4 + 1 + 4 + STORE_VALUE_MAX + 1);
  store_put_u32(frame + STORE_HEADER_SIZE, 1);
  frame[STORE_HEADER_SIZE + 4] = 'k';
  store_put_u32(frame + STORE_HEADER_SIZE + 5, STORE_VALUE_MAX + 1);
  assert_dropped_after(&f, frame, STORE_HEADER_SIZE + 9, true);
  /* A frame with too many keys for a wait. */
  header_bytes(frame, STORE_PROTO_VERSION, STORE_OP_WAIT, 0, STORE_KEYS_MAX + 1, 1u << 20);
  assert_dropped_after(&f, frame, STORE_HEADER_SIZE, true);
  teardown(&f);
}
END_TEST

START_TEST(truncated_frame_then_close_leaves_the_server_serving) {
  fixture_t f = setup(0);
  uint8_t frame[256];
  const char *args[] = {"some/key", "some value"};
  size_t n = util_frame(frame, STORE_OP_SET, 0, 0, args, 2);
  size_t cuts[] = {1, 7, STORE_HEADER_SIZE, STORE_HEADER_SIZE + 2, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    int fd = util_raw_connect(f.port);
    util_raw_hello(fd, NULL);
    util_raw_send(fd, frame, cuts[i]);
    close(fd);
    assert_served_and_alone(&f);
  }
  /* Nothing of the truncated sets was stored. */
  bool exists = true;
  const char *keys[] = {"some/key"};
  ck_assert_int_eq(store_check(f.good, keys, 1, &exists, 1000), COLL_OK);
  ck_assert(!exists);
  teardown(&f);
}
END_TEST

START_TEST(half_sent_frame_then_silence_does_not_stall_others_and_times_out) {
  fixture_t f = setup(3000);
  uint8_t frame[256];
  const char *args[] = {"k", "a value that never fully arrives"};
  size_t n = util_frame(frame, STORE_OP_SET, 0, 0, args, 2);
  int fd = util_raw_connect(f.port);
  util_raw_hello(fd, NULL);
  util_raw_send(fd, frame, n / 2);
  ck_assert(util_wait_clients(f.server, 2, 2000));
  /* While the silent client holds half a frame, the good one is served promptly. */
  int64_t start = coll_now_ms();
  for (int i = 0; i < 200; i++) {
    int64_t v = 0;
    ck_assert_int_eq(store_add(f.good, "busy", 1, &v, 2000), COLL_OK);
    ck_assert_int_eq(v, i + 1);
  }
  /* A server stalled on the silent client would take the 3 s frame timeout first. */
  ck_assert_int_lt(coll_now_ms() - start, 2000);
  /* Then the server gives up on the silent one after its frame timeout. */
  ck_assert_msg(util_raw_closed(fd, 8000), "silent client was not dropped");
  close(fd);
  assert_served_and_alone(&f);
  teardown(&f);
}
END_TEST

START_TEST(client_that_never_reads_its_reply_is_dropped_after_the_frame_timeout) {
  fixture_t f = setup(500);
  /* A reply far larger than the socket buffers, so the server cannot finish writing it. */
  size_t len = 32u << 20;
  uint8_t *big = calloc(1, len);
  ck_assert_int_eq(store_set(f.good, "big", big, len, 10000), COLL_OK);
  free(big);
  int fd = util_raw_connect(f.port);
  util_raw_hello(fd, NULL);
  uint8_t frame[64];
  const char *args[] = {"big"};
  util_raw_send(fd, frame, util_frame(frame, STORE_OP_GET, 0, 1000, args, 1));
  ck_assert(util_wait_clients(f.server, 2, 2000));
  int64_t v = 0;
  ck_assert_int_eq(store_add(f.good, "meanwhile", 1, &v, 2000), COLL_OK);
  ck_assert_msg(util_wait_clients(f.server, 1, 5000), "non-reading client was not dropped");
  close(fd);
  assert_served_and_alone(&f);
  teardown(&f);
}
END_TEST

START_TEST(client_that_connects_but_never_says_hello_is_dropped) {
  fixture_t f = setup(300);
  int fd = util_raw_connect(f.port);
  ck_assert(util_wait_clients(f.server, 2, 2000));
  ck_assert_msg(util_raw_closed(fd, 3000), "silent new client was not dropped");
  close(fd);
  assert_served_and_alone(&f);
  teardown(&f);
}
END_TEST

/* Runs in a forked child: greet, send part of a large set, vanish with a reset. */
static void vanish_mid_frame(uint16_t port) {
  int fd = util_raw_connect(port);
  util_raw_hello(fd, NULL);
  uint8_t frame[STORE_HEADER_SIZE + 4 + 3 + 4 + 1000];
  header_bytes(frame, STORE_PROTO_VERSION, STORE_OP_SET, 0, 2, 4 + 3 + 4 + 1000000);
  store_put_u32(frame + STORE_HEADER_SIZE, 3);
  memcpy(frame + STORE_HEADER_SIZE + 4, "big", 3);
  store_put_u32(frame + STORE_HEADER_SIZE + 7, 1000000);
  memset(frame + STORE_HEADER_SIZE + 11, 'x', 1000);
  util_raw_send(fd, frame, sizeof frame);
  struct linger hard = {.l_onoff = 1, .l_linger = 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  _exit(0); /* the kernel closes the socket with a reset */
}

START_TEST(client_vanishing_mid_frame_is_dropped_and_forgotten) {
  fixture_t f = setup(0);
  for (int round = 0; round < 3; round++) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) vanish_mid_frame(f.port);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    assert_served_and_alone(&f);
  }
  /* A process killed while parked in a get is forgotten too. */
  pid_t pid = fork();
  if (pid == 0) {
    store_client_t *c = NULL;
    if (store_client_connect("127.0.0.1", f.port, NULL, 2000, &c) != COLL_OK) _exit(1);
    void *v;
    size_t len;
    store_get(c, "never-set", &v, &len, 20000);
    _exit(2);
  }
  ck_assert(util_wait_clients(f.server, 2, 3000));
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  assert_served_and_alone(&f);
  teardown(&f);
}
END_TEST

START_TEST(garbage_from_many_clients_leaves_the_good_one_served) {
  fixture_t f = setup(300);
  unsigned seed = 12345;
  for (int i = 0; i < 200; i++) {
    int fd = util_raw_connect(f.port);
    if (i % 2 == 0) util_raw_hello(fd, NULL);
    uint8_t junk[64];
    size_t n = 1 + (size_t)(rand_r(&seed) % sizeof junk);
    for (size_t k = 0; k < n; k++) junk[k] = (uint8_t)rand_r(&seed);
    if (i % 3 == 0) junk[0] = STORE_PROTO_VERSION; /* get past the version check sometimes */
    util_raw_send(fd, junk, n);
    close(fd);
  }
  assert_served_and_alone(&f);
  int64_t v = 0;
  ck_assert_int_eq(store_add(f.good, "still-served", 0, &v, 1000), COLL_OK);
  ck_assert_int_eq(v, 1);
  teardown(&f);
}
END_TEST

SUITE_MAIN("store_frames",
           suite_tests("frames", 30, bad_version_byte_drops_only_that_client,
                       unknown_operation_drops_only_that_client,
                       a_reply_explains_why_the_client_was_dropped,
                       requests_before_hello_and_bad_headers_are_refused,
                       oversized_key_is_refused_as_soon_as_its_length_arrives,
                       oversized_value_length_is_refused_without_reading_the_value,
                       truncated_frame_then_close_leaves_the_server_serving,
                       half_sent_frame_then_silence_does_not_stall_others_and_times_out,
                       client_that_never_reads_its_reply_is_dropped_after_the_frame_timeout,
                       client_that_connects_but_never_says_hello_is_dropped,
                       client_vanishing_mid_frame_is_dropped_and_forgotten,
                       garbage_from_many_clients_leaves_the_good_one_served))
