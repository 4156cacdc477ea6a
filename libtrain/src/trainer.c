/* The training loop behind tools/train: set-up (communicator, backend, data, model,
 * optimizer, DDP, resume), epochs of synchronised steps, evaluation on shards,
 * checkpoints and the result. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend.h"
#include "clock_seconds.h"
#include "console_report.h"
#include "error.h"

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
  };
}

/* The phases of a training step, timed on every rank and printed by rank 0 at the end
 * so that a slow step can be taken apart without a profiler. */
typedef enum {
  PHASE_DATA,
  PHASE_FORWARD,
  PHASE_BACKWARD,
  PHASE_WAIT,
  PHASE_OPTIM,
  PHASE_COUNT
} phase_t;
static const char *const phase_names[PHASE_COUNT] = {
    [PHASE_DATA] = "data",      [PHASE_FORWARD] = "forward", [PHASE_BACKWARD] = "backward",
    [PHASE_WAIT] = "comm wait", [PHASE_OPTIM] = "optimizer",
};

/* Everything one run owns; released in one place. */
typedef struct {
  const train_config_t *cfg;
  coll_comm_t *comm;
  bool own_comm;
  int rank, world;
  train_backend_t *be;
  train_dataset_t train, test;
  train_model_t *model;
  train_optimizer_t *opt;
  train_ddp_t *ddp;
  train_sampler_t sampler;
  float *x; /* one micro-batch of inputs */
  uint8_t *labels;
  /* The next step's first micro-batch, gathered while this step's gradients are being
   * reduced (next_ready); it is swapped with x and labels when that step starts. */
  float *next_x;
  uint8_t *next_labels;
  const uint32_t *next_indices;
  bool next_ready;
  /* The same in the backend's memory (x and labels themselves on the CPU). */
  float *dev_x;
  uint8_t *dev_labels;
  /* Host copy of the parameters and optimizer state for checkpoints and the parameter
   * hash when they live on a device (NULL on the CPU). */
  float *host_state;
  size_t max_batch;
  /* Position: the next step to run. */
  uint64_t epoch, step_in_epoch, global_step;
  /* Seconds this rank spent in each phase of the training steps (see phase_t). */
  double phase_s[PHASE_COUNT];
  double cpu_s; /* CPU time of the whole process (all threads) during the steps */
  uint64_t steps_timed;
} run_t;

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

/* The launcher's world size, or 0 when no launcher set one. */
static int launcher_world(void) {
  static const char *const names[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int n = env_int(names[i], 0);
    if (n > 0) return n;
  }
  return 0;
}

static train_status_t setup_comm(run_t *r) {
  r->comm = r->cfg->comm;
  r->rank = 0;
  r->world = 1;
  /* Without a launcher (or with a world of one) there is nobody to talk to: run alone
   * without a store, like `python train.py` next to `torchrun train.py`. */
  if (r->comm == NULL && launcher_world() > 1) {
    coll_status_t cs = coll_comm_init_env(&r->comm);
    if (cs != COLL_OK) return train_comm_error(cs, "joining the job (coll_comm_init_env)");
    r->own_comm = true;
    /* A DDP rank waits for the others once per step, for as long as the slowest one's
     * backward runs late: often hundreds of microseconds. When every rank of this host
     * has a CPU of its own, the waiting one has nothing else to do, while going to sleep
     * puts a wake-up (in a VM, a halted virtual CPU) on every step's critical path: poll
     * for up to 2 ms (libcoll keeps its short spin when ranks outnumber CPUs). */
    cs = coll_comm_set_poll_us(r->comm, 2000);
    if (cs != COLL_OK) return train_comm_error(cs, "coll_comm_set_poll_us");
  }
  if (r->comm != NULL) {
    coll_status_t cs = coll_comm_rank(r->comm, &r->rank);
    if (cs == COLL_OK) cs = coll_comm_size(r->comm, &r->world);
    if (cs != COLL_OK) return train_comm_error(cs, "communicator rank and size");
  }
  return TRAIN_OK;
}

