/* The hand-over of an elastic run's state to replacements: after a grow, rank 0
 * broadcasts a header (position, sizes, configuration, hashes), the parameters and the
 * optimizer state; every other rank takes them and checks them against the header. */
#include <string.h>

#include "error.h"
#include "trainer_elastic.h"

enum {
  H_MAGIC,
  H_GLOBAL_STEP,
  H_EPOCH,
  H_STEP_IN_EPOCH,
  H_OPT_STEPS,
  H_N_PARAMS,
  H_N_STATE,
  H_SHARDS,
  H_SEED,
  H_BIT_IDENTICAL,
  H_BATCH,
  H_HASH, /* params, then each state array */
  H_WORDS = H_HASH + 3,
};

#define STATE_MAGIC 0x454c415354494331ULL /* "ELASTIC1" */

static train_status_t bcast(trainer_run_t *r, void *buf, size_t count, coll_dtype_t dtype,
                            const char *what) {
  coll_status_t cs = coll_broadcast(buf, count, dtype, 0, r->comm);
  return cs == COLL_OK ? TRAIN_OK : train_comm_error(cs, what);
}

train_status_t elastic_state_share(trainer_run_t *r) {
  const train_config_t *c = r->cfg;
  size_t n = train_model_param_count(r->model);
  int n_state = train_optimizer_state_count(r->opt);
  float *arrays[3] = {train_model_params(r->model)};
  for (int i = 0; i < n_state; i++) arrays[1 + i] = train_optimizer_state(r->opt, i);
  uint64_t h[H_WORDS] = {
      [H_MAGIC] = STATE_MAGIC,
      [H_GLOBAL_STEP] = r->global_step,
      [H_EPOCH] = r->epoch,
      [H_STEP_IN_EPOCH] = r->step_in_epoch,
      [H_OPT_STEPS] = *train_optimizer_steps(r->opt),
      [H_N_PARAMS] = n,
      [H_N_STATE] = (uint64_t)n_state,
      [H_SHARDS] = (uint64_t)c->shards,
      [H_SEED] = c->seed,
      [H_BIT_IDENTICAL] = c->bit_identical,
      [H_BATCH] = c->batch,
  };
  for (int i = 0; i <= n_state; i++) h[H_HASH + i] = train_params_hash(arrays[i], n);
  train_status_t st = bcast(r, h, H_WORDS, COLL_UINT64, "broadcast of the state's header");
  if (st != TRAIN_OK) return st;
  if (h[H_MAGIC] != STATE_MAGIC || h[H_N_PARAMS] != n || h[H_N_STATE] != (uint64_t)n_state)
    return train_error(TRAIN_ERR_FORMAT,
                       "elastic state from rank 0: %llu parameters and %llu state arrays, this "
                       "rank has %zu and %d (same --hidden and --optimizer?)",
                       (unsigned long long)h[H_N_PARAMS], (unsigned long long)h[H_N_STATE], n,
                       n_state);
  if (h[H_SHARDS] != (uint64_t)c->shards || h[H_SEED] != c->seed ||
      h[H_BIT_IDENTICAL] != (uint64_t)c->bit_identical || h[H_BATCH] != c->batch)
    return train_error(TRAIN_ERR_INVALID,
                       "elastic state from rank 0: --shards %llu --seed %llu --batch %llu%s; "
                       "this rank was started with --shards %d --seed %llu --batch %zu%s",
                       (unsigned long long)h[H_SHARDS], (unsigned long long)h[H_SEED],
                       (unsigned long long)h[H_BATCH], h[H_BIT_IDENTICAL] ? " --bit-identical" : "",
                       c->shards, (unsigned long long)c->seed, c->batch,
                       c->bit_identical ? " --bit-identical" : "");
  for (int i = 0; i <= n_state && st == TRAIN_OK; i++)
    st = bcast(r, arrays[i], n, COLL_FLOAT32,
               i == 0 ? "broadcast of the parameters" : "broadcast of the optimizer state");
  if (st != TRAIN_OK) return st;
  for (int i = 0; i <= n_state; i++)
    if (train_params_hash(arrays[i], n) != h[H_HASH + i])
      return train_error(
          TRAIN_ERR_FORMAT, "elastic state: the %s received hash to %016llx, rank 0 sent %016llx",
          i == 0 ? "parameters" : "optimizer state",
          (unsigned long long)train_params_hash(arrays[i], n), (unsigned long long)h[H_HASH + i]);
  r->global_step = h[H_GLOBAL_STEP];
  r->epoch = h[H_EPOCH];
  r->step_in_epoch = h[H_STEP_IN_EPOCH];
  *train_optimizer_steps(r->opt) = h[H_OPT_STEPS];
  return TRAIN_OK;
}
