/* The training loop behind tools/train (train_run): epochs of synchronised steps, each
 * micro-batch's forward and backward with DDP's all-reduces overlapping it, the optimizer
 * per reduced bucket; set-up, checkpoints, evaluation and timing live in trainer_*.c. */
#include <math.h>
#include <stdio.h>

#include "clock_seconds.h"
#include "console_report.h"
#include "error.h"
#include "trainer_run.h"

/* The optimizer's step on one reduced bucket [begin, end) of the flat buffers. */
static train_status_t bucket_step(void *ctx, size_t begin, size_t end) {
  trainer_run_t *r = ctx;
  return train_optimizer_step_range(r->opt, train_model_params(r->model),
                                    train_model_grads(r->model), begin, end);
}

/* One optimizer step: `accumulate` micro-batches, communication only during the last
 * one's backward. The loss gradient is scaled by 1 / (samples of the step on all ranks)
 * so that the summed gradients are the mean over the global batch. */
static train_status_t train_step(trainer_run_t *r, size_t first, size_t count, uint64_t total_steps,
                                 double *loss, double *wait_s) {
  const train_config_t *c = r->cfg;
  trainer_batches_t *b = &r->batches;
  float scale = 1.0f / (float)(count * (size_t)r->world);
  train_status_t st = TRAIN_OK;
  trainer_trace_span(r->comm, "step", true);
  double t = clock_seconds();
  for (size_t done = 0; done < count && st == TRAIN_OK;) {
    size_t nb = count - done < c->batch ? count - done : c->batch;
    bool last = done + nb == count;
    st = trainer_batches_load(b, r->be, &r->train, r->sampler.indices + first + done, nb);
    if (st != TRAIN_OK) break;
    trainer_timing_lap(&r->timing, TRAINER_PHASE_DATA, &t);
    trainer_trace_span(r->comm, "forward", true);
    st = train_model_forward(r->model, b->dev_x, nb);
    if (st == TRAIN_OK) st = train_model_loss(r->model, b->dev_labels, nb, scale, loss, NULL);
    trainer_trace_span(r->comm, "forward", false);
    trainer_timing_lap(&r->timing, TRAINER_PHASE_FORWARD, &t);
    if (st == TRAIN_OK && last) train_ddp_begin_sync(r->ddp);
    trainer_trace_span(r->comm, "backward", true);
    if (st == TRAIN_OK)
      st = train_model_backward(r->model, b->dev_x, nb, done > 0,
                                last ? train_ddp_grad_ready : NULL, r->ddp);
    trainer_trace_span(r->comm, "backward", false);
    trainer_timing_lap(&r->timing, TRAINER_PHASE_BACKWARD, &t);
    done += nb;
  }
  /* While the buckets are being reduced: gather the next step's first micro-batch, when
   * that step is in this epoch (the next epoch's order is drawn when it starts). */
  size_t next_first = first + c->batch * (size_t)c->accumulate;
  if (st == TRAIN_OK && next_first < r->sampler.num_samples) {
    size_t left = r->sampler.num_samples - next_first;
    trainer_batches_prefetch(b, &r->train, r->sampler.indices + next_first,
                             left < c->batch ? left : c->batch);
    trainer_timing_lap(&r->timing, TRAINER_PHASE_DATA, &t);
  }
  /* The optimizer steps each bucket as soon as its all-reduce is done, while the
   * later buckets are still being reduced. */
  train_optimizer_set_lr(r->opt,
                         train_lr_at(c->lr_schedule, c->opt.lr, r->global_step, total_steps));
  trainer_trace_span(r->comm, "ddp wait + optimizer", true);
  double waited = 0.0;
  train_status_t fst =
      train_ddp_finish_sync_each(r->ddp, &waited, st == TRAIN_OK ? bucket_step : NULL, r);
  if (st == TRAIN_OK) st = fst;
  if (st == TRAIN_OK) train_optimizer_step_done(r->opt);
  trainer_trace_span(r->comm, "ddp wait + optimizer", false);
  trainer_trace_span(r->comm, "step", false);
  *wait_s += waited;
  trainer_timing_close_step(&r->timing, waited, &t);
  return st;
}

