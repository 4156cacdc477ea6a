// ProcessGroupColl's all-to-all: all_to_all_single (even splits as coll_all_to_all, split
// sizes as coll_all_to_allv) and the list form (coll_all_to_allv over packed bytes).
#include <c10/util/Exception.h>

#include <numeric>

#include "dtype_map.hpp"
#include "process_group_coll.hpp"
#include "tensor_args.hpp"

namespace torch_coll {

namespace {

// Checks split sizes against dim 0 the way c10d does for gloo; empty means even.
void check_splits(int rank, int size, const char *call, const std::vector<int64_t> &splits,
                  const at::Tensor &t, const char *what) {
  TORCH_COLL_CHECK(t.dim() >= 1, rank, call, "the ", what, " tensor needs at least one dimension");
  if (splits.empty()) {
    TORCH_COLL_CHECK(t.size(0) % size == 0, rank, call, "the ", what, " tensor's dim 0 (",
                     t.size(0), ") does not divide equally across group size ", size);
    return;
  }
  TORCH_COLL_CHECK(splits.size() == static_cast<size_t>(size), rank, call, "has ", splits.size(),
                   " ", what, " split sizes, expected ", size, " (the group size)");
  int64_t total = 0;
  for (int64_t s : splits) {
    TORCH_COLL_CHECK(s >= 0, rank, call, "negative ", what, " split size ", s);
    total += s;
  }
  TORCH_COLL_CHECK(total == t.size(0), rank, call, what, " split sizes add up to ", total,
                   ", but dim 0 is ", t.size(0));
}

// Byte counts and displacements of each rank's block of dim-0 rows.
void split_bytes(const std::vector<int64_t> &splits, const at::Tensor &t, int size,
                 std::vector<size_t> *counts, std::vector<size_t> *displs) {
  const size_t row_bytes = t.size(0) == 0 ? 0 : byte_count(t) / static_cast<size_t>(t.size(0));
  counts->assign(static_cast<size_t>(size), 0);
  displs->assign(static_cast<size_t>(size), 0);
  size_t offset = 0;
  for (int p = 0; p < size; ++p) {
    int64_t rows = splits.empty() ? t.size(0) / size : splits[static_cast<size_t>(p)];
    (*counts)[static_cast<size_t>(p)] = static_cast<size_t>(rows) * row_bytes;
    (*displs)[static_cast<size_t>(p)] = offset;
    offset += (*counts)[static_cast<size_t>(p)];
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::alltoall_base(at::Tensor &output,
                                                               at::Tensor &input,
                                                               std::vector<int64_t> &output_splits,
                                                               std::vector<int64_t> &input_splits,
                                                               const c10d::AllToAllOptions &) {
  const char *call = "all_to_all_single";
  check_tensor(getRank(), call, input);
  check_tensor(getRank(), call, output);
  TORCH_COLL_CHECK(output.scalar_type() == input.scalar_type(), getRank(), call, "output dtype ",
                   output.scalar_type(), " differs from input dtype ", input.scalar_type());
  check_splits(getRank(), getSize(), call, input_splits, input, "input");
  check_splits(getRank(), getSize(), call, output_splits, output, "output");
  Staged in(input);
  Staged out(output);
  if (input_splits.empty() && output_splits.empty()) {
    TORCH_COLL_CHECK(output.numel() == input.numel(), getRank(), call, "output has ",
                     output.numel(), " elements and input ", input.numel(),
                     "; without split sizes they must be equal");
    const WireType wire = wire_type(input.scalar_type());
    const size_t block = wire.count(byte_count(input)) / static_cast<size_t>(getSize());
    StartFn start = [in, out, block, wire](coll_comm_t *comm, coll_request_t **request, int *) {
      return coll_all_to_all_async(in.data(), out.data(), block, wire.dtype, comm, request);
    };
    return enqueue(c10d::OpType::ALLTOALL_BASE, call, {output}, std::move(start),
                   [out] { out.copy_back(); });
  }
  auto counts = std::make_shared<std::vector<std::vector<size_t>>>(4);
  split_bytes(input_splits, input, getSize(), &(*counts)[0], &(*counts)[1]);
  split_bytes(output_splits, output, getSize(), &(*counts)[2], &(*counts)[3]);
  StartFn start = [in, out, counts](coll_comm_t *comm, coll_request_t **request, int *) {
    auto &c = *counts;
    return coll_all_to_allv_async(in.data(), c[0].data(), c[1].data(), out.data(), c[2].data(),
                                  c[3].data(), COLL_UINT8, comm, request);
  };
  return enqueue(c10d::OpType::ALLTOALL_BASE, call, {output}, std::move(start),
                 [out] { out.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::alltoall(std::vector<at::Tensor> &outputs,
                                                          std::vector<at::Tensor> &inputs,
                                                          const c10d::AllToAllOptions &) {
  const char *call = "all_to_all";
  const size_t size = static_cast<size_t>(getSize());
  TORCH_COLL_CHECK(inputs.size() == size && outputs.size() == size, getRank(), call, "takes ", size,
                   " input and output tensors (the group size), got ", inputs.size(), " and ",
                   outputs.size());
  for (size_t p = 0; p < size; ++p) {
    check_tensor(getRank(), call, inputs[p]);
    check_tensor(getRank(), call, outputs[p]);
    TORCH_COLL_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() &&
                         outputs[p].scalar_type() == inputs[0].scalar_type(),
                     getRank(), call, "all tensors must have dtype ", inputs[0].scalar_type());
    TORCH_COLL_CHECK(
        inputs[p].device() == inputs[0].device() && outputs[p].device() == inputs[0].device(),
        getRank(), call, "all tensors must be on ", inputs[0].device());
  }
  auto counts = std::make_shared<std::vector<std::vector<size_t>>>(4, std::vector<size_t>(size));
  size_t send_total = 0, recv_total = 0;
  for (size_t p = 0; p < size; ++p) {
    (*counts)[0][p] = byte_count(inputs[p]);
    (*counts)[1][p] = send_total;
    send_total += slot_bytes(inputs[p]);
    (*counts)[2][p] = byte_count(outputs[p]);
    (*counts)[3][p] = recv_total;
    recv_total += slot_bytes(outputs[p]);
  }
  at::Tensor send = byte_buffer(inputs[0], send_total);
  at::Tensor recv = byte_buffer(inputs[0], recv_total);
  for (size_t p = 0; p < size; ++p) typed_view(send, (*counts)[1][p], inputs[p]).copy_(inputs[p]);
  StartFn start = [send, recv, counts](coll_comm_t *comm, coll_request_t **request, int *) {
    auto &c = *counts;
    return coll_all_to_allv_async(send.data_ptr(), c[0].data(), c[1].data(), recv.data_ptr(),
                                  c[2].data(), c[3].data(), COLL_UINT8, comm, request);
  };
  std::vector<at::Tensor> outs = outputs;
  auto finish = [recv, counts, outs] {
    for (size_t p = 0; p < outs.size(); ++p)
      outs[p].copy_(typed_view(recv, (*counts)[3][p], outs[p]));
  };
  return enqueue(c10d::OpType::ALLTOALL, call, outputs, std::move(start), finish);
}

}  // namespace torch_coll
