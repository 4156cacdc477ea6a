/* Memory calls of the NCCL API: ncclMemAlloc / ncclMemFree (cudaMalloc, or page-aligned
 * host memory where there is no GPU), buffer and window registration (recorded only:
 * libcoll needs no registration), the stream-ordered copy broadcast uses, the read of a
 * ncclScalarDevice premul scalar, and the host copies through which sends and receives
 * of device buffers go (libcoll's point-to-point calls take host memory). */
#include <stdlib.h>
#include <string.h>

#include "coll_config.h"
#include "nccl_internal.h"

#if COLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Host allocations handed out by ncclMemAlloc, so that ncclMemFree knows them. */
typedef struct host_block {
  void *ptr;
  struct host_block *next;
} host_block_t;
static host_block_t *host_blocks;
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;

#if COLL_HAVE_CUDA
static bool is_device_pointer(const void *ptr) {
  struct cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}
#endif

coll_status_t nccl_copy_on_stream(void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0) return COLL_OK;
#if COLL_HAVE_CUDA
  if (is_device_pointer(dst) || is_device_pointer(src)) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream) == cudaSuccess
               ? COLL_OK
               : COLL_ERR_SYSTEM;
  }
  if (stream != NULL && cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess)
    return COLL_ERR_SYSTEM;
#else
  (void)stream;
#endif
  memmove(dst, src, bytes);
  return COLL_OK;
}

ncclResult_t nccl_read_scalar(ncclComm_t comm, void *dst, const void *src, size_t bytes,
                              cudaStream_t stream, const char *what) {
#if COLL_HAVE_CUDA
  if (is_device_pointer(src)) {
    /* NCCL's kernel reads the scalar when it runs: here that is once the work queued
     * on the stream before this call is done. */
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return nccl_fail(comm, ncclUnhandledCudaError,
                       "rank %d: %s: reading the scalar at %p on the call's stream failed: %s",
                       comm->rank, what, src, cudaGetErrorString(e));
    }
    return ncclSuccess;
  }
#else
  (void)comm;
  (void)stream;
  (void)what;
#endif
  memcpy(dst, src, bytes); /* host memory: the value it holds when the call is issued */
  return ncclSuccess;
}

coll_status_t nccl_p2p_stage_in(const nccl_call_t *p, void **host) {
  *host = NULL;
#if COLL_HAVE_CUDA
  const void *user = p->kind == NCCL_CALL_SEND ? p->sendbuf : p->recvbuf;
  size_t bytes = p->count * coll_dtype_size(p->dtype);
  if (bytes == 0 || !is_device_pointer(user)) return COLL_OK;
  if ((*host = malloc(bytes)) == NULL) return COLL_ERR_NO_MEMORY;
  /* A send's data is ready once the stream's earlier work is done. */
  if (p->kind == NCCL_CALL_SEND &&
      (cudaStreamSynchronize((cudaStream_t)p->stream) != cudaSuccess ||
       cudaMemcpy(*host, user, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)) {
    free(*host);
    *host = NULL;
    (void)cudaGetLastError();
    return COLL_ERR_SYSTEM;
  }
#else
  (void)p;
#endif
  return COLL_OK;
}

coll_status_t nccl_p2p_stage_out(const nccl_call_t *p, void *host, bool ok) {
  if (host == NULL) return COLL_OK;
  coll_status_t st = COLL_OK;
#if COLL_HAVE_CUDA
  if (ok && p->kind == NCCL_CALL_RECV &&
      cudaMemcpy(p->recvbuf, host, p->count * coll_dtype_size(p->dtype), cudaMemcpyHostToDevice) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    st = COLL_ERR_SYSTEM;
  }
#else
  (void)p;
  (void)ok;
#endif
  free(host);
  return st;
}

NCCL_EXPORT(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size)) {
  if (ptr == NULL) return nccl_fail(NULL, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) return ncclSuccess;
#if COLL_HAVE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    if (cudaMalloc(ptr, size) == cudaSuccess) return ncclSuccess;
    *ptr = NULL;
    (void)cudaGetLastError();
    return nccl_fail(NULL, ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc of %zu bytes failed",
                     size);
  }
  (void)cudaGetLastError();