static train_status_t validate(const train_config_t *c) {
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
  return TRAIN_OK;
}

static train_status_t setup(run_t *r) {
  const train_config_t *c = r->cfg;
  train_status_t st = setup_comm(r);
  if (st != TRAIN_OK) return st;
  st = train_backend_open(c->device, c->blas_threads, env_int("LOCAL_RANK", r->rank), &r->be);
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
  if (st == TRAIN_OK)
    st = train_ddp_create(r->comm, r->model, (size_t)(c->bucket_mb * 1024 * 1024), &r->ddp);
  if (st == TRAIN_OK)
    st = train_sampler_init(&r->sampler, r->train.count, r->rank, r->world, c->seed, c->shuffle,
                            c->drop_last);
  if (st != TRAIN_OK) return st;
  r->x = malloc(r->max_batch * inputs * sizeof *r->x);
  r->labels = malloc(r->max_batch);
  r->next_x = malloc(r->max_batch * inputs * sizeof *r->x); /* swapped with x */
  r->next_labels = malloc(r->max_batch);
  if (r->x == NULL || r->labels == NULL || r->next_x == NULL || r->next_labels == NULL)
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the input batch");
  r->dev_x = r->x;
  r->dev_labels = r->labels;
  if (backend_is_host(r->be)) return TRAIN_OK;
  void *p = NULL;
  st = r->be->alloc(r->be, r->max_batch * inputs * sizeof *r->x, &p);
  r->dev_x = p;
  if (st == TRAIN_OK) st = r->be->alloc(r->be, r->max_batch, &p);
  if (st != TRAIN_OK) return st;
  r->dev_labels = p;
  size_t n = train_model_param_count(r->model);
  r->host_state = malloc((size_t)(1 + train_optimizer_state_count(r->opt)) * n * sizeof(float));
  if (r->host_state == NULL)
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the host copy of the parameters");
  return TRAIN_OK;
}

/* Gather rows of `ds` into the host batch (or take the prefetched one, when it holds
 * these rows) and copy them to the backend's memory. */
static train_status_t load_batch(run_t *r, const train_dataset_t *ds, const uint32_t *indices,
                                 size_t n) {
  if (r->next_ready && ds == &r->train && indices == r->next_indices) {
    float *x = r->x;
    uint8_t *labels = r->labels;
    r->x = r->next_x;
    r->labels = r->next_labels;
    r->next_x = x;
    r->next_labels = labels;
    if (backend_is_host(r->be)) {
      r->dev_x = r->x;
      r->dev_labels = r->labels;
    }
  } else {
    train_dataset_gather(ds, indices, n, r->x, r->labels);
  }
  r->next_ready = false;
  size_t inputs = ds->rows * ds->cols;
  train_status_t st = backend_upload(r->be, r->dev_x, r->x, n * inputs * sizeof *r->x);
  if (st == TRAIN_OK) st = backend_upload(r->be, r->dev_labels, r->labels, n);
  return st;
}

/* Host views of the parameters and optimizer states (state[i] for i < n_state): the
 * tensors themselves on the CPU, fresh copies in host_state otherwise. */
