/* The CUDA path: collectives on device buffers (cuda_path.c). It finds where a call's
 * buffers live, connects cuda_ipc at the first device call, and runs the call through
 * the schedule executor over its own device links, or staged through pinned host
 * memory over the host links it is given. Built with or without CUDA (mem_cuda.h has
 * stubs). */
#ifndef COLL_CUDA_CUDA_PATH_H
#define COLL_CUDA_CUDA_PATH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "base/call.h"
#include "exec/exec.h"

typedef struct cuda_path cuda_path_t;

/* Where a call's buffers live (cuda_classify) and, for a stream call, the caller's
 * stream and the gate its host callback opens (core/stream_calls.c). */
typedef struct {
  bool on_device; /* sendbuf and recvbuf are CUDA memory on `device` */
  int device;
  void *stream;     /* stream calls: the caller's cudaStream_t */
  atomic_int *gate; /* stream calls: > 0 once the stream has reached the call */
} cuda_where_t;

/* *slot is the communicator's state: made by cuda_probe at init, or on first use. */
/* Find where call's buffers live (where->on_device, where->device; no stream or gate);
 * a host/device mix is an argument error. Caller's thread. */
coll_status_t cuda_classify(cuda_path_t **slot, const coll_base_t *base, const char *what,
                            const coll_call_t *call, cuda_where_t *where);
/* COLL_ERR_UNSUPPORTED when buf is device memory (point-to-point calls). */
coll_status_t cuda_refuse_device(cuda_path_t **slot, const char *what, const void *buf);
/* Make the state and count the devices now (at init): afterwards cuda_refuse_device only
 * reads it, so tagged point-to-point calls may run on another thread than a collective. */
coll_status_t cuda_probe(cuda_path_t **slot);
/* Before a device call is queued (caller's thread): stream, transport path, cuda_ipc
 * connections at the first device call. */
coll_status_t cuda_prepare(cuda_path_t *x, const coll_base_t *base, const cuda_where_t *where);
/* Run a prepared device call (nranks >= 1): a stream call waits for its gate first;
 * host_links carry the staged form. A collective's fingerprint was started by the
 * caller. */
coll_status_t cuda_run(cuda_path_t *x, exec_t *exec, exec_links_t *host_links,
                       const coll_call_t *call, const cuda_where_t *where);
/* Plain calls on device buffers: wait for the legacy default stream first. */
coll_status_t cuda_wait_default_stream(const coll_base_t *base);
/* How device calls move data, for logs: "cuda_ipc", "pinned staging", "device copy". */
const char *cuda_path_name(const cuda_path_t *x, int nranks);
void cuda_free(cuda_path_t **slot);
/* GPU memory the path holds for its schedules (scratch, premul input); 0 for NULL. */
size_t cuda_path_device_bytes(const cuda_path_t *x);

#endif
