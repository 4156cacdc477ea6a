/* Transport tests: real rank processes meet through a real store server started in the
 * test process, connect over shm or tcp (forced, or chosen from host ids), and exchange
 * messages in rings and all pairs, with and without reduction; failures (length
 * mismatch, a killed peer) must come back as the right status naming the peer. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "mem/memops.h"
#include "suite_run.h"
#include "tp_cases.h"

#define MIB (1024u * 1024u)
#define STAGING_LIMIT (16u * MIB) /* per peer connection, the documented default bound */

static const char *const one_host[] = {"hostA", "hostA", "hostA", "hostA", "hostA"};
static const char *const many_hosts[] = {"h0", "h1", "h2", "h3", "h4"};
static const char *const two_hosts[] = {"hostA", "hostA", "hostB", "hostB"};

typedef struct {
  tp_job_t job;
  int victim;         /* for the kill test */
  bool expect_direct; /* shm single-copy reductions must have happened */
  size_t max_staging; /* 0: the default bound per peer */
  const tp_mismatch_t *mismatch;
} test_arg_t;

/* Run body on n forked ranks, connected, against a fresh store server; returns mp_run's
 * count of failed ranks. */
static int run_ranks(int n, tp_body_fn body, test_arg_t *arg, int timeout_ms) {
  return tp_run_connected(n, body, &arg->job, arg, timeout_ms);
}

static const size_t copy_sizes[] = {0, 1, 7, 64 * 1024, MIB + 3, 40 * MIB};
#define NSIZES (sizeof copy_sizes / sizeof copy_sizes[0])

/* Each rank sends every size to the next rank and receives from the previous one, all
 * posted at once, then a burst of small messages (tp_ring_copy); the staging memory stays
 * within the bound per peer (and within max_staging when given). */
static int ring_copy_body(tp_rank_t *t, size_t max_staging) {
  int rank = t->rank, n = t->nranks;
  if (tp_ring_copy(t, copy_sizes, NSIZES, 20000) != 0) return 1;
  size_t staging = transport_set_staging_bytes(t->set);
  RANK_CHECK(staging <= STAGING_LIMIT * (size_t)(n - 1), "staging %zu bytes", staging);
  RANK_CHECK(max_staging == 0 || staging <= max_staging, "staging %zu bytes > %zu", staging,
             max_staging);
  return 0;
}

static int ring_copy_rank(tp_rank_t *t, void *p) {
  const test_arg_t *arg = p;
  return ring_copy_body(t, arg->max_staging);
}

static const size_t reduce_counts[] = {0, 1, 7, 16 * 1024, 256 * 1024 + 3, 10 * MIB};
#define NCOUNTS (sizeof reduce_counts / sizeof reduce_counts[0])

/* Ring with reduction (tp_ring_reduce), then the staging memory within its bound. */
static int ring_reduce_rank(tp_rank_t *t, void *p) {
  const test_arg_t *arg = p;
  int rank = t->rank, n = t->nranks;
  if (tp_ring_reduce(t, reduce_counts, NCOUNTS, 20000) != 0) return 1;
  size_t staging = transport_set_staging_bytes(t->set);
  RANK_CHECK(staging <= STAGING_LIMIT * (size_t)(n - 1), "staging %zu bytes over the limit",
             staging);
  /* Single-copy reductions go through a staging chunk: proof that the path was taken. */
  if (arg->expect_direct) {
    size_t fifo_bytes = (size_t)(n - 1) * (4u * MIB);
    RANK_CHECK(staging > fifo_bytes, "staging %zu: single-copy path not used", staging);
  }
  return 0;
}

