/* Multi-process DDP tests: real rank processes training on a synthetic data set through
 * libcoll. n ranks x batch b must end where 1 rank x batch n*b ends (the sampler hands
 * rank r the positions r, r+n, ... so a step's global batch is the same set of samples),
 * --accumulate likewise, and a resumed run where an uninterrupted one does. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multiproc.h"
#include "suite_run.h"
#include "synth.h"
#include "train.h"

static char dir[512];

static void ddp_setup(void) {
  synth_tmpdir(dir, sizeof dir);
  /* 1000 samples: divisible by 1, 2 and 4 ranks, so no rank count pads; 16 steps of 64
   * per epoch with a short last step (40), and 20 steps cross into a reshuffled epoch. */
  synth_dataset(dir, "train", 1000, 8, 21, true);
  synth_dataset(dir, "t10k", 200, 8, 22, false);
}
static void ddp_teardown(void) { synth_rmdir(dir); }

typedef struct {
  size_t batch;
  int accumulate;
  double bucket_mb;
  train_opt_kind_t opt;
  long max_steps;
  long checkpoint_every;
  bool resume, check_sync, evaluate;
  char ckpt[4096];
  uint16_t port;
} job_t;

/* Rank's communicator of nranks on the job's store (rank 0 hosts it); NULL after saying
 * why. */
static coll_comm_t *open_comm(const job_t *job, int rank, int nranks) {
  coll_config_t cc = {.rank = rank,
                      .size = nranks,
                      .local_rank = rank,
                      .master_port = job->port,
                      .host_store = -1,
                      .timeout_ms = 30000};
  coll_comm_t *comm = NULL;
  if (coll_comm_init_config(&cc, &comm) != COLL_OK) {
    fprintf(stderr, "rank %d: init: %s\n", rank, coll_last_error());
    return NULL;
  }
  return comm;
}

static int rank_main(int rank, int nranks, void *arg) {
  const job_t *job = arg;
  coll_comm_t *comm = NULL;
  /* One rank runs alone, as tools/train does without a launcher. */
  unsetenv("WORLD_SIZE");
  if (nranks > 1 && (comm = open_comm(job, rank, nranks)) == NULL) return 10;
  train_config_t cfg;
  train_config_defaults(&cfg);
  cfg.comm = comm;
  cfg.data_dir = dir;
  cfg.batch = job->batch;
  cfg.accumulate = job->accumulate;
  cfg.bucket_mb = job->bucket_mb > 0 ? job->bucket_mb : 25.0;
  cfg.hidden[0] = 32;
  cfg.hidden[1] = 24;
  cfg.n_hidden = 2;
  cfg.epochs = 50;
  cfg.max_steps = job->max_steps;
  cfg.opt.kind = job->opt;
  if (job->opt == TRAIN_OPT_ADAM) cfg.opt.lr = 1e-3f;
  cfg.checkpoint = job->ckpt;
  cfg.checkpoint_every = job->checkpoint_every;
  cfg.resume = job->resume;
  cfg.check_sync = job->check_sync;
  cfg.evaluate = job->evaluate;
  cfg.quiet = true;
  train_result_t res;
  train_status_t st = train_run(&cfg, &res);
  if (st != TRAIN_OK)
    fprintf(stderr, "rank %d: %s\n", rank, train_last_error());
  else if (res.global_step != (uint64_t)job->max_steps)
    st = TRAIN_ERR_INVALID;
  /* What every rank reports, for the parent to compare across ranks and runs. */
  char path[4200];
  snprintf(path, sizeof path, "%s.result.%d", job->ckpt, rank);
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fprintf(f, "%.17g %.17g\n", res.test_accuracy, res.final_loss);
    fclose(f);
  }
  coll_comm_destroy(comm);
  return st == TRAIN_OK ? 0 : 20;
}

static void run_job(int nranks, job_t *job, const char *ckpt_name) {
  snprintf(job->ckpt, sizeof job->ckpt, "%s/%s", dir, ckpt_name);
  job->port = mp_free_port();
  ck_assert_int_eq(mp_run(nranks, 60000, rank_main, job), 0);
}

