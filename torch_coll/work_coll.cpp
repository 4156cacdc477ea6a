// WorkColl: completion of a "coll" call as c10d::Work and as an ivalue::Future holding the
// list of output tensors, the way gloo's work objects report it.
#include "work_coll.hpp"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <stdexcept>

namespace torch_coll {

WorkColl::WorkColl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      receives_(type == c10d::OpType::RECV || type == c10d::OpType::RECVANYSOURCE) {}

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