/* Every rank exchanges three sizes with every other rank at the same time. */
static int all_pairs_rank(tp_rank_t *t, void *p) {
  (void)p;
  int rank = t->rank, n = t->nranks;
  static const size_t sizes[] = {1, 64 * 1024, MIB + 3};
  enum { NS = 3 };
  unsigned char *out[NS], *in[8][NS];
  for (int s = 0; s < NS; s++) {
    out[s] = malloc(sizes[s]);
    tp_fill(out[s], sizes[s], rank, s);
  }
  for (int peer = 0; peer < n; peer++) {
    if (peer == rank) continue;
    for (int s = 0; s < NS; s++) {
      in[peer][s] = malloc(sizes[s]);
      transport_recv_t r = {.dst = in[peer][s], .len = sizes[s]};
      RANK_CHECK(tp_recv(t, peer, &r) == COLL_OK, "post recv");
      RANK_CHECK(tp_send(t, peer, out[s], sizes[s]) == COLL_OK, "post send");
    }
  }
  RANK_CHECK(tp_drain(t, 20000) == COLL_OK, "drain");
  for (int peer = 0; peer < n; peer++) {
    if (peer == rank) continue;
    for (int s = 0; s < NS; s++) {
      RANK_CHECK(tp_check(in[peer][s], sizes[s], peer, s) == SIZE_MAX, "from %d size %zu differs",
                 peer, sizes[s]);
      free(in[peer][s]);
    }
  }
  for (int s = 0; s < NS; s++) free(out[s]);
  return 0;
}

/* Like halving-doubling with small segments: each rank posts hundreds of sends to its
 * partner, progresses them alone for a while (the FIFO fills up), then posts the matching
 * receives; the queues must hold them all. */
static int sends_first_rank(tp_rank_t *t, void *p) {
  (void)p;
  const tp_sends_first_t how = {.count = 400, .rounds = 20, .wait_ms = 0, .drain_ms = 20000};
  return tp_sends_first(t, &how);
}

/* Small and large messages in a row, copies and reductions in turn, the receives posted
 * one at a time while the rest has arrived already: tcp's small messages share stream 0
 * and its reads take the following bytes ahead (tcp.c), which later receives, small or
 * large, must get in order. */
static int mixed_sizes_rank(tp_rank_t *t, void *p) {
  (void)p;
  int rank = t->rank;
  static const size_t floats[] = {2, 4096, 4097, 1, 0, 16384, 3, 50001, 2, 4096, 5, 1};
  enum { NM = sizeof floats / sizeof floats[0] };
  int partner = rank ^ 1;
  mem_reduce_fn sum = mem_host_reduce_fn(COLL_FLOAT32, COLL_SUM);
  float *out[NM], *in[NM];
  for (int m = 0; m < NM; m++) {
    out[m] = malloc(floats[m] * sizeof(float) + 4);
    in[m] = malloc(floats[m] * sizeof(float) + 4);
    for (size_t k = 0; k < floats[m]; k++) out[m][k] = tp_float_of(rank, k + (size_t)m);
    RANK_CHECK(tp_send(t, partner, out[m], floats[m] * sizeof(float)) == COLL_OK, "post send");
  }
  transport_conn_t *conn = transport_set_conn(t->set, partner);
  for (int m = 0; m < NM; m++) {
    for (int i = 0; i < 50; i++) /* let the partner's messages pile up */
      RANK_CHECK(transport_progress(conn, NULL, NULL) == COLL_OK, "progress");
    transport_recv_t r = {.dst = in[m], .len = floats[m] * sizeof(float)};
    if (m % 2)
      r = (transport_recv_t){.dst = in[m],
                             .operand = out[m],
                             .reduce = sum,
                             .elem_size = sizeof(float),
                             .len = floats[m] * sizeof(float)};
    RANK_CHECK(tp_recv(t, partner, &r) == COLL_OK, "post recv");
  }
  RANK_CHECK(tp_drain(t, 20000) == COLL_OK, "drain");
  for (int m = 0; m < NM; m++) {
    for (size_t k = 0; k < floats[m]; k++) {
      float theirs = tp_float_of(partner, k + (size_t)m);
      float want = m % 2 ? out[m][k] + theirs : theirs;
      RANK_CHECK(in[m][k] == want, "message %d (%zu floats, %s): element %zu is %g, want %g", m,
                 floats[m], m % 2 ? "reduced" : "copied", k, (double)in[m][k], (double)want);
    }
    free(out[m]);
    free(in[m]);
  }
  return 0;
}

/* Rank 0 sends send_len bytes where rank 1 expects recv_len (tp_length_mismatch), also
 * when nothing follows the message (tcp: a length on the other side of TCP_SMALL_BYTES
 * puts it on another stream than the receiver reads). With lead, one matching message
 * goes first, so that the mismatched one is not message 0 (whose first piece is on
 * stream 0 at any length). */
