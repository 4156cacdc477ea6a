// The Work a "coll" call returns: completed (with its output tensors or an error) by the
// process group's worker thread, or by the thread that waits for it; is_completed() and
// exception() come from c10d::Work, wait() (which first drives the group's calls itself),
// the future (what DDP reads), the call's sequence number and duration, and the source
// rank of a receive from any source from here. A coalesced Work (endCoalescing's) stands
// for the calls made between startCoalescing and endCoalescing: it completes when the
// last of them has, with all their outputs, or with the first one's error.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// Work::getDuration and Work::getSequencenumber exist from torch 2.2 on.
#define TORCH_COLL_WORK_HAS_DURATION \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2))

namespace torch_coll {

class CommWorker;

class WorkColl : public c10d::Work {
 public:
  // `driver`: the group's worker, which wait() may drive (gone once the group is).
  // `seq`: the group's count of calls, this one included.
  WorkColl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
           std::weak_ptr<CommWorker> driver, uint64_t seq);

  // Starts and polls the group's calls on this thread for a short while (a small call ends
  // within it, with no thread hand-off), then waits as c10d::Work does.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
#if TORCH_COLL_WORK_HAS_DURATION
  // Milliseconds from the start of the libcoll call to its end (for a coalesced Work, the
  // sum over its calls); an error before the Work completed successfully.
  float getDuration() const override;
  uint64_t getSequencenumber() const override;
#endif

  // Called once, by the thread that saw the call end: the future first (its callbacks
  // may start the next call), then the Work, which wakes wait(). `ran` is how long the
  // libcoll call took.
  void complete_ok(int source_rank, std::chrono::nanoseconds ran);
  void complete_error(const std::string &message);

  // Coalescing: `member`'s outcome counts for this Work. close(): no more members; the
  // Work completes once every member has (at once when they all have, or there are none).
  void add_member(const c10::intrusive_ptr<WorkColl> &member);
  void close();

 private:
  void member_ended(const std::vector<at::Tensor> &outputs, const std::string *error,
                    std::chrono::nanoseconds ran);
  void complete_if_done(std::unique_lock<std::mutex> &lock);

  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_rank_{-1};
  std::atomic<int64_t> duration_ns_{-1};
  const bool receives_;
  const uint64_t seq_;
  const std::chrono::steady_clock::time_point created_;
  std::weak_ptr<CommWorker> driver_;

  // A coalesced Work's members and the one it belongs to.
  std::mutex members_mutex_;
  size_t members_pending_ = 0;
  bool closed_ = false;
  bool done_ = false;
  std::string first_error_;
  int64_t members_ns_ = 0;
  c10::intrusive_ptr<WorkColl> coalesced_into_;
};

}  // namespace torch_coll
