// ProcessGroupColl's gathers and scatters: all_gather (list, flat and coalesced), gather,
// scatter, reduce_scatter (list and flat). Data moves as bytes; reductions use dtype_map.
#include <c10/util/Exception.h>

#include "dtype_map.hpp"
#include "process_group_coll.hpp"
#include "tensor_args.hpp"

namespace torch_coll {

namespace {

// Every tensor of `list` has input's dtype, size and device; there are `expected` of them.
void check_list(int rank, const char *call, const std::vector<at::Tensor> &list,
                const at::Tensor &input, size_t expected, const char *what) {
  TORCH_COLL_CHECK(list.size() == expected, rank, call, "the ", what, " list has ", list.size(),
                   " tensors, expected ", expected, " (the group size)");
  for (const at::Tensor &t : list) check_same_shape(rank, call, t, input, what);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allgather(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &) {
  const char *call = "all_gather";
  const at::Tensor &input = single_tensor(getRank(), call, inputs);
  TORCH_COLL_CHECK(outputs.size() == 1, getRank(), call, "takes one output list (got ",
                   outputs.size(), ")");
  std::vector<at::Tensor> list = outputs[0];
  check_list(getRank(), call, list, input, static_cast<size_t>(getSize()), "output");
  Staged in(input);
  const int64_t numel = input.numel();
  at::Tensor flat = at::empty({numel * getSize()}, input.options());
  const WireType wire = wire_type(input.scalar_type());
  const size_t count = wire.count(byte_count(input));
  StartFn start = [in, flat, count, wire](coll_comm_t *comm, coll_request_t **request, int *) {
    return coll_all_gather_async(in.data(), flat.data_ptr(), count, wire.dtype, comm, request);
  };
  auto finish = [flat, list, numel] {
    for (size_t r = 0; r < list.size(); ++r)
      list[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * numel, numel).view(list[r].sizes()));
  };
  return enqueue(c10d::OpType::ALLGATHER, call, list, std::move(start), finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::_allgather_base(at::Tensor &output,
                                                                 at::Tensor &input,
                                                                 const c10d::AllgatherOptions &) {
  const char *call = "_allgather_base";
  check_tensor(getRank(), call, input);
  check_tensor(getRank(), call, output);
  TORCH_COLL_CHECK(output.scalar_type() == input.scalar_type(), getRank(), call, "output dtype ",
                   output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_COLL_CHECK(output.numel() == input.numel() * getSize(), getRank(), call, "output has ",
                   output.numel(), " elements, expected ", input.numel() * getSize(),
                   " (input size times group size)");
  Staged in(input);
  Staged out(output);
  const WireType wire = wire_type(input.scalar_type());
  const size_t count = wire.count(byte_count(input));
  StartFn start = [in, out, count, wire](coll_comm_t *comm, coll_request_t **request, int *) {
    return coll_all_gather_async(in.data(), out.data(), count, wire.dtype, comm, request);
  };
  return enqueue(c10d::OpType::_ALLGATHER_BASE, call, {output}, std::move(start),
                 [out] { out.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>> &output_lists, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &) {
  const char *call = "all_gather_coalesced";
  TORCH_COLL_CHECK(!inputs.empty(), getRank(), call, "needs at least one input tensor");
  TORCH_COLL_CHECK(output_lists.size() == static_cast<size_t>(getSize()), getRank(), call, "has ",
                   output_lists.size(), " output lists, expected ", getSize(), " (the group size)");
  for (const at::Tensor &t : inputs) {
    check_tensor(getRank(), call, t);
    TORCH_COLL_CHECK(t.device() == inputs[0].device(), getRank(), call,
                     "all tensors must be on the same device");
  }
  for (const auto &list : output_lists) {
    TORCH_COLL_CHECK(list.size() == inputs.size(), getRank(), call, "an output list has ",
                     list.size(), " tensors, expected ", inputs.size());
    for (size_t j = 0; j < list.size(); ++j)
      check_same_shape(getRank(), call, list[j], inputs[j], "output tensor");
  }
  size_t packed = 0;
  for (const at::Tensor &t : inputs) packed += slot_bytes(t);
  at::Tensor send = byte_buffer(inputs[0], packed);
  size_t offset = 0;
  for (const at::Tensor &t : inputs) {
    typed_view(send, offset, t).copy_(t);
    offset += slot_bytes(t);
  }
  at::Tensor recv = byte_buffer(inputs[0], packed * static_cast<size_t>(getSize()));
  StartFn start = [send, recv, packed](coll_comm_t *comm, coll_request_t **request, int *) {
    return coll_all_gather_async(send.data_ptr(), recv.data_ptr(), packed, COLL_UINT8, comm,
                                 request);
  };
  std::vector<std::vector<at::Tensor>> lists = output_lists;
  auto finish = [recv, lists, packed] {
    for (size_t r = 0; r < lists.size(); ++r) {
      size_t at_byte = r * packed;
      for (const at::Tensor &t : lists[r]) {
        t.copy_(typed_view(recv, at_byte, t));
        at_byte += slot_bytes(t);
      }
    }
  };
  std::vector<at::Tensor> all;
  for (const auto &list : output_lists) all.insert(all.end(), list.begin(), list.end());
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, call, all, std::move(start), finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::gather(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::GatherOptions &opts) {
  const char *call = "gather";
  check_root(getRank(), getSize(), call, opts.rootRank);
  const at::Tensor &input = single_tensor(getRank(), call, inputs);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> list;
  if (getRank() == root) {
    TORCH_COLL_CHECK(outputs.size() == 1, getRank(), call,
                     "takes one output list on the root (got ", outputs.size(), ")");
    list = outputs[0];
    check_list(getRank(), call, list, input, static_cast<size_t>(getSize()), "output");
  } else {
    TORCH_COLL_CHECK(outputs.empty(), getRank(), call,
                     "takes no output list on a non-root rank (got ", outputs.size(), ")");
  }
  Staged in(input);
  const int64_t numel = input.numel();
  at::Tensor flat;
  if (getRank() == root) flat = at::empty({numel * getSize()}, input.options());
  const WireType wire = wire_type(input.scalar_type());
  const size_t count = wire.count(byte_count(input));
  StartFn start = [in, flat, count, wire, root](coll_comm_t *comm, coll_request_t **request,
                                                int *) {
    void *recv = flat.defined() ? flat.data_ptr() : nullptr;
    return coll_gather_async(in.data(), recv, count, wire.dtype, root, comm, request);
  };
  auto finish = [flat, list, numel] {
    for (size_t r = 0; r < list.size(); ++r)
      list[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * numel, numel).view(list[r].sizes()));
  };
  return enqueue(c10d::OpType::GATHER, call, list, std::move(start), finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::scatter(
    std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ScatterOptions &opts) {
  const char *call = "scatter";
  check_root(getRank(), getSize(), call, opts.rootRank);
  const at::Tensor &output = single_tensor(getRank(), call, outputs);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> list;
  if (getRank() == root) {
    TORCH_COLL_CHECK(inputs.size() == 1, getRank(), call, "takes one input list on the root (got ",
                     inputs.size(), ")");
    list = inputs[0];
    check_list(getRank(), call, list, output, static_cast<size_t>(getSize()), "input");
  } else {
    TORCH_COLL_CHECK(inputs.empty(), getRank(), call,
                     "takes no input list on a non-root rank (got ", inputs.size(), ")");
  }
  Staged out(output);
  at::Tensor flat;
  if (getRank() == root) {
    std::vector<at::Tensor> parts;
    for (const at::Tensor &t : list) parts.push_back(t.reshape({-1}));
    flat = at::cat(parts);
  }
  const WireType wire = wire_type(output.scalar_type());
  const size_t count = wire.count(byte_count(output));
  StartFn start = [out, flat, count, wire, root](coll_comm_t *comm, coll_request_t **request,
                                                 int *) {
    const void *send = flat.defined() ? flat.data_ptr() : nullptr;
    return coll_scatter_async(send, out.data(), count, wire.dtype, root, comm, request);
  };
  return enqueue(c10d::OpType::SCATTER, call, outputs, std::move(start),
                 [out] { out.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduce_scatter(
    std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ReduceScatterOptions &opts) {
  const char *call = "reduce_scatter";
  const at::Tensor &output = single_tensor(getRank(), call, outputs);
  TORCH_COLL_CHECK(inputs.size() == 1, getRank(), call, "takes one input list (got ", inputs.size(),
                   ")");
  check_list(getRank(), call, inputs[0], output, static_cast<size_t>(getSize()), "input");
  std::vector<at::Tensor> parts;
  for (const at::Tensor &t : inputs[0]) parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(parts);
  Staged out(output);
  return reduce_scatter_buffers(c10d::OpType::REDUCE_SCATTER, call, flat, out.buffer,
                                opts.reduceOp, outputs, [out] { out.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts) {
  const char *call = "_reduce_scatter_base";
  check_tensor(getRank(), call, input);
  check_tensor(getRank(), call, output);
  TORCH_COLL_CHECK(output.scalar_type() == input.scalar_type(), getRank(), call, "output dtype ",
                   output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_COLL_CHECK(input.numel() == output.numel() * getSize(), getRank(), call, "input has ",
                   input.numel(), " elements, expected ", output.numel() * getSize(),
                   " (output size times group size)");
  Staged in(input);
  Staged out(output);
  return reduce_scatter_buffers(c10d::OpType::_REDUCE_SCATTER_BASE, call, in.buffer, out.buffer,
                                opts.reduceOp, {output}, [out] { out.copy_back(); });
}

}  // namespace torch_coll
