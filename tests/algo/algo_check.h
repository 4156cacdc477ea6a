/* Shared helpers of the algo tests: run an algorithm in the simulator over real buffers
 * and check the results against a float64 / exact-integer reference. */
#ifndef TESTS_ALGO_ALGO_CHECK_H
#define TESTS_ALGO_ALGO_CHECK_H

#include <stddef.h>

#include "algo/schedule.h"
#include "sim/sim.h"

typedef struct {
  coll_algo_t algo;
  coll_kind_t collective;
  int nranks;
  size_t count;
  coll_dtype_t dtype;
  coll_op_t op;
  int in_place;
  size_t segment_bytes;
  int root;
  const algo_topo_t *topo; /* the node map for the node-aware algorithms; NULL: one node */
} run_case_t;

/* Simulate the case, check every rank's output; on failure abort the Check test with a
 * message naming the case. Fills *res (caller frees) when res != NULL. */
void check_case(const run_case_t *c, sim_result_t *res);

/* Human-readable case, for messages. */
const char *case_name(const run_case_t *c);

size_t test_dtype_size(coll_dtype_t t);

#endif
