/* Store operations end to end: a real server thread, real clients over loopback, and real
 * rank processes meeting through it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/store.h"
#include "common/clock.h"
#include "multiproc.h"
#include "store_test_util.h"
#include "suite_run.h"

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void assert_value(store_client_t *c, const char *key, const void *want, size_t want_len) {
  void *got = NULL;
  size_t len = 0;
  coll_status_t st = store_get(c, key, &got, &len, 2000);
  ck_assert_msg(st == COLL_OK, "get %s: %s", key, coll_last_error());
  ck_assert_uint_eq(len, want_len);
  if (want_len > 0) ck_assert_mem_eq(got, want, want_len);
  free(got);
}

START_TEST(set_then_get_returns_the_same_bytes) {
  const uint8_t binary[] = {0, 1, 2, 0, 255, 'x', 0};
  ck_assert_int_eq(store_set(the_client, "bin", binary, sizeof binary, 1000), COLL_OK);
  ck_assert_int_eq(store_set(the_client, "empty", NULL, 0, 1000), COLL_OK);
  ck_assert_int_eq(store_set(the_client, "text", "hello", 5, 1000), COLL_OK);
  ck_assert_int_eq(store_set(the_client, "text", "bye", 3, 1000), COLL_OK); /* overwrite */
  assert_value(the_client, "bin", binary, sizeof binary);
  assert_value(the_client, "empty", NULL, 0);
  assert_value(the_client, "text", "bye", 3);
}
END_TEST

START_TEST(large_values_travel_intact) {
  size_t len = 8u << 20;
  uint8_t *big = malloc(len);
  for (size_t i = 0; i < len; i++) big[i] = (uint8_t)(i * 131u + (i >> 13));
  ck_assert_int_eq(store_set(the_client, "big", big, len, 10000), COLL_OK);
  assert_value(the_client, "big", big, len);
  free(big);
}
END_TEST

typedef struct {
  uint16_t port;
  int delay_ms;
  const char *key;
} setter_arg_t;

static void *set_later(void *p) {
  setter_arg_t *a = p;
  sleep_ms(a->delay_ms);
  store_client_t *c = NULL;
  if (store_client_connect("127.0.0.1", a->port, NULL, 5000, &c) == COLL_OK) {
    store_set(c, a->key, "late", 4, 5000);
    store_client_close(c);
  }
  return NULL;
}

START_TEST(get_waits_until_another_client_sets_the_key) {
  setter_arg_t arg = {.port = store_server_port(the_server), .delay_ms = 200, .key = "rank/1/addr"};
  pthread_t t;
  pthread_create(&t, NULL, set_later, &arg);
  int64_t start = coll_now_ms();
  void *v = NULL;
  size_t len = 0;
  coll_status_t st = store_get(the_client, "rank/1/addr", &v, &len, 5000);
  int64_t took = coll_now_ms() - start;
  pthread_join(t, NULL);
  ck_assert_msg(st == COLL_OK, "%s", coll_last_error());
  ck_assert_uint_eq(len, 4);
  ck_assert_mem_eq(v, "late", 4);
  ck_assert_int_ge(took, 150);
  free(v);
}
END_TEST

START_TEST(get_of_a_missing_key_times_out_naming_the_key_and_the_store) {
  int64_t start = coll_now_ms();
  void *v = NULL;
  size_t len = 0;
  coll_status_t st = store_get(the_client, "rank/5/addr", &v, &len, 400);
  int64_t took = coll_now_ms() - start;
  ck_assert_int_eq(st, COLL_ERR_TIMEOUT);
  ck_assert_ptr_null(v);
  ck_assert_int_ge(took, 300);
  ck_assert_int_le(took, 1500);
  char want[128];
  snprintf(want, sizeof want,
           "waiting for store at 127.0.0.1:%u for key 'rank/5/addr': timed out after 400 ms",
           (unsigned)store_server_port(the_server));
  ck_assert_msg(strstr(coll_last_error(), want) != NULL, "message: %s", coll_last_error());
  /* The connection stays usable after a timeout answered by the the_server. */
  ck_assert_int_eq(store_set(the_client, "after", "1", 1, 1000), COLL_OK);
}
END_TEST

