// GroupFailures (group_failures.hpp): the first failure of a communicator, by generation,
// and the abort hooks it runs.
#include "group_failures.hpp"

#include <vector>

namespace torch_coll {

uint64_t GroupFailures::next_generation() {
  std::lock_guard<std::mutex> lock(mutex_);
  kind_ = Kind::kNone;
  message_.clear();
  aborted_ = false;
  return ++generation_;
}

GroupFailures::Kind GroupFailures::kind_of(coll_status_t status) {
  switch (status) {
    case COLL_OK:
    case COLL_ERR_ABORTED:
      return Kind::kNone;
    case COLL_ERR_TIMEOUT:
      return Kind::kTimeout;
    case COLL_ERR_REMOTE:
    case COLL_ERR_REVOKED:
    case COLL_ERR_FENCED:
      return Kind::kRemote;
    default:
      return Kind::kCommunicator;
  }
}

void GroupFailures::call_failed(uint64_t gen, coll_status_t status, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (gen != generation_ || kind_ != Kind::kNone) return;
    if (status == COLL_ERR_REVOKED && aborted_) return;
    const Kind kind = kind_of(status);
    if (kind == Kind::kNone) return;
    kind_ = kind;
    message_ = message;
  }
  run_hooks();
}

void GroupFailures::aborting() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  run_hooks();
}

bool GroupFailures::aborted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

GroupFailures::Kind GroupFailures::kind() {
  std::lock_guard<std::mutex> lock(mutex_);
  return kind_;
}

std::string GroupFailures::message() {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

void GroupFailures::add_hook(int64_t id, std::function<void()> hook) {
  auto held = std::make_shared<std::function<void()>>(std::move(hook));
  std::lock_guard<std::mutex> lock(mutex_);
  hooks_[id].swap(held);  // a hook replaced goes with `held`, after the lock
}

void GroupFailures::remove_hook(int64_t id) {
  std::shared_ptr<std::function<void()>> gone;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = hooks_.find(id);
  if (it == hooks_.end()) return;
  gone.swap(it->second);
  hooks_.erase(it);
}

void GroupFailures::run_hooks() {
  std::vector<std::shared_ptr<std::function<void()>>> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &entry : hooks_) hooks.push_back(entry.second);
  }
  for (auto &hook : hooks) {
    try {
      (*hook)();
    } catch (...) {
      // A hook that fails must not keep the failure from its callers (nor the others).
    }
  }
}

}  // namespace torch_coll
