/* Check suite 'algo': every all-reduce and broadcast algorithm run in the simulator over
 * real buffers for many rank counts, counts, types and ops; bytes sent per rank against
 * each algorithm's formula; the simulator's own checks (deadlock, mismatch, hazard); and
 * parameter validation. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "algo_check.h"
#include "suite_run.h"

static const int rank_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};
enum { NRANK_COUNTS = sizeof rank_counts / sizeof rank_counts[0] };
static const coll_algo_t allreduce_algos[] = {COLL_ALGO_RING, COLL_ALGO_MASTER, COLL_ALGO_TREE,
                                              COLL_ALGO_HD};
enum { NALGOS = sizeof allreduce_algos / sizeof allreduce_algos[0] };

/* dtype/op pairs covering every dtype and every op at least once. */
static const struct {
  coll_dtype_t dtype;
  coll_op_t op;
} type_ops[] = {
    {COLL_FLOAT32, COLL_SUM}, {COLL_INT32, COLL_SUM},    {COLL_INT64, COLL_PROD},
    {COLL_UINT8, COLL_MAX},   {COLL_FLOAT16, COLL_SUM},  {COLL_BFLOAT16, COLL_MIN},
    {COLL_FLOAT64, COLL_AVG}, {COLL_INT8, COLL_MIN},     {COLL_UINT32, COLL_AVG},
    {COLL_UINT64, COLL_SUM},  {COLL_FLOAT32, COLL_PROD}, {COLL_INT32, COLL_BAND},
    {COLL_UINT8, COLL_BOR},   {COLL_UINT64, COLL_BXOR},  {COLL_INT8, COLL_BXOR},
};
enum { NTYPE_OPS = sizeof type_ops / sizeof type_ops[0] };

/* Loop index -> (algorithm, rank count). */
START_TEST(allreduce_matches_reference_for_every_algorithm_and_rank_count) {
  coll_algo_t algo = allreduce_algos[_i / NRANK_COUNTS];
  int n = rank_counts[_i % NRANK_COUNTS];
  static const size_t counts[] = {0, 1, 7, 1023};
  static const size_t segments[] = {0, 24}; /* default, and tiny to force many segments */
  for (size_t ci = 0; ci < 4; ci++)
    for (size_t ti = 0; ti < NTYPE_OPS; ti++)
      for (int in_place = 0; in_place < 2; in_place++)
        for (size_t si = 0; si < 2; si++) {
          run_case_t c = {.algo = algo,
                          .collective = COLL_KIND_ALL_REDUCE,
                          .nranks = n,
                          .count = counts[ci],
                          .dtype = type_ops[ti].dtype,
                          .op = type_ops[ti].op,
                          .in_place = in_place,
                          .segment_bytes = segments[si]};
          check_case(&c, NULL);
        }
}
END_TEST

/* One large count (1 Mi + 3 elements): default and a segment size that does not divide
 * the chunks. */
START_TEST(allreduce_of_a_large_uneven_count_matches_reference) {
  coll_algo_t algo = allreduce_algos[_i];
  static const int ns[] = {3, 8};
  for (int k = 0; k < 2; k++) {
    run_case_t c = {.algo = algo,
                    .collective = COLL_KIND_ALL_REDUCE,
                    .nranks = ns[k],
                    .count = (1u << 20) + 3,
                    .dtype = COLL_FLOAT32,
                    .op = COLL_SUM,
                    .in_place = k,
                    .segment_bytes = k ? 100000 : 0};
    check_case(&c, NULL);
  }
  run_case_t c = {.algo = algo,
                  .collective = COLL_KIND_ALL_REDUCE,
                  .nranks = 5,
                  .count = (1u << 20) + 3,
                  .dtype = COLL_INT32,
                  .op = COLL_SUM};
  check_case(&c, NULL);
}
END_TEST

