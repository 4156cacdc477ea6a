/* CUDA runtime calls behind mem_cuda.h, each turning a CUDA error into a status with a
 * message that names the call and the CUDA error. Built only when meson found CUDA. */
#include "mem/mem_cuda.h"

#include <cuda_runtime.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "mem/cuda_reduce.h"

/* cuda_reduce.cu numbers dtypes and ops by their coll.h values. */
_Static_assert(COLL_INT8 == 0 && COLL_UINT8 == 1 && COLL_INT32 == 2 && COLL_UINT32 == 3 &&
                   COLL_INT64 == 4 && COLL_UINT64 == 5 && COLL_FLOAT16 == 6 &&
                   COLL_BFLOAT16 == 7 && COLL_FLOAT32 == 8 && COLL_FLOAT64 == 9 &&
                   COLL_FLOAT8E4M3 == 10 && COLL_FLOAT8E5M2 == 11 && COLL_DTYPE_COUNT == 12,
               "cuda_reduce.cu assumes these dtype values");
_Static_assert(COLL_SUM == 0 && COLL_PROD == 1 && COLL_MIN == 2 && COLL_MAX == 3 && COLL_AVG == 4 &&
                   COLL_BAND == 5 && COLL_BOR == 6 && COLL_BXOR == 7,
               "cuda_reduce.cu assumes these op values");
_Static_assert(sizeof(cudaIpcMemHandle_t) == MEM_CUDA_IPC_HANDLE_BYTES, "IPC handle size");

enum { SPIN_NS = 20000, SLEEP_NS = 10000 };

static coll_status_t cuda_fail(cudaError_t err, const char *call) {
  return coll_error(COLL_ERR_SYSTEM, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                    cudaGetErrorName(err));
}

int mem_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* "no driver" must not stick to later calls */
    return 0;
  }
  return n;
}

coll_status_t mem_cuda_ptr_device(const void *ptr, int *device) {
  *device = -1;
  if (ptr == NULL) return COLL_OK;
  struct cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    /* Without a driver or GPU every pointer is host memory; older runtimes also answer
     * cudaErrorInvalidValue for plain host pointers. */
    (void)cudaGetLastError();
    return COLL_OK;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)
    *device = attr.device;
  return COLL_OK;
}

coll_status_t mem_cuda_set_device(int device) {
  cudaError_t err = cudaSetDevice(device);
  return err == cudaSuccess ? COLL_OK : cuda_fail(err, "cudaSetDevice");
}

coll_status_t mem_cuda_get_device(int *device) {
  cudaError_t err = cudaGetDevice(device);
  return err == cudaSuccess ? COLL_OK : cuda_fail(err, "cudaGetDevice");
}

coll_status_t mem_cuda_device_pci_id(int device, char *buf, size_t cap) {
  cudaError_t err = cudaDeviceGetPCIBusId(buf, (int)cap, device);
  return err == cudaSuccess ? COLL_OK : cuda_fail(err, "cudaDeviceGetPCIBusId");
}

coll_status_t mem_cuda_stream_create(void **stream) {
  cudaStream_t s = NULL;
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err != cudaSuccess) return cuda_fail(err, "cudaStreamCreateWithFlags");
  *stream = s;
  return COLL_OK;
}

void mem_cuda_stream_destroy(void *stream) {
  if (stream != NULL) cudaStreamDestroy((cudaStream_t)stream);
}

coll_status_t mem_cuda_stream_wait(void *stream, int timeout_ms) {
  int64_t start = coll_now_ns();
  int64_t limit = (int64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000LL;
  for (;;) {
    cudaError_t err = cudaStreamQuery((cudaStream_t)stream);
    if (err == cudaSuccess) return COLL_OK;
    if (err != cudaErrorNotReady) return cuda_fail(err, "cudaStreamQuery");
    int64_t waited = coll_now_ns() - start;
    if (waited > limit)
      return coll_error(COLL_ERR_TIMEOUT, "CUDA stream work did not finish within %d ms",
                        timeout_ms);
    if (waited < SPIN_NS) {
      sched_yield();
    } else {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = SLEEP_NS};
      nanosleep(&ts, NULL);
    }
  }
}