START_TEST(add_counts_from_zero_and_returns_the_new_value) {
  int64_t v = 0;
  ck_assert_int_eq(store_add(the_client, "n", 5, &v, 1000), COLL_OK);
  ck_assert_int_eq(v, 5);
  ck_assert_int_eq(store_add(the_client, "n", -7, &v, 1000), COLL_OK);
  ck_assert_int_eq(v, -2);
  assert_value(the_client, "n", "-2", 2); /* counters are decimal text */
  ck_assert_int_eq(store_set(the_client, "word", "abc", 3, 1000), COLL_OK);
  ck_assert_int_eq(store_add(the_client, "word", 1, &v, 1000), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(coll_last_error(), "not an integer") != NULL, "%s", coll_last_error());
  ck_assert_int_eq(store_set(the_client, "max", "9223372036854775807", 19, 1000), COLL_OK);
  ck_assert_int_eq(store_add(the_client, "max", 1, &v, 1000), COLL_ERR_INVALID_ARGUMENT);
  /* The connection is still good after refused requests. */
  ck_assert_int_eq(store_add(the_client, "n", 2, &v, 1000), COLL_OK);
  ck_assert_int_eq(v, 0);
}
END_TEST

START_TEST(compare_set_swaps_only_when_the_expected_value_matches) {
  void *cur = NULL;
  size_t len = 0;
  /* Expected absent, key absent: set. */
  ck_assert_int_eq(store_compare_set(the_client, "k", NULL, 0, "one", 3, &cur, &len, 1000),
                   COLL_OK);
  ck_assert_uint_eq(len, 3);
  ck_assert_mem_eq(cur, "one", 3);
  free(cur);
  /* Expected absent, key present: unchanged, current returned. */
  ck_assert_int_eq(store_compare_set(the_client, "k", NULL, 0, "two", 3, &cur, &len, 1000),
                   COLL_OK);
  ck_assert_mem_eq(cur, "one", 3);
  free(cur);
  /* Wrong expectation: unchanged. */
  ck_assert_int_eq(store_compare_set(the_client, "k", "xxx", 3, "two", 3, &cur, &len, 1000),
                   COLL_OK);
  ck_assert_mem_eq(cur, "one", 3);
  free(cur);
  /* Right expectation: swapped. */
  ck_assert_int_eq(store_compare_set(the_client, "k", "one", 3, "two", 3, &cur, &len, 1000),
                   COLL_OK);
  ck_assert_mem_eq(cur, "two", 3);
  free(cur);
  assert_value(the_client, "k", "two", 3);
  /* Expected a value but the key is absent: nothing set, nothing returned. */
  ck_assert_int_eq(store_compare_set(the_client, "nokey", "a", 1, "b", 1, &cur, &len, 1000),
                   COLL_OK);
  ck_assert_ptr_null(cur);
  ck_assert_uint_eq(len, 0);
  bool exists = true;
  const char *keys[] = {"nokey"};
  ck_assert_int_eq(store_check(the_client, keys, 1, &exists, 1000), COLL_OK);
  ck_assert(!exists);
}
END_TEST

START_TEST(wait_returns_once_every_key_exists) {
  ck_assert_int_eq(store_set(the_client, "a", "1", 1, 1000), COLL_OK);
  setter_arg_t arg = {.port = store_server_port(the_server), .delay_ms = 150, .key = "b"};
  pthread_t t;
  pthread_create(&t, NULL, set_later, &arg);
  const char *keys[] = {"a", "b"};
  coll_status_t st = store_wait(the_client, keys, 2, 5000);
  pthread_join(t, NULL);
  ck_assert_msg(st == COLL_OK, "%s", coll_last_error());
}
END_TEST

