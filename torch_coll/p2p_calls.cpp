// ProcessGroupColl's point to point: send, recv and recv from any source, matched by
// (peer, tag) through libcoll's tagged calls; the receive's Work knows who sent.
#include <c10/util/Exception.h>

#include "dtype_map.hpp"
#include "process_group_coll.hpp"
#include "tensor_args.hpp"

namespace torch_coll {

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::send(std::vector<at::Tensor> &tensors,
                                                      int dst_rank, int tag) {
  const char *call = "send";
  const at::Tensor &tensor = single_tensor(getRank(), call, tensors);
  check_peer(getRank(), getSize(), call, dst_rank);
  Staged staged(tensor);
  const WireType wire = wire_type(tensor.scalar_type());
  const size_t count = wire.count(byte_count(tensor));
  StartFn start = [staged, count, wire, dst_rank, tag](coll_comm_t *comm, coll_request_t **request,
                                                       int *) {
    return coll_send_tagged_async(staged.data(), count, wire.dtype, dst_rank, tag, comm, request);
  };
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
  StartFn start = [staged, count, wire, src_rank, tag](coll_comm_t *comm, coll_request_t **request,
                                                       int *source) {
    return coll_recv_tagged_async(staged.data(), count, wire.dtype, src_rank, tag, comm, source,
                                  request);
  };
  return enqueue(c10d::OpType::RECV, call, tensors, std::move(start),
                 [staged] { staged.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int tag) {
  const char *call = "recv (any source)";
  const at::Tensor &tensor = single_tensor(getRank(), call, tensors);
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
}

}  // namespace torch_coll
