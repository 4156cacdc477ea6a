/* The elastic training loop (--elastic): every step's gradients come from --shards
 * shards spread over the ranks alive, are summed with an all-reduce, and the step is
 * committed (optimizer, position, sample log) only when every rank agrees that all went
 * well (coll_comm_agree). Otherwise the survivors shrink the communicator and compute the
 * same step again: the parameters are still those before it, so no committed step is
 * lost and at most one is computed twice. Replacements waiting to join are taken in after
 * a committed step and receive the state from rank 0.
 *
 * Reduction, default: each rank sums its shards' gradients (backward accumulates) and one
 * all-reduce sums P floats. --bit-identical: each shard's backward writes into a row of
 * its own, and the rows are summed exactly in 64-bit fixed point (trainer_elastic_exact.c:
 * an all-reduce MAX of one float pair, a reduce-scatter of P int64, an all-gather of P
 * floats): the sum no longer depends on which rank computed which shard, so a run that
 * lost ranks ends bit for bit where one that lost none does; the price is 1.5 times the
 * bytes of the default mode's all-reduce, two more collectives and the conversions.
 * Every row carries one more float, the shard's loss. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "model_grads.h"
#include "trainer_elastic.h"

enum { MAX_TRIES = 10 };

typedef struct {
  trainer_run_t *r;
  const train_config_t *c;
  size_t n_params, row; /* row: the gradients and the loss */
  float *rows;          /* one row (default), or this rank's shard rows (bit-identical) */
  size_t rows_cap;      /* rows allocated */
  float *sum;           /* the step's summed row (bit-identical; else rows) */
  int64_t *fixed;       /* bit-identical: the row in fixed point */
  uint64_t steps_per_epoch, total_steps;
  size_t first, count; /* positions of the step in flight */
  FILE *log;
  int launch_rank, launch_size, die_rank;
  long die_step;
  bool die_after;       /* the test hook: after the all-reduce returned, before the agreement */
  long await_join_step; /* test hook TRAIN_TEST_AWAIT_JOIN: -1 none */
  bool joined;
  double join_t0_ms; /* a replacement: when it called coll_comm_join */
  double loss_epoch, samples_epoch, last_epoch_loss;
} elastic_t;

/* Test hook, read only from the environment: TRAIN_TEST_DIE_AT=RANK:STEP[:after] makes the
 * process started as RANK raise SIGKILL in global step STEP (before its all-reduce, or
 * after it returned). Replacements never die by it. */
static void read_die_hook(elastic_t *e) {
  e->die_rank = -1;
  const char *v = getenv("TRAIN_TEST_DIE_AT");
  if (v == NULL || e->joined) return;
  char phase[16] = "";
  if (sscanf(v, "%d:%ld:%15s", &e->die_rank, &e->die_step, phase) < 2) e->die_rank = -1;
  e->die_after = strcmp(phase, "after") == 0;
}

/* Test hook TRAIN_TEST_AWAIT_JOIN=STEP: before step STEP, while the world is smaller than
 * the launcher's WORLD_SIZE, the ranks agree (flag 1) every 10 ms, for up to 30 s, until a
 * replacement waits, and take it in: so a test's replacement is in by a known step
 * however slowly it starts. The condition depends only on the step and the world, the
 * same on every rank (a replacement taken in earlier reads it too), so all ask the same
 * agreements. */
static void read_await_hook(elastic_t *e) {
  const char *v = getenv("TRAIN_TEST_AWAIT_JOIN");
  e->await_join_step = v != NULL ? atol(v) : -1;
}

static void take_in(elastic_t *e, int joiners);

