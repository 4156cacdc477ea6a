/* The public collectives: argument checks, algorithm choice (forced or cost model,
 * identical on every rank), then the executor, blocking or through a request. */
#include <stdint.h>

#include "common/error.h"
#include "common/log.h"
#include "core/comm.h"
#include "core/window.h"
#include "mem/mem_cuda.h"

/* Checks shared by every collective; on success *call is ready for the executor. */
static coll_status_t prepare(coll_comm_t *comm, const char *what, exec_call_t *call) {
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  st = comm_check_usable(comm, what);
  if (st != COLL_OK) return st;
  size_t esz = coll_dtype_size(call->dtype);
  if (esz == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", what, (int)call->dtype);
  if (call->kind == COLL_KIND_ALL_REDUCE && coll_op_name(call->op) == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: unknown op %d", what, (int)call->op);
  if (call->kind == COLL_KIND_BROADCAST && (call->root < 0 || call->root >= comm->nranks))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: root %d is outside [0, %d)", what, call->root,
                      comm->nranks);
  if (call->count > 0) {
    if (call->sendbuf == NULL || call->recvbuf == NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: %s is NULL with count %zu", what,
                        call->sendbuf == NULL ? "sendbuf" : "recvbuf", call->count);
    if (call->count > (SIZE_MAX / 2) / esz)
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: count %zu of %s overflows the size", what,
                        call->count, coll_dtype_name(call->dtype));
    uintptr_t s = (uintptr_t)call->sendbuf, r = (uintptr_t)call->recvbuf;
    size_t bytes = call->count * esz;
    if (s != r && s < r + bytes && r < s + bytes)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf and recvbuf overlap partially (in-place calls pass the "
                        "same pointer twice)",
                        what);
  }
  st = exec_cuda_classify(comm, what, call);
  if (st == COLL_OK && call->on_device) st = exec_cuda_prepare(comm, call);
  if (st != COLL_OK) return st;
  if (comm->algo_check_pending) {
    st = rdv_check_algo(comm);
    if (st != COLL_OK) return st;
    comm->algo_check_pending = false;
  }
  call->algo = comm->algo;
  /* The arena serves host all-reduces of a communicator that has one (all ranks on one
   * host over shm, arena.h): forced elsewhere, the cost model chooses instead. The facts
   * are the same on every rank, so is the choice. */
  bool arena_ok = comm->arena != NULL && call->kind == COLL_KIND_ALL_REDUCE && !call->on_device;
  if (call->algo == COLL_ALGO_ARENA && !arena_ok) {
    if (call->kind == COLL_KIND_ALL_REDUCE)
      coll_log(COLL_LOG_INFO,
               "%s: algo arena is forced but cannot run here (%s); the cost model chooses",
               what,
               call->on_device      ? "device buffers"
               : comm->nranks == 1 ? "one rank"
                                    : "ranks on several hosts, or a transport other than shm");
    call->algo = COLL_ALGO_AUTO;
  }
  if (call->algo == COLL_ALGO_AUTO) {
    sched_params_t p = {.collective = call->kind,
                        .count = call->count,
                        .dtype = call->dtype,
                        .rank = comm->rank,
                        .nranks = comm->nranks,
                        .root = call->root,
                        .segment_bytes = comm->segment_bytes};
    call->algo =
        comm->nranks > 1 && call->count > 0 ? algo_select(&p, &comm->cost) : COLL_ALGO_RING;
    if (arena_ok && call->count > 0 && algo_arena_preferred(&p, &comm->cost))
      call->algo = COLL_ALGO_ARENA;
  }
  /* Buffers in shared windows (coll_mem_alloc): the zero-copy all-reduce, unless
   * another algorithm is forced. */
  if (arena_ok && call->count > 0 && (comm->algo == COLL_ALGO_AUTO || comm->algo == COLL_ALGO_ARENA))
    window_prepare_call(comm, call);
  if (COLL_LOG_ENABLED(COLL_LOG_INFO)) api_log_choice(comm, what, call);
  return COLL_OK;
}

