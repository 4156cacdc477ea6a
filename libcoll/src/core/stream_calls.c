/* Stream-ordered calls (coll_*_stream on device buffers): the call is queued at once; a
 * host callback enqueued on the caller's stream opens the call's gate when the stream
 * reaches it (the CUDA path waits for the gate before it runs) and holds the stream
 * until the collective has completed, so work queued later waits for it (the NCCL
 * contract). COLL_CUDA_STREAM_MODE=sync instead waits for the stream and runs the call
 * before returning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "core/comm.h"
#include "mem/mem_cuda.h"

enum { HOLD_GRACE_MS = 5000 };

/* One stream call, shared by the host callback and the executor. */
typedef struct {
  atomic_int gate; /* 0: stream not there yet, 1: reached, -1: cancelled */
  coll_comm_t *comm;
  coll_request_t *req;
} stream_op_t;

/* CUDA's host-callback thread: the stream has reached the call. Open the gate, then hold
 * the stream until the collective completes (bounded, so a stuck peer cannot wedge the
 * stream forever: the communicator then reports the failure). No CUDA calls here. */
static void stream_reached(void *arg) {
  stream_op_t *op = arg;
  coll_comm_t *comm = op->comm;
  atomic_store_explicit(&op->gate, 1, memory_order_release);
  int64_t limit = coll_now_ns() + ((int64_t)comm->base.timeout_ms + HOLD_GRACE_MS) * 1000000LL;
  if (!progress_wait_done(comm, op->req, limit))
    return; /* the executor still owns both: leak them rather than race */
  free(op->req);
  free(op);
}

coll_status_t stream_call_submit(coll_comm_t *comm, prepared_call_t *pc) {
  const char *mode = coll_env_str("COLL_CUDA_STREAM_MODE");
  if (mode != NULL && strcmp(mode, "sync") == 0) {
    coll_status_t st = mem_cuda_stream_wait(pc->where.stream, comm->base.timeout_ms);
    return st == COLL_OK ? progress_run_blocking(comm, pc) : st;
  }
  if (mode != NULL && strcmp(mode, "hostfn") != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "COLL_CUDA_STREAM_MODE='%s': use hostfn or sync",
                      mode);
  stream_op_t *op = calloc(1, sizeof *op);
  if (op == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a stream call");
  atomic_init(&op->gate, 0);
  op->comm = comm;
  pc->where.gate = &op->gate;
  coll_status_t st = progress_submit(comm, pc, false, &op->req);
  if (st != COLL_OK) {
    free(op);
    return st;
  }
  st = mem_cuda_stream_callback(pc->where.stream, stream_reached, op);
  if (st != COLL_OK) {
    /* Cancel: the executor fails the call at its gate; then nobody else holds op. */
    char message[BASE_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s", coll_last_error());
    atomic_store_explicit(&op->gate, -1, memory_order_release);
    coll_request_wait(&op->req);
    free(op);
    return coll_error(st, "%s", message);
  }
  return COLL_OK;
}
