/* DDP: gradients in buckets, each all-reduced (sum) as soon as backward has filled it,
 * while backward goes on with the earlier layers. The loss gradient is already scaled by
 * 1 / (global batch), so the sum is the average and no extra pass over the data is
 * needed. Buckets hold whole layers in reverse order: in the model's flat gradient
 * buffer (laid out last layer first) a bucket is one contiguous range, all-reduced in
 * place without a copy. When distributed, that buffer is registered memory
 * (coll_mem_alloc): on one host over shm the all-reduce then reads the peers' gradients
 * in place (zero-copy window), elsewhere it is plain memory. */
#include <stdlib.h>

#include "clock_seconds.h"
#include "error.h"
#include "model_grads.h"

struct train_ddp {
  coll_comm_t *comm; /* NULL: one rank */
  int world;
  train_model_t *model;
  void *window;     /* the gradients' registered buffer (coll_mem_alloc); NULL: none */
  float *own_grads; /* the model's own gradient buffer while the window replaces it */
  float *params, *grads;
  size_t n_params;
  int n_buckets;
  size_t begin[TRAIN_MAX_HIDDEN + 1], end[TRAIN_MAX_HIDDEN + 1];
  coll_request_t *req[TRAIN_MAX_HIDDEN + 1];
  int next; /* next bucket to launch in this synchronised step */
  bool armed;
};

train_status_t train_comm_error(coll_status_t status, const char *what) {
  return train_error(TRAIN_ERR_COMM, "%s: %s (%s)", what, coll_status_string(status),
                     coll_last_error());
}

