/* Check suite 'algo' (timing simulator for large jobs, sim_time.h): it runs sim.c's rounds
 * exactly, prices them on a topology whose uplinks the round's flows share, counts the
 * bytes each node's uplink carries, and completes at 16,384 ranks. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "algo/algo_internal.h"
#include "algo/topo.h"
#include "sim/sim.h"
#include "sim/sim_time.h"
#include "suite_run.h"

static sched_params_t params(coll_kind_t kind, int n, size_t count) {
  return (sched_params_t){.collective = kind, .count = count, .dtype = COLL_FLOAT32, .nranks = n};
}

/* A topology with only bandwidths (no latency), so that times are bytes / bandwidth. */
static sim_topo_t bandwidth_only(int per_node) {
  sim_topo_t t;
  sim_topo_default(&t);
  t.ranks_per_node = per_node;
  t.intra_latency_s = t.uplink_latency_s = t.message_latency_s = 0;
  t.intra_bw = 100e9;
  t.uplink_bw = 10e9;
  return t;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

START_TEST(rounds_messages_and_uplink_bytes_match_sim_c_for_every_algorithm) {
  static const coll_kind_t kinds[] = {
      COLL_KIND_ALL_REDUCE, COLL_KIND_BROADCAST,      COLL_KIND_REDUCE,
      COLL_KIND_ALL_GATHER, COLL_KIND_REDUCE_SCATTER, COLL_KIND_ALL_TO_ALL,
      COLL_KIND_GATHER,     COLL_KIND_SCATTER,        COLL_KIND_BARRIER};
  static const int ranks[] = {2, 3, 5, 8, 13, 16, 33};
  static const size_t counts[] = {1, 1000, 262147};
  int compared = 0;
  for (size_t kk = 0; kk < sizeof kinds / sizeof kinds[0]; kk++)
    for (int algo = COLL_ALGO_RING; algo < COLL_ALGO_COUNT; algo++)
      for (size_t ni = 0; ni < sizeof ranks / sizeof ranks[0]; ni++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
          int n = ranks[ni];
          sched_params_t p = params(kinds[kk], n, counts[ci]);
          p.root = n / 2;
          sim_config_t cfg = {.dtype = COLL_FLOAT32, .op = COLL_SUM};
          sim_result_t ref;
          if (sim_run_algo((coll_algo_t)algo, &p, &cfg, &ref) != COLL_OK) continue;
          sim_topo_t topo = bandwidth_only(4);
          sim_time_result_t res;
          coll_status_t st = sim_time_algo((coll_algo_t)algo, &p, &topo, &res);
          ck_assert_msg(st == COLL_OK, "kind %d algo %d n %d: %s", kinds[kk], algo, n,
                        coll_last_error());
          ck_assert_msg(res.nrounds == ref.nrounds,
                        "kind %d algo %d n %d count %zu: %zu rounds, sim.c %zu", kinds[kk], algo, n,
                        counts[ci], res.nrounds, ref.nrounds);
          ck_assert_uint_eq(res.max_steps, ref.max_steps);
          uint64_t total = 0, up = 0;
          for (int a = 0; a < n; a++) total += ref.bytes_sent[a];
          ck_assert_uint_eq(res.bytes_total, total);
          for (int m = 0; m < res.nnodes; m++) {
            uint64_t egress = 0, ingress = 0;
            for (int a = 0; a < n; a++)
              for (int b = 0; b < n; b++) {
                uint64_t v = ref.link_bytes[(size_t)a * n + b];
                if (a / 4 == b / 4) continue;
                if (a / 4 == m) egress += v;
                if (b / 4 == m) ingress += v;
                if (a / 4 == m) up += v;
              }
            ck_assert_uint_eq(res.uplink_egress[m], egress);
            ck_assert_uint_eq(res.uplink_ingress[m], ingress);
          }
          ck_assert_uint_eq(res.bytes_uplink, up);
          ck_assert_uint_eq(res.bytes_intra + res.bytes_uplink, total);
          sim_time_result_free(&res);
          sim_result_free(&ref);
          compared++;
        }
  ck_assert_int_gt(compared, 300);
}
END_TEST

/* With a node map in the parameters (sched_params_t.topo, what node-aware algorithms such
 * as two_level read) every algorithm, whatever it builds from the map, runs here exactly
 * as in sim.c, and the uplink bytes are those of sim.c's links between the map's nodes. */
START_TEST(node_aware_schedules_run_unchanged_with_the_node_map) {
  static const int ranks[] = {12, 16, 64};
  int compared = 0;
  for (size_t ni = 0; ni < 3; ni++)
    for (int rr = 0; rr < 2; rr++)
      for (int algo = COLL_ALGO_RING; algo < COLL_ALGO_COUNT; algo++) {
        int n = ranks[ni], per = 4;
        algo_topo_t map = {0};
        ck_assert_int_eq(algo_topo_placed(&map, n, per, rr != 0), COLL_OK);
        sched_params_t p = params(COLL_KIND_ALL_REDUCE, n, 4096 + 3);
        p.topo = &map;
        sim_config_t cfg = {.dtype = COLL_FLOAT32, .op = COLL_SUM};
        sim_result_t ref;
        if (sim_run_algo((coll_algo_t)algo, &p, &cfg, &ref) != COLL_OK) {
          algo_topo_free(&map);
          continue;
        }
        sim_topo_t topo = bandwidth_only(per);
        topo.node_of = map.node_of;
        sim_time_result_t res;
        ck_assert_msg(sim_time_algo((coll_algo_t)algo, &p, &topo, &res) == COLL_OK, "%s",
                      coll_last_error());
        ck_assert_uint_eq(res.nrounds, ref.nrounds);
        ck_assert_int_eq(res.nnodes, map.nnodes);
        uint64_t up = 0;
        for (int a = 0; a < n; a++)
          for (int b = 0; b < n; b++)
            if (map.node_of[a] != map.node_of[b]) up += ref.link_bytes[(size_t)a * n + b];
        ck_assert_uint_eq(res.bytes_uplink, up);
        sim_time_result_free(&res);
        sim_result_free(&ref);
        algo_topo_free(&map);
        compared++;
      }
  ck_assert_int_ge(compared, 24);
}
END_TEST

START_TEST(dbtree_depth_formula_matches_the_deepest_node) {
  for (int n = 1; n <= 2000; n++) {
    int deepest = 0;
    for (int r = 0; r < n; r++)
      for (int t = 0; t < 2; t++) {
        algo_tree_node_t node;
        algo_dbtree_node(n, t, r, &node);
        if (node.depth > deepest) deepest = node.depth;
      }
    ck_assert_msg(algo_dbtree_depth(n) == deepest, "n %d: %d, deepest %d", n, algo_dbtree_depth(n),
                  deepest);
  }
}
END_TEST

/* 8 ranks placed round-robin on 2 nodes (rank r on node r % 2): every hop of the ring
 * r -> r+1 crosses, so in each of the 2 (n-1) = 14 rounds 4 flows of S/8 leave each node
 * at once. Shared: a round lasts 4 (S/8) / bw, in all 14 x 4 x S/8 / bw = 7 S / bw;
 * without sharing S/8 / bw, 1.75 S / bw: 4 times too fast. */
START_TEST(uplink_sharing_makes_a_crossing_ring_k_times_slower) {
  int node_of[8];
  for (int r = 0; r < 8; r++) node_of[r] = r % 2;
  size_t count = 8 * 1000; /* S = 32000 bytes, chunks of 4000 */
  double S = 4.0 * count;
  sched_params_t p = params(COLL_KIND_ALL_REDUCE, 8, count);
  sim_topo_t topo = bandwidth_only(0);
  topo.node_of = node_of;
  sim_time_result_t shared, naive;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_RING, &p, &topo, &shared), COLL_OK);
  topo.no_sharing = 1;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_RING, &p, &topo, &naive), COLL_OK);
  ck_assert_int_eq(shared.nnodes, 2);
  ck_assert_uint_eq(shared.max_round_flows, 4);
  ck_assert_msg(close_to(shared.time_s, 7 * S / topo.uplink_bw), "shared %g", shared.time_s);
  ck_assert_msg(close_to(naive.time_s, 1.75 * S / topo.uplink_bw), "naive %g", naive.time_s);
  ck_assert_msg(close_to(shared.time_s / naive.time_s, 4.0), "ratio %g",
                shared.time_s / naive.time_s);
  /* Every byte crosses: 14 rounds x 8 flows x 4000 bytes, half of it leaving each node. */
  ck_assert_uint_eq(shared.bytes_uplink, 14 * 8 * 4000);
  ck_assert_uint_eq(shared.uplink_egress[0], 14 * 4 * 4000);
  ck_assert_uint_eq(shared.uplink_ingress[1], 14 * 4 * 4000);
  ck_assert_int_eq(shared.busiest_kind, SIM_LINK_UPLINK_EGRESS);
  sim_time_result_free(&shared);
  sim_time_result_free(&naive);
}
END_TEST