static train_status_t train_loop(trainer_run_t *r, train_result_t *res) {
  const train_config_t *c = r->cfg;
  console_report_t report;
  console_report_init(&report, r->rank == 0, c->quiet, c->log_every, c->epochs);
  size_t per_step = c->batch * (size_t)c->accumulate;
  size_t shard = r->sampler.num_samples;
  uint64_t steps = c->drop_last ? shard / per_step : (shard + per_step - 1) / per_step;
  if (steps == 0)
    return train_error(TRAIN_ERR_INVALID,
                       "%zu samples per rank make no step of %zu (batch x "
                       "accumulate) with --drop-last",
                       shard, per_step);
  train_status_t st = TRAIN_OK;
  bool stop = false;
  for (; r->epoch < (uint64_t)c->epochs && !stop && st == TRAIN_OK; r->epoch++) {
    train_sampler_set_epoch(&r->sampler, r->epoch);
    console_report_epoch_start(&report);
    double loss = 0.0, samples = 0.0, t_epoch = 0.0, wait_epoch = 0.0;
    for (; r->step_in_epoch < steps; r->step_in_epoch++) {
      if (c->max_steps > 0 && r->global_step >= (uint64_t)c->max_steps) {
        stop = true;
        break;
      }
      size_t first = r->step_in_epoch * per_step;
      size_t count = shard - first < per_step ? shard - first : per_step;
      trainer_timing_step_start(&r->timing, c->warmup_steps);
      double t0 = clock_seconds(), c0 = trainer_cpu_seconds(), step_wait = 0.0;
      st = train_step(r, first, count, steps * (uint64_t)c->epochs, &loss, &step_wait);
      double step_time = clock_seconds() - t0;
      t_epoch += step_time;
      wait_epoch += step_wait;
      r->timing.cpu_s += trainer_cpu_seconds() - c0;
      if (st != TRAIN_OK) break;
      trainer_timing_count_step(&r->timing, step_time, step_wait, (double)count * r->world);
      samples += (double)count;
      r->global_step++;
      console_report_step(&report, (int)r->epoch, r->step_in_epoch + 1, steps, r->global_step,
                          samples * r->world, loss / samples);
      st = trainer_checkpoint_after_step(r, steps);
      if (st != TRAIN_OK) break;
    }
    if (st != TRAIN_OK) break;
    /* Mean training loss over all ranks' samples of this epoch. */
    double sums[2] = {loss, samples};
    st = train_ddp_sum(r->ddp, sums, 2);
    if (st != TRAIN_OK) break;
    if (sums[1] > 0) res->final_loss = sums[0] / sums[1]; /* else no step ran this epoch */
    if (stop) break; /* an interrupted epoch: no evaluation, position stays mid-epoch */
    r->step_in_epoch = 0;
    if (c->check_sync) {
      uint64_t h = 0;
      st = trainer_params_hash(r, &h);
      if (st == TRAIN_OK) st = train_ddp_check_sync(r->ddp, &h);
      if (st != TRAIN_OK) break;
    }
    double acc = -1.0;
    if (c->evaluate) st = trainer_evaluate(r, &acc);
    if (st != TRAIN_OK) break;
    res->test_accuracy = acc;
    console_report_epoch_end(&report, (int)r->epoch, res->final_loss, acc,
                             samples * r->world / (t_epoch + 1e-12),
                             wait_epoch / (t_epoch + 1e-12));
    st = trainer_checkpoint_after_epoch(r);
  }
  if (st != TRAIN_OK) return st;
  res->global_step = r->global_step;
  console_report_close_line(&report);
  trainer_timing_report(&r->timing, r->rank, r->world, r->global_step, c->warmup_steps, res);
  /* The final state, so that --resume after the end (or after --max-steps) continues. */
  return trainer_save_checkpoint(r);
}

train_status_t train_run(const train_config_t *cfg, train_result_t *result) {
  train_result_t res = {.final_loss = NAN, .test_accuracy = -1.0};
  train_status_t st = trainer_validate(cfg);
  if (st != TRAIN_OK) return st;
  trainer_run_t r = {.cfg = cfg};
  st = trainer_setup(&r);
  if (cfg->elastic) {
    /* Every rank builds the same initial model from the seed; see trainer_elastic.c. */
    if (st == TRAIN_OK) st = trainer_elastic_run(&r, &res);
  } else {
    if (st == TRAIN_OK) st = train_ddp_broadcast_params(r.ddp);
    if (st == TRAIN_OK && cfg->resume) st = trainer_resume(&r);
    if (st == TRAIN_OK) st = train_loop(&r, &res);
    uint64_t hash = 0;
    if (st == TRAIN_OK) st = trainer_params_hash(&r, &hash);
    if (st == TRAIN_OK && cfg->check_sync) st = train_ddp_check_sync(r.ddp, &hash);
    if (st == TRAIN_OK) res.param_hash = hash;
  }
  if (st != TRAIN_OK && st != TRAIN_ERR_FENCED && r.own_comm && r.world > 1) {
    /* Peers blocked in a collective with us learn at once instead of at the timeout. */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", train_last_error());
    coll_comm_abort(r.comm);
    train_error(st, "rank %d: %s", r.rank, msg);
  }
  trainer_teardown(&r);
  if (result != NULL) *result = res;
  return st;
}
