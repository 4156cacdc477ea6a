// WorkColl: completion of a "coll" call as c10d::Work and as an ivalue::Future holding the
// list of output tensors, the way gloo's work objects report it.
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
                   std::weak_ptr<CommWorker> driver)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      receives_(type == c10d::OpType::RECV || type == c10d::OpType::RECVANYSOURCE),
      driver_(std::move(driver)) {}

bool WorkColl::wait(std::chrono::milliseconds timeout) {
  const auto began = std::chrono::steady_clock::now();
  auto spin = std::chrono::duration_cast<std::chrono::microseconds>(kDriveSpin);
  if (timeout != kNoTimeout) spin = std::min(spin, std::chrono::microseconds(timeout));
  if (std::shared_ptr<CommWorker> driver = driver_.lock())
    driver->drive_until(*this, spin, timeout == kNoTimeout);
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

void WorkColl::complete_ok(int source_rank) {
  source_rank_.store(source_rank);
  future_->markCompleted(c10::IValue(outputs_));
  finish();
}

void WorkColl::complete_error(const std::string &message) {
  std::exception_ptr error = std::make_exception_ptr(std::runtime_error(message));
  future_->setError(error);
  finish(error);
}

}  // namespace torch_coll
