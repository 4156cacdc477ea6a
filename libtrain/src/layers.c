/* Layers as functions over the backend table: linear (forward, parameter and input
 * gradients), ReLU in place, softmax cross-entropy. A missing kernel on the device is a
 * clear TRAIN_ERR_UNSUPPORTED, not a crash. */
#include "backend.h"
#include "error.h"

static train_status_t missing(const train_backend_t *be, const char *op) {
  return train_error(TRAIN_ERR_UNSUPPORTED, "%s on device '%s' is not yet supported", op, be->name);
}

train_status_t train_linear_forward(train_backend_t *be, const train_layer_t *layer, const float *x,
                                    size_t batch, float *y) {
  if (be->fill_rows == NULL) return missing(be, "linear bias");
  if (be->gemm == NULL) return missing(be, "matrix product");
  /* Start from the bias rows and let the product accumulate onto them (beta = 1): one
   * pass over y instead of a product followed by a bias pass. */
  train_status_t st = be->fill_rows(be, y, layer->b, batch, layer->out);
  if (st != TRAIN_OK) return st;
  return be->gemm(be, false, true, batch, layer->out, layer->in, 1.0f, x, layer->in, layer->w,
                  layer->in, 1.0f, y, layer->out);
}

train_status_t train_linear_backward_input(train_backend_t *be, const train_layer_t *layer,
                                           const float *dy, size_t batch, float *dx) {
  if (be->gemm == NULL) return missing(be, "matrix product");
  return be->gemm(be, false, false, batch, layer->in, layer->out, 1.0f, dy, layer->out, layer->w,
                  layer->in, 0.0f, dx, layer->in);
}

train_status_t train_linear_backward(train_backend_t *be, const train_layer_t *layer,
                                     const float *x, const float *dy, size_t batch, bool accumulate,
                                     float *dx) {
  if (be->gemm == NULL) return missing(be, "matrix product");
  if (be->col_sum == NULL) return missing(be, "bias gradient");
  train_status_t st = be->gemm(be, true, false, layer->out, layer->in, batch, 1.0f, dy, layer->out,
                               x, layer->in, accumulate ? 1.0f : 0.0f, layer->dw, layer->in);
  if (st == TRAIN_OK) st = be->col_sum(be, dy, batch, layer->out, accumulate, layer->db);
  if (st == TRAIN_OK && dx != NULL) st = train_linear_backward_input(be, layer, dy, batch, dx);
  return st;
}

train_status_t train_relu_forward(train_backend_t *be, float *y, size_t n) {
  if (be->relu_forward == NULL) return missing(be, "ReLU");
  return be->relu_forward(be, y, n);
}

train_status_t train_relu_backward(train_backend_t *be, const float *y, float *dy, size_t n) {
  if (be->relu_backward == NULL) return missing(be, "ReLU backward");
  return be->relu_backward(be, y, dy, n);
}

train_status_t train_softmax_xent(train_backend_t *be, const float *logits, const uint8_t *labels,
                                  size_t batch, size_t classes, float grad_scale, float *dlogits,
                                  double *loss_sum, size_t *correct) {
  if (be->softmax_xent == NULL) return missing(be, "softmax cross-entropy");
  if (classes == 0) return train_error(TRAIN_ERR_INVALID, "softmax over 0 classes");
  return be->softmax_xent(be, logits, labels, batch, classes, grad_scale, dlogits, loss_sum,
                          correct);
}
