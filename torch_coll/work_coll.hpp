// The Work a "coll" call returns: completed (with its output tensors or an error) by the
// process group's worker thread, or by the thread that waits for it; is_completed() and
// exception() come from c10d::Work, wait() (which first drives the group's calls itself),
// the future (what DDP reads) and the source rank of a receive from any source from here.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace torch_coll {

class CommWorker;

class WorkColl : public c10d::Work {
 public:
  // `driver`: the group's worker, which wait() may drive (gone once the group is).
  WorkColl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
           std::weak_ptr<CommWorker> driver);

  // Starts and polls the group's calls on this thread for a short while (a small call ends
  // within it, with no thread hand-off), then waits as c10d::Work does.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Called once, by the worker thread: the future first (its callbacks may start the next
  // call), then the Work, which wakes wait().
  void complete_ok(int source_rank);
  void complete_error(const std::string &message);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_rank_{-1};
  bool receives_;
  std::weak_ptr<CommWorker> driver_;
};

}  // namespace torch_coll