coll_status_t mem_cuda_stream_callback(void *stream, void (*fn)(void *), void *arg) {
  cudaError_t err = cudaLaunchHostFunc((cudaStream_t)stream, fn, arg);
  return err == cudaSuccess ? COLL_OK : cuda_fail(err, "cudaLaunchHostFunc");
}

coll_status_t mem_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0 || dst == src) return COLL_OK;
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
  return err == cudaSuccess ? COLL_OK : cuda_fail(err, "cudaMemcpyAsync");
}

coll_status_t mem_cuda_reduce_async(void *dst, const void *a, const void *b, size_t count,
                                    coll_dtype_t dtype, coll_op_t op, void *stream) {
  int rc = cuda_reduce_launch(dst, a, b, count, (int)dtype, (int)op, stream);
  if (rc < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "device reduction: unknown dtype %d or op %d",
                      (int)dtype, (int)op);
  return rc == 0 ? COLL_OK : cuda_fail((cudaError_t)rc, "reduction kernel launch");
}

coll_status_t mem_cuda_finish_avg_async(void *buf, size_t count, coll_dtype_t dtype, int nranks,
                                        void *stream) {
  int rc = cuda_finish_avg_launch(buf, count, (int)dtype, nranks, stream);
  if (rc < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "device average: unknown dtype %d", (int)dtype);
  return rc == 0 ? COLL_OK : cuda_fail((cudaError_t)rc, "average kernel launch");
}

coll_status_t mem_cuda_alloc(void **ptr, size_t bytes) {
  cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
  if (err != cudaSuccess) {
    *ptr = NULL;
    return coll_error(COLL_ERR_NO_MEMORY, "cudaMalloc of %zu bytes failed: %s", bytes,
                      cudaGetErrorString(err));
  }
  return COLL_OK;
}

void mem_cuda_free(void *ptr) {
  if (ptr != NULL) cudaFree(ptr);
}

coll_status_t mem_cuda_host_alloc(void **ptr, size_t bytes) {
  cudaError_t err = cudaHostAlloc(ptr, bytes ? bytes : 1, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    *ptr = NULL;
    return coll_error(COLL_ERR_NO_MEMORY, "cudaHostAlloc of %zu pinned bytes failed: %s", bytes,
                      cudaGetErrorString(err));
  }
  return COLL_OK;
}

void mem_cuda_host_free(void *ptr) {
  if (ptr != NULL) cudaFreeHost(ptr);
}

coll_status_t mem_cuda_event_create(void **event) {
  cudaEvent_t ev = NULL;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err != cudaSuccess) return cuda_fail(err, "cudaEventCreateWithFlags");
  *event = ev;
  return COLL_OK;
}

void mem_cuda_event_destroy(void *event) {
  if (event != NULL) cudaEventDestroy((cudaEvent_t)event);
}

coll_status_t mem_cuda_event_record(void *event, void *stream) {
  cudaError_t err = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
  return err == cudaSuccess ? COLL_OK : cuda_fail(err, "cudaEventRecord");
}

coll_status_t mem_cuda_event_query(void *event) {
  cudaError_t err = cudaEventQuery((cudaEvent_t)event);
  if (err == cudaSuccess) return COLL_OK;
  if (err == cudaErrorNotReady) return COLL_IN_PROGRESS;
  return cuda_fail(err, "cudaEventQuery");
}

coll_status_t mem_cuda_ipc_export(void *dev_ptr, unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES]) {
  cudaIpcMemHandle_t h;
  cudaError_t err = cudaIpcGetMemHandle(&h, dev_ptr);
  if (err != cudaSuccess) return cuda_fail(err, "cudaIpcGetMemHandle");
  memcpy(handle, &h, sizeof h);
  return COLL_OK;
}

coll_status_t mem_cuda_ipc_open(const unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES],
                                void **ptr) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  cudaError_t err = cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    *ptr = NULL;
    return cuda_fail(err, "cudaIpcOpenMemHandle");
  }
  return COLL_OK;
}

void mem_cuda_ipc_close(void *ptr) {
  if (ptr != NULL) cudaIpcCloseMemHandle(ptr);
}