static train_status_t host_views(run_t *r, bool copy, float **params, float *state[2]) {
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

/* The hash of the parameters' bytes, wherever they are. */
static train_status_t params_hash(run_t *r, uint64_t *hash) {
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

static void teardown(run_t *r) {
  if (r->dev_x != r->x && r->dev_x != NULL) r->be->release(r->be, r->dev_x);
  if (r->dev_labels != r->labels && r->dev_labels != NULL) r->be->release(r->be, r->dev_labels);
  free(r->host_state);
  free(r->x);
  free(r->labels);
  free(r->next_x);
  free(r->next_labels);
  train_sampler_free(&r->sampler);
  train_ddp_destroy(r->ddp);
  train_optimizer_destroy(r->opt);
  train_model_destroy(r->model);
  train_dataset_free(&r->train);
  train_dataset_free(&r->test);
  train_backend_close(r->be);
  if (r->own_comm) coll_comm_destroy(r->comm);
}

static void fill_header(const run_t *r, train_ckpt_header_t *h) {
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

static train_status_t save_checkpoint(run_t *r) {
  if (r->cfg->checkpoint == NULL || r->rank != 0) return TRAIN_OK;
  train_ckpt_header_t h;
  fill_header(r, &h);
  float *params, *state[2];
  train_status_t st = host_views(r, true, &params, state);
  if (st != TRAIN_OK) return st;
  return train_checkpoint_write(r->cfg->checkpoint, &h, params, train_model_param_count(r->model),
                                state, train_optimizer_state_count(r->opt));
}

/* Rank 0 reads the checkpoint and sends everything to the others, so that only one
 * rank needs the file. A missing file means a first start: train from scratch. */
static train_status_t resume(run_t *r) {
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

/* Test accuracy and loss: each rank evaluates its slice of the test set, the counts
 * are summed across ranks. */
static train_status_t evaluate(run_t *r, double *accuracy) {
  size_t n = r->test.count;
  size_t first = n * (size_t)r->rank / (size_t)r->world;
  size_t last = n * (size_t)(r->rank + 1) / (size_t)r->world;
  uint32_t *idx = malloc(r->max_batch * sizeof *idx);
  if (idx == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "evaluation indices");
  double loss = 0.0;
  size_t correct = 0;
  train_status_t st = TRAIN_OK;
  for (size_t i = first; i < last && st == TRAIN_OK; i += r->max_batch) {
    size_t nb = last - i < r->max_batch ? last - i : r->max_batch;
    for (size_t k = 0; k < nb; k++) idx[k] = (uint32_t)(i + k);
    st = load_batch(r, &r->test, idx, nb);
    if (st == TRAIN_OK) st = train_model_forward(r->model, r->dev_x, nb);
    if (st == TRAIN_OK) st = train_model_loss(r->model, r->dev_labels, nb, 0.0f, &loss, &correct);
  }
  free(idx);
  double counts[3] = {(double)correct, (double)(last - first), loss};
  if (st == TRAIN_OK) st = train_ddp_sum(r->ddp, counts, 3);
  if (st == TRAIN_OK) *accuracy = counts[0] / counts[1];
  return st;
}

/* A phase on the COLL_TRACE timeline, next to the collectives it overlaps (nothing
 * without a communicator or without COLL_TRACE). */
static void span(const run_t *r, const char *name, bool begin) {
  if (r->comm == NULL) return;
  (void)(begin ? coll_trace_span_begin(r->comm, name) : coll_trace_span_end(r->comm, name));
}

/* Charge the time since *since to phase `phase` of this run; *since becomes now. */
static void lap(run_t *r, phase_t phase, double *since) {
  double now = clock_seconds();
  r->phase_s[phase] += now - *since;
  *since = now;
}

/* The optimizer's step on one reduced bucket [begin, end) of the flat buffers. */
static train_status_t bucket_step(void *ctx, size_t begin, size_t end) {
  run_t *r = ctx;
  return train_optimizer_step_range(r->opt, train_model_params(r->model),
                                    train_model_grads(r->model), begin, end);
}

/* One optimizer step: `accumulate` micro-batches, communication only during the last
 * one's backward. The loss gradient is scaled by 1 / (samples of the step on all ranks)
 * so that the summed gradients are the mean over the global batch. */
static train_status_t train_step(run_t *r, size_t first, size_t count, uint64_t total_steps,
                                 double *loss, double *wait_s) {
  const train_config_t *c = r->cfg;
  float scale = 1.0f / (float)(count * (size_t)r->world);
  train_status_t st = TRAIN_OK;
  span(r, "step", true);
  double t = clock_seconds();
  for (size_t done = 0; done < count && st == TRAIN_OK;) {
    size_t nb = count - done < c->batch ? count - done : c->batch;
    bool last = done + nb == count;
    st = load_batch(r, &r->train, r->sampler.indices + first + done, nb);
    if (st != TRAIN_OK) break;
    lap(r, PHASE_DATA, &t);
    span(r, "forward", true);
    st = train_model_forward(r->model, r->dev_x, nb);
    if (st == TRAIN_OK) st = train_model_loss(r->model, r->dev_labels, nb, scale, loss, NULL);
    span(r, "forward", false);
    lap(r, PHASE_FORWARD, &t);
    if (st == TRAIN_OK && last) train_ddp_begin_sync(r->ddp);
    span(r, "backward", true);
    if (st == TRAIN_OK)
      st = train_model_backward(r->model, r->dev_x, nb, done > 0,
                                last ? train_ddp_grad_ready : NULL, r->ddp);
    span(r, "backward", false);
    lap(r, PHASE_BACKWARD, &t);
    done += nb;
  }
  /* While the buckets are being reduced: gather the next step's first micro-batch, when
   * that step is in this epoch (the next epoch's order is drawn when it starts). */
  size_t next_first = first + c->batch * (size_t)c->accumulate;
  if (st == TRAIN_OK && next_first < r->sampler.num_samples) {
    size_t left = r->sampler.num_samples - next_first;
    r->next_indices = r->sampler.indices + next_first;
    train_dataset_gather(&r->train, r->next_indices, left < c->batch ? left : c->batch, r->next_x,
                         r->next_labels);
    r->next_ready = true;
    lap(r, PHASE_DATA, &t);
  }
  /* The optimizer steps each bucket as soon as its all-reduce is done, while the
   * later buckets are still being reduced. */
  train_optimizer_set_lr(r->opt,
                         train_lr_at(c->lr_schedule, c->opt.lr, r->global_step, total_steps));
  span(r, "ddp wait + optimizer", true);
  double waited = 0.0;
  train_status_t fst =
      train_ddp_finish_sync_each(r->ddp, &waited, st == TRAIN_OK ? bucket_step : NULL, r);
  if (st == TRAIN_OK) st = fst;
  if (st == TRAIN_OK) train_optimizer_step_done(r->opt);
  span(r, "ddp wait + optimizer", false);
  span(r, "step", false);
  *wait_s += waited;
  r->phase_s[PHASE_WAIT] += waited;
  lap(r, PHASE_OPTIM, &t);
  r->phase_s[PHASE_OPTIM] -= waited; /* that lap held the waits too */
  r->steps_timed++;
  return st;
}

/* CPU seconds used by this process so far, all threads (the progress thread's
 * communication included). */
static double cpu_now(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Rank 0's breakdown of its mean step time by phase. */
static void print_phases(const run_t *r) {
  if (r->rank != 0 || r->steps_timed == 0) return;
  double steps = (double)r->steps_timed;
  double total = 0.0;
  for (int i = 0; i < PHASE_COUNT; i++) total += r->phase_s[i];
  printf("step time on rank 0: %.3f ms =", 1e3 * total / steps);
  for (int i = 0; i < PHASE_COUNT; i++)
    printf("%s %s %.3f", i > 0 ? "," : "", phase_names[i], 1e3 * r->phase_s[i] / steps);
  printf("; CPU %.3f ms per step\n", 1e3 * r->cpu_s / steps);
}

static train_status_t train_loop(run_t *r, train_result_t *res) {
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
  /* The run's totals: over every step, until the first step after the warm-up starts
   * them again (a run that ends within its warm-up keeps them all). */
  double total_time = 0.0, total_wait = 0.0, total_samples = 0.0;
  uint64_t run_steps = 0; /* steps of this process (a resumed run counts from its start) */
  bool warmed = false;
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
      if (run_steps == (uint64_t)c->warmup_steps && run_steps > 0) {
        /* The warm-up is over: the totals and the phase means start from here. */
        total_time = total_wait = total_samples = 0.0;
        memset(r->phase_s, 0, sizeof r->phase_s);
        r->cpu_s = 0.0;
        r->steps_timed = 0;
        warmed = true;
      }
      double t0 = clock_seconds(), c0 = cpu_now(), step_wait = 0.0;
      st = train_step(r, first, count, steps * (uint64_t)c->epochs, &loss, &step_wait);
      double step_time = clock_seconds() - t0;
      t_epoch += step_time;
      wait_epoch += step_wait;
      r->cpu_s += cpu_now() - c0;
      if (st != TRAIN_OK) break;
      total_time += step_time;
      total_wait += step_wait;
      total_samples += (double)count * r->world;
      run_steps++;
      samples += (double)count;
      r->global_step++;
      console_report_step(&report, (int)r->epoch, r->step_in_epoch + 1, steps, r->global_step,
                          samples * r->world, loss / samples);
      if (c->checkpoint_every > 0 && r->global_step % (uint64_t)c->checkpoint_every == 0) {
        uint64_t saved = r->step_in_epoch;
        r->step_in_epoch++; /* the position to resume from is the next step */
        bool wrap = r->step_in_epoch == steps;
        if (wrap) {
          r->epoch++;
          r->step_in_epoch = 0;
        }
        st = save_checkpoint(r);
        if (wrap) r->epoch--;
        r->step_in_epoch = saved;
        if (st != TRAIN_OK) break;
      }
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
      st = params_hash(r, &h);
      if (st == TRAIN_OK) st = train_ddp_check_sync(r->ddp, &h);
      if (st != TRAIN_OK) break;
    }
    double acc = -1.0;
    if (c->evaluate) st = evaluate(r, &acc);
    if (st != TRAIN_OK) break;
    res->test_accuracy = acc;
    console_report_epoch_end(&report, (int)r->epoch, res->final_loss, acc,
                             samples * r->world / (t_epoch + 1e-12),
                             wait_epoch / (t_epoch + 1e-12));
    if (c->checkpoint_every == 0 && c->checkpoint != NULL) {
      r->epoch++;
      st = save_checkpoint(r);
      r->epoch--;
    }
  }
  if (st != TRAIN_OK) return st;
  const char *counted = warmed                ? " (after the warm-up)"
                        : c->warmup_steps > 0 ? " (warm-up included: no step came after it)"
                                              : "";
  res->samples_per_s = total_samples / (total_time + 1e-12);
  res->comm_share = total_wait / (total_time + 1e-12);
  res->global_step = r->global_step;
  console_report_close_line(&report);
  if (r->rank == 0)
    printf(
        "done: %llu steps on %d rank%s, %.0f samples/s, waiting on communication %.1f%% "
        "of step time%s\n",
        (unsigned long long)r->global_step, r->world, r->world > 1 ? "s" : "", res->samples_per_s,
        100.0 * res->comm_share, counted);
  print_phases(r);
  /* The final state, so that --resume after the end (or after --max-steps) continues. */
  return save_checkpoint(r);
}

train_status_t train_run(const train_config_t *cfg, train_result_t *result) {
  train_result_t res = {.final_loss = NAN, .test_accuracy = -1.0};
  train_status_t st = validate(cfg);
  if (st != TRAIN_OK) return st;
  run_t r = {.cfg = cfg};
  st = setup(&r);
  if (st == TRAIN_OK) st = train_ddp_broadcast_params(r.ddp);
  if (st == TRAIN_OK && cfg->resume) st = resume(&r);
  if (st == TRAIN_OK) st = train_loop(&r, &res);
  uint64_t hash = 0;
  if (st == TRAIN_OK) st = params_hash(&r, &hash);
  if (st == TRAIN_OK && cfg->check_sync) st = train_ddp_check_sync(r.ddp, &hash);
  if (st == TRAIN_OK) res.param_hash = hash;
  if (st != TRAIN_OK && r.own_comm && r.world > 1) {
    /* Peers blocked in a collective with us learn at once instead of at the timeout. */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", train_last_error());
    coll_comm_abort(r.comm);
    train_error(st, "rank %d: %s", r.rank, msg);
  }
  teardown(&r);
  if (result != NULL) *result = res;
  return st;
}