START_TEST(broadcast_delivers_the_roots_data_from_every_root) {
  static const coll_algo_t algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD,
                                      COLL_ALGO_MASTER};
  coll_algo_t algo = algos[_i / NRANK_COUNTS];
  int n = rank_counts[_i % NRANK_COUNTS];
  static const size_t counts[] = {0, 1, 7, 1023, 100003};
  for (int root = 0; root < n; root++)
    for (size_t ci = 0; ci < 5; ci++)
      for (int in_place = 0; in_place < 2; in_place++) {
        if (ci == 4 && root > 1) continue; /* the big count from two roots is enough */
        run_case_t c = {.algo = algo,
                        .collective = COLL_KIND_BROADCAST,
                        .nranks = n,
                        .count = counts[ci],
                        .dtype = ci % 2 ? COLL_FLOAT32 : COLL_UINT8,
                        .op = COLL_SUM,
                        .in_place = in_place,
                        .segment_bytes = in_place ? 0 : 40,
                        .root = root};
        check_case(&c, NULL);
      }
}
END_TEST

/* Every rank count up to 40, counts around n (empty and one-element chunks), segments of
 * 2 elements: catches shape edge cases (tree truncation, hd folding) at many n. */
START_TEST(allreduce_is_exact_for_every_rank_count_up_to_forty) {
  int n = _i;
  for (size_t a = 0; a < NALGOS; a++) {
    /* The last count is just above hd's whole-buffer exchanges: the halving shape. */
    size_t counts[] = {(size_t)n - 1,     (size_t)n, (size_t)n + 1,
                       3 * (size_t)n + 2, 101,       ALGO_HD_WHOLE_MAX_BYTES / 4 + 1};
    for (size_t ci = 0; ci < 6; ci++)
      for (int in_place = 0; in_place < 2; in_place++) {
        run_case_t c = {.algo = allreduce_algos[a],
                        .collective = COLL_KIND_ALL_REDUCE,
                        .nranks = n,
                        .count = counts[ci],
                        .dtype = COLL_INT32,
                        .op = in_place ? COLL_SUM : COLL_MAX,
                        .in_place = in_place,
                        .segment_bytes = ci % 2 ? 8 : 0};
        check_case(&c, NULL);
      }
    run_case_t b = {.algo = allreduce_algos[a],
                    .collective = COLL_KIND_BROADCAST,
                    .nranks = n,
                    .count = 37,
                    .dtype = COLL_INT32,
                    .op = COLL_SUM,
                    .segment_bytes = 8,
                    .root = n - 1};
    check_case(&b, NULL);
  }
}
END_TEST

/* Bytes sent per rank, from a dry run of the simulator (no data). */
static sim_result_t dry_run(coll_algo_t algo, coll_kind_t kind, int n, size_t count, int root) {
  sched_params_t p = {
      .collective = kind, .count = count, .dtype = COLL_FLOAT32, .nranks = n, .root = root};
  sim_config_t cfg = {.dtype = COLL_FLOAT32, .op = COLL_SUM};
  sim_result_t res;
  coll_status_t st = sim_run_algo(algo, &p, &cfg, &res);
  ck_assert_msg(st == COLL_OK, "dry run failed: %s", coll_last_error());
  return res;
}

START_TEST(ring_sends_two_n_minus_one_over_n_of_the_buffer_per_rank) {
  for (int n = 1; n <= 33; n += 4) {
    size_t count = 1000003;
    sim_result_t res = dry_run(COLL_ALGO_RING, COLL_KIND_ALL_REDUCE, n, count, 0);
    for (int r = 0; r < n; r++) {
      /* Exactly: everything but the chunks (r+1) and (r+2), in 4-byte elements. */
      size_t c1 = algo_part_len(count, (size_t)n, (size_t)((r + 1) % n));
      size_t c2 = algo_part_len(count, (size_t)n, (size_t)((r + 2) % n));
      size_t exact = n == 1 ? 0 : (2 * count - c1 - c2) * 4;
      ck_assert_uint_eq(res.bytes_sent[r], exact);
      double formula = 2.0 * (n - 1) / n * (double)count * 4;
      ck_assert(res.bytes_sent[r] >= formula - 8 && res.bytes_sent[r] <= formula + 8);
      ck_assert_uint_eq(res.bytes_received[r], res.bytes_sent[r == 0 ? n - 1 : r - 1]);
    }
    if (n > 1) ck_assert_uint_eq(res.link_bytes[0 * n + 1], res.bytes_sent[0]);
    sim_result_free(&res);
  }
}
END_TEST

