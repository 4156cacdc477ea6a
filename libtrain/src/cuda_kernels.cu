// libtrain's element-wise CUDA kernels: bias rows, bias gradients, ReLU, softmax
// cross-entropy and the optimizer steps, computing what backend_cpu.c's loops compute.
// Built with -fmad=false (libtrain/meson.build) so that the float arithmetic rounds like
// the CPU's (x86-64 without FMA); only exp/log in the softmax may differ in the last bit.
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_kernels.h"

namespace {

enum { THREADS = 256, MAX_BLOCKS = 8192 };

unsigned blocks_for(size_t n) {
  size_t b = (n + THREADS - 1) / THREADS;
  if (b > (size_t)MAX_BLOCKS) b = MAX_BLOCKS;
  return (unsigned)(b == 0 ? 1 : b);
}

__device__ size_t first_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

__global__ void fill_rows_kernel(float *y, const float *b, size_t rows, size_t cols) {
  size_t n = rows * cols;
  for (size_t i = first_index(); i < n; i += grid_stride()) y[i] = b[i % cols];
}

// One thread per column adds the rows in order, so the sum rounds exactly like the CPU's
// row-by-row loop (and is deterministic, unlike atomics).
__global__ void col_sum_kernel(const float *dy, size_t rows, size_t cols, int accumulate,
                               float *db) {
  for (size_t j = first_index(); j < cols; j += grid_stride()) {
    float acc = accumulate ? db[j] : 0.0f;
    for (size_t i = 0; i < rows; i++) acc += dy[i * cols + j];
    db[j] = acc;
  }
}

__global__ void relu_forward_kernel(float *y, size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride()) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float *y, float *dy, size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride()) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// One block: each thread takes rows t, t + THREADS, ... (classes are few, rows a batch),
// then a fixed-order tree adds the per-thread sums, so the result is deterministic.
__global__ void softmax_xent_kernel(const float *logits, const uint8_t *labels, size_t rows,
                                    size_t cols, float grad_scale, float *dlogits, double *out) {
  __shared__ double s_loss[THREADS];
  __shared__ double s_right[THREADS];
  __shared__ unsigned long long s_bad[THREADS];
  const unsigned long long none = ~0ull;
  double loss = 0.0, right = 0.0;
  unsigned long long bad = none;  // first row with an invalid label
  for (size_t i = threadIdx.x; i < rows; i += THREADS) {
    const float *z = logits + i * cols;
    size_t label = labels[i];
    if (label >= cols) {
      if (bad == none) bad = i;
      if (dlogits != nullptr)
        for (size_t j = 0; j < cols; j++) dlogits[i * cols + j] = 0.0f;
      continue;
    }
    size_t arg = 0;
    for (size_t j = 1; j < cols; j++)
      if (z[j] > z[arg]) arg = j;
    // Shift by the maximum so that exp never overflows.
    float zmax = z[arg];
    double sum = 0.0;
    for (size_t j = 0; j < cols; j++) sum += exp((double)(z[j] - zmax));
    double log_sum = log(sum);
    loss += log_sum - (double)(z[label] - zmax);
    right += arg == label ? 1.0 : 0.0;
    if (dlogits != nullptr) {
      float *d = dlogits + i * cols;
      for (size_t j = 0; j < cols; j++) {
        double p = exp((double)(z[j] - zmax) - log_sum);
        d[j] = grad_scale * (float)(p - (j == label ? 1.0 : 0.0));
      }
    }
  }
  unsigned t = threadIdx.x;
  s_loss[t] = loss;
  s_right[t] = right;
  s_bad[t] = bad;
  __syncthreads();
  for (unsigned half = THREADS / 2; half > 0; half >>= 1) {
    if (t < half) {
      s_loss[t] += s_loss[t + half];
      s_right[t] += s_right[t + half];
      if (s_bad[t + half] < s_bad[t]) s_bad[t] = s_bad[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    out[0] = s_loss[0];
    out[1] = s_right[0];
    out[2] = s_bad[0] == none ? 0.0 : (double)(s_bad[0] + 1);
  }
}

// The three cases of the CPU's SGD loop; `mode` is the same for every thread.
enum { SGD_PLAIN, SGD_FIRST, SGD_MOMENTUM };

__global__ void sgd_kernel(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                           float wd, int mode) {
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    if (mode == SGD_PLAIN) {
      p[i] -= lr * (g[i] + wd * p[i]);
    } else {
      float d = g[i] + wd * p[i];
      if (mode == SGD_MOMENTUM) d = momentum * buf[i] + d;
      buf[i] = d;
      p[i] -= lr * d;
    }
  }
}

__global__ void adam_kernel(float *p, const float *g, float *m, float *v, size_t n, float step,
                            float beta1, float beta2, float bc2_sqrt, float eps, float wd) {
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    float d = g[i] + wd * p[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * d;
    float vi = beta2 * v[i] + (1.0f - beta2) * d * d;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step * mi / (sqrtf(vi) / bc2_sqrt + eps);
  }
}

int launched() { return (int)cudaGetLastError(); }

}  // namespace

extern "C" int train_cuda_fill_rows(float *y, const float *b, size_t rows, size_t cols) {
  if (rows == 0 || cols == 0) return 0;
  fill_rows_kernel<<<blocks_for(rows * cols), THREADS>>>(y, b, rows, cols);
  return launched();
}

extern "C" int train_cuda_col_sum(const float *dy, size_t rows, size_t cols, int accumulate,
                                  float *db) {
  if (cols == 0) return 0;
  col_sum_kernel<<<blocks_for(cols), THREADS>>>(dy, rows, cols, accumulate, db);
  return launched();
}

extern "C" int train_cuda_relu_forward(float *y, size_t n) {
  if (n == 0) return 0;
  relu_forward_kernel<<<blocks_for(n), THREADS>>>(y, n);
  return launched();
}

extern "C" int train_cuda_relu_backward(const float *y, float *dy, size_t n) {
  if (n == 0) return 0;
  relu_backward_kernel<<<blocks_for(n), THREADS>>>(y, dy, n);
  return launched();
}

extern "C" int train_cuda_softmax_xent(const float *logits, const uint8_t *labels, size_t rows,
                                       size_t cols, float grad_scale, float *dlogits, double *out) {
  softmax_xent_kernel<<<1, THREADS>>>(logits, labels, rows, cols, grad_scale, dlogits, out);
  return launched();
}

extern "C" int train_cuda_sgd_step(float *p, const float *g, float *buf, size_t n, float lr,
                                   float momentum, float wd, int first) {
  if (n == 0) return 0;
  int mode = momentum == 0.0f ? SGD_PLAIN : first ? SGD_FIRST : SGD_MOMENTUM;
  sgd_kernel<<<blocks_for(n), THREADS>>>(p, g, buf, n, lr, momentum, wd, mode);
  return launched();
}

extern "C" int train_cuda_adam_step(float *p, const float *g, float *m, float *v, size_t n,
                                    float step, float beta1, float beta2, float bc2_sqrt, float eps,
                                    float wd) {
  if (n == 0) return 0;
  adam_kernel<<<blocks_for(n), THREADS>>>(p, g, m, v, n, step, beta1, beta2, bc2_sqrt, eps, wd);
  return launched();
}