/* The final parameters a job's checkpoint holds (caller frees). */
static float *final_params(const char *ckpt_name, size_t *n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, ckpt_name);
  int n_state;
  train_ckpt_header_t h;
  ck_assert_int_eq(train_checkpoint_peek(path, &h, n, &n_state), 0);
  float *p = malloc(*n * sizeof *p);
  float *state[2] = {malloc(*n * sizeof(float)), malloc(*n * sizeof(float))};
  ck_assert_int_eq(train_checkpoint_read(path, &h, p, *n, state, n_state), TRAIN_OK);
  free(state[0]);
  free(state[1]);
  return p;
}

/* ||a - b|| / ||b|| */
static double rel_diff(const char *a_name, const char *b_name) {
  size_t na, nb;
  float *a = final_params(a_name, &na), *b = final_params(b_name, &nb);
  ck_assert_uint_eq(na, nb);
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < na; i++) {
    diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    norm += (double)b[i] * b[i];
  }
  free(a);
  free(b);
  return sqrt(diff / norm);
}

START_TEST(four_ranks_of_16_match_one_rank_of_64_after_20_steps) {
  job_t one = {.batch = 64, .accumulate = 1, .max_steps = 20};
  run_job(1, &one, "one");
  /* Small buckets: three of them, launched while backward runs. */
  job_t four = {
      .batch = 16, .accumulate = 1, .max_steps = 20, .bucket_mb = 0.001, .check_sync = true};
  run_job(4, &four, "four");
  double d = rel_diff("four", "one");
  ck_assert_msg(d <= 1e-5, "relative parameter difference %g", d);
}
END_TEST

START_TEST(two_ranks_accumulating_two_match_one_rank_of_64) {
  job_t one = {.batch = 64, .accumulate = 1, .max_steps = 20};
  run_job(1, &one, "one");
  job_t two = {.batch = 16, .accumulate = 2, .max_steps = 20};
  run_job(2, &two, "two");
  double d = rel_diff("two", "one");
  ck_assert_msg(d <= 1e-5, "relative parameter difference %g", d);
  /* A different global batch really does end elsewhere: the check can fail. */
  job_t other = {.batch = 16, .accumulate = 1, .max_steps = 20};
  run_job(2, &other, "other");
  double o = rel_diff("other", "one");
  ck_assert_msg(o > 1e-3, "batch 32 ended where batch 64 did (difference %g)", o);
}
END_TEST

/* Accuracy and mean training loss that `rank` of job `name` reported. */
static void read_result(const char *name, int rank, double *accuracy, double *loss) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.result.%d", dir, name, rank);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fscanf(f, "%lf %lf", accuracy, loss), 2);
  fclose(f);
}

START_TEST(evaluation_and_loss_on_four_shards_match_one_rank) {
  /* 16 steps: exactly one epoch, so it ends with an evaluation. */
  job_t one = {.batch = 64, .accumulate = 1, .max_steps = 16, .evaluate = true};
  run_job(1, &one, "eval1");
  job_t four = {.batch = 16, .accumulate = 1, .max_steps = 16, .evaluate = true};
  run_job(4, &four, "eval4");
  double acc1, loss1, acc0, loss0;
  read_result("eval1", 0, &acc1, &loss1);
  read_result("eval4", 0, &acc0, &loss0);
  ck_assert(acc1 > 0.0 && acc1 <= 1.0);
  /* Every rank holds the all-reduced figures, bit for bit. */
  for (int r = 1; r < 4; r++) {
    double acc, loss;
    read_result("eval4", r, &acc, &loss);
    ck_assert_double_eq(acc, acc0);
    ck_assert_double_eq(loss, loss0);
  }
  /* Parameters agree to ~1e-7, so at most a sample on a decision boundary may differ. */
  ck_assert_msg(fabs(acc0 - acc1) <= 1.0 / 200, "accuracy %g on 4 ranks, %g on 1", acc0, acc1);
  ck_assert_msg(fabs(loss0 - loss1) <= 1e-5 * loss1, "loss %g on 4 ranks, %g on 1", loss0, loss1);
}
END_TEST

