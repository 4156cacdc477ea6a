/* gather, scatter and all_to_allv over real forked ranks, the real store and real
 * transports (shm, tcp), 1 to 4 ranks: every root, every type, in place and not, zero
 * counts, blocking and asynchronous, each forced algorithm; all_to_allv with uneven and
 * zero counts, a rank that sends nothing and displacements with gaps. Mismatched roots,
 * counts and all_to_allv counts fail on every rank naming the ranks; bad arguments are
 * refused with a message. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

enum { SENTINEL = 0xA5 };

typedef struct {
  ct_job_t job;
  int variant;
} case_t;

static int status_ok(const char *what, int rank, coll_status_t st) {
  if (st == COLL_OK) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_status_name(st), coll_last_error());
  return 1;
}

/* The blocking call's status, or the async call's after its wait. */
static coll_status_t finish(coll_status_t st, coll_request_t **req, bool async) {
  return async && st == COLL_OK ? coll_request_wait(req) : st;
}

/* Bytes of buf[from, to) still SENTINEL; prints the first that is not. */
static int untouched(const char *what, int rank, const unsigned char *buf, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (buf[i] != SENTINEL) {
      fprintf(stderr, "rank %d: %s: byte %zu outside the result was written\n", rank, what, i);
      return 1;
    }
  return 0;
}

/* One gather and one scatter from root of `count` elements of dt; 0 on success. */
static int gather_scatter(coll_comm_t *comm, int rank, int n, int root, coll_dtype_t dt,
                          size_t count, bool in_place, bool async, uint32_t salt) {
  size_t esz = coll_dtype_size(dt), block = count * esz, all = (size_t)n * block;
  unsigned char *big = malloc(all + 1), *mine = malloc(block + 1);
  int bad = 0;
  char what[96];
  coll_request_t *req = NULL;
  memset(big, SENTINEL, all + 1);
  memset(mine, SENTINEL, block + 1);
  /* gather: away from the root, recvbuf is NULL or a buffer that must stay untouched. */
  snprintf(what, sizeof what, "gather root %d %s %zu%s%s", root, coll_dtype_name(dt), count,
           in_place ? " in place" : "", async ? " async" : "");
  const void *send = mine;
  void *recv = rank == root || (salt & 1) ? big : NULL;
  if (rank == root && in_place) send = big + (size_t)root * block;
  ct_fill((void *)send, count, dt, COLL_SUM, rank, salt);
  coll_status_t st = async ? coll_gather_async(send, recv, count, dt, root, comm, &req)
                           : coll_gather(send, recv, count, dt, root, comm);
  bad += status_ok(what, rank, finish(st, &req, async));
  if (!bad && rank == root)
    for (int r = 0; r < n; r++)
      bad += ct_check_broadcast(big + (size_t)r * block, count, dt, r, salt, what) != 0;
  if (!bad && rank != root) bad += untouched(what, rank, big, 0, all + 1);
  /* scatter: block p of the root's sendbuf, ct_fill of rank p; sendbuf NULL elsewhere at
   * times. */
  snprintf(what, sizeof what, "scatter root %d %s %zu%s%s", root, coll_dtype_name(dt), count,
           in_place ? " in place" : "", async ? " async" : "");
  memset(big, SENTINEL, all + 1);
  memset(mine, SENTINEL, block + 1);
  if (rank == root)
    for (int p = 0; p < n; p++) ct_fill(big + (size_t)p * block, count, dt, COLL_SUM, p, salt + 1);
  const void *ssend = rank == root || (salt & 1) ? big : NULL;
  void *srecv = rank == root && in_place ? big + (size_t)root * block : mine;
  st = async ? coll_scatter_async(ssend, srecv, count, dt, root, comm, &req)
             : coll_scatter(ssend, srecv, count, dt, root, comm);
  bad += status_ok(what, rank, finish(st, &req, async));
  if (!bad) bad += ct_check_broadcast(srecv, count, dt, rank, salt + 1, what) != 0;
  if (!bad && srecv == mine) bad += untouched(what, rank, mine, block, block + 1);
  free(big);
  free(mine);
  return bad;
}

