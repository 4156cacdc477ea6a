/* C entry points of libtrain's element-wise CUDA kernels (cuda_kernels.cu), used by the
 * CUDA backend. Plain C types only, so backend_cuda.c includes it like any header. All
 * work is enqueued on CUDA's legacy default stream, the stream cuBLAS uses here and the
 * one libcoll's plain and _async collectives wait for. Each returns a cudaError_t value
 * (0 on success) from the launch; errors of the kernel itself show at the next sync. */
#ifndef TRAIN_CUDA_KERNELS_H
#define TRAIN_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every row of y[rows x cols] = b. */
int train_cuda_fill_rows(float *y, const float *b, size_t rows, size_t cols);
/* db[j] (+)= sum_i dy[i][j], rows added in order (the CPU loop's order). */
int train_cuda_col_sum(const float *dy, size_t rows, size_t cols, int accumulate, float *db);
int train_cuda_relu_forward(float *y, size_t n);
int train_cuda_relu_backward(const float *y, float *dy, size_t n);
/* Softmax cross-entropy of rows x cols logits (labels are bytes in device memory).
 * dlogits (may be NULL) = grad_scale * (softmax - onehot). out (device, 3 doubles):
 * summed loss, number of rows whose arg-max is the label, and 1 + the first row whose
 * label is not below cols (0 when every label is valid). */
int train_cuda_softmax_xent(const float *logits, const uint8_t *labels, size_t rows, size_t cols,
                            float grad_scale, float *dlogits, double *out);
/* The CPU backend's SGD step (momentum == 0, first, or later step). */
int train_cuda_sgd_step(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                        float wd, int first);
/* Adam with the bias corrections computed by the caller: step = lr / (1 - beta1^t),
 * bc2_sqrt = sqrt(1 - beta2^t). */
int train_cuda_adam_step(float *p, const float *g, float *m, float *v, size_t n, float step,
                         float beta1, float beta2, float bc2_sqrt, float eps, float wd);

#ifdef __cplusplus
}
#endif
#endif
