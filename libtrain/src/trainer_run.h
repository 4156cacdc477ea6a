/* Internal to the trainer (train_run in trainer.c): everything one run owns, and the
 * functions of the files it is split into: set-up, checkpoints and resume, evaluation. */
#ifndef TRAIN_TRAINER_RUN_H
#define TRAIN_TRAINER_RUN_H

#include "train.h"
#include "trainer_batches.h"
#include "trainer_timing.h"

/* Everything one run owns; released in one place (trainer_teardown). */
typedef struct {
  const train_config_t *cfg;
  coll_comm_t *comm;
  bool own_comm;
  int rank, world;
  int local_rank; /* the launcher's (coll_launch_info); -1: none given */
  train_backend_t *be;
  train_dataset_t train, test;
  train_model_t *model;
  train_optimizer_t *opt;
  train_ddp_t *ddp;
  train_sampler_t sampler;
  trainer_batches_t batches;
  /* Host copy of the parameters and optimizer state for checkpoints and the parameter
   * hash when they live on a device (NULL on the CPU). */
  float *host_state;
  size_t max_batch; /* rows of the largest batch: training's, or evaluation's chunk */
  /* Position: the next step to run. */
  uint64_t epoch, step_in_epoch, global_step;
  trainer_timing_t timing;
} trainer_run_t;

/* trainer_setup.c: the configuration's checks, then the communicator (joined from the
 * launcher's environment unless cfg->comm is given), backend, data, model, optimizer,
 * DDP, sampler and buffers; teardown releases whatever set-up got to. */
train_status_t trainer_validate(const train_config_t *cfg);
train_status_t trainer_setup(trainer_run_t *r);
void trainer_teardown(trainer_run_t *r);

/* trainer_checkpoint.c: rank 0 writes checkpoints (nothing without cfg->checkpoint);
 * resume reads rank 0's and broadcasts it. */
train_status_t trainer_save_checkpoint(trainer_run_t *r);
/* After optimizer step global_step of an epoch of steps_per_epoch steps: a checkpoint
 * every cfg->checkpoint_every steps, positioned at the next step. */
train_status_t trainer_checkpoint_after_step(trainer_run_t *r, uint64_t steps_per_epoch);
/* After a whole epoch, when checkpoint_every is 0: positioned at the next epoch. */
train_status_t trainer_checkpoint_after_epoch(trainer_run_t *r);
train_status_t trainer_resume(trainer_run_t *r);
/* The hash of the parameters' bytes, wherever they are. */
train_status_t trainer_params_hash(trainer_run_t *r, uint64_t *hash);

/* trainer_elastic_comm.c: the checks of an --elastic configuration, and its communicator:
 * the launcher's job (a store that outlives the ranks is required), or, with
 * COLL_ELASTIC_JOIN=1, none yet: a replacement joins once it is set up
 * (trainer_elastic_join). */
train_status_t trainer_elastic_validate(const train_config_t *cfg);
train_status_t trainer_elastic_comm(trainer_run_t *r, const coll_launch_info_t *launch);
bool trainer_elastic_joining(void);
/* trainer_elastic.c: the elastic loop behind train_run when cfg->elastic. */
train_status_t trainer_elastic_run(trainer_run_t *r, train_result_t *res);

/* trainer_eval.c: test accuracy, each rank on its slice of the test set, counts summed. */
train_status_t trainer_evaluate(trainer_run_t *r, double *accuracy);

#endif
