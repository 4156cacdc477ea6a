/* libtrain public API: a small data-parallel trainer (MLP on MNIST-format data) whose
 * gradients are averaged across ranks with libcoll, the way PyTorch DDP uses NCCL. */
#ifndef TRAIN_H
#define TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status: 0 is success, negative values are errors; train_last_error() holds the
 * detailed, thread-local message (which file, which flag, which rank). */
typedef enum {
  TRAIN_OK = 0,
  TRAIN_ERR_INVALID = -1, /* bad argument or configuration */
  TRAIN_ERR_IO = -2,      /* file missing, unreadable, unwritable */
  TRAIN_ERR_FORMAT = -3,  /* corrupt, truncated or mismatched data or checkpoint */
  TRAIN_ERR_NO_MEMORY = -4,
  TRAIN_ERR_COMM = -5,        /* a libcoll call failed */
  TRAIN_ERR_UNSUPPORTED = -6, /* not in this build or not implemented for the device */
  TRAIN_ERR_DIVERGED = -7,    /* --check-sync found ranks with different parameters */
  TRAIN_ERR_FENCED = -8,      /* --elastic: the other ranks declared this one failed and went
                                 on without it (it was stopped or too slow); it must exit */
  TRAIN_ERR_NOT_FINITE = -9,  /* --elastic --bit-identical: a gradient or loss is NaN or Inf */
} train_status_t;

const char *train_status_string(train_status_t status);
const char *train_last_error(void);

/* ---- Random numbers: xoshiro256** seeded through splitmix64 (same stream everywhere). */
typedef struct {
  uint64_t s[4];
} train_rng_t;

void train_rng_seed(train_rng_t *rng, uint64_t seed);
uint64_t train_rng_next(train_rng_t *rng);
/* Uniform in [0, 1) with 24 random bits. */
float train_rng_uniform(train_rng_t *rng);
/* Uniform integer in [0, bound), unbiased; bound >= 1. */
uint64_t train_rng_below(train_rng_t *rng, uint64_t bound);

/* ---- Devices and compute backends. */
typedef enum { TRAIN_DEVICE_CPU = 0, TRAIN_DEVICE_CUDA, TRAIN_DEVICE_COUNT } train_device_t;

typedef struct train_backend train_backend_t; /* table of kernels, one per device */

/* Open the backend for `device`: CPU sets the BLAS thread count (blas_threads <= 0:
 * keep OPENBLAS_NUM_THREADS or 1); CUDA picks GPU local_rank % device_count and fails
 * with TRAIN_ERR_UNSUPPORTED when the build has no CUDA or the host no GPU. */
train_status_t train_backend_open(train_device_t device, int blas_threads, int local_rank,
                                  train_backend_t **backend);
void train_backend_close(train_backend_t *backend);
const char *train_backend_name(const train_backend_t *backend);
/* "cpu" / "cuda" -> device; false for anything else. */
bool train_device_parse(const char *text, train_device_t *device);

/* A contiguous float32 matrix (rows x cols) in the memory of `device`. */
typedef struct {
  float *data;
  size_t rows, cols;
  train_device_t device;
} train_tensor_t;

train_status_t train_tensor_alloc(train_backend_t *backend, size_t rows, size_t cols,
                                  train_tensor_t *tensor);
void train_tensor_free(train_backend_t *backend, train_tensor_t *tensor);

/* ---- Layers. Activations are row-major: one row per sample. A linear layer holds
 * W (out x in, PyTorch's layout) and b (out) as views into the model's flat buffers.
 * Every array given to a layer, model or optimizer function (inputs, labels, parameters,
 * gradients, optimizer state) is in the memory of the backend's device; only the loss
 * and count outputs are host memory. */
typedef enum { TRAIN_LAYER_LINEAR = 0, TRAIN_LAYER_RELU } train_layer_kind_t;

typedef struct {
  train_layer_kind_t kind;
  size_t in, out;
  float *w, *b;   /* linear only: views into the parameter buffer */
  float *dw, *db; /* linear only: views into the gradient buffer */
} train_layer_t;

/* y[batch x out] = x W^T + b */
train_status_t train_linear_forward(train_backend_t *be, const train_layer_t *layer, const float *x,
                                    size_t batch, float *y);
/* dW (+)= dy^T x and db (+)= colsum(dy) (accumulate when `accumulate`), and
 * dx = dy W when dx != NULL (the first layer needs no input gradient). */
train_status_t train_linear_backward(train_backend_t *be, const train_layer_t *layer,
                                     const float *x, const float *dy, size_t batch, bool accumulate,
                                     float *dx);
/* Only dx = dy W (the model calls it after announcing the layer's gradients, so the
 * all-reduce of dW overlaps this product). */
