/* libnccl.so.2 with several ranks in one process, driven by one thread, as nccl-tests
 * drives its GPUs: ncclCommInitAll, and ncclGroupStart + one ncclCommInitRank per rank +
 * ncclGroupEnd; then collectives and a ring of sends and receives issued for every rank
 * inside one group, which must run side by side rather than wait for each other; premul
 * ops with device-residence scalars read at ncclGroupEnd. Built against our nccl.h and
 * against NVIDIA's (tests/nccl/meson.build). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "suite_run.h"

enum { MAX_RANKS = 4, COUNT = 1000 };

static void expect_ok(ncclResult_t r, const char *what) {
  ck_assert_msg(r == ncclSuccess, "%s: %s (%s)", what, ncclGetErrorString(r),
                ncclGetLastError(NULL));
}

/* One group: an all-reduce on every rank, then one sends to the next, all at once. */
static void use_the_clique(ncclComm_t *comms, int n) {
  static float data[MAX_RANKS][COUNT], ring_in[MAX_RANKS][COUNT];
  for (int r = 0; r < n; r++)
    for (int i = 0; i < COUNT; i++) data[r][i] = (float)(r + i % 7);
  expect_ok(ncclGroupStart(), "group start");
  for (int r = 0; r < n; r++)
    expect_ok(ncclAllReduce(data[r], data[r], COUNT, ncclFloat32, ncclSum, comms[r], NULL),
              "all_reduce in a group");
  expect_ok(ncclGroupEnd(), "group end");
  for (int r = 0; r < n; r++)
    for (int i = 0; i < COUNT; i++) {
      float want = (float)(n * (n - 1) / 2 + n * (i % 7));
      ck_assert_msg(data[r][i] == want, "rank %d [%d]: %g, want %g", r, i, data[r][i], want);
    }
  if (n < 2) return;
  expect_ok(ncclGroupStart(), "group start");
  for (int r = 0; r < n; r++) {
    expect_ok(ncclSend(data[r], COUNT, ncclFloat32, (r + 1) % n, comms[r], NULL), "send");
    expect_ok(ncclRecv(ring_in[r], COUNT, ncclFloat32, (r + n - 1) % n, comms[r], NULL), "recv");
  }
  expect_ok(ncclGroupEnd(), "group end");
  for (int r = 0; r < n; r++)
    ck_assert_msg(memcmp(ring_in[r], data[(r + n - 1) % n], sizeof ring_in[r]) == 0,
                  "rank %d received other data", r);
  for (int r = 0; r < n; r++) {
    int count = 0, me = -1;
    expect_ok(ncclCommCount(comms[r], &count), "count");
    expect_ok(ncclCommUserRank(comms[r], &me), "user rank");
    ck_assert_int_eq(count, n);
    ck_assert_int_eq(me, r);
  }
}

START_TEST(comm_init_all_makes_a_working_clique) {
  int n = _i;
  ncclComm_t comms[MAX_RANKS] = {0};
  expect_ok(ncclCommInitAll(comms, n, NULL), "ncclCommInitAll");
  use_the_clique(comms, n);
  for (int r = 0; r < n; r++) expect_ok(ncclCommDestroy(comms[r]), "destroy");
}
END_TEST

START_TEST(grouped_inits_from_one_thread_complete_together) {
  int n = _i;
  ncclUniqueId id;
  expect_ok(ncclGetUniqueId(&id), "id");
  ncclComm_t comms[MAX_RANKS] = {0};
  expect_ok(ncclGroupStart(), "group start");
  for (int r = 0; r < n; r++) expect_ok(ncclCommInitRank(&comms[r], n, id, r), "init in group");
  expect_ok(ncclGroupEnd(), "group end");
  use_the_clique(comms, n);
  for (int r = 0; r < n; r++) expect_ok(ncclCommDestroy(comms[r]), "destroy");
}
END_TEST

/* Each rank's ncclScalarDevice op (host scalars: this library's extension) is read when
 * ncclGroupEnd issues the calls, on the thread that runs that rank's calls: a value
 * changed after the calls were recorded is the one used, round after round, while a
 * ncclScalarHostImmediate op made from the same variable keeps its first value. */
START_TEST(device_scalars_are_read_when_the_group_ends) {
  int n = _i;
  ncclComm_t comms[MAX_RANKS] = {0};
  ncclRedOp_t dev[MAX_RANKS], imm[MAX_RANKS];
  static double scalar[MAX_RANKS], x[MAX_RANKS][COUNT], y[MAX_RANKS][COUNT];
  expect_ok(ncclCommInitAll(comms, n, NULL), "ncclCommInitAll");
  for (int r = 0; r < n; r++) {
    scalar[r] = r + 1;
    expect_ok(
        ncclRedOpCreatePreMulSum(&dev[r], &scalar[r], ncclFloat64, ncclScalarDevice, comms[r]),
        "create device-residence");
    expect_ok(ncclRedOpCreatePreMulSum(&imm[r], &scalar[r], ncclFloat64, ncclScalarHostImmediate,
                                       comms[r]),
              "create host-immediate");
  }
  for (int round = 0; round < 2; round++) {
    for (int r = 0; r < n; r++)
      for (int i = 0; i < COUNT; i++) x[r][i] = y[r][i] = r + i % 7;
    expect_ok(ncclGroupStart(), "group start");
    for (int r = 0; r < n; r++) {
      expect_ok(ncclAllReduce(x[r], x[r], COUNT, ncclFloat64, dev[r], comms[r], NULL), "dev");
      expect_ok(ncclAllReduce(y[r], y[r], COUNT, ncclFloat64, imm[r], comms[r], NULL), "imm");
    }
    for (int r = 0; r < n; r++) scalar[r] = (r + 1) * (round + 3);
    expect_ok(ncclGroupEnd(), "group end");
    for (int r = 0; r < n; r++)
      for (int i = 0; i < COUNT; i++) {
        double want = 0, want_imm = 0;
        for (int q = 0; q < n; q++) {
          want += (double)(q + 1) * (round + 3) * (q + i % 7);
          want_imm += (double)(q + 1) * (q + i % 7);
        }
        ck_assert_msg(x[r][i] == want, "round %d rank %d [%d]: %g, want %g", round, r, i, x[r][i],
                      want);
        ck_assert_msg(y[r][i] == want_imm, "round %d rank %d [%d]: host-immediate %g, want %g",
                      round, r, i, y[r][i], want_imm);
      }
  }
  for (int r = 0; r < n; r++) {
    expect_ok(ncclRedOpDestroy(dev[r], comms[r]), "destroy device-residence");
    expect_ok(ncclRedOpDestroy(imm[r], comms[r]), "destroy host-immediate");
    expect_ok(ncclCommDestroy(comms[r]), "destroy");
  }
}
END_TEST

START_TEST(init_all_refuses_bad_arguments) {
  ncclComm_t comms[2];
  ck_assert_int_eq(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "ndev"));
}
END_TEST

SUITE_MAIN("nccl threads",
           suite_loop_tests("one process", 120, 1, MAX_RANKS + 1,
                            comm_init_all_makes_a_working_clique,
                            grouped_inits_from_one_thread_complete_together,
                            device_scalars_are_read_when_the_group_ends),
           suite_tests("one process", 120, init_all_refuses_bad_arguments))
