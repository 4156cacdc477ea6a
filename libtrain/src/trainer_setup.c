/* Set-up and teardown of a training run: the defaults and checks of the configuration,
 * the communicator, then backend, data, model, optimizer, DDP, sampler and buffers. */
#include <stdlib.h>

#include "backend.h"
#include "error.h"
#include "trainer_run.h"

void train_config_defaults(train_config_t *cfg) {
  *cfg = (train_config_t){
      .epochs = 10,
      .batch = 64,
      .accumulate = 1,
      .opt = {.kind = TRAIN_OPT_SGD,
              .lr = 0.05f,
              .momentum = 0.9f,
              .weight_decay = 0.0f,
              .beta1 = 0.9f,
              .beta2 = 0.999f,
              .eps = 1e-8f},
      .lr_schedule = TRAIN_LR_COSINE,
      .seed = 42,
      .hidden = {256, 256},
      .n_hidden = 2,
      .data_dir = NULL,
      .shuffle = true,
      .bucket_mb = 25.0,
      .checkpoint_every = 0,
      .device = TRAIN_DEVICE_CPU,
      .log_every = 100,
      .evaluate = true,
      .shards = 8,
      .elastic_timeout_ms = 10000,
  };
}

train_status_t trainer_validate(const train_config_t *c) {
  if (c->epochs <= 0) return train_error(TRAIN_ERR_INVALID, "--epochs must be > 0");
  if (c->batch == 0 || c->batch > 1u << 20)
    return train_error(TRAIN_ERR_INVALID, "--batch must be in 1..%u", 1u << 20);
  if (c->accumulate < 1) return train_error(TRAIN_ERR_INVALID, "--accumulate must be >= 1");
  if (!(c->bucket_mb > 0.0)) return train_error(TRAIN_ERR_INVALID, "--bucket-mb must be > 0");
  if (c->checkpoint_every < 0)
    return train_error(TRAIN_ERR_INVALID, "--checkpoint-every must be >= 0");
  if (c->resume && c->checkpoint == NULL)
    return train_error(TRAIN_ERR_INVALID, "--resume needs --checkpoint FILE");
  if (c->max_steps < 0) return train_error(TRAIN_ERR_INVALID, "--max-steps must be >= 0");
  if (c->warmup_steps < 0) return train_error(TRAIN_ERR_INVALID, "--warmup-steps must be >= 0");
  if (c->elastic) return trainer_elastic_validate(c);
  if (c->bit_identical || c->sample_log != NULL)
    return train_error(TRAIN_ERR_INVALID, "--bit-identical and --sample-log need --elastic");
  return TRAIN_OK;
}

static train_status_t setup_comm(trainer_run_t *r) {
  r->comm = r->cfg->comm;
  r->rank = 0;
  r->world = 1;
  coll_launch_info_t launch;
  coll_status_t ls = coll_launch_info(&launch);
  if (ls != COLL_OK) return train_comm_error(ls, "reading the launcher's environment");
  r->local_rank = launch.local_rank;
  /* Without a launcher (or with a world of one) there is nobody to talk to: run alone
   * without a store, like `python train.py` next to `torchrun train.py`. */
  if (r->cfg->elastic) return trainer_elastic_comm(r, &launch);
  if (r->comm == NULL && launch.found && launch.size > 1) {
    coll_status_t cs = coll_comm_init_env(&r->comm);
    if (cs != COLL_OK) return train_comm_error(cs, "joining the job (coll_comm_init_env)");
    r->own_comm = true;
    /* A DDP rank waits for the others once per step, for as long as the slowest one's
     * backward runs late: often hundreds of microseconds. libcoll's default poll (10 ms
     * when every rank of this host has a CPU of its own) covers that without a sleep,
     * which would put a wake-up (in a VM, a halted virtual CPU) on every step's critical
     * path; this trainer asked for 2 ms with coll_comm_set_poll_us while the default
     * was 50 us. */
  }
  if (r->comm != NULL) {
    coll_status_t cs = coll_comm_rank(r->comm, &r->rank);
    if (cs == COLL_OK) cs = coll_comm_size(r->comm, &r->world);
    if (cs != COLL_OK) return train_comm_error(cs, "communicator rank and size");
  }
  return TRAIN_OK;
}

train_status_t trainer_setup(trainer_run_t *r) {
  const train_config_t *c = r->cfg;
  train_status_t st = setup_comm(r);
  if (st != TRAIN_OK) return st;
  /* The GPU: the launcher's local rank, else the rank (one host). */
  int local = r->local_rank >= 0 ? r->local_rank : r->rank;
  st = train_backend_open(c->device, c->blas_threads, local, &r->be);
  if (st != TRAIN_OK) return st;
  const char *dir = c->data_dir != NULL ? c->data_dir : TRAIN_DEFAULT_DATA_DIR;
  st = train_dataset_load(dir, "train", &r->train);
  if (st == TRAIN_OK && c->evaluate) st = train_dataset_load(dir, "t10k", &r->test);
  if (st != TRAIN_OK) return st;
  size_t inputs = r->train.rows * r->train.cols;
  if (c->evaluate && r->test.rows * r->test.cols != inputs)
    return train_error(TRAIN_ERR_FORMAT, "%s: test images are %zux%zu, training images %zux%zu",
                       dir, r->test.rows, r->test.cols, r->train.rows, r->train.cols);
  /* Evaluation runs in chunks of at least 256 rows: fewer, larger products. */
  r->max_batch = c->batch > 256 ? c->batch : 256;
  st = train_model_create(r->be, inputs, c->hidden, c->n_hidden, 10, r->max_batch, c->seed,
                          &r->model);
  if (st == TRAIN_OK)
    st = train_optimizer_create(r->be, &c->opt, train_model_param_count(r->model), &r->opt);
  /* An elastic run replaces its communicator when ranks come and go: no DDP window on
   * it, and one sampler of the whole epoch's order (trainer_elastic.c cuts it in shards). */
  if (st == TRAIN_OK)
    st = train_ddp_create(c->elastic ? NULL : r->comm, r->model,
                          (size_t)(c->bucket_mb * 1024 * 1024), &r->ddp);
  if (st == TRAIN_OK)
    st = train_sampler_init(&r->sampler, r->train.count, c->elastic ? 0 : r->rank,
                            c->elastic ? 1 : r->world, c->seed, c->shuffle,
                            c->elastic ? false : c->drop_last);
  if (st == TRAIN_OK) st = trainer_batches_open(&r->batches, r->be, r->max_batch, inputs);
  if (st != TRAIN_OK || backend_is_host(r->be)) return st;
  size_t n = train_model_param_count(r->model);
  r->host_state = malloc((size_t)(1 + train_optimizer_state_count(r->opt)) * n * sizeof(float));
  if (r->host_state == NULL)
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the host copy of the parameters");
  return TRAIN_OK;
}

void trainer_teardown(trainer_run_t *r) {
  trainer_batches_close(&r->batches, r->be);
  free(r->host_state);
  train_sampler_free(&r->sampler);
  train_ddp_destroy(r->ddp);
  train_optimizer_destroy(r->opt);
  train_model_destroy(r->model);
  train_dataset_free(&r->train);
  train_dataset_free(&r->test);
  train_backend_close(r->be);
  if (r->own_comm) coll_comm_destroy(r->comm);
}
