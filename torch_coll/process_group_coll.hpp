// ProcessGroupColl: the torch.distributed backend "coll" on libcoll's public API (coll.h),
// like any user of the library. Joining (the unique id through torch's store) and the
// all-reduce family are in process_group_coll.cpp; the gathers and scatters in
// gather_calls.cpp, all-to-all in all_to_all_calls.cpp, point to point in p2p_calls.cpp.
#pragma once

#include <coll.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend_base.hpp"
#include "comm_worker.hpp"

namespace torch_coll {

class ProcessGroupColl : public BackendBase {
 public:
  // Collective over the group's ranks: rank 0 makes a libcoll unique id and puts it in
  // `store` (the group's PrefixStore), the others read it, all join with the timeout.
  ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupColl() override;

  // What torch.distributed.Backend.register_backend calls, once per group.
  static c10::intrusive_ptr<BackendBase> create(const c10::intrusive_ptr<c10d::Store> &store,
                                                int rank, int size,
                                                const std::chrono::duration<float> &timeout);

  const std::string getBackendName() const override { return "coll"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>> &output_lists, std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &output_splits,
                                               std::vector<int64_t> &input_splits,
                                               const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
  void monitoredBarrier(const c10d::BarrierOptions &opts, bool wait_all_ranks) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;

 private:
  using StartFn = std::function<coll_status_t(coll_comm_t *, coll_request_t **, int *)>;
  // Hands one call to the worker; the Work completes with `outputs`.
  c10::intrusive_ptr<WorkColl> enqueue(c10d::OpType type, const char *call,
                                       std::vector<at::Tensor> outputs, StartFn start,
                                       std::function<void()> finish, bool blocking = false,
                                       std::function<void(coll_comm_t *)> cleanup = nullptr);
  // The all-reduce of one contiguous buffer (shared by allreduce and allreduce_coalesced).
  c10::intrusive_ptr<WorkColl> reduce_buffer(c10d::OpType type, const char *call, at::Tensor buffer,
                                             const c10d::ReduceOp &op, int root,
                                             std::vector<at::Tensor> outputs,
                                             std::function<void()> finish);

  std::chrono::milliseconds timeout_;
  std::shared_ptr<CommWorker> worker_;  // shared with the Works that may drive it
};

}  // namespace torch_coll