static void resume_matches_uninterrupted(int nranks, train_opt_kind_t opt) {
  job_t full = {.batch = 32, .accumulate = 1, .max_steps = 20, .opt = opt};
  run_job(nranks, &full, "full");
  /* Stop at step 10 (mid-epoch), checkpoints every 3 steps, then resume to 20. */
  job_t first = {.batch = 32,
                 .accumulate = 1,
                 .max_steps = 10,
                 .checkpoint_every = 3,
                 .opt = opt,
                 .evaluate = true};
  run_job(nranks, &first, "part");
  job_t second = first;
  second.max_steps = 20;
  second.resume = true;
  run_job(nranks, &second, "part");
  ck_assert_msg(rel_diff("part", "full") == 0.0, "resumed run differs by %g",
                rel_diff("part", "full"));
}

START_TEST(resumed_single_rank_sgd_run_ends_with_the_same_parameters) {
  resume_matches_uninterrupted(1, TRAIN_OPT_SGD);
}
END_TEST

START_TEST(resumed_two_rank_adam_run_ends_with_the_same_parameters) {
  resume_matches_uninterrupted(2, TRAIN_OPT_ADAM);
}
END_TEST

/* check_sync: equal hashes pass; rank 1 holding another hash fails on every rank. */
static int check_sync_rank(int rank, int nranks, void *arg) {
  coll_comm_t *comm = open_comm(arg, rank, nranks);
  if (comm == NULL) return 10;
  train_backend_t *be;
  train_model_t *m;
  train_ddp_t *ddp;
  size_t hidden[1] = {8};
  int rc = 0;
  if (train_backend_open(TRAIN_DEVICE_CPU, 1, rank, &be) != TRAIN_OK ||
      train_model_create(be, 4, hidden, 1, 10, 2, 1, &m) != TRAIN_OK ||
      train_ddp_create(comm, m, 1 << 20, &ddp) != TRAIN_OK)
    return 11;
  /* Rank 1 perturbs its parameters; the broadcast from rank 0 repairs them. */
  float *p = train_model_params(m);
  size_t n = train_model_param_count(m);
  if (rank == 1) p[3] += 1.0f;
  uint64_t h = train_params_hash(p, n);
  if (rank == 1 && train_ddp_check_sync(ddp, &h) != TRAIN_ERR_DIVERGED) rc = 12;
  if (rank == 0 && train_ddp_check_sync(ddp, &h) != TRAIN_ERR_DIVERGED) rc = 12;
  if (rc == 0 && strstr(train_last_error(), "different parameters") == NULL) rc = 13;
  if (rc == 0 && train_ddp_broadcast_params(ddp) != TRAIN_OK) rc = 14;
  h = train_params_hash(p, n);
  if (rc == 0 && train_ddp_check_sync(ddp, &h) != TRAIN_OK) rc = 15;
  train_ddp_destroy(ddp);
  train_model_destroy(m);
  train_backend_close(be);
  coll_comm_destroy(comm);
  return rc;
}

START_TEST(check_sync_fails_loudly_when_ranks_diverge) {
  job_t job = {.port = mp_free_port()};
  ck_assert_int_eq(mp_run(2, 30000, check_sync_rank, &job), 0);
}
END_TEST

/* finish_sync_each's callback: each bucket's range once, in order, stopping at an error. */
typedef struct {
  size_t begin[4], end[4];
  int calls, fail_at;
} ranges_t;

static train_status_t record_range(void *ctx, size_t begin, size_t end) {
  ranges_t *r = ctx;
  if (r->calls < 4) {
    r->begin[r->calls] = begin;
    r->end[r->calls] = end;
  }
  return ++r->calls == r->fail_at ? TRAIN_ERR_INVALID : TRAIN_OK;
}

