/* Optimizers over the flat parameter buffer: SGD with momentum and weight decay, Adam.
 * Their state is flat too, so a checkpoint or a broadcast is one contiguous copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"

struct train_optimizer {
  train_backend_t *be;
  train_opt_config_t cfg;
  size_t n;
  int n_state;
  train_tensor_t state[2]; /* SGD: momentum buffer; Adam: m, v */
  uint64_t steps;
};

bool train_opt_parse(const char *text, train_opt_kind_t *kind) {
  if (text != NULL && strcmp(text, "sgd") == 0) {
    *kind = TRAIN_OPT_SGD;
    return true;
  }
  if (text != NULL && strcmp(text, "adam") == 0) {
    *kind = TRAIN_OPT_ADAM;
    return true;
  }
  return false;
}

train_status_t train_optimizer_create(train_backend_t *be, const train_opt_config_t *cfg,
                                      size_t n_params, train_optimizer_t **out) {
  *out = NULL;
  if (cfg->kind != TRAIN_OPT_SGD && cfg->kind != TRAIN_OPT_ADAM)
    return train_error(TRAIN_ERR_INVALID, "unknown optimizer %d", (int)cfg->kind);
  if (!(cfg->lr > 0.0f) || cfg->momentum < 0.0f || cfg->momentum >= 1.0f ||
      cfg->weight_decay < 0.0f)
    return train_error(TRAIN_ERR_INVALID,
                       "optimizer: need lr > 0, 0 <= momentum < 1, weight decay >= 0 "
                       "(got lr %g, momentum %g, weight decay %g)",
                       (double)cfg->lr, (double)cfg->momentum, (double)cfg->weight_decay);
  if (cfg->kind == TRAIN_OPT_ADAM &&
      (cfg->beta1 < 0.0f || cfg->beta1 >= 1.0f || cfg->beta2 < 0.0f || cfg->beta2 >= 1.0f ||
       !(cfg->eps > 0.0f)))
    return train_error(TRAIN_ERR_INVALID, "adam: need 0 <= beta1, beta2 < 1 and eps > 0");
  train_optimizer_t *opt = calloc(1, sizeof *opt);
  if (opt == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the optimizer");
  *opt = (train_optimizer_t){
      .be = be, .cfg = *cfg, .n = n_params, .n_state = cfg->kind == TRAIN_OPT_ADAM ? 2 : 1};
  for (int i = 0; i < opt->n_state; i++) {
    train_status_t st = train_tensor_alloc(be, 1, n_params, &opt->state[i]);
    if (st != TRAIN_OK) {
      train_optimizer_destroy(opt);
      return st;
    }
  }
  *out = opt;
  return TRAIN_OK;
}

void train_optimizer_destroy(train_optimizer_t *opt) {
  if (opt == NULL) return;
  for (int i = 0; i < opt->n_state; i++) train_tensor_free(opt->be, &opt->state[i]);
  free(opt);
}

train_status_t train_optimizer_step_range(train_optimizer_t *opt, float *params, const float *grads,
                                          size_t begin, size_t end) {
  train_backend_t *be = opt->be;
  const train_opt_config_t *c = &opt->cfg;
  if (begin > end || end > opt->n)
    return train_error(TRAIN_ERR_INVALID, "optimizer range %zu..%zu outside 0..%zu", begin, end,
                       opt->n);
  if (begin == end) return TRAIN_OK;
  size_t n = end - begin;
  params += begin;
  grads += begin;
  if (c->kind == TRAIN_OPT_SGD) {
    if (be->sgd_step == NULL)
      return train_error(TRAIN_ERR_UNSUPPORTED, "SGD on device '%s' is not yet supported",
                         be->name);
    return be->sgd_step(be, params, grads, opt->state[0].data + begin, n, c->lr, c->momentum,
                        c->weight_decay, opt->steps == 0);
  }
  if (be->adam_step == NULL)
    return train_error(TRAIN_ERR_UNSUPPORTED, "Adam on device '%s' is not yet supported", be->name);
  return be->adam_step(be, params, grads, opt->state[0].data + begin, opt->state[1].data + begin, n,
                       c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, opt->steps + 1);
}

void train_optimizer_step_done(train_optimizer_t *opt) { opt->steps++; }

train_status_t train_optimizer_step(train_optimizer_t *opt, float *params, const float *grads) {
  train_status_t st = train_optimizer_step_range(opt, params, grads, 0, opt->n);
  if (st == TRAIN_OK) train_optimizer_step_done(opt);
  return st;
}

int train_optimizer_state_count(const train_optimizer_t *opt) { return opt->n_state; }

float *train_optimizer_state(train_optimizer_t *opt, int index) {
  return index >= 0 && index < opt->n_state ? opt->state[index].data : NULL;
}

uint64_t *train_optimizer_steps(train_optimizer_t *opt) { return &opt->steps; }

void train_optimizer_set_lr(train_optimizer_t *opt, float lr) { opt->cfg.lr = lr; }

float train_lr_at(train_lr_schedule_t schedule, float lr, uint64_t step, uint64_t total) {
  if (schedule != TRAIN_LR_COSINE || total == 0) return lr;
  double t = step >= total ? 1.0 : (double)step / (double)total;
  return (float)(0.5 * (double)lr * (1.0 + cos(M_PI * t)));
}

bool train_lr_schedule_parse(const char *text, train_lr_schedule_t *schedule) {
  if (text != NULL && strcmp(text, "constant") == 0) {
    *schedule = TRAIN_LR_CONSTANT;
    return true;
  }
  if (text != NULL && strcmp(text, "cosine") == 0) {
    *schedule = TRAIN_LR_COSINE;
    return true;
  }
  return false;
}
