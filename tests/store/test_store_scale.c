/* The server under a thousand concurrent clients: forked processes each holding hundreds of
 * real connections, incrementing one counter and parking gets at the same time. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "bootstrap/store_proto.h"
#include "common/clock.h"
#include "multiproc.h"
#include "store_test_util.h"
#include "suite_run.h"

enum {
  PROCS = 4,
  THREADS_PER_PROC = 5,
  CLIENTS_PER_THREAD = 50, /* 4 x 5 x 50 = 1000 connections */
  ADDS_PER_CLIENT = 10,
  CLIENTS = PROCS * THREADS_PER_PROC * CLIENTS_PER_THREAD,
};

typedef struct {
  uint16_t port;
  store_client_t **clients;
  int failed;
} worker_t;

static void *increment(void *p) {
  worker_t *w = p;
  /* Interleave the clients so every connection has requests in flight over time. */
  for (int round = 0; round < ADDS_PER_CLIENT; round++) {
    for (int i = 0; i < CLIENTS_PER_THREAD; i++) {
      int64_t v = 0;
      if (store_add(w->clients[i], "counter", 1, &v, 20000) != COLL_OK) {
        fprintf(stderr, "add: %s\n", coll_last_error());
        w->failed = 1;
        return NULL;
      }
    }
  }
  return NULL;
}

/* One process: connect 250 clients, report, wait for the go, increment from 5 threads. */
static int proc_increments(int rank, int nranks, void *arg) {
  (void)rank;
  (void)nranks;
  uint16_t port = *(uint16_t *)arg;
  enum { N = THREADS_PER_PROC * CLIENTS_PER_THREAD };
  store_client_t **clients = calloc(N, sizeof *clients);
  for (int i = 0; i < N; i++) {
    if (store_client_connect("127.0.0.1", port, NULL, 20000, &clients[i]) != COLL_OK) {
      fprintf(stderr, "connect %d: %s\n", i, coll_last_error());
      return 10;
    }
  }
  int64_t ready = 0;
  if (store_add(clients[0], "ready", N, &ready, 20000) != COLL_OK) return 11;
  const char *go[] = {"go"};
  if (store_wait(clients[0], go, 1, 20000) != COLL_OK) return 12;
  worker_t workers[THREADS_PER_PROC];
  pthread_t threads[THREADS_PER_PROC];
  for (int t = 0; t < THREADS_PER_PROC; t++) {
    workers[t] = (worker_t){.port = port, .clients = clients + t * CLIENTS_PER_THREAD};
    pthread_create(&threads[t], NULL, increment, &workers[t]);
  }
  int failed = 0;
  for (int t = 0; t < THREADS_PER_PROC; t++) {
    pthread_join(threads[t], NULL);
    failed |= workers[t].failed;
  }
  for (int i = 0; i < N; i++) store_client_close(clients[i]);
  free(clients);
  return failed ? 13 : 0;
}

typedef struct {
  uint16_t port;
  int result;
} runner_t;

static void *run_procs(void *p) {
  runner_t *r = p;
  r->result = mp_run(PROCS, 60000, proc_increments, &r->port);
  return NULL;
}

START_TEST(thousand_clients_increment_one_counter_exactly) {
  runner_t runner = {.port = store_server_port(the_server)};
  pthread_t t;
  pthread_create(&t, NULL, run_procs, &runner);
  /* Every connection is open at once before anyone increments. */
  const char *ready[] = {"ready"};
  ck_assert_msg(store_wait(the_client, ready, 1, 30000) == COLL_OK, "%s", coll_last_error());
  int64_t v = 0;
  int64_t deadline = coll_now_ms() + 30000;
  while (store_add(the_client, "ready", 0, &v, 1000) == COLL_OK && v < CLIENTS &&
         coll_now_ms() < deadline)
    usleep(5000);
  ck_assert_int_eq(v, CLIENTS);
  ck_assert_int_eq(store_server_client_count(the_server), CLIENTS + 1);
  ck_assert_int_eq(store_set(the_client, "go", "1", 1, 1000), COLL_OK);
  pthread_join(t, NULL);
  ck_assert_int_eq(runner.result, 0);
  ck_assert_int_eq(store_add(the_client, "counter", 0, &v, 1000), COLL_OK);
  ck_assert_int_eq(v, (int64_t)CLIENTS * ADDS_PER_CLIENT);
  ck_assert(util_wait_clients(the_server, 1, 5000));
}
END_TEST