/* Bucket layout: whole layers, last layer first, closed at the size limit. */
START_TEST(buckets_hold_whole_layers_in_reverse_order) {
  train_backend_t *be;
  train_model_t *m;
  train_ddp_t *ddp;
  size_t hidden[2] = {256, 256};
  ck_assert_int_eq(train_backend_open(TRAIN_DEVICE_CPU, 1, 0, &be), 0);
  ck_assert_int_eq(train_model_create(be, 784, hidden, 2, 10, 4, 1, &m), 0);
  /* 25 MiB: the whole 1 MB model is one bucket. */
  ck_assert_int_eq(train_ddp_create(NULL, m, 25u << 20, &ddp), 0);
  ck_assert_int_eq(train_ddp_bucket_count(ddp), 1);
  train_ddp_destroy(ddp);
  /* 256 KiB: layer 3 (10 KB) plus layer 2 (263 KB) reach it and close the first bucket,
   * layer 1 (804 KB) is the second. At 300 KB the first two stay open and take layer 1
   * in too (as PyTorch: a bucket closes once it reaches the limit). */
  ck_assert_int_eq(train_ddp_create(NULL, m, 256u << 10, &ddp), 0);
  ck_assert_int_eq(train_ddp_bucket_count(ddp), 2);
  train_ddp_destroy(ddp);
  ck_assert_int_eq(train_ddp_create(NULL, m, 300000, &ddp), 0);
  ck_assert_int_eq(train_ddp_bucket_count(ddp), 1);
  train_ddp_destroy(ddp);
  /* 1 byte: one bucket per layer. */
  ck_assert_int_eq(train_ddp_create(NULL, m, 1, &ddp), 0);
  ck_assert_int_eq(train_ddp_bucket_count(ddp), 3);
  /* A step without communication still checks that backward announced every bucket. */
  train_ddp_begin_sync(ddp);
  ck_assert_int_eq(train_ddp_grad_ready(ddp, 10 * 257), 0);
  double wait = 0.0;
  ck_assert_int_eq(train_ddp_finish_sync(ddp, &wait), TRAIN_ERR_INVALID);
  /* A whole step: the callback sees the three layers' ranges, last layer first. */
  train_ddp_begin_sync(ddp);
  for (int i = 2; i >= 0; i--) {
    const train_layer_t *l = train_model_linear(m, i);
    size_t end = (size_t)(l->w - train_model_params(m)) + l->in * l->out + l->out;
    ck_assert_int_eq(train_ddp_grad_ready(ddp, end), 0);
  }
  ranges_t seen = {.fail_at = 0};
  ck_assert_int_eq(train_ddp_finish_sync_each(ddp, &wait, record_range, &seen), 0);
  ck_assert_int_eq(seen.calls, 3);
  size_t expect[4] = {0, 10 * 257, 10 * 257 + 256 * 257, train_model_param_count(m)};
  for (int b = 0; b < 3; b++) {
    ck_assert_uint_eq(seen.begin[b], expect[b]);
    ck_assert_uint_eq(seen.end[b], expect[b + 1]);
  }
  /* The callback's error ends the calls and is returned. */
  train_ddp_begin_sync(ddp);
  ck_assert_int_eq(train_ddp_grad_ready(ddp, train_model_param_count(m)), 0);
  seen = (ranges_t){.fail_at = 2};
  ck_assert_int_eq(train_ddp_finish_sync_each(ddp, &wait, record_range, &seen), TRAIN_ERR_INVALID);
  ck_assert_int_eq(seen.calls, 2);
  train_ddp_destroy(ddp);
  ck_assert_int_eq(train_ddp_create(NULL, m, 0, &ddp), TRAIN_ERR_INVALID);
  train_model_destroy(m);
  train_backend_close(be);
}
END_TEST

SUITE_MAIN("train_ddp",
           suite_fixture_tests("ddp", 120, ddp_setup, ddp_teardown,
                               buckets_hold_whole_layers_in_reverse_order,
                               four_ranks_of_16_match_one_rank_of_64_after_20_steps,
                               evaluation_and_loss_on_four_shards_match_one_rank,
                               two_ranks_accumulating_two_match_one_rank_of_64,
                               resumed_single_rank_sgd_run_ends_with_the_same_parameters,
                               resumed_two_rank_adam_run_ends_with_the_same_parameters,
                               check_sync_fails_loudly_when_ranks_diverge))
