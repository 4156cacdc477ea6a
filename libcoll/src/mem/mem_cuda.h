/* Memory operations on CUDA device buffers: where a pointer lives, stream-ordered
 * copies and reductions (kernels in cuda_reduce.cu), events, pinned and device
 * allocations, IPC handles. Without CUDA in the build, mem_cuda_none.c defines the same
 * functions: no pointer is device memory, there are no devices, the rest is unsupported.
 * Streams and events are cudaStream_t / cudaEvent_t passed as void * (no CUDA headers
 * here); a NULL stream is CUDA's legacy default stream. */
#ifndef COLL_MEM_MEM_CUDA_H
#define COLL_MEM_MEM_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "coll.h"

/* Size of an exported cudaIpcMemHandle_t. */
#define MEM_CUDA_IPC_HANDLE_BYTES 64

/* Usable devices: 0 without CUDA in the build, without a driver or without a GPU. */
int mem_cuda_device_count(void);
/* *device = the device owning ptr (device or managed memory), or -1 for host memory
 * (pageable or pinned). Never fails on a host pointer, even without a GPU. */
coll_status_t mem_cuda_ptr_device(const void *ptr, int *device);
coll_status_t mem_cuda_set_device(int device);
coll_status_t mem_cuda_get_device(int *device);
/* The device's PCI bus id ("0000:3b:00.0"): two processes with the same id share a GPU. */
coll_status_t mem_cuda_device_pci_id(int device, char *buf, size_t cap);

/* A stream that never waits for the legacy default stream (cudaStreamNonBlocking), so
 * that a caller's stream blocked on our host callback cannot stall our own work. */
coll_status_t mem_cuda_stream_create(void **stream);
void mem_cuda_stream_destroy(void *stream);
/* Wait until everything queued on stream has run; COLL_ERR_TIMEOUT after timeout_ms.
 * Polls (briefly spinning, then sleeping) instead of a blocking sync, so it can time out. */
coll_status_t mem_cuda_stream_wait(void *stream, int timeout_ms);
/* Run fn(arg) on CUDA's host-callback thread once all work queued on stream before it
 * has finished; work queued after it waits until fn returns. fn must not call CUDA. */
coll_status_t mem_cuda_stream_callback(void *stream, void (*fn)(void *), void *arg);

/* Stream-ordered operations (any direction: host, pinned, device, IPC-mapped). */
coll_status_t mem_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream);
/* dst = a OP b on device memory (AVG sums), as mem_host_reduce_fn computes it. */
coll_status_t mem_cuda_reduce_async(void *dst, const void *a, const void *b, size_t count,
                                    coll_dtype_t dtype, coll_op_t op, void *stream);
/* buf /= nranks after an AVG sum, as mem_host_finish_avg. */
coll_status_t mem_cuda_finish_avg_async(void *buf, size_t count, coll_dtype_t dtype, int nranks,
                                        void *stream);

/* Device memory on the current device (cudaMalloc: exportable with an IPC handle). */
coll_status_t mem_cuda_alloc(void **ptr, size_t bytes);
void mem_cuda_free(void *ptr);
/* Page-locked host memory (fast copies to and from the device). */
coll_status_t mem_cuda_host_alloc(void **ptr, size_t bytes);
void mem_cuda_host_free(void *ptr);

/* Events without timing (cheap to record and query). */
coll_status_t mem_cuda_event_create(void **event);
void mem_cuda_event_destroy(void *event);
coll_status_t mem_cuda_event_record(void *event, void *stream);
/* COLL_OK when the work before the record has finished, COLL_IN_PROGRESS when not yet. */
coll_status_t mem_cuda_event_query(void *event);

/* Export device memory (from mem_cuda_alloc) to another process on this host, and map
 * such an export here (with peer access enabled when it lives on another GPU). */
coll_status_t mem_cuda_ipc_export(void *dev_ptr, unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES]);
coll_status_t mem_cuda_ipc_open(const unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES],
                                void **ptr);
void mem_cuda_ipc_close(void *ptr);

#endif