static const tp_mismatch_t mismatch_cases[] = {
    {100, 64, false, true},
    {8, 64 * 1024, true, true},
    {64 * 1024, 8, true, true},
    {600 * 1024, 64 * 1024, true, true},
};
#define NMISMATCH (sizeof mismatch_cases / sizeof mismatch_cases[0])

static int mismatch_rank(tp_rank_t *t, void *p) {
  const test_arg_t *arg = p;
  return tp_length_mismatch(t, arg->mismatch, 10000);
}

/* The victim starts sending 40 MiB and kills itself once part of it moved: the survivor
 * must get COLL_ERR_REMOTE (or a timeout) naming it, fast (tp_killed_peer). */
static int killed_rank(tp_rank_t *t, void *p) {
  const test_arg_t *arg = p;
  return tp_killed_peer(t, arg->victim, 40 * MIB, 5000, 6000);
}

/* Transport of every pair, and a ring over a set that mixes shm and tcp. */
static int mixed_rank(tp_rank_t *t, void *p) {
  const test_arg_t *arg = p;
  int rank = t->rank, n = t->nranks;
  for (int peer = 0; peer < n; peer++) {
    if (peer == rank) {
      RANK_CHECK(transport_set_conn(t->set, peer) == NULL, "self has a connection");
      continue;
    }
    const char *want = strcmp(arg->job.hosts[peer], arg->job.hosts[rank]) == 0 ? "shm" : "tcp";
    RANK_CHECK(strcmp(transport_set_conn(t->set, peer)->ops->name, want) == 0,
               "peer %d uses %s, want %s", peer, transport_set_conn(t->set, peer)->ops->name, want);
  }
  return ring_copy_body(t, arg->max_staging);
}

static const char *transport_of(int i) { return i % 2 == 0 ? "shm" : "tcp"; }

static test_arg_t forced_arg(const char *forced, const char *prefix) {
  return (test_arg_t){
      .job = {.prefix = prefix, .hosts = one_host, .forced = forced, .timeout_ms = 10000}};
}

/* run_ranks of body on n ranks of one host over transport_of(i), keys under prefix. */
static int run_forced(int i, const char *prefix, int n, tp_body_fn body, int timeout_ms) {
  test_arg_t arg = forced_arg(transport_of(i), prefix);
  return run_ranks(n, body, &arg, timeout_ms);
}

/* Loop index i: transport i % 2, ranks 2 + i / 2 (2..5). */
START_TEST(ring_of_2_to_5_ranks_delivers_every_size_intact) {
  ck_assert_int_eq(run_forced(_i, "t/ring/", 2 + _i / 2, ring_copy_rank, 60000), 0);
}
END_TEST

START_TEST(ring_receive_with_reduction_computes_operand_plus_incoming) {
  ck_assert_int_eq(run_forced(_i, "t/reduce/", 2 + _i / 2, ring_reduce_rank, 60000), 0);
}
END_TEST

/* COLL_SHM_DIRECT=1: large messages go single-copy (process_vm_readv). Loop index:
 * 0 ring copies, 1 ring reductions, 2 killed sender. */
START_TEST(shm_single_copy_path_delivers_reduces_and_reports_a_dead_sender) {
  test_arg_t arg = forced_arg("shm", _i == 0   ? "t/direct-copy/"
                                     : _i == 1 ? "t/direct-reduce/"
                                               : "t/direct-kill/");
  setenv("COLL_SHM_DIRECT", "1", 1);
  if (_i == 0) ck_assert_int_eq(run_ranks(3, ring_copy_rank, &arg, 60000), 0);
  if (_i == 1) {
    arg.expect_direct = true;
    ck_assert_int_eq(run_ranks(3, ring_reduce_rank, &arg, 60000), 0);
  }
  if (_i == 2) ck_assert_int_eq(run_ranks(2, killed_rank, &arg, 30000), 1);
  unsetenv("COLL_SHM_DIRECT");
}
END_TEST

/* With a small COLL_SHM_INBOX_BYTES the FIFOs shrink to fit; messages still flow. */
START_TEST(shm_fifos_shrink_to_fit_the_inbox_budget) {
  test_arg_t arg = forced_arg("shm", "t/inbox/");
  arg.max_staging = 1u * MIB;
  setenv("COLL_SHM_INBOX_BYTES", "1048576", 1);
  ck_assert_int_eq(run_ranks(5, ring_copy_rank, &arg, 60000), 0);
  unsetenv("COLL_SHM_INBOX_BYTES");
}
END_TEST