static coll_status_t run_blocking(coll_comm_t *comm, const char *what, exec_call_t *call) {
  coll_status_t st = prepare(comm, what, call);
  if (st != COLL_OK) return st;
  if (comm->group_depth > 0) return api_submit(comm, what, call, NULL); /* recorded */
  /* Device buffers of a plain call: what the legacy default stream holds comes first. */
  if (call->on_device) st = exec_cuda_wait_default_stream(comm);
  if (st == COLL_OK) st = progress_run_blocking(comm, call);
  if (st == COLL_OK) coll_error_clear();
  return st;
}

static coll_status_t run_async(coll_comm_t *comm, const char *what, exec_call_t *call,
                               coll_request_t **request) {
  if (request == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: request is NULL", what);
  *request = NULL;
  coll_status_t st = prepare(comm, what, call);
  if (st != COLL_OK) return st;
  if (comm->group_depth > 0) return api_submit(comm, what, call, request); /* refused */
  if (call->on_device) st = exec_cuda_wait_default_stream(comm);
  if (st == COLL_OK) st = progress_submit(comm, call, request);
  if (st == COLL_OK) coll_error_clear();
  return st;
}

static exec_call_t all_reduce_call(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_dtype_t dtype, coll_op_t op) {
  return (exec_call_t){.kind = COLL_KIND_ALL_REDUCE,
                       .sendbuf = sendbuf,
                       .recvbuf = recvbuf,
                       .count = count,
                       .dtype = dtype,
                       .op = op};
}

static exec_call_t broadcast_call(void *buf, size_t count, coll_dtype_t dtype, int root) {
  return (exec_call_t){.kind = COLL_KIND_BROADCAST,
                       .sendbuf = buf,
                       .recvbuf = buf,
                       .count = count,
                       .dtype = dtype,
                       .op = COLL_SUM,
                       .root = root};
}

coll_status_t coll_all_reduce(const void *sendbuf, void *recvbuf, size_t count, coll_dtype_t dtype,
                              coll_op_t op, coll_comm_t *comm) {
  exec_call_t call = all_reduce_call(sendbuf, recvbuf, count, dtype, op);
  return run_blocking(comm, "coll_all_reduce", &call);
}

coll_status_t coll_all_reduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                    coll_request_t **request) {
  exec_call_t call = all_reduce_call(sendbuf, recvbuf, count, dtype, op);
  return run_async(comm, "coll_all_reduce_async", &call, request);
}

coll_status_t coll_broadcast(void *buf, size_t count, coll_dtype_t dtype, int root,
                             coll_comm_t *comm) {
  exec_call_t call = broadcast_call(buf, count, dtype, root);
  return run_blocking(comm, "coll_broadcast", &call);
}

coll_status_t coll_broadcast_async(void *buf, size_t count, coll_dtype_t dtype, int root,
                                   coll_comm_t *comm, coll_request_t **request) {
  exec_call_t call = broadcast_call(buf, count, dtype, root);
  return run_async(comm, "coll_broadcast_async", &call, request);
}

/* Stream calls: device buffers are queued on the stream (exec_cuda.c); host buffers wait
 * for the stream, then run like the blocking call. */
static coll_status_t run_stream(coll_comm_t *comm, const char *what, exec_call_t *call,
                                void *stream) {
  coll_status_t st = prepare(comm, what, call);
  if (st != COLL_OK) return st;
  if (call->on_device) {
    call->stream = stream;
    st = exec_cuda_submit_stream(comm, call);
  } else {
    if (stream != NULL) st = mem_cuda_stream_wait(stream, comm->timeout_ms);
    if (st == COLL_OK) st = progress_run_blocking(comm, call);
  }
  if (st == COLL_OK) coll_error_clear();
  return st;
}

coll_status_t coll_all_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                     void *cuda_stream) {
  exec_call_t call = all_reduce_call(sendbuf, recvbuf, count, dtype, op);
  return run_stream(comm, "coll_all_reduce_stream", &call, cuda_stream);
}

coll_status_t coll_broadcast_stream(void *buf, size_t count, coll_dtype_t dtype, int root,
                                    coll_comm_t *comm, void *cuda_stream) {
  exec_call_t call = broadcast_call(buf, count, dtype, root);
  return run_stream(comm, "coll_broadcast_stream", &call, cuda_stream);
}