START_TEST(master_sends_everything_through_rank_zero) {
  for (int n = 1; n <= 9; n++) {
    size_t count = 777777, S = count * 4;
    sim_result_t res = dry_run(COLL_ALGO_MASTER, COLL_KIND_ALL_REDUCE, n, count, 0);
    ck_assert_uint_eq(res.bytes_sent[0], (size_t)(n - 1) * S);
    ck_assert_uint_eq(res.bytes_received[0], (size_t)(n - 1) * S);
    for (int r = 1; r < n; r++) {
      ck_assert_uint_eq(res.bytes_sent[r], S);
      ck_assert_uint_eq(res.link_bytes[(size_t)r * n + 0], S);
    }
    sim_result_free(&res);
  }
}
END_TEST

START_TEST(broadcast_bytes_follow_each_shape) {
  size_t count = 300001, S = count * 4;
  for (int n = 1; n <= 12; n++) {
    int root = n / 2;
    sim_result_t chain = dry_run(COLL_ALGO_RING, COLL_KIND_BROADCAST, n, count, root);
    sim_result_t direct = dry_run(COLL_ALGO_MASTER, COLL_KIND_BROADCAST, n, count, root);
    sim_result_t binom = dry_run(COLL_ALGO_TREE, COLL_KIND_BROADCAST, n, count, root);
    size_t total_chain = 0, total_binom = 0;
    for (int r = 0; r < n; r++) {
      total_chain += chain.bytes_sent[r];
      total_binom += binom.bytes_sent[r];
      ck_assert_uint_le(chain.bytes_sent[r], S); /* nobody sends more than once */
      ck_assert_uint_eq(direct.bytes_sent[r], r == root ? (size_t)(n - 1) * S : 0);
      ck_assert_uint_eq(chain.bytes_received[r], r == root ? 0 : S);
      ck_assert_uint_eq(binom.bytes_received[r], r == root ? 0 : S);
    }
    ck_assert_uint_eq(total_chain, (size_t)(n - 1) * S);
    ck_assert_uint_eq(total_binom, (size_t)(n - 1) * S);
    int log2n = 0;
    while ((1 << log2n) < n) log2n++;
    ck_assert_uint_eq(binom.bytes_sent[root], (size_t)log2n * S);
    ck_assert_uint_eq(binom.max_steps, (size_t)log2n);
    sim_result_free(&chain);
    sim_result_free(&direct);
    sim_result_free(&binom);
  }
}
END_TEST

START_TEST(double_binary_trees_cover_every_rank_and_swap_leaves) {
  for (int n = 1; n <= 70; n++) {
    int depth = algo_dbtree_depth(n), log2n = 0;
    while ((1 << log2n) < n) log2n++;
    ck_assert_int_le(depth, log2n);
    int leaf_in_both = 0;
    for (int t = 0; t < 2; t++) {
      int roots = 0;
      int *parent_count = calloc((size_t)n, sizeof *parent_count);
      for (int r = 0; r < n; r++) {
        algo_tree_node_t node;
        algo_dbtree_node(n, t, r, &node);
        ck_assert_int_le(node.depth, depth);
        if (node.parent < 0) roots++;
        for (int k = 0; k < 2; k++) {
          int c = node.child[k];
          if (c < 0) continue;
          ck_assert_int_lt(c, n);
          parent_count[c]++;
          algo_tree_node_t cn;
          algo_dbtree_node(n, t, c, &cn);
          ck_assert_int_eq(cn.parent, r);
          ck_assert_int_eq(cn.depth, node.depth + 1);
        }
      }
      ck_assert_int_eq(roots, 1);
      for (int r = 0; r < n; r++) {
        algo_tree_node_t node;
        algo_dbtree_node(n, t, r, &node);
        ck_assert_int_eq(parent_count[r], node.parent < 0 ? 0 : 1);
      }
      free(parent_count);
    }
    for (int r = 0; r < n; r++) {
      algo_tree_node_t a, b;
      algo_dbtree_node(n, 0, r, &a);
      algo_dbtree_node(n, 1, r, &b);
      if (a.child[0] < 0 && b.child[0] < 0) leaf_in_both++;
    }
    ck_assert_msg(n < 3 || leaf_in_both == 0, "n=%d: %d ranks are leaves in both trees", n,
                  leaf_in_both);
  }
}
END_TEST

