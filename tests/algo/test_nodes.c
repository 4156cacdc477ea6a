/* Check suite 'algo-nodes': the node map (algo/topo.h) and the node-aware all-reduces
 * (ring_nodes, two_level) in the simulator over many (ranks, ranks per node, placement)
 * combinations, round-robin placement included; how often their schedules cross nodes;
 * the cost model's choices with and without nodes. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "algo_check.h"
#include "suite_run.h"

static const coll_algo_t node_algos[] = {COLL_ALGO_RING_NODES, COLL_ALGO_TWO_LEVEL,
                                         COLL_ALGO_LEADERS};
enum { NNODE_ALGOS = sizeof node_algos / sizeof node_algos[0] };

/* ---- the map ---- */

START_TEST(node_map_numbers_nodes_by_their_lowest_rank) {
  const char *hosts[] = {"b", "a", "b", "c", "a", "b"};
  algo_topo_t t;
  ck_assert_int_eq(algo_topo_from_hosts(&t, 6, hosts), COLL_OK);
  ck_assert_int_eq(t.nnodes, 3);
  ck_assert_int_eq(t.max_local, 3);
  static const int node_of[] = {0, 1, 0, 2, 1, 0}, local_of[] = {0, 0, 1, 0, 1, 2};
  static const int order[] = {0, 2, 5, 1, 4, 3};
  for (int r = 0; r < 6; r++) {
    ck_assert_int_eq(t.node_of[r], node_of[r]);
    ck_assert_int_eq(t.local_of[r], local_of[r]);
    ck_assert_int_eq(t.node_ranks[r], order[r]);
  }
  ck_assert_int_eq(algo_topo_local_count(&t, 2), 1);
  ck_assert(!algo_topo_uniform(&t));
  char text[128];
  algo_topo_describe(&t, text, sizeof text);
  ck_assert_str_eq(text, "3 nodes of up to 3 ranks (unequal), node of each rank: 0 1 0 2 1 0");
  algo_topo_free(&t);
  ck_assert_int_eq(algo_topo_placed(&t, 8, 2, true), COLL_OK);
  ck_assert_int_eq(t.nnodes, 4);
  ck_assert(algo_topo_uniform(&t));
  for (int r = 0; r < 8; r++) ck_assert_int_eq(t.node_of[r], r % 4);
  ck_assert_int_eq(t.ring_out, 2); /* both of a node's ranks link to another node */
  algo_topo_describe(&t, text, sizeof text);
  ck_assert_str_eq(text, "4 nodes x 2 ranks, node of each rank: 0 1 2 3 0 1 2 3");
  algo_topo_free(&t);
}
END_TEST

/* ---- results ---- */

static void check_all(const algo_topo_t *t, int n) {
  static const struct {
    coll_dtype_t dtype;
    coll_op_t op;
  } type_ops[] = {{COLL_FLOAT32, COLL_SUM},
                  {COLL_INT32, COLL_SUM},
                  {COLL_FLOAT64, COLL_AVG},
                  {COLL_UINT8, COLL_MAX},
                  {COLL_FLOAT16, COLL_SUM}};
  /* 20000 float32: leaders' chain and tree form (ALGO_LEADERS_TREE_MIN_BYTES) */
  static const size_t counts[] = {1, 5, 67, 1031, 20000};
  for (size_t a = 0; a < NNODE_ALGOS; a++)
    for (size_t ci = 0; ci < 5; ci++)
      for (size_t ti = 0; ti < 5; ti++)
        for (int in_place = 0; in_place < 2; in_place++) {
          if (ci == 4 && (node_algos[a] != COLL_ALGO_LEADERS || ti > 1)) continue;
          run_case_t c = {.algo = node_algos[a],
                          .collective = COLL_KIND_ALL_REDUCE,
                          .nranks = n,
                          .count = counts[ci],
                          .dtype = type_ops[ti].dtype,
                          .op = type_ops[ti].op,
                          .in_place = in_place,
                          .segment_bytes = ci == 3   ? 40
                                           : ci == 4 ? 4000
                                                     : 0, /* many */
                          .topo = t};
          check_case(&c, NULL);
        }
}

