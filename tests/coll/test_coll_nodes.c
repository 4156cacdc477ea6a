/* The node-aware all-reduces (ring_nodes, two_level, leaders) over real forked ranks on two made-up
 * hosts (COLL_HOST_ID per rank: shared memory inside a "host", tcp between them), in
 * block and round-robin placement: the node map rendezvous builds, and every result
 * bit-identical to the simulator's run of the same schedules on the same inputs (sums
 * of integer and float types), which is also checked against the reference. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "multiproc.h"
#include "sim/sim.h"
#include "suite_run.h"

typedef struct {
  uint16_t port;
  int nodes;        /* hosts */
  int round_robin;  /* rank r on host r % nodes; else blocks */
  coll_algo_t algo; /* forced */
  coll_algo_t expect_built;
  const char *inter_cost; /* COLL_INTER_COST, NULL: unset */
} case_t;

static int host_of(const case_t *c, int rank, int nranks) {
  int per = (nranks + c->nodes - 1) / c->nodes;
  return c->round_robin ? rank % c->nodes : rank / per;
}

static int init_on_host(const case_t *c, int rank, int nranks, coll_comm_t **comm) {
  ct_clean_env();
  char host[32];
  snprintf(host, sizeof host, "made-up-host-%d", host_of(c, rank, nranks));
  setenv("COLL_HOST_ID", host, 1);
  setenv("COLL_CHUNK_SIZE", "4096", 1); /* many segments per chunk */
  if (c->inter_cost != NULL) setenv("COLL_INTER_COST", c->inter_cost, 1);
  coll_config_t cfg = {.rank = rank,
                       .size = nranks,
                       .local_rank = -1,
                       .master_addr = "127.0.0.1",
                       .master_port = c->port,
                       .host_store = -1,
                       .timeout_ms = 30000};
  coll_status_t st = coll_comm_init_config(&cfg, comm);
  if (st != COLL_OK) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, coll_last_error());
    return 1;
  }
  return 0;
}

/* The map rendezvous built: node of each rank as the host ids say. */
static int check_map(const case_t *c, coll_comm_t *comm, int nranks) {
  const algo_topo_t *t = &comm->base.topo;
  if (t->nranks != nranks || t->nnodes != c->nodes) {
    fprintf(stderr, "map of %d ranks, %d nodes; expected %d, %d\n", t->nranks, t->nnodes, nranks,
            c->nodes);
    return 1;
  }
  for (int r = 0; r < nranks; r++)
    if (t->node_of[r] != host_of(c, r, nranks)) {
      fprintf(stderr, "rank %d on node %d, expected %d\n", r, t->node_of[r], host_of(c, r, nranks));
      return 1;
    }
  return 0;
}

/* One all-reduce (sum), checked against the reference and against the simulator's
 * run of the same algorithm, map and segments, to the bit. */
