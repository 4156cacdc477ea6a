/* A training run's checkpoints: when rank 0 writes one (every N steps or after each
 * epoch, positioned at the step to resume from), and resuming from rank 0's file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "error.h"
#include "trainer_run.h"

/* Host views of the parameters and optimizer states (state[i] for i < n_state): the
 * tensors themselves on the CPU, fresh copies in host_state otherwise. */
static train_status_t host_views(trainer_run_t *r, bool copy, float **params, float *state[2]) {
  size_t n = train_model_param_count(r->model);
  int n_state = train_optimizer_state_count(r->opt);
  state[0] = state[1] = NULL;
  if (r->host_state == NULL) {
    *params = train_model_params(r->model);
    for (int i = 0; i < n_state; i++) state[i] = train_optimizer_state(r->opt, i);
    return TRAIN_OK;
  }
  *params = r->host_state;
  for (int i = 0; i < n_state; i++) state[i] = r->host_state + (size_t)(i + 1) * n;
  train_status_t st = TRAIN_OK;
  if (copy) st = backend_download(r->be, *params, train_model_params(r->model), n * sizeof(float));
  for (int i = 0; i < n_state && copy && st == TRAIN_OK; i++)
    st = backend_download(r->be, state[i], train_optimizer_state(r->opt, i), n * sizeof(float));
  return st;
}

train_status_t trainer_params_hash(trainer_run_t *r, uint64_t *hash) {
  size_t n = train_model_param_count(r->model);
  float *params = train_model_params(r->model);
  if (r->host_state != NULL) {
    train_status_t st = backend_download(r->be, r->host_state, params, n * sizeof(float));
    if (st != TRAIN_OK) return st;
    params = r->host_state;
  }
  *hash = train_params_hash(params, n);
  return TRAIN_OK;
}

static void fill_header(const trainer_run_t *r, train_ckpt_header_t *h) {
  memset(h, 0, sizeof *h);
  h->epoch = r->epoch;
  h->step_in_epoch = r->step_in_epoch;
  h->global_step = r->global_step;
  h->seed = r->cfg->seed;
  h->opt_kind = (uint32_t)r->cfg->opt.kind;
  h->opt_steps = *train_optimizer_steps(r->opt);
  int n = train_model_linear_count(r->model);
  h->n_layers = (uint32_t)n;
  for (int i = 0; i < n; i++) h->dims[i] = (uint32_t)train_model_linear(r->model, i)->in;
  h->dims[n] = (uint32_t)train_model_linear(r->model, n - 1)->out;
}

train_status_t trainer_save_checkpoint(trainer_run_t *r) {
  if (r->cfg->checkpoint == NULL || r->rank != 0) return TRAIN_OK;
  train_ckpt_header_t h;
  fill_header(r, &h);
  float *params, *state[2];
  train_status_t st = host_views(r, true, &params, state);
  if (st != TRAIN_OK) return st;
  return train_checkpoint_write(r->cfg->checkpoint, &h, params, train_model_param_count(r->model),
                                state, train_optimizer_state_count(r->opt));
}

train_status_t trainer_checkpoint_after_step(trainer_run_t *r, uint64_t steps_per_epoch) {
  long every = r->cfg->checkpoint_every;
  if (every <= 0 || r->global_step % (uint64_t)every != 0) return TRAIN_OK;
  uint64_t saved = r->step_in_epoch;
  r->step_in_epoch++; /* the position to resume from is the next step */
  bool wrap = r->step_in_epoch == steps_per_epoch;
  if (wrap) {
    r->epoch++;
    r->step_in_epoch = 0;
  }
  train_status_t st = trainer_save_checkpoint(r);
  if (wrap) r->epoch--;
  r->step_in_epoch = saved;
  return st;
}

train_status_t trainer_checkpoint_after_epoch(trainer_run_t *r) {
  if (r->cfg->checkpoint_every != 0 || r->cfg->checkpoint == NULL) return TRAIN_OK;
  r->epoch++; /* the position to resume from is the next epoch */
  train_status_t st = trainer_save_checkpoint(r);
  r->epoch--;
  return st;
}

/* Rank 0 reads the checkpoint and sends everything to the others, so that only one
 * rank needs the file. A missing file means a first start: train from scratch. */
train_status_t trainer_resume(trainer_run_t *r) {
  size_t n = train_model_param_count(r->model);
  int n_state = train_optimizer_state_count(r->opt);
  float *params, *state[2];
  /* [status, found, epoch, step_in_epoch, global_step, opt_steps] */
  int64_t pos[6] = {0};
  train_status_t st = host_views(r, false, &params, state);
  if (st != TRAIN_OK) return st;
  if (r->rank == 0) {
    if (access(r->cfg->checkpoint, F_OK) != 0 && errno == ENOENT) {
      printf("no checkpoint at %s yet: starting from scratch\n", r->cfg->checkpoint);
    } else {
      train_ckpt_header_t h, mine;
      st = train_checkpoint_read(r->cfg->checkpoint, &h, params, n, state, n_state);
      fill_header(r, &mine);
      if (st == TRAIN_OK && (h.n_layers != mine.n_layers || h.opt_kind != mine.opt_kind ||
                             memcmp(h.dims, mine.dims, sizeof h.dims) != 0))
        st = train_error(TRAIN_ERR_FORMAT, "%s: checkpoint of another model shape or optimizer",
                         r->cfg->checkpoint);
      if (st == TRAIN_OK && h.seed != r->cfg->seed)
        st = train_error(TRAIN_ERR_INVALID, "%s: written with --seed %llu, this run has %llu",
                         r->cfg->checkpoint, (unsigned long long)h.seed,
                         (unsigned long long)r->cfg->seed);
      /* From the host copy into the device's tensors (nothing to do on the CPU). */
      if (st == TRAIN_OK)
        st = backend_upload(r->be, train_model_params(r->model), params, n * sizeof(float));
      for (int i = 0; i < n_state && st == TRAIN_OK; i++)
        st = backend_upload(r->be, train_optimizer_state(r->opt, i), state[i], n * sizeof(float));
      pos[1] = 1;
      pos[2] = (int64_t)h.epoch;
      pos[3] = (int64_t)h.step_in_epoch;
      pos[4] = (int64_t)h.global_step;
      pos[5] = (int64_t)h.opt_steps;
    }
    pos[0] = st;
  }
  /* Every rank learns rank 0's status, so a bad file stops all of them. */
  train_status_t cst = train_ddp_broadcast(r->ddp, pos, 6, COLL_INT64);
  if (cst != TRAIN_OK) return cst;
  if (pos[0] != TRAIN_OK)
    return r->rank == 0 ? st : train_error((train_status_t)pos[0], "rank 0 could not resume");
  if (!pos[1]) return TRAIN_OK;
  cst = train_ddp_broadcast_params(r->ddp);
  for (int i = 0; i < n_state && cst == TRAIN_OK; i++)
    cst = train_ddp_broadcast(r->ddp, train_optimizer_state(r->opt, i), n, COLL_FLOAT32);
  if (cst != TRAIN_OK) return cst;
  r->epoch = (uint64_t)pos[2];
  r->step_in_epoch = (uint64_t)pos[3];
  r->global_step = (uint64_t)pos[4];
  *train_optimizer_steps(r->opt) = (uint64_t)pos[5];
  if (r->rank == 0)
    printf("resumed from %s: epoch %llu, step %llu\n", r->cfg->checkpoint,
           (unsigned long long)r->epoch + 1, (unsigned long long)r->global_step);
  return TRAIN_OK;
}
