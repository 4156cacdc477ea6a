/* All-reduce and broadcast results over real forked ranks, real store and transports:
 * every type and op at 4 ranks; every algorithm x transport x rank count for float32
 * sum (plus an exact integer case); broadcast from every root. Each rank checks its
 * result against a reference and all ranks check they hold identical bytes. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

enum { BIG = (1 << 20) + 3 };

static const coll_algo_t algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD, COLL_ALGO_MASTER};
enum { NALGOS = sizeof algos / sizeof algos[0] };

typedef struct {
  ct_job_t job;
  coll_algo_t algo; /* AUTO: loop over all algorithms */
} case_t;

static int rank_all_types_and_ops(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  int fails = 0;
  if (coll_comm_set_algo(comm, c->algo) != COLL_OK) fails++;
  static const size_t counts[] = {0, 1, 7, 1023, 4099};
  uint32_t salt = 1;
  for (int dt = 0; dt < COLL_DTYPE_COUNT && fails == 0; dt++)
    for (int op = 0; op < COLL_OP_COUNT && fails == 0; op++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int in_place = 0; in_place < 2; in_place++)
          if (ct_op_applies((coll_dtype_t)dt, (coll_op_t)op))
            fails += ct_all_reduce(comm, rank, nranks, counts[k], (coll_dtype_t)dt, (coll_op_t)op,
                                   in_place, salt++, "types x ops");
  /* The big count once per type family, sum only. */
  fails += ct_all_reduce(comm, rank, nranks, BIG, COLL_FLOAT32, COLL_SUM, 0, 99, "big");
  fails += ct_all_reduce(comm, rank, nranks, BIG, COLL_INT32, COLL_SUM, 1, 98, "big");
  if (coll_comm_destroy(comm) != COLL_OK) fails++;
  return fails ? 1 : 0;
}

START_TEST(all_types_and_ops_match_the_reference_on_4_ranks) {
  case_t c = {.job = {.port = mp_free_port()}, .algo = COLL_ALGO_RING};
  ck_assert_int_eq(ct_run_arg(4, 90000, &c.job, rank_all_types_and_ops, &c), 0);
}
END_TEST

static int rank_algorithms(coll_comm_t *comm, int rank, int nranks, void *arg) {
  const case_t *c = arg;
  int fails = 0;
  static const size_t counts[] = {0, 1, 7, 1023, BIG};
  for (int a = 0; a < NALGOS; a++) {
    char tag[64];
    snprintf(tag, sizeof tag, "%s over %s", coll_algo_name(algos[a]),
             c->job.transport ? c->job.transport : "auto");
    if (coll_comm_set_algo(comm, algos[a]) != COLL_OK) fails++;
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
      for (int in_place = 0; in_place < 2; in_place++) {
        /* 8 ranks on 2 cores: the big count out-of-place only, to keep the suite fast. */
        if (counts[k] == BIG && in_place && nranks > 5) continue;
        fails += ct_all_reduce(comm, rank, nranks, counts[k], COLL_FLOAT32, COLL_SUM, in_place,
                               (uint32_t)(k * 2 + (size_t)in_place), tag);
      }
    fails += ct_all_reduce(comm, rank, nranks, 1023, COLL_INT64, COLL_SUM, 0, 7, tag);
    fails += ct_all_reduce(comm, rank, nranks, 77, COLL_FLOAT64, COLL_AVG, 1, 8, tag);
  }
  if (coll_comm_destroy(comm) != COLL_OK) fails++;
  return fails ? 1 : 0;
}

/* Small segments give steps with hundreds of ops (hd: all sends to a partner, then all
 * receives from it) and schedules with thousands: the window must never hold back an op
 * of the oldest step. */
static int rank_small_segments(coll_comm_t *comm, int rank, int nranks) {
  int fails = 0;
  for (int a = 0; a < NALGOS; a++) {
    char tag[64];
    snprintf(tag, sizeof tag, "%s with 4 KiB segments", coll_algo_name(algos[a]));
    if (coll_comm_set_algo(comm, algos[a]) != COLL_OK) fails++;
    fails += ct_all_reduce(comm, rank, nranks, 300001, COLL_FLOAT32, COLL_SUM, 0, 5, tag);
    fails += ct_all_reduce(comm, rank, nranks, 300001, COLL_FLOAT32, COLL_SUM, 1, 6, tag);
  }
  if (coll_comm_destroy(comm) != COLL_OK) fails++;
  return fails ? 1 : 0;
}