train_status_t train_ddp_create(coll_comm_t *comm, train_model_t *model, size_t bucket_bytes,
                                train_ddp_t **out) {
  *out = NULL;
  if (bucket_bytes == 0) return train_error(TRAIN_ERR_INVALID, "DDP bucket size must be > 0");
  train_ddp_t *d = calloc(1, sizeof *d);
  if (d == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate DDP state");
  d->comm = comm;
  d->world = 1;
  if (comm != NULL) {
    coll_status_t cs = coll_comm_size(comm, &d->world);
    if (cs != COLL_OK) {
      free(d);
      return train_comm_error(cs, "coll_comm_size");
    }
  }
  d->model = model;
  d->n_params = train_model_param_count(model);
  if (comm != NULL && d->world > 1) {
    /* Collective: every rank creates its DDP at the same point. */
    coll_status_t cs = coll_mem_alloc(comm, d->n_params * sizeof(float), &d->window);
    if (cs != COLL_OK) {
      free(d);
      return train_comm_error(cs, "registering the gradient buffer (coll_mem_alloc)");
    }
    d->own_grads = train_model_swap_grads(model, d->window);
    if (d->own_grads == NULL) { /* a device model: its gradients stay where they are */
      coll_mem_free(comm, d->window);
      d->window = NULL;
    }
  }
  d->params = train_model_params(model);
  d->grads = train_model_grads(model);
  /* Layers from last to first; a bucket closes once it holds bucket_bytes or more. */
  size_t bucket_start = 0;
  for (int i = train_model_linear_count(model) - 1; i >= 0; i--) {
    size_t layer_end = train_model_grad_end(model, i);
    if ((layer_end - bucket_start) * sizeof(float) >= bucket_bytes || i == 0) {
      d->begin[d->n_buckets] = bucket_start;
      d->end[d->n_buckets] = layer_end;
      d->n_buckets++;
      bucket_start = layer_end;
    }
  }
  *out = d;
  return TRAIN_OK;
}

void train_ddp_destroy(train_ddp_t *d) {
  if (d == NULL) return;
  for (int b = 0; b < d->n_buckets; b++)
    if (d->req[b] != NULL) coll_request_wait(&d->req[b]);
  if (d->window != NULL) {
    train_model_swap_grads(d->model, d->own_grads);
    coll_mem_free(d->comm, d->window);
  }
  free(d);
}

int train_ddp_bucket_count(const train_ddp_t *d) { return d->n_buckets; }

static bool communicates(const train_ddp_t *d) { return d->comm != NULL && d->world > 1; }

train_status_t train_ddp_broadcast(train_ddp_t *d, void *buf, size_t count, coll_dtype_t dtype) {
  if (!communicates(d) || count == 0) return TRAIN_OK;
  coll_status_t cs = coll_broadcast(buf, count, dtype, 0, d->comm);
  return cs == COLL_OK ? TRAIN_OK : train_comm_error(cs, "broadcast from rank 0");
}

train_status_t train_ddp_broadcast_params(train_ddp_t *d) {
  return train_ddp_broadcast(d, d->params, d->n_params, COLL_FLOAT32);
}

train_status_t train_ddp_sum(train_ddp_t *d, double *values, size_t count) {
  if (!communicates(d) || count == 0) return TRAIN_OK;
  coll_status_t cs = coll_all_reduce(values, values, count, COLL_FLOAT64, COLL_SUM, d->comm);
  return cs == COLL_OK ? TRAIN_OK : train_comm_error(cs, "all-reduce of evaluation counts");
}

void train_ddp_begin_sync(train_ddp_t *d) {
  d->next = 0;
  d->armed = true;
}

train_status_t train_ddp_grad_ready(void *ctx, size_t grad_end) {
  train_ddp_t *d = ctx;
  if (!d->armed) return TRAIN_OK;
  while (d->next < d->n_buckets && d->end[d->next] <= grad_end) {
    int b = d->next++;
    if (!communicates(d)) continue;
    float *range = d->grads + d->begin[b];
    coll_status_t cs = coll_all_reduce_async(range, range, d->end[b] - d->begin[b], COLL_FLOAT32,
                                             COLL_SUM, d->comm, &d->req[b]);
    if (cs != COLL_OK) return train_comm_error(cs, "all-reduce of a gradient bucket");
  }
  return TRAIN_OK;
}

train_status_t train_ddp_finish_sync_each(train_ddp_t *d, double *wait_s, train_bucket_done_fn done,
                                          void *ctx) {
  double waited = 0.0;
  train_status_t st = TRAIN_OK;
  if (d->armed && d->next != d->n_buckets)
    st = train_error(TRAIN_ERR_INVALID, "DDP: backward announced %d of %d buckets", d->next,
                     d->n_buckets);
  /* Every request is waited for, even after an error: none may outlive its buffer. */
  for (int b = 0; b < d->n_buckets; b++) {
    if (d->req[b] != NULL) {
      double t0 = clock_seconds();
      coll_status_t cs = coll_request_wait(&d->req[b]);
      waited += clock_seconds() - t0;
      if (cs != COLL_OK && st == TRAIN_OK)
        st = train_comm_error(cs, "waiting for a gradient bucket");
    }
    if (st == TRAIN_OK && done != NULL) st = done(ctx, d->begin[b], d->end[b]);
  }
  d->armed = false;
  if (wait_s != NULL) *wait_s += waited;
  return st;
}

train_status_t train_ddp_finish_sync(train_ddp_t *d, double *wait_s) {
  return train_ddp_finish_sync_each(d, wait_s, NULL, NULL);
}

uint64_t train_params_hash(const float *params, size_t n) {
  const unsigned char *p = (const unsigned char *)params;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n * sizeof(float); i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

train_status_t train_ddp_check_sync(train_ddp_t *d, uint64_t *hash) {
  uint64_t h = *hash;
  if (!communicates(d)) return TRAIN_OK;
  uint64_t lo = h, hi = h;
  coll_status_t cs = coll_all_reduce(&lo, &lo, 1, COLL_UINT64, COLL_MIN, d->comm);
  if (cs == COLL_OK) cs = coll_all_reduce(&hi, &hi, 1, COLL_UINT64, COLL_MAX, d->comm);
  if (cs != COLL_OK) return train_comm_error(cs, "all-reduce of the parameter hash");
  if (lo != hi)
    return train_error(TRAIN_ERR_DIVERGED,
                       "--check-sync: ranks hold different parameters (hash here %016llx, "
                       "smallest %016llx, largest %016llx)",
                       (unsigned long long)h, (unsigned long long)lo, (unsigned long long)hi);
  return TRAIN_OK;
}
