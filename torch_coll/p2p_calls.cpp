// ProcessGroupColl's point to point: send, recv and recv from any source, matched by
// (peer, tag) through libcoll's tagged calls; the receive's Work knows who sent.
#include <c10/util/Exception.h>

#include "dtype_map.hpp"
#include "process_group_coll.hpp"
#include "tensor_args.hpp"
#include "torch_coll_config.h"

namespace torch_coll {

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::send(std::vector<at::Tensor> &tensors,
                                                      int dst_rank, int tag) {
  const char *call = "send";
  const at::Tensor &tensor = single_tensor(getRank(), call, tensors);
  check_peer(getRank(), getSize(), call, dst_rank);
  Staged staged(tensor);
  const WireType wire = wire_type(tensor.scalar_type());
  const size_t count = wire.count(byte_count(tensor));
#if TORCH_COLL_HAVE_TAGGED
  StartFn start = [staged, count, wire, dst_rank, tag](coll_comm_t *comm, coll_request_t **request,
                                                       int *) {
    return coll_send_tagged_async(staged.data(), count, wire.dtype, dst_rank, tag, comm, request);
  };
#else
  TORCH_COLL_CHECK(tag == 0, getRank(), call, "tag ", tag,
                   " needs coll_send_tagged, not in this libcoll");
  StartFn start = [staged, count, wire, dst_rank](coll_comm_t *comm, coll_request_t **request,
                                                  int *) {
    return coll_send_async(staged.data(), count, wire.dtype, dst_rank, comm, request);
  };
#endif
  return enqueue(c10d::OpType::SEND, call, tensors, std::move(start), nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recv(std::vector<at::Tensor> &tensors,
                                                      int src_rank, int tag) {
  const char *call = "recv";
  const at::Tensor &tensor = single_tensor(getRank(), call, tensors);
  check_peer(getRank(), getSize(), call, src_rank);
  Staged staged(tensor);
  const WireType wire = wire_type(tensor.scalar_type());
  const size_t count = wire.count(byte_count(tensor));
#if TORCH_COLL_HAVE_TAGGED
  StartFn start = [staged, count, wire, src_rank, tag](coll_comm_t *comm, coll_request_t **request,
                                                       int *source) {
    return coll_recv_tagged_async(staged.data(), count, wire.dtype, src_rank, tag, comm, source,
                                  request);
  };
#else
  TORCH_COLL_CHECK(tag == 0, getRank(), call, "tag ", tag,
                   " needs coll_recv_tagged, not in this libcoll");
  StartFn start = [staged, count, wire, src_rank](coll_comm_t *comm, coll_request_t **request,
                                                  int *source) {
    *source = src_rank;
    return coll_recv_async(staged.data(), count, wire.dtype, src_rank, comm, request);
  };
#endif
  return enqueue(c10d::OpType::RECV, call, tensors, std::move(start),
                 [staged] { staged.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int tag) {
  const char *call = "recv (any source)";
  const at::Tensor &tensor = single_tensor(getRank(), call, tensors);
#if TORCH_COLL_HAVE_TAGGED
  Staged staged(tensor);
  const WireType wire = wire_type(tensor.scalar_type());
  const size_t count = wire.count(byte_count(tensor));
  StartFn start = [staged, count, wire, tag](coll_comm_t *comm, coll_request_t **request,
                                             int *source) {
    return coll_recv_tagged_async(staged.data(), count, wire.dtype, COLL_ANY_SOURCE, tag, comm,
                                  source, request);
  };
  return enqueue(c10d::OpType::RECVANYSOURCE, call, tensors, std::move(start),
                 [staged] { staged.copy_back(); });
#else
  (void)tensor;
  (void)tag;
  TORCH_CHECK(false, "coll: rank ", getRank(),
              ": recv from any source needs coll_recv_tagged, not in this libcoll");
#endif
}

}  // namespace torch_coll