static int one(coll_comm_t *comm, const case_t *c, int rank, int nranks, size_t count,
               coll_dtype_t dt, int in_place, uint32_t salt) {
  size_t esz = coll_dtype_size(dt), bytes = count * esz;
  void **ins = calloc((size_t)nranks, sizeof *ins), **outs = calloc((size_t)nranks, sizeof *outs);
  void *in = malloc(bytes + 1), *out = malloc(bytes + 1);
  int rc = 1;
  if (ins == NULL || outs == NULL || in == NULL || out == NULL) goto out;
  for (int r = 0; r < nranks; r++) {
    ins[r] = malloc(bytes + 1);
    outs[r] = malloc(bytes + 1);
    if (ins[r] == NULL || outs[r] == NULL) goto out;
    ct_fill(ins[r], count, dt, COLL_SUM, r, salt);
  }
  memcpy(in, ins[rank], bytes);
  char what[96];
  snprintf(what, sizeof what, "%s %s x %zu%s", coll_algo_name(c->algo), coll_dtype_name(dt), count,
           in_place ? " in place" : "");
  void *res = in_place ? in : out;
  coll_status_t st = coll_all_reduce(in, res, count, dt, COLL_SUM, comm);
  if (st != COLL_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, coll_last_error());
    goto out;
  }
  if (ct_check_all_reduce(res, count, dt, COLL_SUM, nranks, salt, what) != 0) goto out;
  /* rank 0 against the simulator, the others against rank 0 (ct_agree) */
  if (rank != 0) goto agree;
  sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                      .count = count,
                      .dtype = dt,
                      .nranks = nranks,
                      .segment_bytes = comm->segment_bytes,
                      .topo = &comm->base.topo};
  sim_config_t cfg = {.dtype = dt, .op = COLL_SUM, .inputs = ins, .outputs = outs};
  sim_result_t sim;
  if (sim_run_algo(c->algo, &p, &cfg, &sim) != COLL_OK) {
    fprintf(stderr, "rank %d: %s: simulator: %s\n", rank, what, coll_last_error());
    goto out;
  }
  sim_result_free(&sim);
  if (memcmp(res, outs[rank], bytes) != 0) {
    fprintf(stderr, "rank %d: %s: result differs from the simulator's bits\n", rank, what);
    goto out;
  }
agree:
  if (ct_agree(comm, res, bytes, what) != 0) goto out;
  rc = 0;
out:
  for (int r = 0; r < nranks && ins != NULL && outs != NULL; r++) {
    free(ins[r]);
    free(outs[r]);
  }
  free(ins);
  free(outs);
  free(in);
  free(out);
  return rc;
}

static int rank_sums(int rank, int nranks, void *arg) {
  const case_t *c = arg;
  coll_comm_t *comm;
  if (init_on_host(c, rank, nranks, &comm) != 0) return 1;
  int fails = check_map(c, comm, nranks);
  if (fails == 0 && ct_ok(rank, "set_algo", coll_comm_set_algo(comm, c->algo))) fails++;
  sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                      .count = 1,
                      .dtype = COLL_INT32,
                      .nranks = nranks,
                      .topo = &comm->base.topo};
  if (fails == 0 && algo_effective(c->algo, &p) != c->expect_built) {
    fprintf(stderr, "rank %d: %s builds %s\n", rank, coll_algo_name(c->algo),
            coll_algo_name(algo_effective(c->algo, &p)));
    fails++;
  }
  static const coll_dtype_t types[] = {COLL_INT32,   COLL_INT64,   COLL_UINT8,   COLL_FLOAT32,
                                       COLL_FLOAT64, COLL_FLOAT16, COLL_BFLOAT16};
  /* 20011: many 4 KiB segments, and leaders' chain and tree form for 4- and 8-byte types */
  static const size_t counts[] = {1, 7, 1023, 20011};
  uint32_t salt = 1;
  for (size_t t = 0; t < sizeof types / sizeof types[0] && fails == 0; t++)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0] && fails == 0; k++)
      fails += one(comm, c, rank, nranks, counts[k], types[t], (int)(k + t) % 2, salt++);
  if (coll_comm_destroy(comm) != COLL_OK) fails++;
  return fails ? 1 : 0;
}

/* Loop index: algorithm (ring_nodes, two_level, leaders) x placement (blocks,
 * round-robin). */
START_TEST(node_aware_sums_are_bit_exact_on_two_made_up_hosts) {
  static const coll_algo_t algos[] = {COLL_ALGO_RING_NODES, COLL_ALGO_TWO_LEVEL, COLL_ALGO_LEADERS};
  case_t c = {.port = mp_free_port(), .nodes = 2, .round_robin = _i % 2, .algo = algos[_i / 2]};
  c.expect_built = c.algo;
  ck_assert_msg(mp_run(4, 60000, rank_sums, &c) == 0, "%s, %s placement failed",
                coll_algo_name(c.algo), c.round_robin ? "round-robin" : "block");
}
END_TEST