START_TEST(tree_bytes_follow_the_tree_shape) {
  for (int n = 1; n <= 20; n++) {
    size_t count = 200001, S = count * 4;
    size_t half[2] = {algo_part_len(count, 2, 0) * 4, algo_part_len(count, 2, 1) * 4};
    sim_result_t res = dry_run(COLL_ALGO_TREE, COLL_KIND_ALL_REDUCE, n, count, 0);
    for (int r = 0; r < n; r++) {
      size_t want = 0;
      for (int t = 0; t < 2; t++) {
        algo_tree_node_t node;
        algo_dbtree_node(n, t, r, &node);
        size_t msgs = (node.parent >= 0) + (node.child[0] >= 0) + (node.child[1] >= 0);
        want += msgs * half[t];
      }
      ck_assert_uint_eq(res.bytes_sent[r], want);
      ck_assert_uint_le(res.bytes_sent[r], 3 * S); /* at most 3 links of S/2 per tree */
    }
    sim_result_free(&res);
  }
}
END_TEST

START_TEST(halving_doubling_sends_two_p_minus_one_over_p_plus_the_fold) {
  for (int n = 1; n <= 40; n++) {
    size_t count = 1000003, S = count * 4;
    int pw = 1;
    while (pw * 2 <= n) pw *= 2;
    int rem = n - pw;
    sim_result_t res = dry_run(COLL_ALGO_HD, COLL_KIND_ALL_REDUCE, n, count, 0);
    int log2p = 0;
    while ((1 << log2p) < pw) log2p++;
    for (int r = 0; r < n; r++) {
      double want = r < 2 * rem && r % 2 == 0 ? (double)S : 2.0 * (pw - 1) / pw * (double)S;
      if (r < 2 * rem && r % 2 == 1) want += (double)S;
      /* Blocks differ by one element: within pw elements of 4 bytes. */
      ck_assert_msg(res.bytes_sent[r] >= want - 4.0 * pw && res.bytes_sent[r] <= want + 4.0 * pw,
                    "n=%d rank %d sent %zu, formula %.0f", n, r, res.bytes_sent[r], want);
    }
    ck_assert_uint_eq(res.max_steps, n == 1 ? 1 : (size_t)(2 * log2p + (rem ? 2 : 0)));
    sim_result_free(&res);
  }
}
END_TEST

/* Up to ALGO_HD_WHOLE_MAX_BYTES hd exchanges whole buffers: log2 p messages of S per
 * rank (plus the fold's S), and at 2 ranks a single message each way. */
START_TEST(halving_doubling_exchanges_whole_buffers_when_small) {
  for (int n = 2; n <= 40; n++) {
    size_t count = ALGO_HD_WHOLE_MAX_BYTES / 4, S = count * 4;
    int pw = 1, log2p = 0;
    while (pw * 2 <= n) pw *= 2, log2p++;
    int rem = n - pw;
    sim_result_t res = dry_run(COLL_ALGO_HD, COLL_KIND_ALL_REDUCE, n, count, 0);
    for (int r = 0; r < n; r++) {
      size_t want = r < 2 * rem && r % 2 == 0 ? S : (size_t)log2p * S;
      if (r < 2 * rem && r % 2 == 1) want += S;
      ck_assert_msg(res.bytes_sent[r] == want, "n=%d rank %d sent %zu, want %zu", n, r,
                    res.bytes_sent[r], want);
    }
    /* 2 ranks: the exchange, rank 1's reduction of what it got, the copy out */
    if (n == 2) ck_assert_uint_eq(res.nrounds, 3);
    sim_result_free(&res);
  }
}
END_TEST

/* Float min and max of -0 and +0 depend on the operand order: every algorithm must
 * still give every rank the same bits (schedule.h rule 6), hd's exchanges included. */
