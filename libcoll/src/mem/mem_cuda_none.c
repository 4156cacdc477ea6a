/* mem_cuda.h in a build without CUDA: no devices, every pointer is host memory, and
 * the device operations report COLL_ERR_UNSUPPORTED (callers never reach them, since
 * nothing is ever device memory). */
#include "mem/mem_cuda.h"

#include "common/error.h"

static coll_status_t unsupported(const char *what) {
  return coll_error(COLL_ERR_UNSUPPORTED, "%s: this build of libcoll has no CUDA support", what);
}

int mem_cuda_device_count(void) { return 0; }

coll_status_t mem_cuda_ptr_device(const void *ptr, int *device) {
  (void)ptr;
  *device = -1;
  return COLL_OK;
}

coll_status_t mem_cuda_set_device(int device) {
  (void)device;
  return unsupported("cudaSetDevice");
}

coll_status_t mem_cuda_get_device(int *device) {
  *device = -1;
  return unsupported("cudaGetDevice");
}

coll_status_t mem_cuda_device_pci_id(int device, char *buf, size_t cap) {
  (void)device;
  if (cap > 0) buf[0] = '\0';
  return unsupported("device PCI id");
}

coll_status_t mem_cuda_stream_create(void **stream) {
  *stream = NULL;
  return unsupported("stream creation");
}

void mem_cuda_stream_destroy(void *stream) { (void)stream; }

coll_status_t mem_cuda_stream_wait(void *stream, int timeout_ms) {
  (void)stream;
  (void)timeout_ms;
  return unsupported("stream wait");
}

coll_status_t mem_cuda_stream_callback(void *stream, void (*fn)(void *), void *arg) {
  (void)stream;
  (void)fn;
  (void)arg;
  return unsupported("stream callback");
}

coll_status_t mem_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream) {
  (void)dst;
  (void)src;
  (void)bytes;
  (void)stream;
  return unsupported("device copy");
}

coll_status_t mem_cuda_reduce_async(void *dst, const void *a, const void *b, size_t count,
                                    coll_dtype_t dtype, coll_op_t op, void *stream) {
  (void)dst;
  (void)a;
  (void)b;
  (void)count;
  (void)dtype;
  (void)op;
  (void)stream;
  return unsupported("device reduction");
}

coll_status_t mem_cuda_finish_avg_async(void *buf, size_t count, coll_dtype_t dtype, int nranks,
                                        void *stream) {
  (void)buf;
  (void)count;
  (void)dtype;
  (void)nranks;
  (void)stream;
  return unsupported("device average");
}

coll_status_t mem_cuda_alloc(void **ptr, size_t bytes) {
  (void)bytes;
  *ptr = NULL;
  return unsupported("device allocation");
}

void mem_cuda_free(void *ptr) { (void)ptr; }

coll_status_t mem_cuda_host_alloc(void **ptr, size_t bytes) {
  (void)bytes;
  *ptr = NULL;
  return unsupported("pinned allocation");
}

void mem_cuda_host_free(void *ptr) { (void)ptr; }

coll_status_t mem_cuda_event_create(void **event) {
  *event = NULL;
  return unsupported("event creation");
}

void mem_cuda_event_destroy(void *event) { (void)event; }

coll_status_t mem_cuda_event_record(void *event, void *stream) {
  (void)event;
  (void)stream;
  return unsupported("event record");
}

coll_status_t mem_cuda_event_query(void *event) {
  (void)event;
  return unsupported("event query");
}

coll_status_t mem_cuda_ipc_export(void *dev_ptr, unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES]) {
  (void)dev_ptr;
  (void)handle;
  return unsupported("IPC export");
}

coll_status_t mem_cuda_ipc_open(const unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES],
                                void **ptr) {
  (void)handle;
  *ptr = NULL;
  return unsupported("IPC open");
}

void mem_cuda_ipc_close(void *ptr) { (void)ptr; }
