/* Helpers of the 'rdma' tests: whether this machine has a usable RDMA port (the guest of
 * tests/rdma/run.sh has soft-RoCE rxe0; the host usually has none), a store server per
 * test and the rank-side check macro. */
#ifndef TESTS_RDMA_RDMA_UTIL_H
#define TESTS_RDMA_RDMA_UTIL_H

#include <stdbool.h>
#include <stdio.h>

#include "coll.h"
#include "multiproc.h"
#include "tp_util.h"

/* True when the ib transport would find a device and an active port here. */
bool rdma_have_port(void);

/* Run fn on n forked ranks against a fresh store server (job->port is set); returns
 * mp_run's count of failed ranks, or -1 when no store could start. */
int rdma_run_ranks(int n, mp_rank_fn fn, tp_job_t *job, void *arg, int timeout_ms);

#define RANK_CHECK(cond, ...)                                                               \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "rank %d: ", rank);                                                   \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fprintf(stderr, " (%s:%d; last error: %s)\n", __FILE__, __LINE__, coll_last_error()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

#endif
