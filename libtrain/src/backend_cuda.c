/* CUDA backend: device memory and matrix products through cuBLAS on the GPU chosen by
 * LOCAL_RANK modulo the device count. The element-wise kernels (ReLU, softmax,
 * optimizer steps) are not written yet: their slots stay NULL and report so. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include "backend.h"
#include "error.h"

static train_status_t cuda_alloc(train_backend_t *be, size_t bytes, void **ptr) {
  (void)be;
  cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
  if (err != cudaSuccess)
    return train_error(TRAIN_ERR_NO_MEMORY, "cudaMalloc of %zu bytes: %s", bytes,
                       cudaGetErrorString(err));
  cudaMemset(*ptr, 0, bytes ? bytes : 1);
  return TRAIN_OK;
}

static void cuda_release(train_backend_t *be, void *ptr) {
  (void)be;
  cudaFree(ptr);
}

/* cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
 * C^T = op(B)^T op(A)^T, i.e. the same call with the operands swapped. */
static train_status_t cuda_gemm(train_backend_t *be, bool trans_a, bool trans_b, size_t m, size_t n,
                                size_t k, float alpha, const float *a, size_t lda, const float *b,
                                size_t ldb, float beta, float *c, size_t ldc) {
  cublasStatus_t st = cublasSgemm((cublasHandle_t)be->ctx, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                  &alpha, b, (int)ldb, a, (int)lda, &beta, c, (int)ldc);
  if (st != CUBLAS_STATUS_SUCCESS)
    return train_error(TRAIN_ERR_INVALID, "cublasSgemm(%zu x %zu x %zu) failed: status %d", m, n, k,
                       (int)st);
  return TRAIN_OK;
}

static void cuda_close(train_backend_t *be) {
  if (be->ctx != NULL) cublasDestroy((cublasHandle_t)be->ctx);
  free(be);
}

train_status_t backend_cuda_open(int blas_threads, int local_rank, train_backend_t **out) {
  (void)blas_threads;
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
  cublasHandle_t handle = NULL;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS)
    return train_error(TRAIN_ERR_UNSUPPORTED, "cublasCreate on GPU %d failed", device);
  train_backend_t *be = malloc(sizeof *be);
  if (be == NULL) {
    cublasDestroy(handle);
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the CUDA backend");
  }
  *be = (train_backend_t){
      .name = "cuda",
      .device = TRAIN_DEVICE_CUDA,
      .ctx = handle,
      .alloc = cuda_alloc,
      .release = cuda_release,
      .gemm = cuda_gemm,
      .close = cuda_close,
  };
  *out = be;
  return TRAIN_OK;
}
