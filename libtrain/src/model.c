/* The MLP: linear layers with ReLU between them, parameters and gradients in one flat
 * buffer each (reverse layer order, so DDP buckets are contiguous), activation buffers
 * sized once for the largest batch so that a training step allocates nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "model_grads.h"

struct train_model {
  train_backend_t *be;
  int n_linear;
  train_layer_t linear[TRAIN_MAX_HIDDEN + 1];
  size_t grad_end[TRAIN_MAX_HIDDEN + 1]; /* end of layer i's gradients in the flat buffer */
  size_t max_batch;
  size_t n_params;
  train_tensor_t params, grads;
  train_tensor_t act[TRAIN_MAX_HIDDEN + 1];  /* output of linear i (after its ReLU) */
  train_tensor_t dact[TRAIN_MAX_HIDDEN + 1]; /* loss gradient w.r.t. act[i] */
};

void train_model_destroy(train_model_t *m) {
  if (m == NULL) return;
  for (int i = 0; i < m->n_linear; i++) {
    train_tensor_free(m->be, &m->act[i]);
    train_tensor_free(m->be, &m->dact[i]);
  }
  train_tensor_free(m->be, &m->params);
  train_tensor_free(m->be, &m->grads);
  free(m);
}

/* PyTorch's nn.Linear default: kaiming_uniform(a = sqrt(5)) for W, which is
 * U(-1/sqrt(in), 1/sqrt(in)), and the same bound for b. Layers are drawn in forward
 * order from one stream so the result depends only on the seed and the shape. */
static void init_params(train_model_t *m, uint64_t seed, float *host) {
  train_rng_t rng;
  train_rng_seed(&rng, seed);
  for (int i = 0; i < m->n_linear; i++) {
    train_layer_t *l = &m->linear[i];
    float bound = 1.0f / sqrtf((float)l->in);
    size_t w_off = (size_t)(l->w - m->params.data);
    for (size_t k = 0; k < l->in * l->out; k++)
      host[w_off + k] = (2.0f * train_rng_uniform(&rng) - 1.0f) * bound;
    for (size_t k = 0; k < l->out; k++)
      host[w_off + l->in * l->out + k] = (2.0f * train_rng_uniform(&rng) - 1.0f) * bound;
  }
}

