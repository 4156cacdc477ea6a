/* The compute backend contract: one table of kernels per device (CPU via CBLAS, CUDA via
 * cuBLAS). A NULL slot means "not implemented on this device"; callers go through the
 * wrappers in layers.c / optim.c, which turn that into TRAIN_ERR_UNSUPPORTED. */
#ifndef TRAIN_BACKEND_H
#define TRAIN_BACKEND_H

#include "train.h"

struct train_backend {
  const char *name;
  train_device_t device;
  void *ctx; /* per-backend state (cuBLAS handle, ...) */
  /* Memory in the device's address space. */
  train_status_t (*alloc)(train_backend_t *be, size_t bytes, void **ptr);
  void (*release)(train_backend_t *be, void *ptr);
  /* Copies between host memory and the device's memory (plain memcpy on the CPU), for
   * the input batches, the initial parameters, checkpoints and the parameter hash. */
  train_status_t (*upload)(train_backend_t *be, void *dst, const void *host, size_t bytes);
  train_status_t (*download)(train_backend_t *be, void *host, const void *src, size_t bytes);
  /* Row-major C[m x n] = alpha op(A)[m x k] op(B)[k x n] + beta C. */
  train_status_t (*gemm)(train_backend_t *be, bool trans_a, bool trans_b, size_t m, size_t n,
                         size_t k, float alpha, const float *a, size_t lda, const float *b,
                         size_t ldb, float beta, float *c, size_t ldc);
  /* Every row of y[rows x cols] = b. */
  train_status_t (*fill_rows)(train_backend_t *be, float *y, const float *b, size_t rows,
                              size_t cols);
  /* db[j] (+)= sum_i dy[i][j]. */
  train_status_t (*col_sum)(train_backend_t *be, const float *dy, size_t rows, size_t cols,
                            bool accumulate, float *db);
  train_status_t (*relu_forward)(train_backend_t *be, float *y, size_t n);
  train_status_t (*relu_backward)(train_backend_t *be, const float *y, float *dy, size_t n);
  train_status_t (*softmax_xent)(train_backend_t *be, const float *logits, const uint8_t *labels,
                                 size_t rows, size_t cols, float grad_scale, float *dlogits,
                                 double *loss_sum, size_t *correct);
  /* p -= lr * buf with buf = momentum * buf + (g + wd p) (buf = g + wd p when first). */
  train_status_t (*sgd_step)(train_backend_t *be, float *p, const float *g, float *buf, size_t n,
                             float lr, float momentum, float wd, bool first);
  /* Adam step number t (>= 1) with bias correction. */
  train_status_t (*adam_step)(train_backend_t *be, float *p, const float *g, float *m, float *v,
                              size_t n, float lr, float beta1, float beta2, float eps, float wd,
                              uint64_t t);
  void (*close)(train_backend_t *be);
};

/* Whether the backend's memory is host memory (the CPU's): callers then use tensors in
 * place instead of staging them through host copies. */
static inline bool backend_is_host(const train_backend_t *be) {
  return be->device == TRAIN_DEVICE_CPU;
}
/* upload/download that do nothing when the two pointers are the same host memory. */
train_status_t backend_upload(train_backend_t *be, void *dst, const void *host, size_t bytes);
train_status_t backend_download(train_backend_t *be, void *host, const void *src, size_t bytes);

/* Openers of each backend; the registry in backend.c picks one by device. */
train_status_t backend_cpu_open(int blas_threads, int local_rank, train_backend_t **be);
train_status_t backend_cuda_open(int blas_threads, int local_rank, train_backend_t **be);

#endif