/* The same ring with ranks in blocks of k per node: exactly one flow leaves each node per
 * round (the node's last rank to the next node's first), so sharing changes nothing and
 * a round lasts max(c / intra_bw, c / uplink_bw) = c / uplink_bw for chunks of c bytes,
 * plus the latencies. */
START_TEST(a_rank_ordered_ring_sends_one_flow_per_node_and_sharing_changes_nothing) {
  int n = 32, k = 8;
  size_t count = 32 * 512;
  sched_params_t p = params(COLL_KIND_ALL_REDUCE, n, count);
  sim_topo_t topo = bandwidth_only(k);
  topo.uplink_latency_s = 3e-6;
  topo.intra_latency_s = 1e-6;
  topo.message_latency_s = 0.5e-6;
  sim_time_result_t shared, naive;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_RING, &p, &topo, &shared), COLL_OK);
  topo.no_sharing = 1;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_RING, &p, &topo, &naive), COLL_OK);
  double c = 4.0 * count / n;
  double round = 3e-6 + c / topo.uplink_bw + 0.5e-6;
  ck_assert_uint_eq(shared.max_round_flows, 1);
  ck_assert_msg(close_to(shared.time_s, 2 * (n - 1) * round), "%g", shared.time_s);
  ck_assert_msg(close_to(naive.time_s, shared.time_s), "%g %g", naive.time_s, shared.time_s);
  sim_time_result_free(&shared);
  sim_time_result_free(&naive);
}
END_TEST

