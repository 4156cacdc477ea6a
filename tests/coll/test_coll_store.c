/* Communicators on a store the caller provides (coll.h, coll_store_ops_t): collectives,
 * split and the destroy barrier on it, liveness kept as a lease that moves while a rank
 * lives and stops when it dies, its cost in store requests, tables that are wrong refused
 * by name, and the calls such a store cannot serve (an id for joiners) refused clearly.
 * The store is a real TCP store server the test hosts, reached through the table
 * (caller_store.h). A killed rank on this store: test_coll_elastic.c. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "caller_store.h"
#include "coll_test_util.h"
#include "common/clock.h"
#include "multiproc.h"
#include "suite_run.h"
#include "tp_util.h"

/* ---- collectives, split and destroy ---- */

static int rank_collectives(coll_comm_t *comm, int rank, int nranks) {
  int bad = ct_all_reduce(comm, rank, nranks, 1000, COLL_FLOAT32, COLL_SUM, 0, 1, "all-reduce");
  bad |= ct_all_reduce(comm, rank, nranks, 5, COLL_INT64, COLL_MAX, 1, 2, "small all-reduce");
  int v = rank == 1 ? 42 : 0;
  bad |= ct_ok(rank, "broadcast", coll_broadcast(&v, 1, COLL_INT32, 1, comm));
  if (v != 42) {
    fprintf(stderr, "rank %d: broadcast gave %d\n", rank, v);
    bad = 1;
  }
  coll_comm_t *half = NULL;
  bad |= ct_ok(rank, "split", coll_comm_split(comm, rank % 2, rank, &half));
  if (half != NULL) {
    int w = 1;
    bad |= ct_ok(rank, "all-reduce on the split",
                 coll_all_reduce(&w, &w, 1, COLL_INT32, COLL_SUM, half));
    int want = (nranks + (rank % 2 == 0)) / 2;
    if (w != want) {
      fprintf(stderr, "rank %d: the split's all-reduce gave %d, want %d\n", rank, w, want);
      bad = 1;
    }
    bad |= ct_ok(rank, "destroy the split", coll_comm_destroy(half));
  }
  bad |= ct_ok(rank, "destroy", coll_comm_destroy(comm));
  return bad;
}

START_TEST(collectives_split_and_destroy_work_on_the_callers_store) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  ct_job_t job = {.port = store.port,
                  .transport = _i ? "tcp" : "shm",
                  .store_elsewhere = true,
                  .caller_store = true};
  int failed = ct_run(3, 60000, &job, rank_collectives);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- the lease ---- */

typedef struct {
  int64_t lease_at[2]; /* rank 1's lease read by rank 0, 500 ms apart */
  int64_t requests;    /* store requests rank 1 made while idle for a second */
} lease_seen_t;

static lease_seen_t *seen;

static int64_t read_lease(uint16_t port, const char *key) {
  store_client_t *c = NULL;
  int64_t v = -1;
  if (store_client_connect("127.0.0.1", port, NULL, 5000, &c) == COLL_OK)
    store_add(c, key, 0, &v, 5000);
  store_client_close(c);
  return v;
}

static uint16_t lease_port;

static int rank_lease(coll_comm_t *comm, int rank, int nranks) {
  int bad = 0;
  (void)nranks;
  if (rank == 1) {
    caller_store_counts_t before = caller_store_counts();
    ct_sleep_ms(1000); /* idle: only the failure watcher talks to the store */
    caller_store_counts_t after = caller_store_counts();
    seen->requests = (after.set + after.get + after.add + after.check + after.compare_set) -
                     (before.set + before.get + before.add + before.check + before.compare_set);
  } else {
    ct_sleep_ms(200);
    seen->lease_at[0] = read_lease(lease_port, "coll/c1/alive/1");
    ct_sleep_ms(500);
    seen->lease_at[1] = read_lease(lease_port, "coll/c1/alive/1");
  }
  int v = 1;
  bad |= ct_ok(rank, "all-reduce", coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm));
  bad |= ct_ok(rank, "destroy", coll_comm_destroy(comm));
  return bad;
}

