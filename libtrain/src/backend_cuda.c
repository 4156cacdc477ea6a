/* CUDA backend: device memory, matrix products through cuBLAS and the element-wise
 * kernels of cuda_kernels.cu, on the GPU chosen by LOCAL_RANK modulo the device count.
 * Everything runs on the legacy default stream, in call order; libcoll's collectives on
 * device buffers wait for that stream first, so DDP needs no extra synchronisation. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "cuda_kernels.h"
#include "error.h"

typedef struct {
  cublasHandle_t blas;
  double *result; /* device: the softmax kernel's 3 sums */
} cuda_ctx_t;

static cuda_ctx_t *ctx_of(train_backend_t *be) { return (cuda_ctx_t *)be->ctx; }

static train_status_t launched(int err, const char *what) {
  if (err == cudaSuccess) return TRAIN_OK;
  return train_error(TRAIN_ERR_INVALID, "CUDA %s: %s", what, cudaGetErrorString((cudaError_t)err));
}

static train_status_t cuda_alloc(train_backend_t *be, size_t bytes, void **ptr) {
  (void)be;
  size_t n = bytes ? bytes : 1;
  cudaError_t err = cudaMalloc(ptr, n);
  if (err != cudaSuccess) {
    *ptr = NULL;
    return train_error(TRAIN_ERR_NO_MEMORY, "cudaMalloc of %zu bytes: %s", bytes,
                       cudaGetErrorString(err));
  }
  /* Zeroed like the CPU's memory (optimizer state starts at 0). */
  err = cudaMemset(*ptr, 0, n);
  if (err != cudaSuccess) {
    cudaFree(*ptr);
    *ptr = NULL;
    return train_error(TRAIN_ERR_NO_MEMORY, "cudaMemset of %zu bytes: %s", bytes,
                       cudaGetErrorString(err));
  }
  return TRAIN_OK;
}

static void cuda_release(train_backend_t *be, void *ptr) {
  (void)be;
  cudaFree(ptr);
}

/* cudaMemcpy from pageable host memory returns once the source has been read, so the
 * caller may refill its buffer at once; it is ordered after earlier default-stream work. */
static train_status_t cuda_upload(train_backend_t *be, void *dst, const void *host, size_t bytes) {
  (void)be;
  cudaError_t err = cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess)
    return train_error(TRAIN_ERR_INVALID, "copy of %zu bytes to the GPU: %s", bytes,
                       cudaGetErrorString(err));
  return TRAIN_OK;
}

/* Waits for the kernels queued before it, so the host sees their results. */
static train_status_t cuda_download(train_backend_t *be, void *host, const void *src,
                                    size_t bytes) {
  (void)be;
  cudaError_t err = cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess)
    return train_error(TRAIN_ERR_INVALID, "copy of %zu bytes from the GPU: %s", bytes,
                       cudaGetErrorString(err));
  return TRAIN_OK;
}

/* cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
 * C^T = op(B)^T op(A)^T, i.e. the same call with the operands swapped. */
static train_status_t cuda_gemm(train_backend_t *be, bool trans_a, bool trans_b, size_t m, size_t n,
                                size_t k, float alpha, const float *a, size_t lda, const float *b,
                                size_t ldb, float beta, float *c, size_t ldc) {
  cublasStatus_t st = cublasSgemm(ctx_of(be)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                  &alpha, b, (int)ldb, a, (int)lda, &beta, c, (int)ldc);
  if (st != CUBLAS_STATUS_SUCCESS)
    return train_error(TRAIN_ERR_INVALID, "cublasSgemm(%zu x %zu x %zu) failed: status %d", m, n, k,
                       (int)st);
  return TRAIN_OK;
}

static train_status_t cuda_fill_rows(train_backend_t *be, float *y, const float *b, size_t rows,
                                     size_t cols) {
  (void)be;
  return launched(train_cuda_fill_rows(y, b, rows, cols), "bias rows");
}

static train_status_t cuda_col_sum(train_backend_t *be, const float *dy, size_t rows, size_t cols,
                                   bool accumulate, float *db) {
  (void)be;
  return launched(train_cuda_col_sum(dy, rows, cols, accumulate, db), "bias gradient");
}

static train_status_t cuda_relu_forward(train_backend_t *be, float *y, size_t n) {
  (void)be;
  return launched(train_cuda_relu_forward(y, n), "ReLU");
}

static train_status_t cuda_relu_backward(train_backend_t *be, const float *y, float *dy, size_t n) {
  (void)be;
  return launched(train_cuda_relu_backward(y, dy, n), "ReLU backward");
}