/* Loop index: ranks 2..13; every ranks-per-node from 1 to n, block and round-robin. */
START_TEST(node_aware_allreduces_match_the_reference_for_every_placement) {
  int n = 2 + _i;
  for (int per_node = 1; per_node <= n; per_node++)
    for (int rr = 0; rr < 2; rr++) {
      algo_topo_t t;
      ck_assert_int_eq(algo_topo_placed(&t, n, per_node, rr), COLL_OK);
      check_all(&t, n);
      algo_topo_free(&t);
    }
}
END_TEST

START_TEST(node_aware_allreduces_match_the_reference_for_scattered_hosts) {
  uint32_t x = 12345;
  for (int trial = 0; trial < 12; trial++) {
    int n = 3 + trial % 9, hosts = 2 + trial % 4, ids[16];
    for (int r = 0; r < n; r++) {
      x = x * 1103515245u + 12345u;
      ids[r] = (int)((x >> 16) % (uint32_t)hosts);
    }
    algo_topo_t t;
    ck_assert_int_eq(algo_topo_from_ids(&t, n, ids), COLL_OK);
    check_all(&t, n);
    algo_topo_free(&t);
  }
}
END_TEST

START_TEST(node_aware_allreduces_run_without_a_map_as_one_node) {
  for (int n = 1; n <= 5; n++) check_all(NULL, n);
}
END_TEST

START_TEST(two_level_builds_ring_nodes_when_nodes_hold_unequal_counts) {
  int ids[] = {0, 0, 0, 1, 1};
  algo_topo_t t;
  ck_assert_int_eq(algo_topo_from_ids(&t, 5, ids), COLL_OK);
  sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                      .count = 100,
                      .dtype = COLL_FLOAT32,
                      .nranks = 5,
                      .topo = &t};
  ck_assert_int_eq(algo_effective(COLL_ALGO_TWO_LEVEL, &p), COLL_ALGO_RING_NODES);
  sched_t s;
  ck_assert_int_eq(algo_build(COLL_ALGO_TWO_LEVEL, &p, &s), COLL_OK);
  ck_assert_int_eq(s.algo, COLL_ALGO_RING_NODES);
  sched_free(&s);
  /* a map of other ranks than the call's is refused */
  p.nranks = 4;
  ck_assert_int_eq(algo_build(COLL_ALGO_RING_NODES, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  algo_topo_free(&t);
}
END_TEST

/* ---- crossings ---- */

/* Sends, over all ranks' schedules, whose peer is on another node; *steps: the longest
 * schedule's steps. */
static size_t cross_sends(coll_algo_t algo, const algo_topo_t *t, size_t count, size_t *steps) {
  size_t cross = 0;
  *steps = 0;
  for (int r = 0; r < t->nranks; r++) {
    sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                        .count = count,
                        .dtype = COLL_FLOAT32,
                        .rank = r,
                        .nranks = t->nranks,
                        .topo = t};
    sched_t s;
    ck_assert_int_eq(algo_build(algo, &p, &s), COLL_OK);
    for (size_t i = 0; i < s.nops; i++)
      if (s.ops[i].kind == SCHED_SEND && algo_topo_crosses(t, r, s.ops[i].peer)) cross++;
    if (s.nsteps > *steps) *steps = s.nsteps;
    sched_free(&s);
  }
  return cross;
}

/* Host ids alternating (a launcher's round-robin placement): one pass of the ring (one
 * step of every rank) leaves each node once and enters it once, 2 x nodes crossing ends,
 * nodes sends; the rank-order ring crosses on every link. */
START_TEST(ring_nodes_crosses_nodes_twice_per_node_per_pass_with_round_robin_placement) {
  static const struct {
    int n, per_node;
  } shapes[] = {{4, 2}, {8, 2}, {8, 4}, {12, 3}, {16, 4}, {6, 3}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int n = shapes[i].n;
    algo_topo_t t;
    ck_assert_int_eq(algo_topo_placed(&t, n, shapes[i].per_node, true), COLL_OK);
    size_t count = (size_t)n * 64, steps;
    size_t cross = cross_sends(COLL_ALGO_RING_NODES, &t, count, &steps);
    ck_assert_uint_eq(steps, 2 * (size_t)(n - 1)); /* one segment per chunk */
    ck_assert_msg(cross == (size_t)t.nnodes * steps,
                  "%d ranks on %d nodes: %zu sends cross nodes in %zu passes, expected %d per "
                  "pass (each node left once, entered once)",
                  n, t.nnodes, cross, steps, t.nnodes);
    size_t flat = cross_sends(COLL_ALGO_RING, &t, count, &steps);
    ck_assert_uint_eq(flat, (size_t)n * steps);
    algo_topo_free(&t);
  }
}
END_TEST

