// The Work a "coll" call returns: completed (with its output tensors or an error) by the
// process group's worker thread; wait(), is_completed(), exception() come from c10d::Work,
// the future (what DDP reads) and the source rank of a receive from any source from here.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <string>
#include <vector>

namespace torch_coll {

class WorkColl : public c10d::Work {
 public:
  WorkColl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

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
};

}  // namespace torch_coll