train_status_t train_linear_backward_input(train_backend_t *be, const train_layer_t *layer,
                                           const float *dy, size_t batch, float *dx);
/* In place: y = max(y, 0); backward: dy *= (y > 0), from the forward output y. */
train_status_t train_relu_forward(train_backend_t *be, float *y, size_t n);
train_status_t train_relu_backward(train_backend_t *be, const float *y, float *dy, size_t n);
/* Softmax cross-entropy over `classes` logits per row. Adds the summed loss (natural log)
 * to *loss_sum and the number of rows whose arg-max equals the label to *correct.
 * When dlogits != NULL it receives grad_scale * (softmax - onehot): pass
 * grad_scale = 1 / batch for the batch mean. */
train_status_t train_softmax_xent(train_backend_t *be, const float *logits, const uint8_t *labels,
                                  size_t batch, size_t classes, float grad_scale, float *dlogits,
                                  double *loss_sum, size_t *correct);

/* ---- Model: an MLP  in -> hidden[0] -> ... -> classes  with ReLU between layers.
 * Parameters live in one flat buffer laid out in REVERSE layer order (last layer first,
 * W then b), gradients likewise: a DDP bucket is then a contiguous range that backward
 * fills from its start. */
#define TRAIN_MAX_HIDDEN 8

typedef struct train_model train_model_t;

/* Called by train_model_backward after each linear layer's gradients are final;
 * `grad_end` is the number of gradient floats (from the start of the flat buffer) that
 * are now complete. */
typedef train_status_t (*train_grad_ready_fn)(void *ctx, size_t grad_end);

train_status_t train_model_create(train_backend_t *be, size_t inputs, const size_t *hidden,
                                  int n_hidden, size_t classes, size_t max_batch, uint64_t seed,
                                  train_model_t **model);
void train_model_destroy(train_model_t *model);
size_t train_model_param_count(const train_model_t *model);
/* In the backend's memory (device pointers on CUDA). */
float *train_model_params(train_model_t *model);
float *train_model_grads(train_model_t *model);
/* Linear layers in forward order (index 0 is the first). */
int train_model_linear_count(const train_model_t *model);
const train_layer_t *train_model_linear(const train_model_t *model, int index);
/* Forward pass of `batch` rows of x; the logits stay inside the model. */
train_status_t train_model_forward(train_model_t *model, const float *x, size_t batch);
/* Loss of the last forward; fills the logits' gradient (scaled by grad_scale). */
train_status_t train_model_loss(train_model_t *model, const uint8_t *labels, size_t batch,
                                float grad_scale, double *loss_sum, size_t *correct);
/* Backward pass of the last forward; `accumulate` adds into the gradients instead of
 * overwriting them. `ready` (may be NULL) is called as layers finish. */
train_status_t train_model_backward(train_model_t *model, const float *x, size_t batch,
                                    bool accumulate, train_grad_ready_fn ready, void *ctx);

/* ---- Optimizers over the flat parameter buffer (PyTorch semantics: L2 weight decay
 * added to the gradient; SGD momentum buffer starts at the first gradient; Adam with
 * bias correction). */
typedef enum { TRAIN_OPT_SGD = 0, TRAIN_OPT_ADAM } train_opt_kind_t;

typedef struct {
  train_opt_kind_t kind;
  float lr, momentum, weight_decay;
  float beta1, beta2, eps; /* Adam */
} train_opt_config_t;

typedef struct train_optimizer train_optimizer_t;

train_status_t train_optimizer_create(train_backend_t *be, const train_opt_config_t *cfg,
                                      size_t n_params, train_optimizer_t **opt);
void train_optimizer_destroy(train_optimizer_t *opt);
train_status_t train_optimizer_step(train_optimizer_t *opt, float *params, const float *grads);
/* The same step in pieces: each call updates parameters [begin, end) of the flat
 * buffers (element-wise, so pieces in any order give the same result as one call);
 * once every element had its piece, train_optimizer_step_done counts the step. */
train_status_t train_optimizer_step_range(train_optimizer_t *opt, float *params, const float *grads,
                                          size_t begin, size_t end);
void train_optimizer_step_done(train_optimizer_t *opt);
/* The state as flat float arrays, for checkpoints: SGD one (momentum), Adam two (m, v);
 * plus the step count. */
int train_optimizer_state_count(const train_optimizer_t *opt);
float *train_optimizer_state(train_optimizer_t *opt, int index);
uint64_t *train_optimizer_steps(train_optimizer_t *opt);
/* Change the learning rate for the next steps (schedules). */
void train_optimizer_set_lr(train_optimizer_t *opt, float lr);

/* Learning-rate schedules, a function of the step only (so a resumed run follows the
 * same curve): constant, or cosine from lr down to 0 over `total` steps. */