/* two_level sends 2 (N-1)/N S/k between nodes per rank and 2 (k-1)/k S inside. */
START_TEST(two_level_sends_one_kth_of_the_ring_bytes_between_nodes) {
  static const struct {
    int n, per_node, rr;
  } shapes[] = {{4, 2, 1}, {8, 2, 0}, {8, 4, 1}, {12, 3, 1}, {12, 4, 0}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int n = shapes[i].n, k = shapes[i].per_node, N = n / k;
    algo_topo_t t;
    ck_assert_int_eq(algo_topo_placed(&t, n, k, shapes[i].rr), COLL_OK);
    size_t count = (size_t)n * 96, S = count * 4;
    sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                        .count = count,
                        .dtype = COLL_FLOAT32,
                        .nranks = n,
                        .topo = &t};
    sim_config_t cfg = {.dtype = COLL_FLOAT32, .op = COLL_SUM};
    sim_result_t res;
    ck_assert_int_eq(sim_run_algo(COLL_ALGO_TWO_LEVEL, &p, &cfg, &res), COLL_OK);
    for (int r = 0; r < n; r++) {
      size_t inter = 0, intra = 0;
      for (int q = 0; q < n; q++) {
        size_t b = res.link_bytes[(size_t)r * (size_t)n + (size_t)q];
        if (algo_topo_crosses(&t, r, q))
          inter += b;
        else
          intra += b;
      }
      ck_assert_uint_eq(inter, 2 * (size_t)(N - 1) * S / ((size_t)N * (size_t)k));
      ck_assert_uint_eq(intra, 2 * (size_t)(k - 1) * S / (size_t)k);
    }
    sim_result_free(&res);
    algo_topo_free(&t);
  }
}
END_TEST

/* Only a node's leader (its lowest rank) sends to other nodes, log2 N whole buffers
 * for small messages (recursive doubling among N = 4 leaders). */
START_TEST(leaders_cross_nodes_from_the_leaders_only) {
  for (int rr = 0; rr < 2; rr++) {
    algo_topo_t t;
    ck_assert_int_eq(algo_topo_placed(&t, 12, 3, rr), COLL_OK);
    for (int r = 0; r < 12; r++) {
      sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                          .count = 100,
                          .dtype = COLL_FLOAT32,
                          .rank = r,
                          .nranks = 12,
                          .topo = &t};
      sched_t s;
      ck_assert_int_eq(algo_build(COLL_ALGO_LEADERS, &p, &s), COLL_OK);
      size_t cross = 0;
      for (size_t i = 0; i < s.nops; i++)
        if (s.ops[i].kind == SCHED_SEND && algo_topo_crosses(&t, r, s.ops[i].peer)) {
          cross++;
          ck_assert_uint_eq(s.ops[i].count, 100);
        }
      ck_assert_uint_eq(cross, t.local_of[r] == 0 ? 2 : 0);
      sched_free(&s);
    }
    algo_topo_free(&t);
  }
}
END_TEST

/* ---- the cost model ---- */

static const algo_cost_t two_kinds = {.alpha = 0.91e-6,
                                      .beta = 1.0 / 4.78e9,
                                      .gamma = 1.0 / 4.03e9,
                                      .inter_alpha = 10.7e-6,
                                      .inter_beta = 1.0 / 2.21e9};

