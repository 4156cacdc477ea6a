// ProcessGroupColl: the torch.distributed backend "coll" on libcoll's public API (coll.h),
// like any user of the library. Joining (the unique id through torch's store) and the
// all-reduce family are in process_group_coll.cpp; the gathers and scatters in
// gather_calls.cpp, all-to-all in all_to_all_calls.cpp, point to point in p2p_calls.cpp;
// coalescing, the *_coalesced collectives and the group's life (split, shrink, abort,
// shutdown) in group_calls.cpp.
#pragma once

#include <coll.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend_base.hpp"
#include "comm_worker.hpp"
#include "dtype_map.hpp"

// What the c10d base class of this torch declares (torch/version.h via backend_base.hpp):
// coalescing and the tensor-coalesced collectives from 2.1, Backend::split with a store
// and Options::clone from 2.10 (2.15 and the GPU machines' 2.11 are what is built here).
#define TORCH_COLL_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
#define TORCH_COLL_HAS_COALESCING TORCH_COLL_AT_LEAST(2, 1)

namespace torch_coll {

class ProcessGroupColl : public BackendBase {
 public:
  // Collective over the group's ranks: rank 0 makes a libcoll unique id and puts it in
  // `store` (the group's PrefixStore), the others read it, all join with the timeout.
  ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                   std::chrono::milliseconds timeout);
  // A group over a communicator made already (a shrink's). `parent` (may be null), the
  // worker of the group it came from, is kept until this group goes: the communicator of
  // rank 0's first group hosts libcoll's store, which those shrunk from it meet through.
  ProcessGroupColl(coll_comm_t *comm, int rank, int size, std::chrono::milliseconds timeout,
                   std::shared_ptr<CommWorker> parent);
  ~ProcessGroupColl() override;

  // Surviving a lost rank (group_calls.cpp; coll.h "Surviving a lost rank"). The ranks
  // every live rank agrees have failed (coll_comm_agree: collective over the live ranks,
  // each the same number of times).
  std::vector<int64_t> agree_failed();
  // A new group of this group's ranks without `exclude` (coll_comm_shrink), ranked in this
  // group's order: every survivor passes the same list and the excluded ranks do not call.
  // `revoke` (SHRINK_ABORT) makes this group's running calls fail first.
  c10::intrusive_ptr<ProcessGroupColl> shrink_to(const std::vector<int64_t> &exclude, bool revoke,
                                                 std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }

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

#if TORCH_VERSION_MAJOR >= 2
  // Sequence numbers: every call this group was given, in order (the same on every rank
  // of a group whose ranks make the same calls).
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  // Every Work is timed already (getDuration).
  void enableCollectivesTiming() override {}
  // abort(): every pending and later call fails at once (coll_comm_abort); shutdown():
  // the pending calls finish (or fail at the group's timeout), later ones are refused.
  void abort() override;
  void shutdown() override;
  c10::intrusive_ptr<Options> getBackendOptions() override;
#endif
#if TORCH_COLL_HAS_COALESCING
  bool supportsCoalescing() const override { return true; }
  // Between the two, every call runs as usual; endCoalescing's Work completes with them
  // all (batch_isend_irecv's one Work, the coalescing manager's).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // Each one libcoll call over the tensors packed together.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
      const c10d::ReduceScatterOptions &opts) override;
#endif
#if TORCH_COLL_AT_LEAST(2, 10)
  // split_group: the new group's members join a communicator of their own.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store> &store,
                                          const std::vector<int> &ranks,
                                          const c10::intrusive_ptr<Options> &opts) override;
#endif
#if TORCH_COLL_AT_LEAST(2, 15)
  // torch.distributed.shrink_group: shrink_to, SHRINK_ABORT (1) revoking first.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t> &ranks_to_exclude, int shrink_flags,
      const c10::intrusive_ptr<Options> &opts_override) override;
#endif

 private:
  using StartFn = std::function<coll_status_t(coll_comm_t *, coll_request_t **, int *)>;
  // Hands one call to the worker; the Work completes with `outputs`.
  c10::intrusive_ptr<WorkColl> enqueue(c10d::OpType type, const char *call,
                                       std::vector<at::Tensor> outputs, StartFn start,
                                       std::function<void()> finish, bool blocking = false,
                                       std::function<void(coll_comm_t *)> cleanup = nullptr);
  // The all-reduce (root < 0) or reduce of one contiguous buffer in place (allreduce,
  // allreduce_coalesced, reduce).
  c10::intrusive_ptr<WorkColl> reduce_buffer(c10d::OpType type, const char *call, at::Tensor buffer,
                                             const c10d::ReduceOp &op, int root,
                                             std::vector<at::Tensor> outputs,
                                             std::function<void()> finish);
  // The reduce-scatter of contiguous `input` (group size times `output`'s elements) into
  // contiguous `output` (reduce_scatter, _reduce_scatter_base, the coalesced form).
  c10::intrusive_ptr<WorkColl> reduce_scatter_buffers(c10d::OpType type, const char *call,
                                                      at::Tensor input, at::Tensor output,
                                                      const c10d::ReduceOp &op,
                                                      std::vector<at::Tensor> outputs,
                                                      std::function<void()> finish);
  // The libcoll op of `plan` for one call: a PREMUL_SUM's is made when the call starts
  // (coll_op_create_premul_sum) and destroyed when it ended (the cleanup this sets).
  using ReduceStart = std::function<coll_status_t(coll_comm_t *, coll_op_t, coll_request_t **)>;
  c10::intrusive_ptr<WorkColl> enqueue_reduction(c10d::OpType type, const char *call,
                                                 const ReducePlan &plan, ReduceStart start,
                                                 std::vector<at::Tensor> outputs,
                                                 std::function<void()> finish);

  std::chrono::milliseconds timeout_;
  std::shared_ptr<CommWorker> worker_;  // shared with the Works that may drive it
  std::shared_ptr<CommWorker> parent_;  // the group this one was shrunk from, or null
  std::atomic<uint64_t> seq_{0};
  std::mutex coalescing_mutex_;
  c10::intrusive_ptr<WorkColl> coalescing_;  // between startCoalescing and endCoalescing
};

}  // namespace torch_coll
