/* The collectives and point-to-point calls of the NCCL API, also in their nccl*Config
 * forms (2.32; per-call options read by config.c): arguments checked and mapped here,
 * then run through libcoll's stream-ordered calls (device buffers queue on the stream;
 * host buffers wait for the stream and run before returning) or recorded by the
 * thread's group. */
#include "coll_config.h"
#include "nccl_internal.h"

#if COLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static coll_status_t issue(const nccl_call_t *p, coll_op_t op) {
  coll_comm_t *c = p->comm->coll;
  void *s = (void *)p->stream;
  coll_status_t st = COLL_ERR_INTERNAL;
  switch (p->kind) {
    case NCCL_CALL_ALL_REDUCE:
      st = coll_all_reduce_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, op, c, s);
      break;
    case NCCL_CALL_BROADCAST:
      /* libcoll broadcasts in place: the root's sendbuff first goes to its recvbuff. */
      st = COLL_OK;
      if (p->root == p->comm->rank && p->sendbuf != p->recvbuf)
        st = nccl_copy_on_stream(p->recvbuf, p->sendbuf, p->count * coll_dtype_size(p->dtype), s);
      if (st == COLL_OK) st = coll_broadcast_stream(p->recvbuf, p->count, p->dtype, p->root, c, s);
      break;
    case NCCL_CALL_REDUCE:
      st = coll_reduce_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, op, p->root, c, s);
      break;
    case NCCL_CALL_ALL_GATHER:
      st = coll_all_gather_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, c, s);
      break;
    case NCCL_CALL_REDUCE_SCATTER:
      st = coll_reduce_scatter_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, op, c, s);
      break;
    case NCCL_CALL_ALL_TO_ALL:
      st = coll_all_to_all_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, c, s);
      break;
    case NCCL_CALL_GATHER:
      st = coll_gather_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, p->root, c, s);
      break;
    case NCCL_CALL_SCATTER:
      st = coll_scatter_stream(p->sendbuf, p->recvbuf, p->count, p->dtype, p->root, c, s);
      break;
    case NCCL_CALL_SEND:
      st = coll_send(p->sendbuf, p->count, p->dtype, p->root, c);
      break;
    case NCCL_CALL_RECV:
      st = coll_recv(p->recvbuf, p->count, p->dtype, p->root, c);
      break;
    case NCCL_CALL_INIT:
      break; /* nccl_run_call runs it */
  }
  return st;
}

/* A nccl*Config call's launchCompletionEvent, once the call is on its stream. */
static ncclResult_t record_launch(const nccl_call_t *p, ncclResult_t r) {
  if (r != ncclSuccess || p->launch_event == NULL) return r;
#if COLL_HAVE_CUDA
  cudaError_t e = cudaEventRecord((cudaEvent_t)p->launch_event, p->stream);
  if (e != cudaSuccess)
    return nccl_fail(p->comm, ncclUnhandledCudaError,
                     "rank %d: recording the call's launchCompletionEvent failed: %s",
                     p->comm->rank, cudaGetErrorString(e));
#endif
  return r;
}

ncclResult_t nccl_run_call(const nccl_call_t *p) {
  if (p->kind == NCCL_CALL_INIT) return nccl_init_now(p->comm);
  if (p->premul_scalar == NULL) {
    coll_status_t st = issue(p, p->op);
    return record_launch(p, st == COLL_OK ? ncclSuccess : nccl_fail_coll(p->comm, st));
  }
  /* A ncclScalarDevice premul op: its value now, as a libcoll op for this call only.
   * libcoll copies the scalar into the call when it is submitted (coll.h: calls already
   * issued keep their scalar), so the op is destroyed as soon as the call is issued;
   * the call's result is recorded first (a successful destroy clears the last error). */
  coll_op_t op;
  ncclResult_t r = nccl_premul_at_call(p, &op);
  if (r != ncclSuccess) return r;
  coll_status_t st = issue(p, op);
  r = st == COLL_OK ? ncclSuccess : nccl_fail_coll(p->comm, st);
  coll_status_t gone = coll_op_destroy(p->comm->coll, op);
  if (r == ncclSuccess && gone != COLL_OK) r = nccl_fail_coll(p->comm, gone);
  return record_launch(p, r);
}

ncclResult_t nccl_prepare_call(nccl_call_t *call, ncclComm_t comm, ncclDataType_t datatype,
                               const ncclRedOp_t *op, const char *what) {
  ncclResult_t r = nccl_check_usable(comm, what);
  if (r != ncclSuccess) return r;
  call->comm = comm;
  if ((r = nccl_dtype(comm, datatype, &call->dtype, what)) != ncclSuccess) return r;
  if (op != NULL) r = nccl_op(comm, *op, datatype, &call->op, &call->premul_scalar, what);
  return r;
}

/* Prepare, read the per-call options (config may be NULL) and run or record the call. */
static ncclResult_t submit(nccl_call_t *call, ncclComm_t comm, ncclDataType_t datatype,
                           const ncclRedOp_t *op, const ncclCollConfig_t *config,
                           const char *what) {
  ncclResult_t r = nccl_prepare_call(call, comm, datatype, op, what);
  if (r == ncclSuccess) r = nccl_read_coll_config(comm, config, &call->launch_event, what);
  return r != ncclSuccess ? r : nccl_submit(call);
}

static ncclResult_t all_reduce(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t *config,
                               const char *what) {
  nccl_call_t call = {.kind = NCCL_CALL_ALL_REDUCE,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .stream = stream};
  return submit(&call, comm, datatype, &op, config, what);
}