START_TEST(signed_zeros_give_every_rank_the_same_bits) {
  enum { COUNT = 6 };
  for (size_t a = 0; a < NALGOS; a++)
    for (int op = 0; op < 2; op++)
      for (int n = 2; n <= 7; n++) {
        float in[8][COUNT], out[8][COUNT];
        void *ins[8], *outs[8];
        for (int r = 0; r < n; r++) {
          for (int i = 0; i < COUNT; i++) in[r][i] = (r + i) % 3 ? 0.0f : -0.0f;
          ins[r] = in[r];
          outs[r] = out[r];
        }
        sched_params_t p = {
            .collective = COLL_KIND_ALL_REDUCE, .count = COUNT, .dtype = COLL_FLOAT32, .nranks = n};
        sim_config_t cfg = {
            .dtype = COLL_FLOAT32, .op = op ? COLL_MAX : COLL_MIN, .inputs = ins, .outputs = outs};
        sim_result_t res;
        coll_status_t st = sim_run_algo(allreduce_algos[a], &p, &cfg, &res);
        ck_assert_msg(st == COLL_OK, "%s", coll_last_error());
        sim_result_free(&res);
        for (int r = 1; r < n; r++)
          ck_assert_msg(memcmp(out[r], out[0], sizeof out[0]) == 0,
                        "%s %s, %d ranks: rank %d's result differs in its bits from rank 0's",
                        coll_algo_name(allreduce_algos[a]), op ? "max" : "min", n, r);
      }
}
END_TEST

START_TEST(no_message_is_larger_than_a_segment) {
  static const coll_algo_t algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD,
                                      COLL_ALGO_MASTER};
  for (size_t a = 0; a < 4; a++)
    for (int kind = 0; kind < 2; kind++)
      for (int n = 1; n <= 9; n += 2) {
        sched_params_t p = {.collective = (coll_kind_t)kind,
                            .count = 100003,
                            .dtype = COLL_FLOAT64,
                            .nranks = n,
                            .segment_bytes = 4000};
        for (int r = 0; r < n; r++) {
          sched_t s;
          p.rank = r;
          ck_assert_int_eq(algo_build(algos[a], &p, &s), COLL_OK);
          for (size_t i = 0; i < s.nops; i++)
            if (s.ops[i].kind <= SCHED_RECV_REDUCE)
              ck_assert_msg(s.ops[i].count <= 500, "algo %d kind %d n %d: %zu elements",
                            (int)algos[a], kind, n, s.ops[i].count);
          sched_free(&s);
        }
      }
}
END_TEST

START_TEST(tiny_segments_on_huge_buffers_keep_schedules_bounded) {
  static const coll_algo_t algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD,
                                      COLL_ALGO_MASTER};
  for (size_t a = 0; a < 4; a++) {
    sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                        .count = (size_t)1 << 32,
                        .dtype = COLL_FLOAT32,
                        .rank = 1,
                        .nranks = 4,
                        .segment_bytes = 1};
    sched_t s;
    ck_assert_int_eq(algo_build(algos[a], &p, &s), COLL_OK);
    ck_assert_msg(s.nops <= 8 * ALGO_MAX_SEGMENTS, "algo %d: %zu ops", (int)algos[a], s.nops);
    sched_free(&s);
  }
}
END_TEST

/* ---- the simulator catches broken schedules ---- */

static void two_rank_params(sched_params_t *p, int rank) {
  *p = (sched_params_t){.collective = COLL_KIND_ALL_REDUCE,
                        .count = 8,
                        .dtype = COLL_INT32,
                        .rank = rank,
                        .nranks = 2};
}