/* Ring all-reduce of S bytes over N ranks in nodes of k consecutive ranks: the only flow
 * leaving node m is its last rank r = (m+1)k - 1 sending to r + 1. In the reduce-scatter
 * step s it sends chunk r - s (all chunks but r + 1 over the N - 1 steps), in the
 * all-gather chunk r + 1 - s (all but r + 2), so node m's egress is exactly
 *     2 S - len(chunk r+1) - len(chunk r+2)   (chunk numbers mod N)
 * = 2 (N-1)/N S when N divides the element count; its ingress is node m-1's egress. */
START_TEST(ring_uplink_bytes_match_the_formula_for_nodes_of_k_ranks) {
  static const int ks[] = {2, 4, 8};
  static const size_t counts[] = {64 * 1000, 64 * 1000 + 13, 37};
  for (size_t ki = 0; ki < 3; ki++)
    for (size_t ci = 0; ci < 3; ci++) {
      int N = 64, k = ks[ki];
      size_t count = counts[ci];
      sched_params_t p = params(COLL_KIND_ALL_REDUCE, N, count);
      sim_topo_t topo = bandwidth_only(k);
      sim_time_result_t res;
      ck_assert_int_eq(sim_time_algo(COLL_ALGO_RING, &p, &topo, &res), COLL_OK);
      ck_assert_int_eq(res.nnodes, N / k);
      uint64_t sum = 0;
      for (int m = 0; m < N / k; m++) {
        int r = (m + 1) * k - 1;
        uint64_t want = 4 * (2 * count - algo_part_len(count, (size_t)N, (size_t)((r + 1) % N)) -
                             algo_part_len(count, (size_t)N, (size_t)((r + 2) % N)));
        ck_assert_msg(res.uplink_egress[m] == want, "k %d count %zu node %d: %llu, want %llu", k,
                      count, m, (unsigned long long)res.uplink_egress[m], (unsigned long long)want);
        ck_assert_uint_eq(res.uplink_ingress[(m + 1) % (N / k)], want);
        if (count % (size_t)N == 0) ck_assert_uint_eq(want, 2 * (N - 1) * (4 * count / N));
        sum += want;
      }
      ck_assert_uint_eq(res.bytes_uplink, sum);
      sim_time_result_free(&res);
    }
}
END_TEST