typedef struct {
  uint16_t port;
  atomic_int done;
  coll_status_t status;
} waiter_t;

static void *wait_for_many(void *p) {
  waiter_t *w = p;
  store_client_t *c = NULL;
  w->status = store_client_connect("127.0.0.1", w->port, NULL, 2000, &c);
  if (w->status == COLL_OK) {
    char names[200][16];
    const char *keys[200];
    for (int i = 0; i < 200; i++) {
      snprintf(names[i], sizeof names[i], "k%d", i);
      keys[i] = names[i];
    }
    w->status = store_wait(c, keys, 200, 10000);
  }
  store_client_close(c);
  atomic_store(&w->done, 1);
  return NULL;
}

START_TEST(wait_answers_only_once_all_keys_exist_at_the_same_time) {
  waiter_t w = {.port = store_server_port(the_server)};
  pthread_t t;
  pthread_create(&t, NULL, wait_for_many, &w);
  ck_assert(util_wait_clients(the_server, 2, 3000));
  char key[16];
  for (int i = 199; i >= 0; i--) { /* backwards: the waiter's cursor key comes last */
    if (i == 50) continue;
    snprintf(key, sizeof key, "k%d", i);
    ck_assert_int_eq(store_set(the_client, key, "x", 1, 1000), COLL_OK);
  }
  bool deleted = false;
  ck_assert_int_eq(store_delete(the_client, "k10", &deleted, 1000), COLL_OK);
  ck_assert(deleted);
  ck_assert_int_eq(store_set(the_client, "k50", "x", 1, 1000), COLL_OK);
  sleep_ms(150);
  ck_assert_msg(!atomic_load(&w.done), "wait returned while k10 was deleted");
  ck_assert_int_eq(store_set(the_client, "k10", "x", 1, 1000), COLL_OK);
  pthread_join(t, NULL);
  ck_assert_msg(w.status == COLL_OK, "%s", coll_last_error());
}
END_TEST

START_TEST(wait_times_out_naming_the_missing_key) {
  ck_assert_int_eq(store_set(the_client, "a", "1", 1, 1000), COLL_OK);
  const char *keys[] = {"a", "never"};
  int64_t start = coll_now_ms();
  coll_status_t st = store_wait(the_client, keys, 2, 1000);
  int64_t took = coll_now_ms() - start;
  ck_assert_int_eq(st, COLL_ERR_TIMEOUT);
  ck_assert_int_ge(took, 750);
  ck_assert_int_le(took, 2000);
  ck_assert_msg(strstr(coll_last_error(), "keys 'a', 'never'") != NULL, "%s", coll_last_error());
  ck_assert_msg(strstr(coll_last_error(), "first 'never'") != NULL, "%s", coll_last_error());
}
END_TEST

START_TEST(delete_num_keys_and_check_report_the_table) {
  int64_t n = -1;
  ck_assert_int_eq(store_num_keys(the_client, &n, 1000), COLL_OK);
  ck_assert_int_eq(n, 0);
  ck_assert_int_eq(store_set(the_client, "x", "1", 1, 1000), COLL_OK);
  ck_assert_int_eq(store_set(the_client, "y", "2", 1, 1000), COLL_OK);
  ck_assert_int_eq(store_num_keys(the_client, &n, 1000), COLL_OK);
  ck_assert_int_eq(n, 2);
  const char *both[] = {"x", "y"};
  const char *with_z[] = {"x", "z"};
  bool all = false;
  ck_assert_int_eq(store_check(the_client, both, 2, &all, 1000), COLL_OK);
  ck_assert(all);
  ck_assert_int_eq(store_check(the_client, with_z, 2, &all, 1000), COLL_OK);
  ck_assert(!all);
  bool deleted = false;
  ck_assert_int_eq(store_delete(the_client, "x", &deleted, 1000), COLL_OK);
  ck_assert(deleted);
  ck_assert_int_eq(store_delete(the_client, "x", &deleted, 1000), COLL_OK);
  ck_assert(!deleted);
  ck_assert_int_eq(store_num_keys(the_client, &n, 1000), COLL_OK);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(store_check(the_client, both, 2, &all, 1000), COLL_OK);
  ck_assert(!all);
}
END_TEST