/* 3 ranks on 2 hosts (2 + 1, placed round-robin or in blocks) with algo forced: the sums
 * are right and the algorithm built is `built`. */
static int on_unequal_hosts(coll_algo_t algo, int round_robin, coll_algo_t built) {
  case_t c = {.port = mp_free_port(),
              .nodes = 2,
              .round_robin = round_robin,
              .algo = algo,
              .expect_built = built};
  return mp_run(3, 60000, rank_sums, &c);
}

/* two_level needs equal nodes and runs ring_nodes. */
START_TEST(two_level_on_unequal_hosts_runs_ring_nodes) {
  ck_assert_int_eq(on_unequal_hosts(COLL_ALGO_TWO_LEVEL, 1, COLL_ALGO_RING_NODES), 0);
}
END_TEST

/* leaders takes unequal nodes as they are. */
START_TEST(leaders_on_unequal_hosts_runs_itself) {
  ck_assert_int_eq(on_unequal_hosts(COLL_ALGO_LEADERS, 0, COLL_ALGO_LEADERS), 0);
}
END_TEST

/* COLL_INTER_COST reaches the cost model: a slow link between the hosts makes auto
 * choose a node-aware algorithm for a large all-reduce with ranks placed round-robin. */
static int rank_inter_cost(int rank, int nranks, void *arg) {
  const case_t *c = arg;
  coll_comm_t *comm;
  if (init_on_host(c, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  if (comm->cost.inter_alpha != 500e-6 || comm->cost.inter_beta != 1.0 / (0.01 * 1e9)) {
    fprintf(stderr, "rank %d: inter constants %g s, %g s/B\n", rank, comm->cost.inter_alpha,
            comm->cost.inter_beta);
    bad = 1;
  }
  double seconds = 0;
  coll_algo_t chosen = COLL_ALGO_AUTO;
  bad |= ct_ok(rank, "predict", coll_comm_predict(comm, COLL_PREDICT_ALL_REDUCE, 4 << 20,
                                                  COLL_FLOAT32, &seconds, &chosen));
  if (chosen != COLL_ALGO_RING_NODES && chosen != COLL_ALGO_TWO_LEVEL &&
      chosen != COLL_ALGO_LEADERS) {
    fprintf(stderr, "rank %d: auto chose %s for 16 MiB across a 10 MB/s link\n", rank,
            coll_algo_name(chosen));
    bad = 1;
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(the_link_between_nodes_can_be_told_to_the_cost_model) {
  case_t c = {.port = mp_free_port(), .nodes = 2, .round_robin = 1, .inter_cost = "500,0.01"};
  ck_assert_int_eq(mp_run(4, 60000, rank_inter_cost, &c), 0);
}
END_TEST

static int rank_bad_inter_cost(int rank, int nranks, void *arg) {
  coll_comm_t *comm = NULL;
  if (init_on_host(arg, rank, nranks, &comm) == 0) {
    coll_comm_destroy(comm);
    return 1;
  }
  return strstr(coll_last_error(), "COLL_INTER_COST='1,fast'") == NULL;
}

START_TEST(a_malformed_inter_cost_is_refused_by_name) {
  case_t c = {.port = mp_free_port(), .nodes = 2, .inter_cost = "1,fast"};
  ck_assert_int_eq(mp_run(2, 60000, rank_bad_inter_cost, &c), 0);
}
END_TEST

SUITE_MAIN("coll_nodes",
           suite_loop_tests("two hosts", 90, 0, 6,
                            node_aware_sums_are_bit_exact_on_two_made_up_hosts),
           suite_tests("two hosts", 90, two_level_on_unequal_hosts_runs_ring_nodes,
                       leaders_on_unequal_hosts_runs_itself,
                       the_link_between_nodes_can_be_told_to_the_cost_model,
                       a_malformed_inter_cost_is_refused_by_name))