typedef enum { TRAIN_LR_CONSTANT = 0, TRAIN_LR_COSINE } train_lr_schedule_t;
float train_lr_at(train_lr_schedule_t schedule, float lr, uint64_t step, uint64_t total);
bool train_lr_schedule_parse(const char *text, train_lr_schedule_t *schedule);
bool train_opt_parse(const char *text, train_opt_kind_t *kind);

/* ---- Data: IDX files (plain or gzip) and MNIST-format data sets. */
typedef struct {
  size_t count;      /* number of samples */
  size_t rows, cols; /* image size */
  uint8_t *images;   /* count * rows * cols bytes */
  uint8_t *labels;   /* count bytes */
} train_dataset_t;

/* Read one IDX file (gzip or plain, detected by content): magic 0x0000_08_<ndims>,
 * big-endian sizes, then the bytes. ndims must be `want_dims` (1 labels, 3 images). */
train_status_t train_idx_read(const char *path, int want_dims, uint32_t dims[3], uint8_t **data,
                              size_t *bytes);
/* Load `<dir>/<prefix>-images-idx3-ubyte[.gz]` and `<prefix>-labels-idx1-ubyte[.gz]`
 * (prefix "train" or "t10k"); the counts must match and labels be < 10. */
train_status_t train_dataset_load(const char *dir, const char *prefix, train_dataset_t *ds);
void train_dataset_free(train_dataset_t *ds);
/* Rows [first, first+n) of `indices` as normalised floats (x/255 - mean) / std. */
void train_dataset_gather(const train_dataset_t *ds, const uint32_t *indices, size_t n, float *x,
                          uint8_t *labels);
#define TRAIN_DEFAULT_DATA_DIR "/usr/share/datasets/fashion-mnist"

/* ---- Distributed sampler, PyTorch DistributedSampler semantics: the permutation of
 * [0, dataset_size) is shuffled with seed + epoch (the same on every rank); without
 * drop_last it is padded by wrapping to a multiple of nranks, with drop_last truncated;
 * rank r takes positions r, r + n, r + 2n, ... */
typedef struct {
  size_t dataset_size;
  int rank, nranks;
  uint64_t seed;
  bool shuffle, drop_last;
  size_t num_samples; /* per rank */
  uint32_t *indices;  /* this rank's shard for the current epoch */
  uint32_t *perm;     /* scratch */
} train_sampler_t;

train_status_t train_sampler_init(train_sampler_t *s, size_t dataset_size, int rank, int nranks,
                                  uint64_t seed, bool shuffle, bool drop_last);
/* Recompute this rank's shard for `epoch`. */
void train_sampler_set_epoch(train_sampler_t *s, uint64_t epoch);
void train_sampler_free(train_sampler_t *s);

/* ---- Checkpoints: parameters, optimizer state and position, written atomically. */
typedef struct {
  uint64_t epoch;         /* epoch in progress */
  uint64_t step_in_epoch; /* optimizer steps done in that epoch */
  uint64_t global_step;   /* optimizer steps done in all */
  uint64_t seed;
  uint32_t opt_kind;
  uint64_t opt_steps;
  uint32_t n_layers;                   /* linear layers */
  uint32_t dims[TRAIN_MAX_HIDDEN + 2]; /* inputs, hidden..., classes */
} train_ckpt_header_t;

/* Write header, params and `n_state` state arrays (each n_params floats) to
 * path.tmp, fsync, then rename over `path`. */
train_status_t train_checkpoint_write(const char *path, const train_ckpt_header_t *hdr,
                                      const float *params, size_t n_params, float *const *state,
                                      int n_state);
/* Read a checkpoint; the sizes must match n_params and n_state exactly (a checkpoint of
 * another model is an error, never silently loaded). Any pointer may be NULL to only
 * read the header. */
train_status_t train_checkpoint_read(const char *path, train_ckpt_header_t *hdr, float *params,
                                     size_t n_params, float *const *state, int n_state);
/* Only the header and the parameter count (to size buffers before a full read). */
train_status_t train_checkpoint_peek(const char *path, train_ckpt_header_t *hdr, size_t *n_params,
                                     int *n_state);

/* ---- DDP: gradient buckets all-reduced while backward runs. */
typedef struct train_ddp train_ddp_t;

/* comm may be NULL (one rank, no communication). bucket_bytes > 0. Buckets cover the
 * model's flat gradient buffer in reverse layer order, whole tensors each. */
train_status_t train_ddp_create(coll_comm_t *comm, train_model_t *model, size_t bucket_bytes,
                                train_ddp_t **ddp);