START_TEST(all_pairs_exchange_at_once) {
  ck_assert_int_eq(run_forced(_i, "t/pairs/", 4, all_pairs_rank, 60000), 0);
}
END_TEST

START_TEST(hundreds_of_sends_posted_before_their_receives_all_arrive) {
  ck_assert_int_eq(run_forced(_i, "t/sends-first/", 4, sends_first_rank, 60000), 0);
}
END_TEST

START_TEST(small_and_large_messages_in_a_row_arrive_in_order) {
  ck_assert_int_eq(run_forced(_i, "t/mixed/", 2, mixed_sizes_rank, 60000), 0);
}
END_TEST

/* Loop index i: transport i % 2, case i / 2 of mismatch_cases. */
START_TEST(length_mismatch_is_a_protocol_error_naming_the_peer) {
  test_arg_t arg = forced_arg(transport_of(_i), "t/mismatch/");
  arg.mismatch = &mismatch_cases[_i / 2];
  ck_assert_int_eq(run_ranks(2, mismatch_rank, &arg, 30000), 0);
}
END_TEST

START_TEST(killed_peer_is_reported_to_the_survivor_within_the_deadline) {
  test_arg_t arg = forced_arg(transport_of(_i), "t/kill/");
  arg.victim = 0;
  /* One failure: the victim, killed by its own hand. */
  ck_assert_int_eq(run_ranks(2, killed_rank, &arg, 30000), 1);
}
END_TEST

START_TEST(hosts_pick_shm_within_and_tcp_across_in_one_set) {
  test_arg_t arg = {.job = {.prefix = "t/mixed/", .hosts = two_hosts, .timeout_ms = 10000}};
  ck_assert_int_eq(run_ranks(4, mixed_rank, &arg, 60000), 0);
}
END_TEST

START_TEST(different_hosts_default_to_tcp) {
  test_arg_t arg = {.job = {.prefix = "t/hosts/", .hosts = many_hosts, .timeout_ms = 10000}};
  ck_assert_int_eq(run_ranks(3, mixed_rank, &arg, 60000), 0);
}
END_TEST

