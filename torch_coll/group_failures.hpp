// What a "coll" group knows of its communicator's failures, and the abort hooks that run at
// the first one (PyTorch's Backend::registerAbortHook): kept apart from the group because
// its worker's completions report here and a worker may outlive its group (a shrunk group
// holds its parent's). A reconfigure starts a new generation: what the retired
// communicator's calls report afterwards is not this group's failure.
#pragma once

#include <coll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace torch_coll {

class GroupFailures {
 public:
  // How PyTorch's ErrorType sees a failure (getError).
  enum class Kind { kNone, kTimeout, kCommunicator, kRemote };

  // A new communicator: its failures are counted from now; the abort() of the last is forgotten.
  uint64_t next_generation();
  // A call of generation `gen` failed: the first failure of the current generation is kept
  // and runs the hooks (before the call's Work completes, so that a waiter sees the error
  // only after them). Not a failure: COLL_ERR_ABORTED (this process aborted or shut the
  // group down), and COLL_ERR_REVOKED after this process's own abort().
  void call_failed(uint64_t gen, coll_status_t status, const std::string &message);
  // abort(): the hooks run; the abort itself is no error (getError stays SUCCESS, as gloo's).
  void aborting();
  bool aborted();

  Kind kind();
  std::string message();
  // The kind of a libcoll status (COLL_OK, COLL_ERR_ABORTED: kNone).
  static Kind kind_of(coll_status_t status);

  // While hooks run (on the thread that saw the failure, or abort()'s), registering or
  // removing one never waits: the change is made when they have run. A hook may remove
  // itself or another (PyTorch's flight recorder removes its own when its last owner,
  // which the hook may be, goes).
  void add_hook(int64_t id, std::function<void()> hook);
  void remove_hook(int64_t id);

 private:
  void run_hooks();
  // With hooks_mutex_ held and no hook running: the changes made meanwhile. What they
  // replace or remove goes to `dead`, to be destroyed after the lock.
  void apply_pending(std::vector<std::function<void()>> &dead);

  std::mutex mutex_;  // the failure's state
  uint64_t generation_ = 0;
  Kind kind_ = Kind::kNone;
  std::string message_;
  bool aborted_ = false;
  std::mutex hooks_mutex_;  // guards the hooks, running_ and the pending changes
  std::map<int64_t, std::function<void()>> hooks_;
  int running_ = 0;  // run_hooks calls in progress: the map stays as it is meanwhile
  std::vector<std::pair<int64_t, std::function<void()>>> pending_adds_;
  std::vector<int64_t> pending_removals_;
};

}  // namespace torch_coll