static int rank_gather_scatter(coll_comm_t *comm, int rank, int n) {
  static const coll_algo_t algos[] = {COLL_ALGO_AUTO, COLL_ALGO_MASTER, COLL_ALGO_TREE};
  static const size_t counts[] = {0, 1, 37};
  int bad = 0;
  uint32_t salt = 0; /* every rank takes the same turns */
  for (size_t a = 0; a < 3 && !bad; a++) {
    bad += status_ok("set_algo", rank, coll_comm_set_algo(comm, algos[a]));
    for (int root = 0; root < n && !bad; root++)
      for (int dt = 0; dt < COLL_DTYPE_COUNT && !bad; dt++)
        for (size_t k = 0; k < 3 && !bad; k++, salt++)
          bad += gather_scatter(comm, rank, n, root, (coll_dtype_t)dt, counts[k], salt % 3 == 1,
                                salt % 4 == 3, salt);
    /* Several segments (COLL_CHUNK_SIZE 65536) per block. */
    for (int root = 0; root < n && !bad; root++, salt++)
      bad +=
          gather_scatter(comm, rank, n, root, COLL_FLOAT32, 40001, root % 2 == 1, root == 2, salt);
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

static const int sizes[] = {1, 2, 3, 4};

START_TEST(gather_and_scatter_from_every_root_over_shm_match_the_inputs) {
  case_t c = {
      .job = {.port = mp_free_port(), .transport = "shm", .chunk = "65536", .timeout_ms = 10000}};
  ck_assert_int_eq(ct_run(sizes[_i], 90000, &c.job, rank_gather_scatter), 0);
}
END_TEST

START_TEST(gather_and_scatter_from_every_root_over_tcp_match_the_inputs) {
  case_t c = {
      .job = {.port = mp_free_port(), .transport = "tcp", .chunk = "65536", .timeout_ms = 10000}};
  ck_assert_int_eq(ct_run(sizes[_i + 1], 90000, &c.job, rank_gather_scatter), 0);
}
END_TEST

/* What rank `from` sends rank `to` in pattern k: uneven, zero for some pairs, nothing at
 * all from the last rank (pattern 0), a large block between ranks 0 and 1 (pattern 2). */
static size_t pair_count(int k, int n, int from, int to) {
  if (k == 0 && from == n - 1) return 0;
  if (k == 2 && from == 0 && to == n - 1) return 70001;
  size_t c = (size_t)((from * 3 + to * 5 + k) % 4) * (size_t)(1 + from + to);
  return c;
}

/* One all_to_allv in pattern k; the displacements leave a gap of 3 elements before every
 * block and lay the blocks out in reverse peer order. */
static int alltoallv_round(coll_comm_t *comm, int rank, int n, coll_dtype_t dt, int k, bool async,
                           uint32_t salt) {
  size_t esz = coll_dtype_size(dt);
  size_t sc[4], sd[4], rc[4], rd[4], stotal = 0, rtotal = 0;
  for (int p = n - 1; p >= 0; p--) {
    sc[p] = pair_count(k, n, rank, p);
    rc[p] = pair_count(k, n, p, rank);
    sd[p] = stotal + 3;
    rd[p] = rtotal + 3;
    stotal += sc[p] + 3;
    rtotal += rc[p] + 3;
  }
  unsigned char *send = malloc(stotal * esz + 1), *recv = malloc(rtotal * esz + 1);
  memset(send, SENTINEL, stotal * esz + 1);
  memset(recv, SENTINEL, rtotal * esz + 1);
  for (int p = 0; p < n; p++)
    ct_fill(send + sd[p] * esz, sc[p], dt, COLL_SUM, rank, salt + 131u * (uint32_t)p);
  char what[96];
  snprintf(what, sizeof what, "all_to_allv pattern %d %s%s", k, coll_dtype_name(dt),
           async ? " async" : "");
  coll_request_t *req = NULL;
  coll_status_t st = async ? coll_all_to_allv_async(send, sc, sd, recv, rc, rd, dt, comm, &req)
                           : coll_all_to_allv(send, sc, sd, recv, rc, rd, dt, comm);
  int bad = status_ok(what, rank, finish(st, &req, async));
  size_t at = 0;
  for (int p = n - 1; p >= 0 && !bad; p--) {
    bad += untouched(what, rank, recv, at * esz, rd[p] * esz);
    bad += ct_check_broadcast(recv + rd[p] * esz, rc[p], dt, p, salt + 131u * (uint32_t)rank,
                              what) != 0;
    at = rd[p] + rc[p];
  }
  if (!bad) bad += untouched(what, rank, recv, at * esz, rtotal * esz + 1);
  free(send);
  free(recv);
  return bad;
}

static int rank_alltoallv(coll_comm_t *comm, int rank, int n) {
  int bad = 0;
  uint32_t salt = 7;
  for (int dt = 0; dt < COLL_DTYPE_COUNT && !bad; dt++)
    for (int k = 0; k < 3 && !bad; k++, salt++)
      bad += alltoallv_round(comm, rank, n, (coll_dtype_t)dt, k, salt % 3 == 0, salt);
  /* The same layout again (the cached schedule), then a different one. */
  for (int k = 0; k < 3 && !bad; k++, salt++)
    bad += alltoallv_round(comm, rank, n, COLL_INT32, 1, k == 1, salt);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

START_TEST(all_to_allv_with_uneven_counts_and_gaps_over_shm_matches_the_inputs) {
  case_t c = {
      .job = {.port = mp_free_port(), .transport = "shm", .chunk = "65536", .timeout_ms = 10000}};
  ck_assert_int_eq(ct_run(sizes[_i], 90000, &c.job, rank_alltoallv), 0);
}
END_TEST

START_TEST(all_to_allv_with_uneven_counts_and_gaps_over_tcp_matches_the_inputs) {
  case_t c = {
      .job = {.port = mp_free_port(), .transport = "tcp", .chunk = "65536", .timeout_ms = 10000}};
  ck_assert_int_eq(ct_run(sizes[_i + 1], 90000, &c.job, rank_alltoallv), 0);
}
END_TEST

/* Mismatches: variant 0 gather with rank 1's root different, 1 scatter with rank 1's
 * count different, 2 all_to_allv where rank 0 sends rank 1 three elements and rank 1
 * expects two, 3 all_to_allv against rank 1's all_to_all, 4 all_to_allv with rank 1's
 * type different, 5 as 2 with blocks of several segments (100000 elements sent, 99999
 * expected). Every rank must fail with COLL_ERR_MISMATCH naming the ranks. */
static int rank_mismatch(coll_comm_t *comm, int rank, int n, void *arg) {
  const case_t *c = arg;
  enum { BIG = 100000 };
  float *a = calloc(4 * BIG + 64, sizeof *a), *b = calloc(4 * BIG + 64, sizeof *b);
  size_t sc[4], sd[4], rc[4], rd[4];
  for (int p = 0; p < n; p++) {
    sc[p] = rc[p] = 2;
    sd[p] = rd[p] = (size_t)p * 4;
  }
  coll_status_t st;
  const char *needle[6] = {"root 1",
                           "scatter(float32, 5",
                           "rank 0 sends 3 to rank 1, which expects 2",
                           "all_to_all(float32, 2)",
                           "all_to_allv(int32, per-peer counts)",
                           "rank 0 sends 100000 to rank 1, which expects 99999"};
  coll_barrier(comm);
  switch (c->variant) {
    case 0:
      st = coll_gather(a, b, 2, COLL_FLOAT32, rank == 1 ? 1 : 0, comm);
      break;
    case 1:
      st = coll_scatter(a, b, rank == 1 ? 5 : 2, COLL_FLOAT32, 0, comm);
      break;
    case 2:
      if (rank == 0) sc[1] = 3;
      st = coll_all_to_allv(a, sc, sd, b, rc, rd, COLL_FLOAT32, comm);
      break;
    case 3:
      st = rank == 1 ? coll_all_to_all(a, b, 2, COLL_FLOAT32, comm)
                     : coll_all_to_allv(a, sc, sd, b, rc, rd, COLL_FLOAT32, comm);
      break;
    case 4:
      st = coll_all_to_allv(a, sc, sd, b, rc, rd, rank == 1 ? COLL_INT32 : COLL_FLOAT32, comm);
      break;
    default:
      for (int p = 0; p < n; p++) {
        sc[p] = rc[p] = BIG - 1;
        sd[p] = rd[p] = (size_t)p * BIG;
      }
      if (rank == 0) sc[1] = BIG;
      st = coll_all_to_allv(a, sc, sd, b, rc, rd, COLL_FLOAT32, comm);
  }
  int bad = 0;
  const char *msg = coll_last_error();
  if (st != COLL_ERR_MISMATCH || strstr(msg, needle[c->variant]) == NULL ||
      strstr(msg, "rank 0") == NULL || strstr(msg, "rank 1") == NULL) {
    fprintf(stderr, "rank %d: variant %d over %s: got %s: %s\n", rank, c->variant, c->job.transport,
            coll_status_name(st), msg);
    bad = 1;
  }
  coll_comm_abort(comm);
  coll_comm_destroy(comm);
  free(a);
  free(b);
  return bad;
}

START_TEST(mismatched_roots_counts_and_all_to_allv_counts_fail_on_every_rank) {
  static const char *const transports[] = {"shm", "tcp"};
  for (int t = 0; t < 2; t++)
    for (int n = 2; n <= 4; n++) {
      case_t c = {.job = {.port = mp_free_port(), .transport = transports[t], .timeout_ms = 10000},
                  .variant = _i};
      ck_assert_msg(ct_run_arg(n, 30000, &c.job, rank_mismatch, &c) == 0,
                    "variant %d, %d ranks over %s", _i, n, transports[t]);
    }
}
END_TEST

static int expect_status(const char *what, coll_status_t want, coll_status_t st,
                         const char *needle) {
  if (st == want && strstr(coll_last_error(), needle) != NULL) return 0;
  fprintf(stderr, "%s: got %s (%s), want %s with '%s'\n", what, coll_status_name(st),
          coll_last_error(), coll_status_name(want), needle);
  return 1;
}

static int rank_bad_args(coll_comm_t *comm, int rank, int n) {
  float x[64] = {0};
  size_t cnt[2] = {1, 1}, displ[2] = {0, 1};
  coll_request_t *req = NULL;
  int bad = 0;
  const coll_status_t inval = COLL_ERR_INVALID_ARGUMENT;
  char who[64];
  snprintf(who, sizeof who, "rank %d: coll_gather", rank);
  bad += expect_status("gather root", inval, coll_gather(x, x + 32, 1, COLL_FLOAT32, n, comm), who);
  bad += expect_status("gather root message", inval,
                       coll_gather(x, x + 32, 1, COLL_FLOAT32, -1, comm), "root -1");
  bad += expect_status("gather NULL sendbuf", inval, coll_gather(NULL, x, 1, COLL_FLOAT32, 0, comm),
                       "sendbuf is NULL");
  if (rank == 0) {
    bad += expect_status("gather NULL recvbuf at root", inval,
                         coll_gather(x, NULL, 1, COLL_FLOAT32, 0, comm), "recvbuf is NULL");
    bad += expect_status("gather overlap", inval, coll_gather(x + 1, x, 4, COLL_FLOAT32, 0, comm),
                         "in-place at the root is sendbuf == recvbuf + root * sendcount");
    bad += expect_status("scatter overlap", inval, coll_scatter(x, x + 1, 4, COLL_FLOAT32, 0, comm),
                         "in-place at the root is recvbuf == sendbuf + root * recvcount");
  }
  bad += expect_status("scatter NULL recvbuf", inval,
                       coll_scatter(x, NULL, 1, COLL_FLOAT32, 0, comm), "recvbuf is NULL");
  bad += expect_status("scatter dtype", inval,
                       coll_scatter(x, x + 32, 1, COLL_DTYPE_COUNT, 0, comm), "unknown dtype");
  bad += expect_status("gather_async request", inval,
                       coll_gather_async(x, x + 32, 1, COLL_FLOAT32, 0, comm, NULL),
                       "request is NULL");
  bad += expect_status("alltoallv NULL counts", inval,
                       coll_all_to_allv(x, NULL, displ, x + 32, cnt, displ, COLL_FLOAT32, comm),
                       "sendcounts is NULL");
  bad += expect_status("alltoallv NULL rdispls", inval,
                       coll_all_to_allv(x, cnt, displ, x + 32, cnt, NULL, COLL_FLOAT32, comm),
                       "rdispls is NULL");
  bad += expect_status("alltoallv overlap", inval,
                       coll_all_to_allv(x, cnt, displ, x + 1, cnt, displ, COLL_FLOAT32, comm),
                       "overlap");
  bad += expect_status("alltoallv NULL recvbuf", inval,
                       coll_all_to_allv(x, cnt, displ, NULL, cnt, displ, COLL_FLOAT32, comm),
                       "recvbuf is NULL");
  size_t huge[2] = {SIZE_MAX, 1};
  bad += expect_status("alltoallv overflow", inval,
                       coll_all_to_allv(x, cnt, huge, x + 32, cnt, displ, COLL_FLOAT32, comm),
                       "overflows");
  bad += expect_status(
      "alltoallv_async request", inval,
      coll_all_to_allv_async(x, cnt, displ, x + 32, cnt, displ, COLL_FLOAT32, comm, NULL),
      "request is NULL");
  coll_group_start(comm);
  bad += expect_status("alltoallv in a group", COLL_ERR_UNSUPPORTED,
                       coll_all_to_allv(x, cnt, displ, x + 32, cnt, displ, COLL_FLOAT32, comm),
                       "inside a group");
  bad += status_ok("empty group", rank, coll_group_end(comm));
  if (req != NULL) bad++;
  /* The communicator still works, and a zero-count all_to_allv with NULL buffers too. */
  size_t zero[2] = {0, 0};
  bad += status_ok("all_to_allv of nothing", rank,
                   coll_all_to_allv(NULL, zero, zero, NULL, zero, zero, COLL_FLOAT32, comm));
  bad += status_ok("barrier", rank, coll_barrier(comm));
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

START_TEST(bad_arguments_are_refused_with_a_message_naming_the_rank_and_call) {
  case_t c = {.job = {.port = mp_free_port(), .transport = "shm"}};
  ck_assert_int_eq(ct_run(2, 30000, &c.job, rank_bad_args), 0);
}
END_TEST

SUITE_MAIN("coll gather",
           suite_loop_tests("gather, scatter, all_to_allv", 150, 0, 4,
                            gather_and_scatter_from_every_root_over_shm_match_the_inputs),
           suite_loop_tests("gather, scatter, all_to_allv", 150, 0, 3,
                            gather_and_scatter_from_every_root_over_tcp_match_the_inputs),
           suite_loop_tests("gather, scatter, all_to_allv", 150, 0, 4,
                            all_to_allv_with_uneven_counts_and_gaps_over_shm_matches_the_inputs),
           suite_loop_tests("gather, scatter, all_to_allv", 150, 0, 3,
                            all_to_allv_with_uneven_counts_and_gaps_over_tcp_matches_the_inputs),
           suite_loop_tests("gather, scatter, all_to_allv", 150, 0, 6,
                            mismatched_roots_counts_and_all_to_allv_counts_fail_on_every_rank),
           suite_tests("gather, scatter, all_to_allv", 150,
                       bad_arguments_are_refused_with_a_message_naming_the_rank_and_call))
