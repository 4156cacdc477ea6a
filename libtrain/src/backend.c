/* Backend registry: which opener serves which device, and the device names. The only
 * place where the build's CUDA support decides anything in libtrain. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "coll_config.h"
#include "error.h"

typedef train_status_t (*backend_open_fn)(int blas_threads, int local_rank, train_backend_t **be);

static const struct {
  const char *name;
  backend_open_fn open;
} backends[TRAIN_DEVICE_COUNT] = {
    [TRAIN_DEVICE_CPU] = {.name = "cpu", .open = backend_cpu_open},
#if COLL_HAVE_CUDA
    [TRAIN_DEVICE_CUDA] = {.name = "cuda", .open = backend_cuda_open},
#else
    [TRAIN_DEVICE_CUDA] = {.name = "cuda", .open = NULL},
#endif
};

bool train_device_parse(const char *text, train_device_t *device) {
  for (int d = 0; d < TRAIN_DEVICE_COUNT; d++) {
    if (text != NULL && strcmp(text, backends[d].name) == 0) {
      *device = (train_device_t)d;
      return true;
    }
  }
  return false;
}

train_status_t train_backend_open(train_device_t device, int blas_threads, int local_rank,
                                  train_backend_t **backend) {
  *backend = NULL;
  if ((int)device < 0 || device >= TRAIN_DEVICE_COUNT)
    return train_error(TRAIN_ERR_INVALID, "unknown device %d", (int)device);
  if (backends[device].open == NULL)
    return train_error(TRAIN_ERR_UNSUPPORTED,
                       "device '%s': this build has no CUDA support (nvcc, cudart and "
                       "cuBLAS were not found when it was configured)",
                       backends[device].name);
  return backends[device].open(blas_threads, local_rank, backend);
}

void train_backend_close(train_backend_t *backend) {
  if (backend != NULL && backend->close != NULL) backend->close(backend);
}

const char *train_backend_name(const train_backend_t *backend) { return backend->name; }

train_status_t train_tensor_alloc(train_backend_t *backend, size_t rows, size_t cols,
                                  train_tensor_t *tensor) {
  void *ptr = NULL;
  size_t n = rows * cols;
  if (cols != 0 && n / cols != rows)
    return train_error(TRAIN_ERR_INVALID, "tensor of %zu x %zu overflows", rows, cols);
  train_status_t st = backend->alloc(backend, (n ? n : 1) * sizeof(float), &ptr);
  if (st != TRAIN_OK) return st;
  *tensor = (train_tensor_t){.data = ptr, .rows = rows, .cols = cols, .device = backend->device};
  return TRAIN_OK;
}

void train_tensor_free(train_backend_t *backend, train_tensor_t *tensor) {
  if (tensor->data != NULL) backend->release(backend, tensor->data);
  tensor->data = NULL;
}

train_status_t backend_upload(train_backend_t *be, void *dst, const void *host, size_t bytes) {
  if (bytes == 0 || dst == host) return TRAIN_OK;
  return be->upload(be, dst, host, bytes);
}

train_status_t backend_download(train_backend_t *be, void *host, const void *src, size_t bytes) {
  if (bytes == 0 || host == src) return TRAIN_OK;
  return be->download(be, host, src, bytes);
}
