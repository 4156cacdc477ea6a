/* The ib transport where there may be no RDMA device (this suite runs on every build with
 * libibverbs): COLL_TRANSPORT=ib must fail with a clear status and message, quickly,
 * never crash or hang; automatic choice between hosts must fall back to tcp; coll-info
 * must say what it found. Where a device exists (the soft-RoCE guest) the same tests
 * check the positive side instead: ib is used. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "coll_test_util.h"
#include "common/clock.h"
#include "rdma_util.h"
#include "suite_run.h"

static const char *const one_host[] = {"hostA", "hostA", "hostA"};
/* Ranks 0 and 1 share a host (shm between them), rank 2 is alone. */
static const char *const two_hosts[] = {"h0", "h0", "h1"};

typedef struct {
  tp_job_t job;
  bool have_port;
} arg_t;

/* Communicator with COLL_TRANSPORT=ib: an error naming ib and the missing device, or
 * (with a device) a working all-reduce over ib. */
static int forced_comm_rank(int rank, int nranks, void *p) {
  const arg_t *arg = p;
  ct_clean_env();
  setenv("COLL_TRANSPORT", "ib", 1);
  coll_config_t cfg = {.rank = rank,
                       .size = nranks,
                       .local_rank = rank,
                       .master_addr = "127.0.0.1",
                       .master_port = arg->job.port,
                       .host_store = 0, /* a helper process hosts it: no rank's exit ends it */
                       .timeout_ms = 10000};
  coll_comm_t *comm = NULL;
  int64_t start = coll_now_ms();
  coll_status_t st = coll_comm_init_config(&cfg, &comm);
  int64_t took = coll_now_ms() - start;
  if (arg->have_port) {
    RANK_CHECK(st == COLL_OK, "init over ib failed: %s", coll_status_name(st));
    float v = (float)rank;
    RANK_CHECK(coll_all_reduce(&v, &v, 1, COLL_FLOAT32, COLL_SUM, comm) == COLL_OK, "all-reduce");
    RANK_CHECK(v == (float)(nranks * (nranks - 1) / 2), "sum %g", (double)v);
    coll_comm_destroy(comm);
    return 0;
  }
  RANK_CHECK(st == COLL_ERR_UNSUPPORTED, "got %s, want COLL_ERR_UNSUPPORTED", coll_status_name(st));
  const char *msg = coll_last_error();
  RANK_CHECK(strstr(msg, "COLL_TRANSPORT=ib") != NULL, "message '%s' lacks COLL_TRANSPORT=ib", msg);
  RANK_CHECK(strstr(msg, "RDMA") != NULL, "message '%s' does not say RDMA is missing", msg);
  RANK_CHECK(took < 8000, "took %lld ms", (long long)took);
  if (rank == 0) fprintf(stderr, "rank 0: %s\n", msg);
  return 0;
}

START_TEST(forcing_ib_without_a_device_fails_init_with_a_clear_message) {
  arg_t arg = {.have_port = rdma_have_port()};
  ck_assert_int_eq(tp_run_ranks(2, forced_comm_rank, &arg.job, &arg, 30000), 0);
}
END_TEST

/* Transport level: the same through transport_set_connect, with three ranks. */
static int forced_set_rank(int rank, int nranks, void *p) {
  const arg_t *arg = p;
  tp_rank_t t;
  coll_status_t st = tp_open(&arg->job, rank, nranks, &t);
  if (arg->have_port) {
    RANK_CHECK(st == COLL_OK, "connect over ib");
    for (int peer = 0; peer < nranks; peer++)
      if (peer != rank)
        RANK_CHECK(strcmp(transport_set_conn(t.set, peer)->ops->name, "ib") == 0, "peer %d", peer);
  } else {
    RANK_CHECK(st == COLL_ERR_UNSUPPORTED, "got %s", coll_status_name(st));
    RANK_CHECK(strstr(coll_last_error(), "no RDMA device") != NULL ||
                   strstr(coll_last_error(), "no usable RDMA port") != NULL,
               "message '%s'", coll_last_error());
  }
  tp_close(&t);
  return 0;
}