static ncclResult_t broadcast(const void *sendbuff, void *recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t *config,
                              const char *what) {
  nccl_call_t call = {.kind = NCCL_CALL_BROADCAST,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  return submit(&call, comm, datatype, NULL, config, what);
}

static ncclResult_t reduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                           cudaStream_t stream, const ncclCollConfig_t *config, const char *what) {
  nccl_call_t call = {.kind = NCCL_CALL_REDUCE,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  return submit(&call, comm, datatype, &op, config, what);
}

/* The collectives without an operator or root: all-gather and all-to-all. */
static ncclResult_t unrooted(nccl_call_kind_t kind, const void *sendbuff, void *recvbuff,
                             size_t count, ncclDataType_t datatype, ncclComm_t comm,
                             cudaStream_t stream, const ncclCollConfig_t *config,
                             const char *what) {
  nccl_call_t call = {
      .kind = kind, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count, .stream = stream};
  return submit(&call, comm, datatype, NULL, config, what);
}

static ncclResult_t reduce_scatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream, const ncclCollConfig_t *config,
                                   const char *what) {
  nccl_call_t call = {.kind = NCCL_CALL_REDUCE_SCATTER,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = recvcount,
                      .stream = stream};
  return submit(&call, comm, datatype, &op, config, what);
}

/* Gather and scatter (2.28's in-place rules: gather's sendbuff == recvbuff + root*count,
 * scatter's recvbuff == sendbuff + root*count, at the root; libcoll's are the same). */
static ncclResult_t rooted(nccl_call_kind_t kind, const void *sendbuff, void *recvbuff,
                           size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream, const ncclCollConfig_t *config, const char *what) {
  nccl_call_t call = {.kind = kind,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  return submit(&call, comm, datatype, NULL, config, what);
}

NCCL_EXPORT(ncclResult_t, ncclAllReduce,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream, NULL, "ncclAllReduce");
}

NCCL_EXPORT(ncclResult_t, ncclAllReduceConfig,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t *config)) {
  return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream, config,
                    "ncclAllReduceConfig");
}

NCCL_EXPORT(ncclResult_t, ncclBroadcast,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, NULL, "ncclBroadcast");
}

NCCL_EXPORT(ncclResult_t, ncclBroadcastConfig,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, config,
                   "ncclBroadcastConfig");
}

NCCL_EXPORT(ncclResult_t, ncclBcast,
            (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
             cudaStream_t stream)) {
  return broadcast(buff, buff, count, datatype, root, comm, stream, NULL, "ncclBcast");
}

NCCL_EXPORT(ncclResult_t, ncclReduce,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, NULL, "ncclReduce");
}

NCCL_EXPORT(ncclResult_t, ncclReduceConfig,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t *config)) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, config,
                "ncclReduceConfig");
}

NCCL_EXPORT(ncclResult_t, ncclAllGather,
            (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream)) {
  return unrooted(NCCL_CALL_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, comm, stream, NULL,
                  "ncclAllGather");
}

NCCL_EXPORT(ncclResult_t, ncclAllGatherConfig,
            (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)) {
  return unrooted(NCCL_CALL_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, comm, stream,
                  config, "ncclAllGatherConfig");
}

NCCL_EXPORT(ncclResult_t, ncclReduceScatter,
            (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, NULL,
                        "ncclReduceScatter");
}

NCCL_EXPORT(ncclResult_t, ncclReduceScatterConfig,
            (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t *config)) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config,
                        "ncclReduceScatterConfig");
}

NCCL_EXPORT(ncclResult_t, ncclAlltoAll,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream)) {
  return unrooted(NCCL_CALL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, comm, stream, NULL,
                  "ncclAlltoAll");
}

NCCL_EXPORT(ncclResult_t, ncclAlltoAllConfig,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)) {
  return unrooted(NCCL_CALL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, comm, stream, config,
                  "ncclAlltoAllConfig");
}

NCCL_EXPORT(ncclResult_t, ncclGather,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  return rooted(NCCL_CALL_GATHER, sendbuff, recvbuff, count, datatype, root, comm, stream, NULL,
                "ncclGather");
}

NCCL_EXPORT(ncclResult_t, ncclGatherConfig,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)) {
  return rooted(NCCL_CALL_GATHER, sendbuff, recvbuff, count, datatype, root, comm, stream, config,
                "ncclGatherConfig");
}

NCCL_EXPORT(ncclResult_t, ncclScatter,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  return rooted(NCCL_CALL_SCATTER, sendbuff, recvbuff, count, datatype, root, comm, stream, NULL,
                "ncclScatter");
}

NCCL_EXPORT(ncclResult_t, ncclScatterConfig,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)) {
  return rooted(NCCL_CALL_SCATTER, sendbuff, recvbuff, count, datatype, root, comm, stream, config,
                "ncclScatterConfig");
}

NCCL_EXPORT(ncclResult_t, ncclSend,
            (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
             cudaStream_t stream)) {
  nccl_call_t call = {
      .kind = NCCL_CALL_SEND, .sendbuf = sendbuff, .count = count, .root = peer, .stream = stream};
  return submit(&call, comm, datatype, NULL, NULL, "ncclSend");
}

NCCL_EXPORT(ncclResult_t, ncclRecv,
            (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
             cudaStream_t stream)) {
  nccl_call_t call = {
      .kind = NCCL_CALL_RECV, .recvbuf = recvbuff, .count = count, .root = peer, .stream = stream};
  return submit(&call, comm, datatype, NULL, NULL, "ncclRecv");
}