/* Labels are in device memory (the trainer copies each batch's). The sums come back to
 * the host here, which waits for the forward pass: the loss is reported every step. */
static train_status_t cuda_softmax_xent(train_backend_t *be, const float *logits,
                                        const uint8_t *labels, size_t rows, size_t cols,
                                        float grad_scale, float *dlogits, double *loss_sum,
                                        size_t *correct) {
  cuda_ctx_t *x = ctx_of(be);
  if (rows == 0) return TRAIN_OK;
  train_status_t st =
      launched(train_cuda_softmax_xent(logits, labels, rows, cols, grad_scale, dlogits, x->result),
               "softmax cross-entropy");
  double sums[3];
  if (st == TRAIN_OK) st = cuda_download(be, sums, x->result, sizeof sums);
  if (st != TRAIN_OK) return st;
  if (sums[2] > 0.0) {
    size_t row = (size_t)sums[2] - 1;
    uint8_t label = 0;
    cudaMemcpy(&label, labels + row, 1, cudaMemcpyDeviceToHost);
    return train_error(TRAIN_ERR_INVALID, "label %u of row %zu is not below %zu classes",
                       (unsigned)label, row, cols);
  }
  if (loss_sum != NULL) *loss_sum += sums[0];
  if (correct != NULL) *correct += (size_t)sums[1];
  return TRAIN_OK;
}

static train_status_t cuda_sgd_step(train_backend_t *be, float *p, const float *g, float *buf,
                                    size_t n, float lr, float momentum, float wd, bool first) {
  (void)be;
  return launched(train_cuda_sgd_step(p, g, buf, n, lr, momentum, wd, first), "SGD step");
}

/* The bias corrections exactly as the CPU backend computes them, on the host. */
static train_status_t cuda_adam_step(train_backend_t *be, float *p, const float *g, float *m,
                                     float *v, size_t n, float lr, float beta1, float beta2,
                                     float eps, float wd, uint64_t t) {
  (void)be;
  float bc1 = 1.0f - powf(beta1, (float)t);
  float bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
  float step = lr / bc1;
  return launched(train_cuda_adam_step(p, g, m, v, n, step, beta1, beta2, bc2_sqrt, eps, wd),
                  "Adam step");
}

static void cuda_close(train_backend_t *be) {
  cuda_ctx_t *x = ctx_of(be);
  if (x != NULL) {
    if (x->blas != NULL) cublasDestroy(x->blas);
    if (x->result != NULL) cudaFree(x->result);
    free(x);
  }
  free(be);
}

train_status_t backend_cuda_open(int blas_threads, int local_rank, train_backend_t **out) {
  (void)blas_threads;
  *out = NULL;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return train_error(TRAIN_ERR_UNSUPPORTED, "--device cuda: no CUDA GPU is usable here (%s)",
                       err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
  int device = (local_rank < 0 ? 0 : local_rank) % count;
  err = cudaSetDevice(device);
  if (err != cudaSuccess)
    return train_error(TRAIN_ERR_UNSUPPORTED, "cudaSetDevice(%d): %s", device,
                       cudaGetErrorString(err));
  train_backend_t *be = calloc(1, sizeof *be);
  cuda_ctx_t *x = calloc(1, sizeof *x);
  if (be == NULL || x == NULL) {
    free(be);
    free(x);
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the CUDA backend");
  }
  *be = (train_backend_t){
      .name = "cuda",
      .device = TRAIN_DEVICE_CUDA,
      .ctx = x,
      .alloc = cuda_alloc,
      .release = cuda_release,
      .upload = cuda_upload,
      .download = cuda_download,
      .gemm = cuda_gemm,
      .fill_rows = cuda_fill_rows,
      .col_sum = cuda_col_sum,
      .relu_forward = cuda_relu_forward,
      .relu_backward = cuda_relu_backward,
      .softmax_xent = cuda_softmax_xent,
      .sgd_step = cuda_sgd_step,
      .adam_step = cuda_adam_step,
      .close = cuda_close,
  };
  if (cublasCreate(&x->blas) != CUBLAS_STATUS_SUCCESS) {
    x->blas = NULL;
    cuda_close(be);
    return train_error(TRAIN_ERR_UNSUPPORTED, "cublasCreate on GPU %d failed", device);
  }
  err = cudaMalloc((void **)&x->result, 3 * sizeof(double));
  if (err != cudaSuccess) {
    x->result = NULL;
    cuda_close(be);
    return train_error(TRAIN_ERR_NO_MEMORY, "cudaMalloc of the loss sums on GPU %d: %s", device,
                       cudaGetErrorString(err));
  }
  *out = be;
  return TRAIN_OK;
}
