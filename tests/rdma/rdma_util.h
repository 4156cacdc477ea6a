/* Helpers of the 'rdma' tests: whether this machine has a usable RDMA port (the guest of
 * tests/rdma/run.sh has soft-RoCE rxe0; the host usually has none). A store server per
 * test (tp_run_ranks), the rank bodies and RANK_CHECK come from tests/transport
 * (tp_util.h, tp_cases.h). */
#ifndef TESTS_RDMA_RDMA_UTIL_H
#define TESTS_RDMA_RDMA_UTIL_H

#include <stdbool.h>
#include <stdio.h>

#include "coll.h"
#include "multiproc.h"
#include "tp_cases.h"
#include "tp_util.h"

/* True when the ib transport would find a device and an active port here. */
bool rdma_have_port(void);

#endif