START_TEST(steps_with_hundreds_of_segments_complete) {
  case_t c = {.job = {.port = mp_free_port(), .chunk = "4096"}};
  ck_assert_int_eq(ct_run(4, 100000, &c.job, rank_small_segments), 0);
}
END_TEST

static const int rank_counts[] = {1, 2, 3, 4, 5, 8};
enum { NRANK_COUNTS = sizeof rank_counts / sizeof rank_counts[0] };

/* Loop index i: transport (shm, tcp) x rank count. */
START_TEST(every_algorithm_matches_the_reference_for_every_transport_and_rank_count) {
  case_t c = {.job = {.port = mp_free_port(), .transport = (_i / NRANK_COUNTS) ? "tcp" : "shm"}};
  int n = rank_counts[_i % NRANK_COUNTS];
  ck_assert_msg(ct_run_arg(n, 100000, &c.job, rank_algorithms, &c) == 0, "%d ranks over %s failed",
                n, c.job.transport);
}
END_TEST

static int rank_broadcasts(coll_comm_t *comm, int rank, int nranks) {
  int fails = 0;
  static const size_t counts[] = {0, 1, 7, 1023, 65539};
  char *buf = malloc((size_t)BIG * 4);
  if (buf == NULL) return 1;
  for (int a = 0; a < NALGOS; a++) {
    if (coll_comm_set_algo(comm, algos[a]) != COLL_OK) fails++;
    for (int root = 0; root < nranks; root++) {
      for (size_t k = 0; k <= sizeof counts / sizeof counts[0]; k++) {
        /* The big count only from the last root, to keep the suite fast. */
        size_t count = k < sizeof counts / sizeof counts[0] ? counts[k] : BIG;
        if (count == BIG && (root != nranks - 1 || algos[a] == COLL_ALGO_MASTER)) continue;
        coll_dtype_t dt = k % 2 ? COLL_FLOAT32 : COLL_UINT8;
        uint32_t salt = (uint32_t)(root * 16 + (int)k);
        if (rank == root)
          ct_fill(buf, count, dt, COLL_SUM, root, salt);
        else
          memset(buf, 0x5A, count * coll_dtype_size(dt));
        char what[128];
        snprintf(what, sizeof what, "rank %d: %s broadcast root %d count %zu", rank,
                 coll_algo_name(algos[a]), root, count);
        coll_status_t st = coll_broadcast(buf, count, dt, root, comm);
        if (st != COLL_OK) {
          fprintf(stderr, "%s: %s: %s\n", what, coll_status_name(st), coll_last_error());
          fails++;
          continue;
        }
        if (ct_check_broadcast(buf, count, dt, root, salt, what) != 0)
          fails++;
        else if (ct_agree(comm, buf, count * coll_dtype_size(dt), what) != 0)
          fails++;
      }
    }
  }
  free(buf);
  if (coll_comm_destroy(comm) != COLL_OK) fails++;
  return fails ? 1 : 0;
}

static const int bcast_rank_counts[] = {1, 2, 3, 5, 8};
enum { NBCAST = sizeof bcast_rank_counts / sizeof bcast_rank_counts[0] };

START_TEST(broadcast_from_every_root_reaches_every_rank) {
  case_t c = {.job = {.port = mp_free_port(), .transport = (_i / NBCAST) ? "tcp" : "shm"}};
  int n = bcast_rank_counts[_i % NBCAST];
  ck_assert_msg(ct_run(n, 100000, &c.job, rank_broadcasts) == 0, "%d ranks over %s failed", n,
                c.job.transport);
}
END_TEST

SUITE_MAIN(
    "coll results",
    suite_tests("all-reduce", 120, all_types_and_ops_match_the_reference_on_4_ranks,
                steps_with_hundreds_of_segments_complete),
    suite_loop_tests("all-reduce", 120, 0, 2 * NRANK_COUNTS,
                     every_algorithm_matches_the_reference_for_every_transport_and_rank_count),
    suite_loop_tests("broadcast", 120, 0, 2 * NBCAST, broadcast_from_every_root_reaches_every_rank))