static train_status_t await_joiner(elastic_t *e) {
  trainer_run_t *r = e->r;
  if ((long)r->global_step != e->await_join_step) return TRAIN_OK;
  for (int waited = 0; waited < 30000 && r->world < e->launch_size; waited += 10) {
    coll_agreement_t a = {.flag = 1};
    coll_status_t cs = coll_comm_agree(r->comm, &a);
    if (cs != COLL_OK) return train_comm_error(cs, "agreement (TRAIN_TEST_AWAIT_JOIN)");
    if (a.nfailed > 0) return elastic_shrink(r, &a);
    if (a.joiners > 0) {
      take_in(e, a.joiners);
      return TRAIN_OK;
    }
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return TRAIN_OK;
}

static void maybe_die(const elastic_t *e, bool after) {
  if (e->die_rank != e->launch_rank || e->die_after != after ||
      (long)e->r->global_step != e->die_step)
    return;
  fprintf(stderr, "elastic: rank %d dies in step %ld (TRAIN_TEST_DIE_AT) at unix time %.3f\n",
          e->launch_rank, e->die_step, elastic_unix_s());
  fflush(stderr);
  raise(SIGKILL);
}

/* Bit-identical mode: rank r's shards r, r + w, r + 2w, ... sit in its `per` slots of
 * e->rows (slot j: shard r + j*w). */
static size_t slots_per_rank(const elastic_t *e) {
  return ((size_t)e->c->shards + (size_t)e->r->world - 1) / (size_t)e->r->world;
}

static train_status_t ensure_rows(elastic_t *e, size_t nrows) {
  if (nrows <= e->rows_cap) return TRAIN_OK;
  float *grown = realloc(e->rows, nrows * e->row * sizeof(float));
  if (grown == NULL)
    return train_error(TRAIN_ERR_NO_MEMORY, "elastic: cannot allocate %zu x %zu floats", nrows,
                       e->row);
  e->rows = grown;
  e->rows_cap = nrows;
  if (!e->c->bit_identical) e->sum = grown;
  return TRAIN_OK;
}

/* The exchange: an all-reduce of the one row (default), or the exact sum of every rank's
 * shard rows (bit-identical). */
static train_status_t exchange(elastic_t *e) {
  trainer_run_t *r = e->r;
  if (e->c->bit_identical) {
    elastic_exact_t x = {.rows = e->rows,
                         .row = e->row,
                         .rank = r->rank,
                         .world = r->world,
                         .shards = e->c->shards,
                         .step = r->global_step,
                         .fixed = e->fixed,
                         .sum = e->sum};
    return elastic_exact_sum(r->comm, &x);
  }
  coll_status_t cs = coll_all_reduce(e->rows, e->rows, e->row, COLL_FLOAT32, COLL_SUM, r->comm);
  return cs == COLL_OK ? TRAIN_OK : train_comm_error(cs, "all-reduce of the step's gradients");
}

/* Forward and backward of this rank's shards, then the exchange. */
static train_status_t compute_step(elastic_t *e) {
  trainer_run_t *r = e->r;
  const train_config_t *c = e->c;
  size_t per = c->bit_identical ? slots_per_rank(e) : 1;
  train_status_t st = ensure_rows(e, per);
  if (st != TRAIN_OK) return st;
  float *mine = e->rows; /* bit-identical: every slot of a shard < S is written below */
  if (!c->bit_identical) memset(mine, 0, e->row * sizeof(float));
  float scale = 1.0f / (float)e->count;
  float *grads = train_model_grads(r->model);
  float *own_grads = NULL; /* bit-identical: the model's buffer while it writes into rows */
  double loss_mine = 0.0;
  bool any = false;
  for (int s = r->rank; s < c->shards && st == TRAIN_OK; s += r->world) {
    size_t first, n;
    elastic_shard_range(e->first, e->count, c->batch, s, &first, &n);
    float *slot = mine + (size_t)(s / r->world) * e->row;
    if (n == 0) {
      if (c->bit_identical) memset(slot, 0, e->row * sizeof(float));
      continue;
    }
    if (c->bit_identical) {
      float *was = train_model_use_grads(r->model, slot); /* backward writes the row */
      if (own_grads == NULL) own_grads = was;
    }
    trainer_batches_t *b = &r->batches;
    double loss = 0.0;
    st = trainer_batches_load(b, r->be, &r->train, r->sampler.indices + first, n);
    if (st == TRAIN_OK) st = train_model_forward(r->model, b->dev_x, n);
    if (st == TRAIN_OK) st = train_model_loss(r->model, b->dev_labels, n, scale, &loss, NULL);
    if (st == TRAIN_OK)
      st = train_model_backward(r->model, b->dev_x, n, !c->bit_identical && any, NULL, NULL);
    if (st != TRAIN_OK) break;
    if (c->bit_identical) slot[e->n_params] = (float)loss;
    loss_mine += loss;
    any = true;
  }
  if (own_grads != NULL) train_model_use_grads(r->model, own_grads);
  if (st != TRAIN_OK) return st;
  if (!c->bit_identical && any) {
    memcpy(e->rows, grads, e->n_params * sizeof(float));
    e->rows[e->n_params] = (float)loss_mine;
  }
  maybe_die(e, false);
  st = exchange(e);
  if (st == TRAIN_OK) maybe_die(e, true);
  return st;
}

static void position_step(elastic_t *e) {
  elastic_step_range(e->r->train.count, e->c->batch, e->c->shards, e->r->step_in_epoch, &e->first,
                     &e->count);
}

static bool rank0_prints(const elastic_t *e) { return e->r->rank == 0; }

/* The agreed step: optimizer, sample log, position. */
static train_status_t commit(elastic_t *e) {
  trainer_run_t *r = e->r;
  const train_config_t *c = e->c;
  train_optimizer_set_lr(r->opt,
                         train_lr_at(c->lr_schedule, c->opt.lr, r->global_step, e->total_steps));
  train_status_t st = train_optimizer_step(r->opt, train_model_params(r->model), e->sum);
  if (st == TRAIN_OK)
    st = elastic_log_step(e->log, r->global_step, r->epoch, r->step_in_epoch,
                          r->sampler.indices + e->first, e->count);
  if (st != TRAIN_OK) return st;
  double loss = e->sum[e->n_params];
  e->loss_epoch += loss;
  e->samples_epoch += (double)e->count;
  r->global_step++;
  r->step_in_epoch++;
  if (!c->quiet && rank0_prints(e) && r->global_step % (uint64_t)c->log_every == 0)
    printf("step %llu (epoch %llu): loss %.4f on %d ranks\n", (unsigned long long)r->global_step,
           (unsigned long long)r->epoch + 1, loss / (double)e->count, r->world);
  if (r->step_in_epoch == e->steps_per_epoch) {
    if (rank0_prints(e))
      printf("epoch %llu: loss %.4f on %d ranks\n", (unsigned long long)r->epoch + 1,
             e->loss_epoch / e->samples_epoch, r->world);
    e->last_epoch_loss = e->loss_epoch / e->samples_epoch;
    r->epoch++;
    r->step_in_epoch = 0;
    e->loss_epoch = e->samples_epoch = 0.0;
    train_sampler_set_epoch(&r->sampler, r->epoch);
  }
  fflush(stdout);
  return TRAIN_OK;
}

/* Replacements wait: take them in and hand them the state (the step is committed). A
 * failure here is left to the next step's agreement, which sees who is missing. */
static void take_in(elastic_t *e, int joiners) {
  trainer_run_t *r = e->r;
  double t0 = elastic_now_ms();
  int before = r->world;
  train_status_t st = elastic_grow(r, joiners);
  double t_grow = elastic_now_ms();
  if (st == TRAIN_OK) st = elastic_state_share(r);
  double t_end = elastic_now_ms();
  if (st != TRAIN_OK) {
    fprintf(stderr, "elastic: rank %d: taking in %d replacement(s) failed: %s\n", r->rank, joiners,
            train_last_error());
    return;
  }
  if (rank0_prints(e))
    printf(
        "elastic: took in %d replacement(s) at step %llu: %d -> %d ranks; stall %.1f ms "
        "(grow %.1f, state %.1f)\n",
        joiners, (unsigned long long)r->global_step, before, r->world, t_end - t0, t_grow - t0,
        t_end - t_grow);
  fflush(stdout); /* collrun relays a pipe: the report must not wait for the next flush */
}

/* The agreement said the step failed but lost nobody: a rank's call returned an error (a
 * timeout, a revoke, a peer's error) while every rank lived. Each rank it failed on says
 * what failed at once; `redone` gets the note for rank 0's report. */
static void tell_redo(elastic_t *e, const coll_agreement_t *a, bool mine_failed, const char *why,
                      char *redone, size_t size) {
  trainer_run_t *r = e->r;
  if (mine_failed) {
    printf("elastic: rank %d: step %llu failed here: %s; no rank was lost, the %d ranks redo it\n",
           r->rank, (unsigned long long)r->global_step, why, r->world);
    fflush(stdout);
  }
  char ranks[160];
  int n = elastic_list_flagged(a->flag, r->world, ranks, sizeof ranks);
  snprintf(redone, size, "; redone: the step failed on rank%s %s (see %s 'failed here' line%s)",
           n == 1 ? "" : "s", n > 0 ? ranks : "?", n == 1 ? "its" : "their", n == 1 ? "" : "s");
}

/* Run step `global_step` until it is committed on every rank alive. */
static train_status_t run_step(elastic_t *e) {
  trainer_run_t *r = e->r;
  position_step(e);
  double t_fail = -1.0, t_agree = 0.0, t_shrink = 0.0;
  train_status_t st = compute_step(e);
  if (st == TRAIN_OK) st = elastic_test_fail(r->global_step);
  char failed[256] = "", redone[256] = "", why[512] = "";
  for (int tries = 1;; tries++) {
    if (st == TRAIN_ERR_NOT_FINITE) return st; /* every rank saw it; a redo gives it again */
    if (tries > MAX_TRIES)
      return train_error(TRAIN_ERR_COMM, "step %llu: not committed after %d tries: %s",
                         (unsigned long long)r->global_step, MAX_TRIES, train_last_error());
    if (st != TRAIN_OK) {
      if (t_fail < 0) t_fail = elastic_now_ms();
      snprintf(why, sizeof why, "%s", train_last_error());
      coll_comm_revoke(r->comm); /* peers waiting for this rank learn at once */
    }
    coll_agreement_t a = {.flag = elastic_step_flag(r->rank, st == TRAIN_OK)};
    double t0 = elastic_now_ms();
    coll_status_t cs = coll_comm_agree(r->comm, &a);
    t_agree += elastic_now_ms() - t0;
    if (cs == COLL_ERR_FENCED)
      return train_error(TRAIN_ERR_FENCED,
                         "rank %d: the other ranks declared this one failed in step %llu (it was "
                         "stopped or slower than --elastic-timeout-ms) and went on without it: %s",
                         r->rank, (unsigned long long)r->global_step, coll_last_error());
    if (cs != COLL_OK) {
      st = train_comm_error(cs, "agreement");
      struct timespec pause = {0, 50 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    if (elastic_step_ok(a.flag) && a.nfailed == 0) {
      st = commit(e);
      if (st != TRAIN_OK) return st;
      if (t_fail >= 0 && rank0_prints(e))
        printf(
            "elastic: step %llu committed on %d ranks %.1f ms after the failure was seen "
            "(rank(s) %s lost; agree %.1f ms, shrink %.1f ms) at unix time %.3f%s\n",
            (unsigned long long)r->global_step - 1, r->world, elastic_now_ms() - t_fail,
            failed[0] ? failed : "none", t_agree, t_shrink, elastic_unix_s(), redone);
      if (e->joined && e->join_t0_ms > 0) {
        printf(
            "elastic: replacement (rank %d of %d) committed its first step, %llu, %.1f ms "
            "after it called coll_comm_join\n",
            r->rank, r->world, (unsigned long long)r->global_step - 1,
            elastic_now_ms() - e->join_t0_ms);
        e->join_t0_ms = 0;
      }
      fflush(stdout);
      if (a.joiners > 0) take_in(e, a.joiners);
      return TRAIN_OK;
    }
    if (t_fail < 0) t_fail = t0; /* first seen by the agreement (a peer died after the reduce) */
    if (a.nfailed > 0)
      elastic_list_failed(&a, failed, sizeof failed);
    else
      tell_redo(e, &a, st != TRAIN_OK, why, redone, sizeof redone);
    t0 = elastic_now_ms();
    st = elastic_shrink(r, &a);
    t_shrink += elastic_now_ms() - t0;
    if (st != TRAIN_OK) continue; /* agree again on the communicator we still have */
    st = compute_step(e);         /* the same step, on the smaller world */
  }
}

static train_status_t open_elastic(elastic_t *e, trainer_run_t *r) {
  const train_config_t *c = r->cfg;
  *e = (elastic_t){
      .r = r, .c = c, .n_params = train_model_param_count(r->model), .last_epoch_loss = NAN};
  e->row = e->n_params + 1;
  coll_launch_info_t launch;
  bool found = coll_launch_info(&launch) == COLL_OK && launch.found;
  e->launch_rank = found ? launch.rank : -1;
  e->launch_size = found ? launch.size : 1;
  e->joined = trainer_elastic_joining();
  read_die_hook(e);
  read_await_hook(e);
  train_status_t st = ensure_rows(e, c->bit_identical ? (size_t)c->shards : 1);
  if (st != TRAIN_OK) return st;
  if (c->bit_identical) {
    size_t padded = e->row + (size_t)c->shards; /* world <= shards */
    e->sum = malloc(padded * sizeof(float));
    e->fixed = malloc(padded * sizeof(int64_t));
    if (e->sum == NULL || e->fixed == NULL)
      return train_error(TRAIN_ERR_NO_MEMORY, "elastic: no memory for a row");
  }
  e->steps_per_epoch = elastic_steps_per_epoch(r->train.count, c->batch, c->shards);
  e->total_steps = e->steps_per_epoch * (uint64_t)c->epochs;
  return elastic_log_open(c->sample_log, &e->log);
}

static void close_elastic(elastic_t *e) {
  if (e->sum != e->rows) free(e->sum);
  free(e->fixed);
  free(e->rows);
  if (e->log != NULL) fclose(e->log);
}

/* Every rank the same parameters? (--check-sync, at the end) */
static train_status_t check_sync(trainer_run_t *r, uint64_t hash) {
  uint64_t lo = hash, hi = hash;
  coll_status_t cs = coll_all_reduce(&lo, &lo, 1, COLL_UINT64, COLL_MIN, r->comm);
  if (cs == COLL_OK) cs = coll_all_reduce(&hi, &hi, 1, COLL_UINT64, COLL_MAX, r->comm);
  if (cs != COLL_OK) return train_comm_error(cs, "all-reduce of the parameter hash");
  if (lo != hi)
    return train_error(TRAIN_ERR_DIVERGED, "--check-sync: ranks hold different parameters");
  return TRAIN_OK;
}

train_status_t trainer_elastic_run(trainer_run_t *r, train_result_t *res) {
  elastic_t e;
  train_status_t st = open_elastic(&e, r);
  if (st == TRAIN_OK && e.joined) {
    e.join_t0_ms = elastic_now_ms();
    st = elastic_join(r);
    if (st == TRAIN_OK) st = elastic_state_share(r);
    if (st == TRAIN_OK) {
      train_sampler_set_epoch(&r->sampler, r->epoch);
      printf(
          "elastic: joined as rank %d of %d at step %llu (epoch %llu); state verified by "
          "its hashes, %.1f ms after the join call\n",
          r->rank, r->world, (unsigned long long)r->global_step, (unsigned long long)r->epoch + 1,
          elastic_now_ms() - e.join_t0_ms);
      fflush(stdout);
    }
  }
  const train_config_t *c = r->cfg;
  /* steps/s leaves out the first --warmup-steps of this process (the slowest rank's
   * start, page faults). */
  double t0 = elastic_now_ms();
  uint64_t step0 = r->global_step;
  const uint64_t warm_end = step0 + (uint64_t)c->warmup_steps;
  while (st == TRAIN_OK && r->epoch < (uint64_t)c->epochs &&
         !(c->max_steps > 0 && r->global_step >= (uint64_t)c->max_steps)) {
    if (c->warmup_steps > 0 && r->global_step == warm_end) {
      t0 = elastic_now_ms();
      step0 = r->global_step;
    }
    st = await_joiner(&e);
    if (st == TRAIN_OK) st = run_step(&e);
  }
  double took_s = (elastic_now_ms() - t0) / 1e3;
  uint64_t hash = 0;
  if (st == TRAIN_OK) st = trainer_params_hash(r, &hash);
  if (st == TRAIN_OK && c->check_sync) st = check_sync(r, hash);
  if (st == TRAIN_OK) st = elastic_save_final(r); /* with --checkpoint: a live rank writes it */
  if (st == TRAIN_OK) {
    uint64_t steps = r->global_step - step0;
    printf("elastic: rank %d of %d done at step %llu, params hash %016llx\n", r->rank, r->world,
           (unsigned long long)r->global_step, (unsigned long long)hash);
    if (rank0_prints(&e))
      printf("done: %llu steps on %d ranks (at the end), %.2f steps/s, %.0f samples/s%s\n",
             (unsigned long long)steps, r->world, (double)steps / (took_s + 1e-12),
             (double)steps * (double)(c->batch * (size_t)c->shards) / (took_s + 1e-12),
             c->warmup_steps > 0 ? " (after the warm-up)" : "");
    res->global_step = r->global_step;
    res->param_hash = hash;
    res->final_loss = e.samples_epoch > 0 ? e.loss_epoch / e.samples_epoch : e.last_epoch_loss;
  }
  close_elastic(&e);
  fflush(stdout);
  return st;
}