START_TEST(simulator_reports_a_deadlock) {
  sched_t s[2];
  for (int r = 0; r < 2; r++) {
    sched_params_t p;
    two_rank_params(&p, r);
    sched_init(&s[r], &p, COLL_ALGO_RING);
    /* Both ranks first wait to receive, then send: nobody can move. */
    ck_assert_int_eq(sched_begin_step(&s[r]), COLL_OK);
    ck_assert_int_eq(sched_recv_copy(&s[r], 1 - r, SCHED_BUF_OUTPUT, 0, 8), COLL_OK);
    ck_assert_int_eq(sched_begin_step(&s[r]), COLL_OK);
    ck_assert_int_eq(sched_send(&s[r], 1 - r, SCHED_BUF_INPUT, 0, 8), COLL_OK);
  }
  sim_config_t cfg = {.dtype = COLL_INT32, .op = COLL_SUM};
  sim_result_t res;
  ck_assert_int_eq(sim_run(s, 2, &cfg, &res), COLL_ERR_INTERNAL);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "deadlock"));
  /* The same ops with the send first on rank 0 run fine. */
  sched_reset(&s[0]);
  ck_assert_int_eq(sched_begin_step(&s[0]), COLL_OK);
  ck_assert_int_eq(sched_send(&s[0], 1, SCHED_BUF_INPUT, 0, 8), COLL_OK);
  ck_assert_int_eq(sched_begin_step(&s[0]), COLL_OK);
  ck_assert_int_eq(sched_recv_copy(&s[0], 1, SCHED_BUF_OUTPUT, 0, 8), COLL_OK);
  ck_assert_int_eq(sim_run(s, 2, &cfg, &res), COLL_OK);
  ck_assert_uint_eq(res.nrounds, 2);
  sim_result_free(&res);
  sched_free(&s[0]);
  sched_free(&s[1]);
}
END_TEST

START_TEST(simulator_reports_mismatched_counts_and_unpaired_messages) {
  sched_t s[2];
  for (int r = 0; r < 2; r++) {
    sched_params_t p;
    two_rank_params(&p, r);
    sched_init(&s[r], &p, COLL_ALGO_RING);
  }
  sched_send(&s[0], 1, SCHED_BUF_INPUT, 0, 8);
  sched_recv_copy(&s[1], 0, SCHED_BUF_OUTPUT, 0, 4);
  sim_config_t cfg = {.dtype = COLL_INT32, .op = COLL_SUM};
  sim_result_t res;
  ck_assert_int_eq(sim_run(s, 2, &cfg, &res), COLL_ERR_MISMATCH);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "receives 4"));
  sched_send(&s[0], 1, SCHED_BUF_INPUT, 0, 8); /* a second send nobody receives */
  ck_assert_int_eq(sim_run(s, 2, &cfg, &res), COLL_ERR_MISMATCH);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "sends 2 messages"));
  sched_free(&s[0]);
  sched_free(&s[1]);
}
END_TEST

START_TEST(simulator_reports_hazards_and_out_of_bounds_ops) {
  sched_t s[2];
  for (int r = 0; r < 2; r++) {
    sched_params_t p;
    two_rank_params(&p, r);
    sched_init(&s[r], &p, COLL_ALGO_RING);
  }
  /* Rank 1 receives into OUTPUT[0..8) while sending INPUT[4..8): in-place they alias. */
  sched_begin_step(&s[0]);
  sched_send(&s[0], 1, SCHED_BUF_INPUT, 0, 8);
  sched_recv_copy(&s[0], 1, SCHED_BUF_OUTPUT, 0, 4);
  sched_begin_step(&s[1]);
  sched_recv_copy(&s[1], 0, SCHED_BUF_OUTPUT, 0, 8);
  sched_send(&s[1], 0, SCHED_BUF_INPUT, 4, 4);
  sim_config_t cfg = {.dtype = COLL_INT32, .op = COLL_SUM};
  sim_result_t res;
  ck_assert_int_eq(sim_run(s, 2, &cfg, &res), COLL_ERR_INTERNAL);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "touch the same elements"));
  sched_reset(&s[1]);
  sched_reset(&s[0]);
  sched_send(&s[0], 1, SCHED_BUF_INPUT, 4, 8); /* past the end of 8 elements */
  sched_recv_copy(&s[1], 0, SCHED_BUF_OUTPUT, 0, 8);
  ck_assert_int_eq(sim_run(s, 2, &cfg, &res), COLL_ERR_INTERNAL);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "out of bounds"));
  sched_free(&s[0]);
  sched_free(&s[1]);
}
END_TEST