#endif
  /* No GPU: host memory (this library's extension; every call accepts host buffers). */
  host_block_t *b = malloc(sizeof *b);
  void *mem = NULL;
  if (b == NULL || posix_memalign(&mem, 4096, size) != 0) {
    free(b);
    return nccl_fail(NULL, ncclSystemError, "ncclMemAlloc: out of host memory for %zu bytes", size);
  }
  memset(mem, 0, size);
  pthread_mutex_lock(&host_lock);
  *b = (host_block_t){.ptr = mem, .next = host_blocks};
  host_blocks = b;
  pthread_mutex_unlock(&host_lock);
  *ptr = mem;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclMemFree, (void *ptr)) {
  if (ptr == NULL) return ncclSuccess;
  pthread_mutex_lock(&host_lock);
  for (host_block_t **p = &host_blocks; *p != NULL; p = &(*p)->next) {
    if ((*p)->ptr == ptr) {
      host_block_t *b = *p;
      *p = b->next;
      pthread_mutex_unlock(&host_lock);
      free(b->ptr);
      free(b);
      return ncclSuccess;
    }
  }
  pthread_mutex_unlock(&host_lock);
#if COLL_HAVE_CUDA
  if (cudaFree(ptr) == cudaSuccess) return ncclSuccess;
  (void)cudaGetLastError();
#endif
  return nccl_fail(NULL, ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc",
                   ptr);
}

/* A registration only records what was registered: libcoll reads any buffer. */
enum { REGISTRATION_MAGIC = 0x72656767 };
typedef struct {
  unsigned magic;
  ncclComm_t comm;
  void *buff;
  size_t size;
} registration_t;

static ncclResult_t record(ncclComm_t comm, void *buff, size_t size, void **handle,
                           const char *what) {
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (handle == NULL) return nccl_fail(comm, ncclInvalidArgument, "%s: handle is NULL", what);
  registration_t *reg = malloc(sizeof *reg);
  if (reg == NULL) return nccl_fail(comm, ncclSystemError, "%s: out of memory", what);
  *reg = (registration_t){.magic = REGISTRATION_MAGIC, .comm = comm, .buff = buff, .size = size};
  *handle = reg;
  return ncclSuccess;
}

static ncclResult_t forget(ncclComm_t comm, void *handle, const char *what) {
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  registration_t *reg = handle;
  if (reg == NULL || reg->magic != REGISTRATION_MAGIC || reg->comm != comm)
    return nccl_fail(comm, ncclInvalidArgument,
                     "%s: handle was not registered on this communicator", what);
  reg->magic = 0;
  free(reg);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommRegister,
            (const ncclComm_t comm, void *buff, size_t size, void **handle)) {
  return record(comm, buff, size, handle, "ncclCommRegister");
}

NCCL_EXPORT(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle)) {
  return forget(comm, handle, "ncclCommDeregister");
}

NCCL_EXPORT(ncclResult_t, ncclCommWindowRegister,
            (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)) {
  (void)winFlags;
  void *handle = NULL;
  ncclResult_t r = record(comm, buff, size, win == NULL ? NULL : &handle, "ncclCommWindowRegister");
  if (r == ncclSuccess) *win = handle;
  return r;
}

NCCL_EXPORT(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win)) {
  return forget(comm, win, "ncclCommWindowDeregister");
}

void *nccl_window_user_ptr(ncclComm_t comm, ncclWindow_t win) {
  const registration_t *reg = (const registration_t *)(void *)win;
  if (reg == NULL || reg->magic != REGISTRATION_MAGIC || reg->comm != comm) return NULL;
  return reg->buff;
}

NCCL_EXPORT(ncclResult_t, ncclWinGetUserPtr,
            (ncclComm_t comm, ncclWindow_t win, void **outUserPtr)) {
  const char *what = "ncclWinGetUserPtr";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (outUserPtr == NULL)
    return nccl_fail(comm, ncclInvalidArgument, "%s: outUserPtr is NULL", what);
  void *ptr = nccl_window_user_ptr(comm, win);
  if (ptr == NULL)
    return nccl_fail(comm, ncclInvalidArgument,
                     "%s: win was not registered on this communicator (ncclCommWindowRegister)",
                     what);
  *outUserPtr = ptr;
  return ncclSuccess;
}