START_TEST(wrong_or_missing_token_is_refused_with_a_clear_message) {
  store_server_options_t opt = {.token = "job-42"};
  store_server_t *server = util_start_server(&opt);
  uint16_t port = store_server_port(server);
  store_client_t *c = NULL;
  coll_status_t st = store_client_connect("127.0.0.1", port, "job-41", 2000, &c);
  ck_assert_int_eq(st, COLL_ERR_REFUSED);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(coll_last_error(), "job token mismatch") != NULL, "%s", coll_last_error());
  ck_assert_msg(strstr(coll_last_error(), "127.0.0.1") != NULL, "%s", coll_last_error());
  st = store_client_connect("127.0.0.1", port, NULL, 2000, &c);
  ck_assert_int_eq(st, COLL_ERR_REFUSED);
  ck_assert_msg(strstr(coll_last_error(), "none was sent") != NULL, "%s", coll_last_error());
  c = util_connect(server, "job-42");
  ck_assert_int_eq(store_set(c, "ok", "1", 1, 1000), COLL_OK);
  ck_assert(util_wait_clients(server, 1, 2000));
  store_client_close(c);
  store_server_stop(server);
}
END_TEST

typedef struct {
  uint16_t port;
  int delay_ms;
  store_server_t *server;
} late_server_t;

static void *start_later(void *p) {
  late_server_t *a = p;
  sleep_ms(a->delay_ms);
  store_server_options_t opt = {.bind_addr = "127.0.0.1", .port = a->port};
  if (store_server_start(&opt, &a->server) != COLL_OK) a->server = NULL;
  return NULL;
}

START_TEST(client_retries_until_a_late_server_starts) {
  late_server_t late = {.port = mp_free_port(), .delay_ms = 300};
  pthread_t t;
  pthread_create(&t, NULL, start_later, &late);
  store_client_t *c = NULL;
  coll_status_t st = store_client_connect("127.0.0.1", late.port, NULL, 5000, &c);
  pthread_join(t, NULL);
  ck_assert_ptr_nonnull(late.server);
  ck_assert_msg(st == COLL_OK, "%s", coll_last_error());
  ck_assert_int_eq(store_set(c, "k", "v", 1, 1000), COLL_OK);
  store_client_close(c);
  store_server_stop(late.server);
}
END_TEST

START_TEST(connecting_to_no_server_times_out_naming_the_address) {
  uint16_t port = mp_free_port();
  store_client_t *c = NULL;
  int64_t start = coll_now_ms();
  coll_status_t st = store_client_connect("127.0.0.1", port, NULL, 300, &c);
  int64_t took = coll_now_ms() - start;
  ck_assert_int_eq(st, COLL_ERR_TIMEOUT);
  ck_assert_int_ge(took, 250);
  ck_assert_int_le(took, 1500);
  char want[64];
  snprintf(want, sizeof want, "store at 127.0.0.1:%u", (unsigned)port);
  ck_assert_msg(strstr(coll_last_error(), want) != NULL, "%s", coll_last_error());
  ck_assert_msg(strstr(coll_last_error(), "refused") != NULL, "%s", coll_last_error());
}
END_TEST