START_TEST(simulator_records_every_executed_op) {
  run_case_t c = {.algo = COLL_ALGO_RING,
                  .collective = COLL_KIND_ALL_REDUCE,
                  .nranks = 3,
                  .count = 6,
                  .dtype = COLL_INT32,
                  .op = COLL_SUM};
  sim_result_t res;
  check_case(&c, &res);
  /* 3 ranks x 4 steps x (send + recv), each op recorded once; rounds = 4 steps. */
  ck_assert_uint_eq(sim_event_count(&res), 24);
  ck_assert_uint_eq(res.nrounds, 4);
  size_t sends = 0;
  for (size_t i = 0; i < sim_event_count(&res); i++) {
    const sim_event_t *e = sim_event_at(&res, i);
    if (e->op.kind == SCHED_SEND) {
      sends++;
      ck_assert_int_eq(e->op.peer, (e->rank + 1) % 3);
      ck_assert_uint_eq(e->op.count, 2);
      ck_assert_uint_eq(e->round, e->step);
    }
  }
  ck_assert_uint_eq(sends, 12);
  ck_assert_ptr_null(sim_event_at(&res, 24));
  sim_result_free(&res);
}
END_TEST

START_TEST(algo_build_rejects_bad_parameters) {
  sched_t s;
  sched_params_t p = {.collective = COLL_KIND_ALL_REDUCE,
                      .count = 4,
                      .dtype = COLL_FLOAT32,
                      .rank = 0,
                      .nranks = 2};
  ck_assert_int_eq(algo_build(COLL_ALGO_AUTO, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(algo_build(COLL_ALGO_COUNT, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  p.rank = 2;
  ck_assert_int_eq(algo_build(COLL_ALGO_RING, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(coll_last_error(), "rank 2 of 2"));
  p.rank = 0;
  p.nranks = 0;
  ck_assert_int_eq(algo_build(COLL_ALGO_RING, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  p.nranks = 2;
  p.dtype = COLL_DTYPE_COUNT;
  ck_assert_int_eq(algo_build(COLL_ALGO_RING, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  p.dtype = COLL_FLOAT32;
  p.collective = COLL_KIND_BROADCAST;
  p.root = 5;
  ck_assert_int_eq(algo_build(COLL_ALGO_TREE, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  p.root = 1;
  p.count = SIZE_MAX / 2;
  ck_assert_int_eq(algo_build(COLL_ALGO_RING, &p, &s), COLL_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(algo_build(COLL_ALGO_RING, NULL, &s), COLL_ERR_INVALID_ARGUMENT);
  p.count = 0;
  ck_assert_int_eq(algo_build(COLL_ALGO_RING, &p, &s), COLL_OK);
  ck_assert_uint_eq(s.nsteps, 0);
  sched_free(&s);
}
END_TEST

SUITE_MAIN("algo",
           suite_loop_tests("results", 120, 0, NALGOS *NRANK_COUNTS,
                            allreduce_matches_reference_for_every_algorithm_and_rank_count),
           suite_loop_tests("results", 120, 1, 41,
                            allreduce_is_exact_for_every_rank_count_up_to_forty),
           suite_tests("results", 120, signed_zeros_give_every_rank_the_same_bits),
           suite_loop_tests("large", 120, 0, NALGOS,
                            allreduce_of_a_large_uneven_count_matches_reference),
           suite_loop_tests("broadcast", 120, 0, 4 * NRANK_COUNTS,
                            broadcast_delivers_the_roots_data_from_every_root),
           suite_tests("bytes", 120, ring_sends_two_n_minus_one_over_n_of_the_buffer_per_rank,
                       master_sends_everything_through_rank_zero, broadcast_bytes_follow_each_shape,
                       double_binary_trees_cover_every_rank_and_swap_leaves,
                       tree_bytes_follow_the_tree_shape,
                       halving_doubling_sends_two_p_minus_one_over_p_plus_the_fold,
                       halving_doubling_exchanges_whole_buffers_when_small,
                       no_message_is_larger_than_a_segment,
                       tiny_segments_on_huge_buffers_keep_schedules_bounded),
           suite_tests("simulator", 0, simulator_reports_a_deadlock,
                       simulator_reports_mismatched_counts_and_unpaired_messages,
                       simulator_reports_hazards_and_out_of_bounds_ops,
                       simulator_records_every_executed_op, algo_build_rejects_bad_parameters))