START_TEST(forcing_ib_in_a_transport_set_names_the_missing_device) {
  arg_t arg = {
      .job = {.prefix = "host/forced/", .hosts = one_host, .forced = "ib", .timeout_ms = 10000},
      .have_port = rdma_have_port()};
  ck_assert_int_eq(tp_run_ranks(3, forced_set_rank, &arg.job, &arg, 30000), 0);
}
END_TEST

/* Ranks on different hosts try ib first; without a port on both sides they use tcp.
 * The set mixes shm with ib (or tcp), so its wait takes turns between the two. */
static int auto_rank(int rank, int nranks, void *p) {
  const arg_t *arg = p;
  tp_rank_t t;
  RANK_CHECK(tp_open(&arg->job, rank, nranks, &t) == COLL_OK, "connect");
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int peer = 0; peer < nranks; peer++) {
    if (peer == rank) continue;
    const char *want = strcmp(two_hosts[peer], two_hosts[rank]) == 0 ? "shm"
                       : arg->have_port                              ? "ib"
                                                                     : "tcp";
    RANK_CHECK(strcmp(transport_set_conn(t.set, peer)->ops->name, want) == 0,
               "peer %d uses %s, want %s", peer, transport_set_conn(t.set, peer)->ops->name, want);
  }
  char out[1000], in[1000];
  tp_fill(out, sizeof out, rank, 1);
  transport_recv_t r = {.dst = in, .len = sizeof in};
  RANK_CHECK(tp_recv(&t, prev, &r) == COLL_OK, "post recv");
  RANK_CHECK(tp_send(&t, next, out, sizeof out) == COLL_OK, "post send");
  RANK_CHECK(tp_drain(&t, 10000) == COLL_OK, "drain");
  RANK_CHECK(tp_check(in, sizeof in, prev, 1) == SIZE_MAX, "data differs");
  tp_close(&t);
  return 0;
}

START_TEST(different_hosts_use_ib_when_both_have_a_port_else_tcp_and_shm_within) {
  arg_t arg = {.job = {.prefix = "host/auto/", .hosts = two_hosts, .timeout_ms = 10000},
               .have_port = rdma_have_port()};
  ck_assert_int_eq(tp_run_ranks(3, auto_rank, &arg.job, &arg, 30000), 0);
}
END_TEST

/* Run coll-info (path in COLL_INFO_BIN) with one argument; its output and exit status. */
static int run_coll_info(const char *option, char *out, size_t len) {
  const char *bin = getenv("COLL_INFO_BIN");
  ck_assert_msg(bin != NULL, "COLL_INFO_BIN is not set (meson sets it)");
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "timeout 20 '%s' %s 2>&1", bin, option);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(coll_info_ib_lists_devices_or_says_there_is_none) {
  char out[16384];
  int rc = run_coll_info("--ib", out, sizeof out);
  fprintf(stderr, "coll-info --ib (exit %d):\n%s", rc, out);
  if (rdma_have_port()) {
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(out, "Pick: device") != NULL, "no pick in:\n%s", out);
    ck_assert_msg(strstr(out, "GID[") != NULL || strstr(out, "LID") != NULL, "no GIDs:\n%s", out);
  } else {
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(out, "none found") != NULL, "no 'none found' in:\n%s", out);
    ck_assert_msg(strstr(out, "Pick: none") != NULL, "no 'Pick: none' in:\n%s", out);
  }
}
END_TEST

START_TEST(coll_info_prints_build_features_and_transports) {
  char out[16384];
  int rc = run_coll_info("", out, sizeof out);
  ck_assert_int_eq(rc, 0);
  ck_assert_msg(strstr(out, "ibverbs: yes") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "  ib   RDMA verbs") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "  tcp") != NULL, "%s", out);
  ck_assert_int_eq(run_coll_info("--bogus", out, sizeof out), 2);
  ck_assert_msg(strstr(out, "usage") != NULL, "%s", out);
}
END_TEST

SUITE_MAIN("rdma_host",
           suite_tests("no device", 120,
                       forcing_ib_without_a_device_fails_init_with_a_clear_message,
                       forcing_ib_in_a_transport_set_names_the_missing_device,
                       different_hosts_use_ib_when_both_have_a_port_else_tcp_and_shm_within,
                       coll_info_ib_lists_devices_or_says_there_is_none,
                       coll_info_prints_build_features_and_transports))