START_TEST(limits_are_enforced_before_sending) {
  store_server_options_t opt = {.key_max = 16, .value_max = 1024};
  store_server_t *server = util_start_server(&opt);
  store_client_t *c = util_connect(server, NULL);
  char big[2048];
  memset(big, 'v', sizeof big);
  ck_assert_int_eq(store_set(c, "k", big, 1025, 1000), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(coll_last_error(), "limit of 1024") != NULL, "%s", coll_last_error());
  ck_assert_int_eq(store_set(c, "k", big, 1024, 1000), COLL_OK);
  ck_assert_int_eq(store_set(c, "a-key-longer-than-16", "v", 1, 1000), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(store_set(c, "", "v", 1, 1000), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(store_set(c, NULL, "v", 1, 1000), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(store_get(NULL, "k", NULL, NULL, 1000), COLL_ERR_INVALID_ARGUMENT);
  store_client_close(c);
  store_server_stop(server);
}
END_TEST

START_TEST(a_stopped_server_turns_calls_into_errors_not_hangs) {
  store_server_t *server = util_start_server(NULL);
  store_client_t *c = util_connect(server, NULL);
  ck_assert_int_eq(store_set(c, "k", "v", 1, 1000), COLL_OK);
  store_server_stop(server);
  int64_t start = coll_now_ms();
  void *v = NULL;
  size_t len = 0;
  coll_status_t st = store_get(c, "k", &v, &len, 500);
  ck_assert_int_ne(st, COLL_OK);
  ck_assert_int_le(coll_now_ms() - start, 2000);
  ck_assert_msg(strstr(coll_last_error(), "store at 127.0.0.1") != NULL, "%s", coll_last_error());
  store_client_close(c);
}
END_TEST

START_TEST(client_reconnects_when_the_server_comes_back_on_the_same_port) {
  store_server_t *server = util_start_server(NULL);
  uint16_t port = store_server_port(server);
  store_client_t *c = util_connect(server, NULL);
  ck_assert_int_eq(store_set(c, "k", "v", 1, 1000), COLL_OK);
  store_server_stop(server);
  store_server_options_t opt = {.bind_addr = "127.0.0.1", .port = port};
  ck_assert_int_eq(store_server_start(&opt, &server), COLL_OK);
  /* The old connection is gone; the call notices, reconnects and succeeds. */
  coll_status_t st = store_set(c, "k2", "v", 1, 2000);
  if (st != COLL_OK) st = store_set(c, "k2", "v", 1, 2000);
  ck_assert_msg(st == COLL_OK, "%s", coll_last_error());
  int64_t n = 0;
  ck_assert_int_eq(store_num_keys(c, &n, 1000), COLL_OK);
  ck_assert_int_eq(n, 1);
  store_client_close(c);
  store_server_stop(server);
}
END_TEST

START_TEST(clients_beyond_max_clients_are_turned_away_and_time_out) {
  store_server_options_t opt = {.max_clients = 2};
  store_server_t *server = util_start_server(&opt);
  store_client_t *a = util_connect(server, NULL);
  store_client_t *b = util_connect(server, NULL);
  store_client_t *c = NULL;
  coll_status_t st = store_client_connect("127.0.0.1", store_server_port(server), NULL, 300, &c);
  ck_assert_int_eq(st, COLL_ERR_TIMEOUT);
  ck_assert_msg(strstr(coll_last_error(), "closed by the server") != NULL, "%s", coll_last_error());
  store_client_close(b);
  c = util_connect(server, NULL); /* a slot is free again */
  ck_assert_int_eq(store_set(c, "k", "v", 1, 1000), COLL_OK);
  store_client_close(c);
  store_client_close(a);
  store_server_stop(server);
}
END_TEST

typedef struct {
  uint16_t port;
  coll_status_t status;
  int64_t took_ms;
} parked_get_t;

static void *get_forever_key(void *p) {
  parked_get_t *a = p;
  store_client_t *c = NULL;
  a->status = store_client_connect("localhost", a->port, NULL, 2000, &c);
  if (a->status != COLL_OK) return NULL;
  int64_t start = coll_now_ms();
  void *v = NULL;
  size_t len = 0;
  a->status = store_get(c, "never", &v, &len, 10000);
  a->took_ms = coll_now_ms() - start;
  store_client_close(c);
  return NULL;
}

START_TEST(stopping_the_server_fails_a_parked_get_at_once) {
  store_server_t *server = util_start_server(NULL);
  parked_get_t arg = {.port = store_server_port(server)};
  pthread_t t;
  pthread_create(&t, NULL, get_forever_key, &arg);
  ck_assert(util_wait_clients(server, 1, 3000)); /* "localhost" resolves and connects */
  sleep_ms(100);
  store_server_stop(server);
  pthread_join(t, NULL);
  ck_assert_int_eq(arg.status, COLL_ERR_REMOTE);
  ck_assert_int_lt(arg.took_ms, 3000);
}
END_TEST

/* Ranks publish their "address" and read every other rank's, as the communicator does. */
static int rank_meets_others(int rank, int nranks, void *arg) {
  uint16_t port = *(uint16_t *)arg;
  store_client_t *c = NULL;
  if (store_client_connect("127.0.0.1", port, "tok", 5000, &c) != COLL_OK) return 10;
  char key[64], value[64];
  snprintf(key, sizeof key, "rank/%d/addr", rank);
  snprintf(value, sizeof value, "host-%d:%d", rank, 1000 + rank);
  if (store_set(c, key, value, strlen(value), 5000) != COLL_OK) return 11;
  for (int r = 0; r < nranks; r++) {
    snprintf(key, sizeof key, "rank/%d/addr", r);
    snprintf(value, sizeof value, "host-%d:%d", r, 1000 + r);
    void *got = NULL;
    size_t len = 0;
    if (store_get(c, key, &got, &len, 5000) != COLL_OK) return 12;
    int same = len == strlen(value) && memcmp(got, value, len) == 0;
    free(got);
    if (!same) return 13;
  }
  int64_t arrived = 0;
  if (store_add(c, "arrived", 1, &arrived, 5000) != COLL_OK) return 14;
  store_client_close(c);
  return 0;
}

START_TEST(rank_processes_exchange_addresses_through_the_store) {
  store_server_options_t opt = {.token = "tok"};
  store_server_t *server = util_start_server(&opt);
  uint16_t port = store_server_port(server);
  ck_assert_int_eq(mp_run(6, 20000, rank_meets_others, &port), 0);
  store_client_t *c = util_connect(server, "tok");
  void *v = NULL;
  size_t len = 0;
  ck_assert_int_eq(store_get(c, "arrived", &v, &len, 1000), COLL_OK);
  ck_assert_uint_eq(len, 1);
  ck_assert_mem_eq(v, "6", 1);
  free(v);
  store_client_close(c);
  ck_assert(util_wait_clients(server, 0, 2000));
  store_server_stop(server);
}
END_TEST

SUITE_MAIN("store_ops",
           suite_fixture_tests("ops", 30, util_open_store, util_close_store,
                               set_then_get_returns_the_same_bytes, large_values_travel_intact,
                               get_waits_until_another_client_sets_the_key,
                               get_of_a_missing_key_times_out_naming_the_key_and_the_store,
                               add_counts_from_zero_and_returns_the_new_value,
                               compare_set_swaps_only_when_the_expected_value_matches,
                               wait_returns_once_every_key_exists,
                               wait_answers_only_once_all_keys_exist_at_the_same_time,
                               wait_times_out_naming_the_missing_key,
                               delete_num_keys_and_check_report_the_table),
           suite_tests("ops", 30, wrong_or_missing_token_is_refused_with_a_clear_message,
                       client_retries_until_a_late_server_starts,
                       connecting_to_no_server_times_out_naming_the_address,
                       limits_are_enforced_before_sending,
                       a_stopped_server_turns_calls_into_errors_not_hangs,
                       client_reconnects_when_the_server_comes_back_on_the_same_port,
                       clients_beyond_max_clients_are_turned_away_and_time_out,
                       stopping_the_server_fails_a_parked_get_at_once,
                       rank_processes_exchange_addresses_through_the_store))