START_TEST(forcing_shm_across_hosts_fails_with_a_message) {
  store_server_options_t opt = {.bind_addr = "127.0.0.1"};
  store_server_t *server = NULL;
  ck_assert_int_eq(store_server_start(&opt, &server), COLL_OK);
  store_client_t *client = NULL;
  ck_assert_int_eq(
      store_client_connect("127.0.0.1", store_server_port(server), NULL, 5000, &client), COLL_OK);
  transport_setup_t setup = {.store = client,
                             .key_prefix = "t/force/",
                             .rank = 0,
                             .nranks = 2,
                             .host_ids = many_hosts,
                             .forced = "shm",
                             .timeout_ms = 1000};
  transport_set_t *set = NULL;
  ck_assert_int_eq(transport_set_connect(&setup, &set), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(set);
  ck_assert_msg(strstr(coll_last_error(), "different hosts") != NULL, "%s", coll_last_error());
  setup.forced = "carrier-pigeon";
  ck_assert_int_eq(transport_set_connect(&setup, &set), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(coll_last_error(), "carrier-pigeon") != NULL, "%s", coll_last_error());
  store_client_close(client);
  store_server_stop(server);
}
END_TEST

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Progress connection c and wait on the whole set until c's first receive is done,
 * counting the waits that returned before it was (each one a wake-up). */
static coll_status_t wait_first_recv(tp_rank_t *t, transport_conn_t *c, int *wakeups) {
  uint64_t rd = 0;
  *wakeups = 0;
  for (;;) {
    coll_status_t st = transport_progress(c, NULL, &rd);
    if (st != COLL_OK || rd > 0) return st;
    st = transport_set_wait(t->set, 5000);
    if (st != COLL_OK) return st;
    (*wakeups)++;
  }
}

/* transport_set_wait sleeps while nothing can move (no spinning) and returns soon after
 * a message arrives: rank 0 sends after 300 ms; rank 1 waits with long timeouts. */
static int wait_rank(tp_rank_t *t, void *p) {
  (void)p;
  int rank = t->rank;
  char msg[64] = "ring the bell", got[64] = {0};
  if (rank == 0) {
    sleep_ms(300);
    RANK_CHECK(tp_send(t, 1, msg, sizeof msg) == COLL_OK, "post send");
    RANK_CHECK(tp_drain(t, 10000) == COLL_OK, "drain");
    void *v = NULL;
    size_t len = 0;
    RANK_CHECK(store_get(t->store, "wait/done", &v, &len, 10000) == COLL_OK, "wait for rank 1");
    free(v);
  } else {
    /* Idle: after one possibly early return (a doorbell rung during setup), waits block. */
    transport_set_wait(t->set, 0);
    int64_t start = coll_now_ms();
    for (int i = 0; i < 2; i++) RANK_CHECK(transport_set_wait(t->set, 50) == COLL_OK, "idle wait");
    int64_t idle = coll_now_ms() - start;
    RANK_CHECK(idle >= 80, "two idle 50 ms waits returned after %lld ms", (long long)idle);
    transport_recv_t r = {.dst = got, .len = sizeof got};
    RANK_CHECK(tp_recv(t, 0, &r) == COLL_OK, "post recv");
    int wakeups;
    start = coll_now_ms();
    RANK_CHECK(wait_first_recv(t, transport_set_conn(t->set, 0), &wakeups) == COLL_OK, "wait");
    int64_t took = coll_now_ms() - start;
    store_set(t->store, "wait/done", "1", 1, 1000);
    RANK_CHECK(strcmp(got, msg) == 0, "wrong message");
    RANK_CHECK(took < 2500, "message seen after %lld ms", (long long)took);
    RANK_CHECK(wakeups < 50, "%d wake-ups for one message: spinning", wakeups);
  }
  return 0;
}

START_TEST(wait_sleeps_while_idle_and_wakes_when_a_message_arrives) {
  ck_assert_int_eq(run_forced(_i, "t/wait/", 2, wait_rank, 30000), 0);
}
END_TEST

/* A message that arrived before its receive was posted must not keep waking the wait
 * for another peer: rank 1 sends rank 0 a small message, then, once rank 0 has it (so
 * that their connection has been progressed, as after any earlier call), a 64 KiB one
 * (past tcp's read-ahead); rank 2 sends after 300 ms. Rank 0 waits for rank 2's alone
 * (progressing only that connection, as the executor does), then takes rank 1's. */
#define EARLY_BYTES (64u * 1024u)
static int early_rank(tp_rank_t *t, void *p) {
  (void)p;
  int rank = t->rank;
  char small[64] = "first", got[64] = {0};
  unsigned char *big = calloc(1, EARLY_BYTES);
  RANK_CHECK(big != NULL, "no memory");
  void *v = NULL;
  size_t len = 0;
  if (rank == 1) {
    RANK_CHECK(tp_send(t, 0, small, sizeof small) == COLL_OK, "post first send");
    RANK_CHECK(tp_drain(t, 10000) == COLL_OK, "drain the first");
    RANK_CHECK(store_get(t->store, "early/first", &v, &len, 10000) == COLL_OK, "wait for rank 0");
    free(v);
    for (size_t i = 0; i < EARLY_BYTES; i++) big[i] = (unsigned char)(i * 7 + 1);
    RANK_CHECK(tp_send(t, 0, big, EARLY_BYTES) == COLL_OK, "post the early send");
    RANK_CHECK(tp_drain(t, 10000) == COLL_OK, "drain the early send");
  } else if (rank == 2) {
    sleep_ms(300);
    RANK_CHECK(tp_send(t, 0, "from rank 2", 12) == COLL_OK, "post send");
    RANK_CHECK(tp_drain(t, 10000) == COLL_OK, "drain");
  } else {
    transport_recv_t r0 = {.dst = got, .len = sizeof got};
    RANK_CHECK(tp_recv(t, 1, &r0) == COLL_OK, "post first recv from rank 1");
    RANK_CHECK(tp_drain(t, 10000) == COLL_OK, "drain the first");
    store_set(t->store, "early/first", "1", 1, 1000);
    transport_recv_t r = {.dst = got, .len = 12};
    RANK_CHECK(tp_recv(t, 2, &r) == COLL_OK, "post recv from rank 2");
    int wakeups;
    RANK_CHECK(wait_first_recv(t, transport_set_conn(t->set, 2), &wakeups) == COLL_OK, "wait");
    RANK_CHECK(strcmp(got, "from rank 2") == 0, "wrong message from rank 2: '%s'", got);
    RANK_CHECK(wakeups < 50, "%d wake-ups while rank 1's message waited: spinning", wakeups);
    transport_recv_t r1 = {.dst = big, .len = EARLY_BYTES};
    RANK_CHECK(tp_recv(t, 1, &r1) == COLL_OK, "post the early message's recv");
    RANK_CHECK(tp_drain(t, 10000) == COLL_OK, "drain");
    for (size_t i = 0; i < EARLY_BYTES; i++)
      RANK_CHECK(big[i] == (unsigned char)(i * 7 + 1), "early message byte %zu is %u", i, big[i]);
  }
  if (rank != 0) {
    RANK_CHECK(store_get(t->store, "early/done", &v, &len, 10000) == COLL_OK, "wait for rank 0");
    free(v);
  } else {
    store_set(t->store, "early/done", "1", 1, 1000);
  }
  free(big);
  return 0;
}

START_TEST(an_early_message_does_not_wake_the_wait_for_another_peer) {
  ck_assert_int_eq(run_forced(_i, "t/early/", 3, early_rank, 30000), 0);
}
END_TEST

/* COLL_SOCKET_IFNAME picks the listening interface; an unknown one is a clear error. */
static int ifname_rank(int rank, int n, void *p) {
  test_arg_t *arg = p;
  tp_rank_t t;
  coll_status_t st = tp_open(&arg->job, rank, n, &t);
  const char *ifname = getenv("COLL_SOCKET_IFNAME");
  if (strcmp(ifname, "lo") != 0) {
    RANK_CHECK(st == COLL_ERR_INVALID_ARGUMENT, "got %s", coll_status_name(st));
    RANK_CHECK(strstr(coll_last_error(), ifname) != NULL, "message '%s'", coll_last_error());
    return 0;
  }
  RANK_CHECK(st == COLL_OK, "connect over lo");
  int rc = ring_copy_body(&t, arg->max_staging);
  tp_close(&t);
  return rc;
}

START_TEST(socket_ifname_selects_the_interface_or_names_the_bad_one) {
  test_arg_t arg = forced_arg("tcp", _i == 0 ? "t/if-lo/" : "t/if-bad/");
  setenv("COLL_SOCKET_IFNAME", _i == 0 ? "lo" : "no-such-if0", 1);
  ck_assert_int_eq(tp_run_ranks(2, ifname_rank, &arg.job, &arg, 30000), 0);
  unsetenv("COLL_SOCKET_IFNAME");
}
END_TEST

SUITE_MAIN("transport",
           suite_loop_tests("exchange", 120, 0, 8, ring_of_2_to_5_ranks_delivers_every_size_intact,
                            ring_receive_with_reduction_computes_operand_plus_incoming),
           suite_loop_tests("exchange", 120, 0, 2, all_pairs_exchange_at_once,
                            hundreds_of_sends_posted_before_their_receives_all_arrive,
                            small_and_large_messages_in_a_row_arrive_in_order),
           suite_tests("exchange", 120, shm_fifos_shrink_to_fit_the_inbox_budget),
           suite_loop_tests("exchange", 120, 0, 2,
                            wait_sleeps_while_idle_and_wakes_when_a_message_arrives,
                            an_early_message_does_not_wake_the_wait_for_another_peer),
           suite_loop_tests("exchange", 120, 0, 3,
                            shm_single_copy_path_delivers_reduces_and_reports_a_dead_sender),
           suite_tests("exchange", 120, hosts_pick_shm_within_and_tcp_across_in_one_set,
                       different_hosts_default_to_tcp),
           suite_loop_tests("errors", 60, 0, 2 * (int)NMISMATCH,
                            length_mismatch_is_a_protocol_error_naming_the_peer),
           suite_loop_tests("errors", 60, 0, 2,
                            killed_peer_is_reported_to_the_survivor_within_the_deadline),
           suite_tests("errors", 60, forcing_shm_across_hosts_fails_with_a_message),
           suite_loop_tests("errors", 60, 0, 2,
                            socket_ifname_selects_the_interface_or_names_the_bad_one))
