/* The entry points of every collective (all_reduce, broadcast, reduce, all_gather,
 * reduce_scatter, all_to_all, gather, scatter, barrier), blocking, asynchronous and on a
 * CUDA stream: each builds its call and hands it to the common path (prepare.c).
 * all_to_allv, which copies its counts first, is in all_to_allv.c. */
#include <stdint.h>

#include "api/api.h"
#include "common/test_hook.h"

static coll_call_t make(coll_kind_t kind, const void *s, void *r, size_t count, coll_dtype_t dt,
                        coll_op_t op, int root) {
  return (coll_call_t){.kind = kind,
                       .sendbuf = s,
                       .recvbuf = r,
                       .count = count,
                       .dtype = dt,
                       .op = op,
                       .root = root};
}

static coll_call_t all_reduce_call(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_dtype_t dtype, coll_op_t op) {
  return make(COLL_KIND_ALL_REDUCE, sendbuf, recvbuf, count, dtype, op, 0);
}

/* In place by definition: one buffer is both INPUT and OUTPUT. */
static coll_call_t broadcast_call(void *buf, size_t count, coll_dtype_t dtype, int root) {
  return make(COLL_KIND_BROADCAST, buf, buf, count, dtype, COLL_SUM, root);
}

coll_status_t coll_all_reduce(const void *sendbuf, void *recvbuf, size_t count, coll_dtype_t dtype,
                              coll_op_t op, coll_comm_t *comm) {
  coll_test_hook("all_reduce");
  return api_run(comm, "coll_all_reduce", all_reduce_call(sendbuf, recvbuf, count, dtype, op), NULL,
                 false);
}

coll_status_t coll_all_reduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                    coll_request_t **request) {
  coll_test_hook("all_reduce");
  return api_run(comm, "coll_all_reduce_async", all_reduce_call(sendbuf, recvbuf, count, dtype, op),
                 request, true);
}

coll_status_t coll_broadcast(void *buf, size_t count, coll_dtype_t dtype, int root,
                             coll_comm_t *comm) {
  coll_test_hook("broadcast");
  return api_run(comm, "coll_broadcast", broadcast_call(buf, count, dtype, root), NULL, false);
}

coll_status_t coll_broadcast_async(void *buf, size_t count, coll_dtype_t dtype, int root,
                                   coll_comm_t *comm, coll_request_t **request) {
  coll_test_hook("broadcast");
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

coll_status_t coll_reduce(const void *sendbuf, void *recvbuf, size_t count, coll_dtype_t dtype,
                          coll_op_t op, int root, coll_comm_t *comm) {
  return api_run(comm, "coll_reduce",
                 make(COLL_KIND_REDUCE, sendbuf, recvbuf, count, dtype, op, root), NULL, false);
}

coll_status_t coll_reduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                coll_dtype_t dtype, coll_op_t op, int root, coll_comm_t *comm,
                                coll_request_t **request) {
  return api_run(comm, "coll_reduce_async",
                 make(COLL_KIND_REDUCE, sendbuf, recvbuf, count, dtype, op, root), request, true);
}

coll_status_t coll_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                              coll_dtype_t dtype, coll_comm_t *comm) {
  coll_test_hook("all_gather");
  return api_run(comm, "coll_all_gather",
                 make(COLL_KIND_ALL_GATHER, sendbuf, recvbuf, sendcount, dtype, COLL_SUM, 0), NULL,
                 false);
}

coll_status_t coll_all_gather_async(const void *sendbuf, void *recvbuf, size_t sendcount,
                                    coll_dtype_t dtype, coll_comm_t *comm,
                                    coll_request_t **request) {
  coll_test_hook("all_gather");
  return api_run(comm, "coll_all_gather_async",
                 make(COLL_KIND_ALL_GATHER, sendbuf, recvbuf, sendcount, dtype, COLL_SUM, 0),
                 request, true);
}

coll_status_t coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm) {
  coll_test_hook("reduce_scatter");
  return api_run(comm, "coll_reduce_scatter",
                 make(COLL_KIND_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0), NULL,
                 false);
}

coll_status_t coll_reduce_scatter_async(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                        coll_request_t **request) {
  coll_test_hook("reduce_scatter");
  return api_run(comm, "coll_reduce_scatter_async",
                 make(COLL_KIND_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0), request,
                 true);
}

coll_status_t coll_all_to_all(const void *sendbuf, void *recvbuf, size_t count, coll_dtype_t dtype,
                              coll_comm_t *comm) {
  return api_run(comm, "coll_all_to_all",
                 make(COLL_KIND_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, COLL_SUM, 0), NULL,
                 false);
}

