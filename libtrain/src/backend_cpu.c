/* CPU backend: matrix products through CBLAS (OpenBLAS), the small element-wise kernels
 * as plain loops the compiler vectorises. One BLAS thread per rank by default: ranks
 * already fill the cores, and BLAS threads fighting them costs more than it gives. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"

static train_status_t cpu_alloc(train_backend_t *be, size_t bytes, void **ptr) {
  (void)be;
  /* 64-byte alignment: whole cache lines and aligned vector loads in BLAS. */
  size_t rounded = (bytes + 63) & ~(size_t)63;
  *ptr = aligned_alloc(64, rounded ? rounded : 64);
  if (*ptr == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate %zu bytes", bytes);
  memset(*ptr, 0, rounded ? rounded : 64);
  return TRAIN_OK;
}

static void cpu_release(train_backend_t *be, void *ptr) {
  (void)be;
  free(ptr);
}

static train_status_t cpu_copy(train_backend_t *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  memcpy(dst, src, bytes);
  return TRAIN_OK;
}

static train_status_t cpu_gemm(train_backend_t *be, bool trans_a, bool trans_b, size_t m, size_t n,
                               size_t k, float alpha, const float *a, size_t lda, const float *b,
                               size_t ldb, float beta, float *c, size_t ldc) {
  (void)be;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
              (int)ldb, beta, c, (int)ldc);
  return TRAIN_OK;
}

static train_status_t cpu_fill_rows(train_backend_t *be, float *y, const float *b, size_t rows,
                                    size_t cols) {
  (void)be;
  for (size_t i = 0; i < rows; i++) memcpy(y + i * cols, b, cols * sizeof *b);
  return TRAIN_OK;
}

static train_status_t cpu_col_sum(train_backend_t *be, const float *restrict dy, size_t rows,
                                  size_t cols, bool accumulate, float *restrict db) {
  (void)be;
  if (!accumulate) memset(db, 0, cols * sizeof *db);
  for (size_t i = 0; i < rows; i++) {
    const float *row = dy + i * cols;
    for (size_t j = 0; j < cols; j++) db[j] += row[j];
  }
  return TRAIN_OK;
}

/* The element-wise loops below are written branch-free with restrict pointers so that
 * the compiler vectorises them (built at -O3, see libtrain/meson.build):
 * as scalar loops the optimizer step alone took a fifth of the step time. */
static train_status_t cpu_relu_forward(train_backend_t *be, float *restrict y, size_t n) {
  (void)be;
  for (size_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
  return TRAIN_OK;
}

static train_status_t cpu_relu_backward(train_backend_t *be, const float *restrict y,
                                        float *restrict dy, size_t n) {
  (void)be;
  for (size_t i = 0; i < n; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  return TRAIN_OK;
}

static train_status_t cpu_softmax_xent(train_backend_t *be, const float *logits,
                                       const uint8_t *labels, size_t rows, size_t cols,
                                       float grad_scale, float *dlogits, double *loss_sum,
                                       size_t *correct) {
  (void)be;
  double loss = 0.0;
  size_t right = 0;
  for (size_t i = 0; i < rows; i++) {
    const float *z = logits + i * cols;
    size_t label = labels[i];
    if (label >= cols)
      return train_error(TRAIN_ERR_INVALID, "label %zu of row %zu is not below %zu classes", label,
                         i, cols);
    size_t arg = 0;
    for (size_t j = 1; j < cols; j++)
      if (z[j] > z[arg]) arg = j;
    /* Shift by the maximum so that exp never overflows. */
    float zmax = z[arg];
    double sum = 0.0;
    for (size_t j = 0; j < cols; j++) sum += exp((double)(z[j] - zmax));
    double log_sum = log(sum);
    loss += log_sum - (double)(z[label] - zmax);
    right += arg == label;
    if (dlogits != NULL) {
      float *d = dlogits + i * cols;
      for (size_t j = 0; j < cols; j++) {
        double p = exp((double)(z[j] - zmax) - log_sum);
        d[j] = grad_scale * (float)(p - (j == label ? 1.0 : 0.0));
      }
    }
  }
  if (loss_sum != NULL) *loss_sum += loss;
  if (correct != NULL) *correct += right;
  return TRAIN_OK;
}

/* The optimizer steps stream three or four arrays of all parameters once per step:
 * clones for AVX-512 and AVX2 (picked at load time) do it in wider vectors than the
 * baseline x86-64 build can. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef WIDE_CLONES
#define WIDE_CLONES
#endif

WIDE_CLONES static train_status_t cpu_sgd_step(train_backend_t *be, float *restrict p,
                                               const float *restrict g, float *restrict buf,
                                               size_t n, float lr, float momentum, float wd,
                                               bool first) {
  (void)be;
  if (momentum == 0.0f) {
    for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
  } else if (first) {
    for (size_t i = 0; i < n; i++) {
      float d = g[i] + wd * p[i];
      buf[i] = d;
      p[i] -= lr * d;
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      float d = momentum * buf[i] + (g[i] + wd * p[i]);
      buf[i] = d;
      p[i] -= lr * d;
    }
  }
  return TRAIN_OK;
}

WIDE_CLONES static train_status_t cpu_adam_step(train_backend_t *be, float *restrict p,
                                                const float *restrict g, float *restrict m,
                                                float *restrict v, size_t n, float lr, float beta1,
                                                float beta2, float eps, float wd, uint64_t t) {
  (void)be;
  float bc1 = 1.0f - powf(beta1, (float)t);
  float bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
  float step = lr / bc1;
  for (size_t i = 0; i < n; i++) {
    float d = g[i] + wd * p[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * d;
    v[i] = beta2 * v[i] + (1.0f - beta2) * d * d;
    p[i] -= step * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
  }
  return TRAIN_OK;
}

static void cpu_close(train_backend_t *be) { free(be); }

train_status_t backend_cpu_open(int blas_threads, int local_rank, train_backend_t **out) {
  (void)local_rank;
  train_backend_t *be = malloc(sizeof *be);
  if (be == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the CPU backend");
  *be = (train_backend_t){
      .name = "cpu",
      .device = TRAIN_DEVICE_CPU,
      .alloc = cpu_alloc,
      .release = cpu_release,
      .upload = cpu_copy,
      .download = cpu_copy,
      .gemm = cpu_gemm,
      .fill_rows = cpu_fill_rows,
      .col_sum = cpu_col_sum,
      .relu_forward = cpu_relu_forward,
      .relu_backward = cpu_relu_backward,
      .softmax_xent = cpu_softmax_xent,
      .sgd_step = cpu_sgd_step,
      .adam_step = cpu_adam_step,
      .close = cpu_close,
  };
  if (blas_threads <= 0) {
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    blas_threads = env != NULL && atoi(env) > 0 ? atoi(env) : 1;
  }
  openblas_set_num_threads(blas_threads);
  *out = be;
  return TRAIN_OK;
}