START_TEST(the_lease_moves_while_the_rank_lives_at_a_stated_cost) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  seen = mmap(NULL, sizeof *seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(seen, MAP_FAILED);
  memset(seen, 0, sizeof *seen);
  lease_port = store.port;
  ct_job_t job = {.port = store.port, .store_elsewhere = true, .caller_store = true};
  int failed = ct_run(2, 60000, &job, rank_lease);
  int64_t after_exit = read_lease(store.port, "coll/c1/alive/1");
  ct_sleep_ms(300);
  int64_t later = read_lease(store.port, "coll/c1/alive/1");
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
  fprintf(stderr,
          "lease of rank 1: %lld, then %lld 500 ms later; %lld store requests in an idle "
          "second\n",
          (long long)seen->lease_at[0], (long long)seen->lease_at[1], (long long)seen->requests);
  /* Renewed every 100 ms (COLL_LEASE_MS): about 5 in 500 ms, at least 2 on a busy host. */
  ck_assert_msg(seen->lease_at[0] > 0 && seen->lease_at[1] >= seen->lease_at[0] + 2,
                "the lease did not move: %lld then %lld", (long long)seen->lease_at[0],
                (long long)seen->lease_at[1]);
  /* The cost: one renewal and one get of the failure record a period, 20 a second; not
   * more than twice that. */
  ck_assert_msg(seen->requests > 0 && seen->requests <= 40, "%lld requests in a second",
                (long long)seen->requests);
  /* A rank that is gone renews nothing. */
  ck_assert_int_eq(later, after_exit);
  munmap(seen, sizeof *seen);
}
END_TEST

/* ---- tables that are wrong ---- */

static coll_status_t no_clone(void *s, int ms, void **copy) {
  (void)s;
  (void)ms;
  *copy = NULL;
  return COLL_ERR_SYSTEM;
}

/* Init of rank 0 of 2 on the table: the status, coll_last_error() in message. */
static coll_status_t init_on(const coll_store_ops_t *ops, void *store, char *message, size_t cap) {
  coll_config_t cfg = {.rank = 0, .size = 2, .local_rank = -1, .timeout_ms = 2000};
  cfg.store_ops = ops;
  cfg.store = store;
  coll_comm_t *comm = NULL;
  coll_status_t st = coll_comm_init_config(&cfg, &comm);
  snprintf(message, cap, "%s", coll_last_error());
  if (comm != NULL) coll_comm_destroy(comm);
  return st;
}

START_TEST(a_wrong_store_table_is_refused_naming_what_is_wrong) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  void *handle = caller_store_open(store.port, 5000);
  ck_assert_ptr_nonnull(handle);
  char message[1024];
  coll_store_ops_t ops = caller_store_ops;
  ck_assert_int_eq(init_on(&ops, NULL, message, sizeof message), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(message, "store_ops and store go together"), "%s", message);
  ops.version = 99;
  ck_assert_int_eq(init_on(&ops, handle, message, sizeof message), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(message, "version"), "%s", message);
  ops = caller_store_ops;
  ops.compare_set = NULL;
  ck_assert_int_eq(init_on(&ops, handle, message, sizeof message), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(message, "compare_set is missing"), "%s", message);
  ops = caller_store_ops;
  ops.clone = no_clone;
  ck_assert_int_eq(init_on(&ops, handle, message, sizeof message), COLL_ERR_SYSTEM);
  ck_assert_msg(strstr(message, "clone failed"), "%s", message);
  caller_store_free(handle);
  tp_store_stop(&store);
}
END_TEST

/* ---- what it cannot serve ---- */

static int rank_grow_id(coll_comm_t *comm, int rank, int nranks) {
  (void)nranks;
  coll_unique_id_t id;
  coll_status_t st = coll_comm_grow_id(comm, &id);
  int bad = 0;
  if (st != COLL_ERR_UNSUPPORTED || strstr(coll_last_error(), "caller's store") == NULL) {
    fprintf(stderr, "rank %d: grow id gave %s: %s\n", rank, coll_status_name(st),
            coll_last_error());
    bad = 1;
  }
  coll_agreement_t a = {.flag = 1};
  bad |= ct_ok(rank, "agree", coll_comm_agree(comm, &a));
  bad |= ct_ok(rank, "destroy", coll_comm_destroy(comm));
  return bad;
}

START_TEST(an_id_for_joiners_is_refused_on_the_callers_store) {
  tp_store_host_t store;
  ck_assert(tp_store_start(&store));
  ct_job_t job = {.port = store.port, .store_elsewhere = true, .caller_store = true};
  int failed = ct_run(2, 60000, &job, rank_grow_id);
  tp_store_stop(&store);
  ck_assert_int_eq(failed, 0);
}
END_TEST

SUITE_MAIN("coll store",
           suite_loop_tests("caller's store", 120, 0, 2,
                            collectives_split_and_destroy_work_on_the_callers_store),
           suite_tests("caller's store", 120, the_lease_moves_while_the_rank_lives_at_a_stated_cost,
                       a_wrong_store_table_is_refused_naming_what_is_wrong,
                       an_id_for_joiners_is_refused_on_the_callers_store))