void train_ddp_destroy(train_ddp_t *ddp);
int train_ddp_bucket_count(const train_ddp_t *ddp);
/* Copy rank 0's parameters to every rank (blocking). */
train_status_t train_ddp_broadcast_params(train_ddp_t *ddp);
/* Before the backward that ends a synchronised step: arm the buckets. Pass
 * train_ddp_grad_ready and the ddp as the backward's callback. */
void train_ddp_begin_sync(train_ddp_t *ddp);
train_status_t train_ddp_grad_ready(void *ddp, size_t grad_end);
/* Wait for every bucket's all-reduce; adds the time spent waiting to *wait_s. */
train_status_t train_ddp_finish_sync(train_ddp_t *ddp, double *wait_s);
/* The same, calling done(ctx, begin, end) for each bucket's range of the flat buffer,
 * in bucket order, as soon as that bucket is reduced (the optimizer step of a bucket
 * then runs while later buckets are still being reduced). Stops at the first error;
 * *wait_s gets only the time spent waiting. */
typedef train_status_t (*train_bucket_done_fn)(void *ctx, size_t begin, size_t end);
train_status_t train_ddp_finish_sync_each(train_ddp_t *ddp, double *wait_s,
                                          train_bucket_done_fn done, void *ctx);
/* Blocking helpers over the same communicator (no-ops on one rank): broadcast from
 * rank 0, and an in-place sum of doubles (evaluation counts). */
train_status_t train_ddp_broadcast(train_ddp_t *ddp, void *buf, size_t count, coll_dtype_t dtype);
train_status_t train_ddp_sum(train_ddp_t *ddp, double *values, size_t count);
/* 64-bit hash of the parameters' bytes (FNV-1a), in host memory (the trainer copies
 * device parameters to the host first, so a hash means the same on every device). */
uint64_t train_params_hash(const float *params, size_t n);
/* All ranks agree on the hash (all-reduce min and max)? TRAIN_ERR_DIVERGED if not. */
train_status_t train_ddp_check_sync(train_ddp_t *ddp, uint64_t *hash);

/* ---- The trainer: what tools/train runs. */
typedef struct {
  int epochs;     /* > 0 */
  size_t batch;   /* per rank, per micro-batch */
  int accumulate; /* micro-batches per optimizer step, >= 1 */
  train_opt_config_t opt;
  train_lr_schedule_t lr_schedule; /* over epochs x steps per epoch (not --max-steps) */
  uint64_t seed;
  size_t hidden[TRAIN_MAX_HIDDEN];
  int n_hidden;
  const char *data_dir; /* NULL: TRAIN_DEFAULT_DATA_DIR */
  bool drop_last;
  bool shuffle;
  double bucket_mb; /* > 0 */
  bool check_sync;
  const char *checkpoint; /* NULL: none */
  long checkpoint_every;  /* steps; 0: at the end of each epoch */
  bool resume;
  train_device_t device;
  int blas_threads;  /* <= 0: OPENBLAS_NUM_THREADS or 1 */
  long max_steps;    /* > 0: stop after this many optimizer steps in all */
  long warmup_steps; /* the first N steps of this run are left out of the samples/s, the
                        communication share and the phase times (they still train) */
  bool quiet;        /* no per-step output */
  int log_every;     /* steps between progress lines when stdout is not a TTY */
  bool evaluate;     /* test accuracy at the end of each epoch */
  coll_comm_t *comm; /* NULL: from the environment (or one rank if WORLD_SIZE is unset) */
  /* --elastic (trainer_elastic.c): survive lost ranks and take in replacements. Needs a
   * launcher's store (COLL_STORE_HOSTED=1) and cfg->comm == NULL; CPU only; no
   * accumulation, evaluation or checkpoints. Each step is `shards` shards of `batch`
   * samples, spread over the ranks; a step is committed only when every rank agrees. */
  bool elastic;
  int shards;              /* >= the largest world size (8) */
  bool bit_identical;      /* sum the shards exactly, so the result does not depend on the world */
  const char *sample_log;  /* NULL: none; else each process appends to <path>.<pid> */
  int elastic_timeout_ms;  /* communicator deadline of elastic runs (10000) */
} train_config_t;

/* Defaults of tools/train (784-256-256-10, SGD momentum 0.9, lr 0.05, batch 64, ...). */
void train_config_defaults(train_config_t *cfg);

typedef struct {
  double final_loss;    /* mean training loss of the last epoch run */
  double test_accuracy; /* of the last evaluation, -1 if none */
  double samples_per_s; /* global samples per second of training (no evaluation) */
  double comm_share;    /* share of step time spent waiting on communication */
  uint64_t global_step;
  uint64_t param_hash;
} train_result_t;

train_status_t train_run(const train_config_t *cfg, train_result_t *result);

#ifdef __cplusplus
}
#endif
#endif /* TRAIN_H */
