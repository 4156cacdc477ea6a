// WorkColl: completion of a "coll" call as c10d::Work and as an ivalue::Future holding the
// list of output tensors, the way gloo's work objects report it; and the coalesced Work
// that completes with its members.
#include "work_coll.hpp"

#include "comm_worker.hpp"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <stdexcept>

namespace torch_coll {

namespace {
// How long wait() drives the group's calls itself before it sleeps: longer than a small
// call takes, short enough that a long one does not keep a core spinning.
constexpr auto kDriveSpin = std::chrono::microseconds(500);
}  // namespace

WorkColl::WorkColl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                   std::weak_ptr<CommWorker> driver, uint64_t seq)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      receives_(type == c10d::OpType::RECV || type == c10d::OpType::RECVANYSOURCE),
      seq_(seq),
      created_(std::chrono::steady_clock::now()),
      driver_(std::move(driver)) {}

bool WorkColl::wait(std::chrono::milliseconds timeout) {
  const auto began = std::chrono::steady_clock::now();
  auto spin = std::chrono::duration_cast<std::chrono::microseconds>(kDriveSpin);
  if (timeout != kNoTimeout) spin = std::min(spin, std::chrono::microseconds(timeout));
  if (std::shared_ptr<CommWorker> driver = driver_.lock()) {
    driver->note_wait(began - created_);
    driver->drive_until(*this, spin, timeout == kNoTimeout);
  }
  if (timeout == kNoTimeout || isCompleted()) return c10d::Work::wait(timeout);
  auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - began);
  return c10d::Work::wait(std::max(left, std::chrono::milliseconds(1)));
}

std::vector<at::Tensor> WorkColl::result() { return outputs_; }

int WorkColl::sourceRank() const {
  TORCH_CHECK(receives_, "coll: sourceRank() is only known for a recv or a recv from any source");
  return source_rank_.load();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkColl::getFuture() { return future_; }

#if TORCH_COLL_WORK_HAS_DURATION
float WorkColl::getDuration() const {
  const int64_t ns = duration_ns_.load();
  TORCH_CHECK(ns >= 0, "coll: rank ", rank_,
              ": getDuration(): the call has not completed successfully (yet)");
  return static_cast<float>(static_cast<double>(ns) / 1e6);
}

uint64_t WorkColl::getSequencenumber() const { return seq_; }
#endif

void WorkColl::complete_ok(int source_rank, std::chrono::nanoseconds ran) {
  source_rank_.store(source_rank);
  duration_ns_.store(ran.count());
  future_->markCompleted(c10::IValue(outputs_));
  finish();
  if (coalesced_into_) {
    c10::intrusive_ptr<WorkColl> group = std::move(coalesced_into_);
    group->member_ended(outputs_, nullptr, ran);
  }
}

void WorkColl::complete_error(const std::string &message) {
  std::exception_ptr error = std::make_exception_ptr(std::runtime_error(message));
  future_->setError(error);
  finish(error);
  if (coalesced_into_) {
    c10::intrusive_ptr<WorkColl> group = std::move(coalesced_into_);
    group->member_ended({}, &message, std::chrono::nanoseconds(0));
  }
}

void WorkColl::add_member(const c10::intrusive_ptr<WorkColl> &member) {
  std::lock_guard<std::mutex> lock(members_mutex_);
  TORCH_CHECK(!closed_, "coll: rank ", rank_, ": a call joined a coalesced Work after its end");
  member->coalesced_into_ = c10::intrusive_ptr<WorkColl>::unsafe_reclaim_from_nonowning(this);
  ++members_pending_;
}

void WorkColl::close() {
  std::unique_lock<std::mutex> lock(members_mutex_);
  closed_ = true;
  complete_if_done(lock);
}

void WorkColl::member_ended(const std::vector<at::Tensor> &outputs, const std::string *error,
                            std::chrono::nanoseconds ran) {
  std::unique_lock<std::mutex> lock(members_mutex_);
  outputs_.insert(outputs_.end(), outputs.begin(), outputs.end());
  if (error != nullptr && first_error_.empty()) first_error_ = *error;
  members_ns_ += ran.count();
  --members_pending_;
  complete_if_done(lock);
}

void WorkColl::complete_if_done(std::unique_lock<std::mutex> &lock) {
  if (!closed_ || members_pending_ > 0 || done_) return;
  done_ = true;
  const std::string error = first_error_;
  const auto ran = std::chrono::nanoseconds(members_ns_);
  lock.unlock();
  if (error.empty())
    complete_ok(-1, ran);
  else
    complete_error(error);
}

}  // namespace torch_coll