/* Without a node map the whole job is one node: nothing crosses an uplink. */
START_TEST(one_node_has_no_uplink_traffic_and_bad_topologies_are_refused) {
  sched_params_t p = params(COLL_KIND_ALL_REDUCE, 16, 4096);
  sim_topo_t topo = bandwidth_only(0);
  sim_time_result_t res;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_TREE, &p, &topo, &res), COLL_OK);
  ck_assert_int_eq(res.nnodes, 1);
  ck_assert_uint_eq(res.bytes_uplink, 0);
  ck_assert_uint_gt(res.bytes_intra, 0);
  ck_assert(res.time_s > 0);
  sim_time_result_free(&res);
  topo.uplink_bw = 0;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_TREE, &p, &topo, &res), COLL_ERR_INVALID_ARGUMENT);
  topo = bandwidth_only(0);
  int node_of[16] = {0};
  node_of[3] = -1;
  topo.node_of = node_of;
  ck_assert_int_eq(sim_time_algo(COLL_ALGO_TREE, &p, &topo, &res), COLL_ERR_INVALID_ARGUMENT);
}
END_TEST

/* 16,384 ranks in nodes of 8 (the bench script times the ring and the sweep; the ring
 * takes too long under ASan for a unit test): tree, hd and master complete, every byte
 * that leaves a node enters another, and the tree's rounds grow with log2 of the ranks. */
START_TEST(sixteen_thousand_ranks_complete_for_tree_hd_and_master) {
  static const coll_algo_t algos[] = {COLL_ALGO_TREE, COLL_ALGO_HD, COLL_ALGO_MASTER};
  for (size_t a = 0; a < 3; a++) {
    sched_params_t p = params(COLL_KIND_ALL_REDUCE, 16384, 16384);
    sim_topo_t topo;
    sim_topo_default(&topo);
    sim_time_result_t res;
    coll_status_t st = sim_time_algo(algos[a], &p, &topo, &res);
    ck_assert_msg(st == COLL_OK, "algo %d: %s", algos[a], coll_last_error());
    ck_assert_int_eq(res.nnodes, 2048);
    uint64_t egress = 0, ingress = 0;
    for (int m = 0; m < res.nnodes; m++)
      egress += res.uplink_egress[m], ingress += res.uplink_ingress[m];
    ck_assert_uint_eq(egress, res.bytes_uplink);
    ck_assert_uint_eq(ingress, res.bytes_uplink);
    ck_assert(res.time_s > 0 && isfinite(res.time_s));
    if (algos[a] == COLL_ALGO_TREE) ck_assert_uint_lt(res.nrounds, 64 * 15);
    sim_time_result_free(&res);
  }
}
END_TEST

SUITE_MAIN("algo-sim-scale",
           suite_tests("sim_time", 120,
                       rounds_messages_and_uplink_bytes_match_sim_c_for_every_algorithm,
                       node_aware_schedules_run_unchanged_with_the_node_map,
                       dbtree_depth_formula_matches_the_deepest_node,
                       uplink_sharing_makes_a_crossing_ring_k_times_slower,
                       a_rank_ordered_ring_sends_one_flow_per_node_and_sharing_changes_nothing,
                       ring_uplink_bytes_match_the_formula_for_nodes_of_k_ranks,
                       one_node_has_no_uplink_traffic_and_bad_topologies_are_refused,
                       sixteen_thousand_ranks_complete_for_tree_hd_and_master))
