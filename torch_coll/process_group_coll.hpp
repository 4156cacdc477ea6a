// ProcessGroupColl: the torch.distributed backend "coll" on libcoll's public API (coll.h),
// like any user of the library. Joining (on torch's store itself from 2.10, through a
// unique id in it before) and the all-reduce family are in process_group_coll.cpp; the
// gathers and scatters in gather_calls.cpp, all-to-all in all_to_all_calls.cpp, point to
// point in p2p_calls.cpp; coalescing, the *_coalesced collectives and the group's life
// (split, shrink, abort, shutdown) in group_calls.cpp; PyTorch's fault-tolerance API
// (reconfigure, abort hooks, getError, setTimeout) in fault_tolerance.cpp.
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
#include "c10d_store.hpp"
#include "comm_worker.hpp"
#include "dtype_map.hpp"
#include "group_failures.hpp"

// What the c10d base class of this torch declares (torch/version.h via backend_base.hpp):
// coalescing and the tensor-coalesced collectives from 2.1, Backend::split with a store
// and Options::clone from 2.10 (2.15 and the GPU machines' 2.11 are what is built here);
// the fault-tolerance API (reconfigure, abort hooks) where Backend.hpp says it has it.
#define TORCH_COLL_HAS_COALESCING TORCH_COLL_AT_LEAST(2, 1)
#if TORCH_VERSION_MAJOR >= 2 && defined(C10D_BACKEND_HAS_RECONFIGURE)
#define TORCH_COLL_HAS_RECONFIGURE 1
#else
#define TORCH_COLL_HAS_RECONFIGURE 0
#endif
#if TORCH_VERSION_MAJOR >= 2 && defined(C10D_BACKEND_HAS_HOOKS)
#define TORCH_COLL_HAS_ABORT_HOOKS 1
#else
#define TORCH_COLL_HAS_ABORT_HOOKS 0
#endif

namespace torch_coll {

class ProcessGroupColl : public BackendBase {
 public:
  // Collective over the group's ranks, with the timeout. From 2.10 every rank makes the
  // communicator on `store` (the group's PrefixStore) itself, which keeps libcoll's
  // rendezvous, liveness and agreement (c10d_store.hpp); before, rank 0 makes a libcoll
  // unique id and puts it in `store`, the others read it. `reconfigurable`
  // (init_process_group(enable_reconfigure=True), 2.14+): no communicator until the first
  // reconfigure(), so a late joiner may make its group without the others.
  ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                   std::chrono::milliseconds timeout, bool reconfigurable = false);
  // A group over a communicator made already (a shrink's). `parent` (may be null), the
  // worker of the group it came from, is kept until this group goes: on 1.13 the
  // communicator of rank 0's first group hosts libcoll's store, which those shrunk from it
  // meet through; from 2.10 the parent's c10d store handle (its store_keep()) is what they
  // need, and `store`, the parent's c10d store, is where a reconfigure() meets.
  ProcessGroupColl(coll_comm_t *comm, int rank, int size, std::chrono::milliseconds timeout,
                   std::shared_ptr<CommWorker> parent, c10::intrusive_ptr<c10d::Store> store = {},
                   bool reconfigurable = false);
  ~ProcessGroupColl() override;

  // Surviving a lost rank (group_calls.cpp; coll.h "Surviving a lost rank"). The ranks
  // every live rank agrees have failed (coll_comm_agree: collective over the live ranks,
  // each the same number of times). agree(): the whole answer, `flag` AND-ed over the ranks.
  coll_agreement_t agree(uint32_t flag);
  std::vector<int64_t> agree_failed();
  // A new group of this group's ranks without `exclude` (coll_comm_shrink), ranked in this
  // group's order: every survivor passes the same list and the excluded ranks do not call.
  // `revoke` (SHRINK_ABORT) makes this group's running calls fail first.
  c10::intrusive_ptr<ProcessGroupColl> shrink_to(const std::vector<int64_t> &exclude, bool revoke,
                                                 std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load());
  }

  // What torch.distributed.Backend.register_backend calls, once per group.
  static c10::intrusive_ptr<BackendBase> create(const c10::intrusive_ptr<c10d::Store> &store,
                                                int rank, int size,
                                                const std::chrono::duration<float> &timeout,
                                                bool reconfigurable = false);

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
  // abort(): the abort hooks run, then every pending and later call fails at once
  // (coll_comm_abort; a reconfigurable group revokes instead, coll_comm_revoke, so every
  // member's calls fail and all go to reconfigure()); shutdown(): the pending calls finish
  // (or fail at the group's timeout), later ones are refused.
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
#if TORCH_COLL_HAS_RECONFIGURE
  // PyTorch's fault-tolerance API (fault_tolerance.cpp). The handle names this process
  // ("coll:HOST:PID:NONCE"); reconfigure() makes a new communicator of the processes whose
  // handles are given (a list ranks them by position, a set by sorted handle), on this
  // group's c10d store under "torch_coll/reconfigure/<uuid>/", and retires the current one
  // locally (no collective step, so a member left out holds nobody).
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions &opts) override;
  // No communicator yet (enable_reconfigure, before the first reconfigure()).
  bool isInitialized() override;
  // SUCCESS, or how the current communicator's first failure is seen: a timeout, a peer
  // (dead, revoked, timed out) or anything else (COMM_ERROR). abort() is no error.
  c10d::ErrorType getError() override;
  // The deadline of later calls (coll_comm_set_timeout), and of groups split from this one.
  void setTimeout(std::chrono::milliseconds timeout) override;
#endif
#if TORCH_COLL_HAS_ABORT_HOOKS
  // Run before a call's failure reaches its waiter (the first failure of a communicator:
  // a timeout, a lost peer, a revoke) and at abort().
  bool supportsAbortHooks() const override { return true; }
  void registerAbortHook(int64_t hook_id, c10d::AbortHook hook) override;
  void unregisterAbortHook(int64_t hook_id) override;
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

  // The current worker; throws when there is none (a reconfigurable group before its first
  // reconfigure(), or after one that failed). worker_or_null() does not.
  std::shared_ptr<CommWorker> worker() const;
  std::shared_ptr<CommWorker> worker_or_null() const;
  // A worker for `comm`, reporting to failures_ under a new generation.
  std::shared_ptr<CommWorker> make_worker(coll_comm_t *comm, int rank,
                                          std::shared_ptr<void> store_keep);
  // Refuses a call on a reconfigurable group whose communicator failed, as PyTorch's own
  // reconfigurable backend does: later calls raise at once until reconfigure().
  void refuse_after_failure(const char *call);

  std::atomic<int64_t> timeout_ms_;
  c10::intrusive_ptr<c10d::Store> store_;    // the group's c10d store (from 2.10), for reconfigure
  std::atomic<bool> reconfigurable_{false};  // enable_reconfigure, or reconfigured once
  std::shared_ptr<GroupFailures> failures_ = std::make_shared<GroupFailures>();
  mutable std::mutex worker_mutex_;     // guards worker_ and parent_ (reconfigure swaps them)
  std::shared_ptr<CommWorker> worker_;  // shared with the Works that may drive it
  std::shared_ptr<CommWorker> parent_;  // the group this one was shrunk from, or null
  std::mutex reconfigure_mutex_;        // one reconfigure() at a time; guards used_uuids_
  std::vector<int64_t> used_uuids_;
  std::atomic<uint64_t> seq_{0};
  std::mutex coalescing_mutex_;
  c10::intrusive_ptr<WorkColl> coalescing_;  // between startCoalescing and endCoalescing
};

}  // namespace torch_coll