START_TEST(one_node_chooses_as_without_a_map) {
  for (int n = 2; n <= 16; n++) {
    algo_topo_t t;
    ck_assert_int_eq(algo_topo_placed(&t, n, n, false), COLL_OK);
    for (size_t count = 1; count <= ((size_t)64 << 20); count *= 4) {
      sched_params_t p = {
          .collective = COLL_KIND_ALL_REDUCE, .count = count, .dtype = COLL_FLOAT32, .nranks = n};
      coll_algo_t flat = algo_select(&p, &algo_cost_shm_default);
      p.topo = &t;
      ck_assert_int_eq(algo_select(&p, &algo_cost_shm_default), flat);
      ck_assert_int_eq(algo_select(&p, &two_kinds),
                       algo_select(&p, &(algo_cost_t){.alpha = two_kinds.alpha,
                                                      .beta = two_kinds.beta,
                                                      .gamma = two_kinds.gamma}));
      ck_assert(fabs(algo_predict(COLL_ALGO_RING_NODES, &p, &two_kinds) -
                     algo_predict(COLL_ALGO_RING, &p, &two_kinds)) < 1e-12);
    }
    algo_topo_free(&t);
  }
}
END_TEST

START_TEST(several_nodes_choose_two_level_where_the_node_link_is_faster) {
  for (int rr = 0; rr < 2; rr++) {
    algo_topo_t t;
    ck_assert_int_eq(algo_topo_placed(&t, 16, 4, rr), COLL_OK);
    sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                        .count = (size_t)16 << 20,
                        .dtype = COLL_FLOAT32,
                        .nranks = 16,
                        .topo = &t};
    /* a node's own link ten times the network's: two_level from 64 KiB up (below, hd's
     * log2 n steps win) */
    algo_cost_t fast_inside = two_kinds;
    fast_inside.beta = two_kinds.inter_beta / 10;
    fast_inside.alpha = two_kinds.inter_alpha / 10;
    for (size_t count = 16384; count <= ((size_t)16 << 20); count *= 16) {
      p.count = count;
      ck_assert_msg(algo_select(&p, &fast_inside) == COLL_ALGO_TWO_LEVEL, "%zu floats: %s", count,
                    coll_algo_name(algo_select(&p, &fast_inside)));
    }
    /* small messages: leaders, 2 + 2 steps inside and 2 across */
    p.count = 256;
    ck_assert_msg(algo_select(&p, &two_kinds) == COLL_ALGO_LEADERS, "%s",
                  coll_algo_name(algo_select(&p, &two_kinds)));
    /* shm against loopback tcp (2x): two_level for its fewer steps between nodes */
    p.count = 16384;
    ck_assert_int_eq(algo_select(&p, &two_kinds), COLL_ALGO_TWO_LEVEL);
    /* round-robin: the rank-order ring shares each node's link four ways */
    p.count = (size_t)16 << 20;
    double ring = algo_predict(COLL_ALGO_RING, &p, &two_kinds);
    double nodes = algo_predict(COLL_ALGO_RING_NODES, &p, &two_kinds);
    if (rr)
      ck_assert(ring > 3.0 * nodes); /* bytes 4x, reductions alike */
    else
      ck_assert(fabs(ring - nodes) < 1e-12);
    algo_topo_free(&t);
  }
  /* unequal nodes: two_level is not offered */
  int ids[] = {0, 0, 0, 1, 1, 1, 1, 1};
  algo_topo_t t;
  ck_assert_int_eq(algo_topo_from_ids(&t, 8, ids), COLL_OK);
  sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                      .count = (size_t)16 << 20,
                      .dtype = COLL_FLOAT32,
                      .nranks = 8,
                      .topo = &t};
  ck_assert_int_ne(algo_select(&p, &two_kinds), COLL_ALGO_TWO_LEVEL);
  algo_topo_free(&t);
}
END_TEST

SUITE_MAIN("algo-nodes", suite_tests("map", 0, node_map_numbers_nodes_by_their_lowest_rank),
           suite_loop_tests("results", 120, 0, 12,
                            node_aware_allreduces_match_the_reference_for_every_placement),
           suite_tests("results", 120,
                       node_aware_allreduces_match_the_reference_for_scattered_hosts,
                       node_aware_allreduces_run_without_a_map_as_one_node,
                       two_level_builds_ring_nodes_when_nodes_hold_unequal_counts),
           suite_tests("crossings", 0,
                       ring_nodes_crosses_nodes_twice_per_node_per_pass_with_round_robin_placement,
                       two_level_sends_one_kth_of_the_ring_bytes_between_nodes,
                       leaders_cross_nodes_from_the_leaders_only),
           suite_tests("cost", 0, one_node_chooses_as_without_a_map,
                       several_nodes_choose_two_level_where_the_node_link_is_faster))
