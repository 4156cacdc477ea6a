/* The entry points of all-reduce and broadcast, blocking, asynchronous and on a CUDA
 * stream: each builds its call and hands it to the common path (api_call.c). */
#include "core/comm.h"

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
  return api_run(comm, "coll_all_reduce", all_reduce_call(sendbuf, recvbuf, count, dtype, op), NULL,
                 false);
}

coll_status_t coll_all_reduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                    coll_request_t **request) {
  return api_run(comm, "coll_all_reduce_async", all_reduce_call(sendbuf, recvbuf, count, dtype, op),
                 request, true);
}

coll_status_t coll_broadcast(void *buf, size_t count, coll_dtype_t dtype, int root,
                             coll_comm_t *comm) {
  return api_run(comm, "coll_broadcast", broadcast_call(buf, count, dtype, root), NULL, false);
}

coll_status_t coll_broadcast_async(void *buf, size_t count, coll_dtype_t dtype, int root,
                                   coll_comm_t *comm, coll_request_t **request) {
  return api_run(comm, "coll_broadcast_async", broadcast_call(buf, count, dtype, root), request,
                 true);
}

coll_status_t coll_all_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                     void *cuda_stream) {
  return api_run_stream(comm, "coll_all_reduce_stream",
                        all_reduce_call(sendbuf, recvbuf, count, dtype, op), cuda_stream);
}

coll_status_t coll_broadcast_stream(void *buf, size_t count, coll_dtype_t dtype, int root,
                                    coll_comm_t *comm, void *cuda_stream) {
  return api_run_stream(comm, "coll_broadcast_stream", broadcast_call(buf, count, dtype, root),
                        cuda_stream);
}