train_status_t train_model_create(train_backend_t *be, size_t inputs, const size_t *hidden,
                                  int n_hidden, size_t classes, size_t max_batch, uint64_t seed,
                                  train_model_t **out) {
  *out = NULL;
  if (n_hidden < 0 || n_hidden > TRAIN_MAX_HIDDEN)
    return train_error(TRAIN_ERR_INVALID, "%d hidden layers: between 0 and %d are supported",
                       n_hidden, TRAIN_MAX_HIDDEN);
  if (inputs == 0 || classes == 0 || max_batch == 0)
    return train_error(TRAIN_ERR_INVALID, "model needs inputs, classes and batch > 0");
  train_model_t *m = calloc(1, sizeof *m);
  if (m == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the model");
  m->be = be;
  m->max_batch = max_batch;
  m->n_linear = n_hidden + 1;
  size_t dims[TRAIN_MAX_HIDDEN + 2];
  dims[0] = inputs;
  for (int i = 0; i < n_hidden; i++) {
    if (hidden[i] == 0) {
      free(m);
      return train_error(TRAIN_ERR_INVALID, "hidden layer %d has width 0", i + 1);
    }
    dims[i + 1] = hidden[i];
  }
  dims[m->n_linear] = classes;
  for (int i = 0; i < m->n_linear; i++) m->n_params += dims[i + 1] * (dims[i] + 1);

  train_status_t st = train_tensor_alloc(be, 1, m->n_params, &m->params);
  if (st == TRAIN_OK) st = train_tensor_alloc(be, 1, m->n_params, &m->grads);
  for (int i = 0; st == TRAIN_OK && i < m->n_linear; i++) {
    st = train_tensor_alloc(be, max_batch, dims[i + 1], &m->act[i]);
    if (st == TRAIN_OK) st = train_tensor_alloc(be, max_batch, dims[i + 1], &m->dact[i]);
  }
  if (st != TRAIN_OK) {
    train_model_destroy(m);
    return st;
  }
  /* Reverse layer order: the last layer's W and b first. */
  size_t off = 0;
  for (int i = m->n_linear - 1; i >= 0; i--) {
    train_layer_t *l = &m->linear[i];
    size_t nw = dims[i + 1] * dims[i];
    *l = (train_layer_t){
        .kind = TRAIN_LAYER_LINEAR,
        .in = dims[i],
        .out = dims[i + 1],
        .w = m->params.data + off,
        .b = m->params.data + off + nw,
        .dw = m->grads.data + off,
        .db = m->grads.data + off + nw,
    };
    off += nw + dims[i + 1];
    m->grad_end[i] = off;
  }
  /* On a device the values are drawn on the host and copied over in one piece. */
  float *host = backend_is_host(be) ? m->params.data : malloc(m->n_params * sizeof *host);
  if (host == NULL) {
    train_model_destroy(m);
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate %zu initial parameters", m->n_params);
  }
  init_params(m, seed, host);
  st = backend_upload(be, m->params.data, host, m->n_params * sizeof *host);
  if (host != m->params.data) free(host);
  if (st != TRAIN_OK) {
    train_model_destroy(m);
    return st;
  }
  *out = m;
  return TRAIN_OK;
}

size_t train_model_param_count(const train_model_t *m) { return m->n_params; }
float *train_model_params(train_model_t *m) { return m->params.data; }
float *train_model_grads(train_model_t *m) { return m->grads.data; }

size_t train_model_grad_end(const train_model_t *m, int index) { return m->grad_end[index]; }

float *train_model_swap_grads(train_model_t *m, float *buf) {
  if (buf == NULL || !backend_is_host(m->be)) return NULL;
  memcpy(buf, m->grads.data, m->n_params * sizeof *buf);
  return train_model_use_grads(m, buf);
}

float *train_model_use_grads(train_model_t *m, float *buf) {
  if (buf == NULL || !backend_is_host(m->be)) return NULL;
  float *old = m->grads.data;
  for (int i = 0; i < m->n_linear; i++) {
    m->linear[i].dw = buf + (m->linear[i].dw - old);
    m->linear[i].db = buf + (m->linear[i].db - old);
  }
  m->grads.data = buf;
  return old;
}

int train_model_linear_count(const train_model_t *m) { return m->n_linear; }

const train_layer_t *train_model_linear(const train_model_t *m, int index) {
  return index >= 0 && index < m->n_linear ? &m->linear[index] : NULL;
}

static train_status_t check_batch(const train_model_t *m, size_t batch) {
  if (batch == 0 || batch > m->max_batch)
    return train_error(TRAIN_ERR_INVALID, "batch of %zu rows: the model was sized for 1..%zu",
                       batch, m->max_batch);
  return TRAIN_OK;
}

train_status_t train_model_forward(train_model_t *m, const float *x, size_t batch) {
  train_status_t st = check_batch(m, batch);
  const float *in = x;
  for (int i = 0; st == TRAIN_OK && i < m->n_linear; i++) {
    st = train_linear_forward(m->be, &m->linear[i], in, batch, m->act[i].data);
    if (st == TRAIN_OK && i + 1 < m->n_linear)
      st = train_relu_forward(m->be, m->act[i].data, batch * m->linear[i].out);
    in = m->act[i].data;
  }
  return st;
}

train_status_t train_model_loss(train_model_t *m, const uint8_t *labels, size_t batch,
                                float grad_scale, double *loss_sum, size_t *correct) {
  train_status_t st = check_batch(m, batch);
  if (st != TRAIN_OK) return st;
  int last = m->n_linear - 1;
  return train_softmax_xent(m->be, m->act[last].data, labels, batch, m->linear[last].out,
                            grad_scale, m->dact[last].data, loss_sum, correct);
}

train_status_t train_model_backward(train_model_t *m, const float *x, size_t batch, bool accumulate,
                                    train_grad_ready_fn ready, void *ctx) {
  train_status_t st = check_batch(m, batch);
  for (int i = m->n_linear - 1; st == TRAIN_OK && i >= 0; i--) {
    const train_layer_t *l = &m->linear[i];
    if (i + 1 < m->n_linear)
      st = train_relu_backward(m->be, m->act[i].data, m->dact[i].data, batch * l->out);
    const float *in = i > 0 ? m->act[i - 1].data : x;
    if (st == TRAIN_OK)
      st = train_linear_backward(m->be, l, in, m->dact[i].data, batch, accumulate, NULL);
    /* Announce this layer's gradients before computing the input gradient, so that a
     * bucket's all-reduce runs while the product below does. */
    if (st == TRAIN_OK && ready != NULL) st = ready(ctx, m->grad_end[i]);
    if (st == TRAIN_OK && i > 0)
      st = train_linear_backward_input(m->be, l, m->dact[i].data, batch, m->dact[i - 1].data);
  }
  return st;
}
