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
#include <memory>
#include <mutex>
#include <string>

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

  void add_hook(int64_t id, std::function<void()> hook);
  void remove_hook(int64_t id);

 private:
  void run_hooks();  // copied under the lock, called without it

  std::mutex mutex_;
  uint64_t generation_ = 0;
  Kind kind_ = Kind::kNone;
  std::string message_;
  bool aborted_ = false;
  // Behind pointers: copying or destroying a hook that wraps a Python callable takes the
  // GIL, which must never be waited for with mutex_ held.
  std::map<int64_t, std::shared_ptr<std::function<void()>>> hooks_;
};

}  // namespace torch_coll