START_TEST(thousand_parked_gets_are_answered_by_one_set) {
  store_server_t *server = util_start_server(NULL);
  uint16_t port = store_server_port(server);
  enum { N = 1000 };
  int *fds = calloc(N, sizeof *fds);
  uint8_t frame[128];
  const char *args[] = {"the/key"};
  size_t n = util_frame(frame, STORE_OP_GET, 0, 20000, args, 1);
  for (int i = 0; i < N; i++) {
    fds[i] = util_raw_connect(port);
    util_raw_hello(fds[i], NULL);
    util_raw_send(fds[i], frame, n);
  }
  ck_assert(util_wait_clients(server, N, 5000));
  /* Parked gets do not block the server: another client is served meanwhile. */
  store_client_t *c = util_connect(server, NULL);
  int64_t start = coll_now_ms();
  ck_assert_int_eq(store_set(c, "other", "x", 1, 5000), COLL_OK);
  ck_assert_int_lt(coll_now_ms() - start, 5000); /* the parked gets wait 20 s */
  ck_assert_int_eq(store_set(c, "the/key", "value", 5, 1000), COLL_OK);
  for (int i = 0; i < N; i++) {
    store_header_t h;
    ck_assert_msg(util_raw_reply(fds[i], &h), "client %d got no reply", i);
    ck_assert_uint_eq(h.code, STORE_REPLY_OK);
    ck_assert_uint_eq(h.body_len, 4 + 5);
    close(fds[i]);
  }
  free(fds);
  ck_assert(util_wait_clients(server, 1, 5000));
  store_client_close(c);
  store_server_stop(server);
}
END_TEST

START_TEST(every_rank_waiting_for_every_rank_key_is_answered_quickly) {
  /* The rendezvous pattern at scale: 500 waiters, each on the same 500 keys. */
  enum { N = 500 };
  store_server_t *server = util_start_server(NULL);
  uint16_t port = store_server_port(server);
  size_t cap = STORE_HEADER_SIZE + (size_t)N * 16;
  uint8_t *frame = malloc(cap);
  store_arg_t args[N];
  char names[N][12];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "rank/%d", i);
    args[i] = (store_arg_t){.data = (const uint8_t *)names[i], .len = (uint32_t)strlen(names[i])};
  }
  store_header_t h = {.version = STORE_PROTO_VERSION, .code = STORE_OP_WAIT, .timeout_ms = 30000};
  size_t n = store_proto_encode(frame, &h, args, N);
  int *fds = calloc(N, sizeof *fds);
  for (int i = 0; i < N; i++) {
    fds[i] = util_raw_connect(port);
    util_raw_hello(fds[i], NULL);
    util_raw_send(fds[i], frame, n);
  }
  free(frame);
  ck_assert(util_wait_clients(server, N, 5000));
  store_client_t *c = util_connect(server, NULL);
  int64_t start = coll_now_ms();
  for (int i = 0; i < N; i++) ck_assert_int_eq(store_set(c, names[i], "addr", 4, 2000), COLL_OK);
  for (int i = 0; i < N; i++) {
    store_header_t r;
    ck_assert_msg(util_raw_reply(fds[i], &r), "waiter %d got no reply", i);
    ck_assert_uint_eq(r.code, STORE_REPLY_OK);
    close(fds[i]);
  }
  int64_t took = coll_now_ms() - start;
  ck_assert_msg(took < 5000, "500 sets with 500 waiters took %lld ms", (long long)took);
  free(fds);
  store_client_close(c);
  store_server_stop(server);
}
END_TEST

START_TEST(parked_gets_time_out_on_the_server_at_their_own_deadlines) {
  store_server_t *server = util_start_server(NULL);
  uint16_t port = store_server_port(server);
  enum { N = 50 };
  int fds[N];
  int64_t sent_at[N];
  const char *args[] = {"absent"};
  for (int i = 0; i < N; i++) {
    uint8_t frame[128];
    /* Deadlines spread from 100 to 590 ms. */
    size_t n = util_frame(frame, STORE_OP_GET, 0, (uint32_t)(100 + 10 * i), args, 1);
    fds[i] = util_raw_connect(port);
    util_raw_hello(fds[i], NULL);
    sent_at[i] = coll_now_ms();
    util_raw_send(fds[i], frame, n);
  }
  /* On a loaded machine the 50 connections can take longer than the first deadlines: each
   * wait is measured from its own request, and a reply may be read late, never early. */
  int64_t all_sent = coll_now_ms();
  for (int i = 0; i < N; i++) {
    store_header_t h;
    ck_assert(util_raw_reply(fds[i], &h));
    ck_assert_uint_eq(h.code, STORE_REPLY_TIMEOUT);
    int64_t waited = coll_now_ms() - sent_at[i];
    int64_t deadline = 100 + 10 * i;
    int64_t reading_from = all_sent - sent_at[i];
    ck_assert_msg(waited >= deadline - 2, "get %d (deadline %lld ms) answered after %lld ms", i,
                  (long long)deadline, (long long)waited);
    ck_assert_msg(waited <= (deadline > reading_from ? deadline : reading_from) + 400,
                  "get %d (deadline %lld ms) answered after %lld ms", i, (long long)deadline,
                  (long long)waited);
    close(fds[i]);
  }
  ck_assert(util_wait_clients(server, 0, 5000));
  store_server_stop(server);
}
END_TEST

SUITE_MAIN("store_scale",
           suite_fixture_tests("scale", 90, util_open_store, util_close_store,
                               thousand_clients_increment_one_counter_exactly),
           suite_tests("scale", 90, thousand_parked_gets_are_answered_by_one_set,
                       every_rank_waiting_for_every_rank_key_is_answered_quickly,
                       parked_gets_time_out_on_the_server_at_their_own_deadlines))
