/* The collectives and point-to-point calls of the NCCL API: arguments checked and mapped
 * here, then run through libcoll's stream-ordered calls (device buffers queue on the
 * stream; host buffers wait for the stream and run before returning) or recorded by the
 * thread's group. */
#include "nccl_internal.h"

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

ncclResult_t nccl_run_call(const nccl_call_t *p) {
  if (p->kind == NCCL_CALL_INIT) return nccl_init_now(p->comm);
  if (p->premul_scalar == NULL) {
    coll_status_t st = issue(p, p->op);
    return st == COLL_OK ? ncclSuccess : nccl_fail_coll(p->comm, st);
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
  return r;
}

/* Check the communicator, the type and (for reductions) the operator, fill the call. */
static ncclResult_t prepare(nccl_call_t *call, ncclComm_t comm, ncclDataType_t datatype,
                            const ncclRedOp_t *op, const char *what) {
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  call->comm = comm;
  if ((r = nccl_dtype(comm, datatype, &call->dtype, what)) != ncclSuccess) return r;
  if (op != NULL) r = nccl_op(comm, *op, datatype, &call->op, &call->premul_scalar, what);
  return r;
}

NCCL_EXPORT(ncclResult_t, ncclAllReduce,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_ALL_REDUCE,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, &op, "ncclAllReduce");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclBroadcast,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_BROADCAST,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclBroadcast");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclBcast,
            (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
             cudaStream_t stream)) {
  return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

NCCL_EXPORT(ncclResult_t, ncclReduce,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_REDUCE,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, &op, "ncclReduce");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclAllGather,
            (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_ALL_GATHER,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = sendcount,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclAllGather");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclReduceScatter,
            (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_REDUCE_SCATTER,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = recvcount,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, &op, "ncclReduceScatter");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclAlltoAll,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_ALL_TO_ALL,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclAlltoAll");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclGather,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_GATHER,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclGather");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclScatter,
            (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  nccl_call_t call = {.kind = NCCL_CALL_SCATTER,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclScatter");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclSend,
            (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
             cudaStream_t stream)) {
  nccl_call_t call = {
      .kind = NCCL_CALL_SEND, .sendbuf = sendbuff, .count = count, .root = peer, .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclSend");
  return r != ncclSuccess ? r : nccl_submit(&call);
}

NCCL_EXPORT(ncclResult_t, ncclRecv,
            (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
             cudaStream_t stream)) {
  nccl_call_t call = {
      .kind = NCCL_CALL_RECV, .recvbuf = recvbuff, .count = count, .root = peer, .stream = stream};
  ncclResult_t r = prepare(&call, comm, datatype, NULL, "ncclRecv");
  return r != ncclSuccess ? r : nccl_submit(&call);
}