coll_status_t coll_all_to_all_async(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_dtype_t dtype, coll_comm_t *comm,
                                    coll_request_t **request) {
  return api_run(comm, "coll_all_to_all_async",
                 make(COLL_KIND_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, COLL_SUM, 0), request,
                 true);
}

coll_status_t coll_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                 coll_dtype_t dtype, coll_op_t op, int root, coll_comm_t *comm,
                                 void *cuda_stream) {
  return api_run_stream(comm, "coll_reduce_stream",
                        make(COLL_KIND_REDUCE, sendbuf, recvbuf, count, dtype, op, root),
                        cuda_stream);
}

coll_status_t coll_all_gather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                     coll_dtype_t dtype, coll_comm_t *comm, void *cuda_stream) {
  return api_run_stream(comm, "coll_all_gather_stream",
                        make(COLL_KIND_ALL_GATHER, sendbuf, recvbuf, sendcount, dtype, COLL_SUM, 0),
                        cuda_stream);
}

coll_status_t coll_reduce_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                         coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm,
                                         void *cuda_stream) {
  return api_run_stream(comm, "coll_reduce_scatter_stream",
                        make(COLL_KIND_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0),
                        cuda_stream);
}

coll_status_t coll_all_to_all_stream(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_dtype_t dtype, coll_comm_t *comm, void *cuda_stream) {
  return api_run_stream(comm, "coll_all_to_all_stream",
                        make(COLL_KIND_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, COLL_SUM, 0),
                        cuda_stream);
}

coll_status_t coll_gather(const void *sendbuf, void *recvbuf, size_t sendcount, coll_dtype_t dtype,
                          int root, coll_comm_t *comm) {
  return api_run(comm, "coll_gather",
                 make(COLL_KIND_GATHER, sendbuf, recvbuf, sendcount, dtype, COLL_SUM, root), NULL,
                 false);
}

coll_status_t coll_gather_async(const void *sendbuf, void *recvbuf, size_t sendcount,
                                coll_dtype_t dtype, int root, coll_comm_t *comm,
                                coll_request_t **request) {
  return api_run(comm, "coll_gather_async",
                 make(COLL_KIND_GATHER, sendbuf, recvbuf, sendcount, dtype, COLL_SUM, root),
                 request, true);
}

coll_status_t coll_gather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                 coll_dtype_t dtype, int root, coll_comm_t *comm,
                                 void *cuda_stream) {
  return api_run_stream(comm, "coll_gather_stream",
                        make(COLL_KIND_GATHER, sendbuf, recvbuf, sendcount, dtype, COLL_SUM, root),
                        cuda_stream);
}

coll_status_t coll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, coll_dtype_t dtype,
                           int root, coll_comm_t *comm) {
  return api_run(comm, "coll_scatter",
                 make(COLL_KIND_SCATTER, sendbuf, recvbuf, recvcount, dtype, COLL_SUM, root), NULL,
                 false);
}

coll_status_t coll_scatter_async(const void *sendbuf, void *recvbuf, size_t recvcount,
                                 coll_dtype_t dtype, int root, coll_comm_t *comm,
                                 coll_request_t **request) {
  return api_run(comm, "coll_scatter_async",
                 make(COLL_KIND_SCATTER, sendbuf, recvbuf, recvcount, dtype, COLL_SUM, root),
                 request, true);
}

coll_status_t coll_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  coll_dtype_t dtype, int root, coll_comm_t *comm,
                                  void *cuda_stream) {
  return api_run_stream(comm, "coll_scatter_stream",
                        make(COLL_KIND_SCATTER, sendbuf, recvbuf, recvcount, dtype, COLL_SUM, root),
                        cuda_stream);
}

/* The barrier reduces one byte held by the communicator: every rank must have sent its
 * contribution before any can finish (MAX keeps the byte 0 whatever the order). */
static coll_call_t barrier_call(coll_comm_t *comm) {
  static const uint8_t zero = 0;
  return make(COLL_KIND_BARRIER, &zero, &comm->barrier_byte, 1, COLL_UINT8, COLL_MAX, 0);
}

coll_status_t coll_barrier(coll_comm_t *comm) {
  coll_status_t st = comm_check(comm, "coll_barrier");
  if (st != COLL_OK) return st;
  return api_run(comm, "coll_barrier", barrier_call(comm), NULL, false);
}

coll_status_t coll_barrier_async(coll_comm_t *comm, coll_request_t **request) {
  coll_status_t st = comm_check(comm, "coll_barrier_async");
  if (st != COLL_OK) return st;
  return api_run(comm, "coll_barrier_async", barrier_call(comm), request, true);
}
