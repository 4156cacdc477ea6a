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
  std::vector<std::function<void()>> dead;  // destroyed after the lock (they take the GIL)
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  pending_adds_.emplace_back(id, std::move(hook));
  if (running_ == 0) apply_pending(dead);
}

void GroupFailures::remove_hook(int64_t id) {
  std::vector<std::function<void()>> dead;
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  pending_removals_.push_back(id);
  if (running_ == 0) apply_pending(dead);
}

void GroupFailures::apply_pending(std::vector<std::function<void()>> &dead) {
  for (int64_t id : pending_removals_) {
    auto it = hooks_.find(id);
    if (it == hooks_.end()) continue;
    dead.push_back(std::move(it->second));
    hooks_.erase(it);
  }
  pending_removals_.clear();
  for (auto &added : pending_adds_) {
    std::function<void()> &slot = hooks_[added.first];
    if (slot) dead.push_back(std::move(slot));
    slot = std::move(added.second);
  }
  pending_adds_.clear();
}

void GroupFailures::run_hooks() {
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(hooks_mutex_);
    ++running_;
    for (auto &entry : hooks_) ids.push_back(entry.first);
  }
  for (int64_t id : ids) {
    std::function<void()> *hook = nullptr;
    {
      std::lock_guard<std::mutex> lock(hooks_mutex_);
      auto it = hooks_.find(id);
      if (it == hooks_.end()) continue;
      hook = &it->second;  // the entry stays while running_ > 0
    }
    try {
      (*hook)();
    } catch (...) {
      // A hook that fails must not keep the failure from its callers (nor the others).
    }
  }
  std::vector<std::function<void()>> dead;
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  if (--running_ == 0) apply_pending(dead);
}

}  // namespace torch_coll
