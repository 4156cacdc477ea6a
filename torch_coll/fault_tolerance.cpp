// PyTorch's fault-tolerance API on the "coll" backend (2.14+: Backend.hpp's
// C10D_BACKEND_HAS_RECONFIGURE and C10D_BACKEND_HAS_HOOKS): reconfigure() with this
// process's handle, getError(), setTimeout(), the abort hooks. What each means here:
//  - reconfigure(uuid, handles): a new communicator of the processes named by the handles
//    (a list ranks them by position, a set by sorted handle), made on the group's c10d
//    store under "torch_coll/reconfigure/<uuid>/" (every member's first communicator
//    there, so libcoll's own numbering agrees whatever each member made before), with
//    opts.timeout as the rendezvous's deadline and the group's timeout after. Then the
//    old communicator is retired locally (aborted, then destroyed: no collective step, so
//    a member left out that never reconfigures holds nobody) and getRank()/getSize()
//    follow. A uuid is refused when this group used it (every member checks) or another
//    process claimed it on the store (the new rank 0 checks): its keys would be stale.
//  - getError(): how the current communicator's first failure is seen; abort() is none.
//  - abort hooks: run at that first failure, before the call's Work completes, and at abort().
#include "process_group_coll.hpp"

#if TORCH_COLL_HAS_RECONFIGURE

#include <c10/util/Exception.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <random>
#include <utility>
#include <variant>

#include "tensor_args.hpp"
#include "without_gil.hpp"

namespace torch_coll {

namespace {

// "coll:HOST:PID:NONCE": the nonce, drawn once per process, tells apart processes that
// reuse a pid under one host name (containers); the pid is read each time, so that a
// child forked after the first call has a handle of its own.
std::string process_handle() {
  static const std::pair<std::string, std::string> host_and_nonce = [] {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
    std::random_device random;
    const unsigned long long nonce = (static_cast<unsigned long long>(random()) << 32) ^
                                     static_cast<unsigned long long>(random());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", nonce);
    return std::make_pair(std::string(host), std::string(hex));
  }();
  return "coll:" + host_and_nonce.first + ":" + std::to_string(getpid()) + ":" +
         host_and_nonce.second;
}

// The members in rank order: a list as given, a set sorted (every member sorts the same).
std::vector<std::string> ranked_handles(const c10d::ReconfigureOptions &opts) {
  std::vector<std::string> handles;
  std::visit([&](const auto &given) { handles.assign(given.begin(), given.end()); }, opts.handles);
  if (std::holds_alternative<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles))
    std::sort(handles.begin(), handles.end());
  return handles;
}

int clamp_to_int(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

}  // namespace

c10d::ReconfigureHandle ProcessGroupColl::get_reconfigure_handle() const {
  return process_handle();
}

bool ProcessGroupColl::isInitialized() { return worker_or_null() != nullptr; }

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reconfigure(const c10d::ReconfigureOptions &opts) {
  const char *call = "reconfigure";
  const std::vector<std::string> handles = ranked_handles(opts);
  TORCH_COLL_CHECK(!handles.empty(), getRank(), call,
                   "no handles given (a communicator has at least this process)");
  std::vector<std::string> sorted = handles;
  std::sort(sorted.begin(), sorted.end());
  auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  TORCH_COLL_CHECK(twice == sorted.end(), getRank(), call, "handle ",
                   twice == sorted.end() ? "" : *twice, " is given twice");
  const std::string mine = process_handle();
  auto at = std::find(handles.begin(), handles.end(), mine);
  TORCH_COLL_CHECK(at != handles.end(), getRank(), call, "this process's handle ", mine,
                   " is not among the ", handles.size(),
                   " handles given: every member passes the same handles, each its own "
                   "(get_reconfigure_handle()) among them");
  TORCH_COLL_CHECK(store_, getRank(), call, "this group has no c10d store to meet on");
  const int rank = static_cast<int>(at - handles.begin());
  const int size = static_cast<int>(handles.size());
  const std::chrono::milliseconds timeout = opts.timeout.value_or(this->timeout());

  WithoutGil released;  // the rendezvous waits for peers; completions may need the GIL
  std::lock_guard<std::mutex> one_at_a_time(reconfigure_mutex_);
  TORCH_COLL_CHECK(
      std::find(used_uuids_.begin(), used_uuids_.end(), opts.uuid) == used_uuids_.end(), getRank(),
      call, "uuid ", opts.uuid,
      " was already used on this group: each reconfigure() needs a fresh one");
  used_uuids_.push_back(opts.uuid);  // a failed attempt leaves its keys behind too

  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::PrefixStore>(
      "torch_coll/reconfigure/" + std::to_string(opts.uuid), store_->clone());
  if (rank == 0) {
    const std::vector<uint8_t> claim(mine.begin(), mine.end());
    const std::vector<uint8_t> owner = store->compareSet("claimed", {}, claim);
    TORCH_COLL_CHECK(owner == claim, getRank(), call, "uuid ", opts.uuid,
                     " was already used on this store (claimed by ",
                     std::string(owner.begin(), owner.end()),
                     "): each reconfigure() needs a fresh one");
  }
  std::shared_ptr<C10dStoreHandle> handle = c10d_store_handle(store);
  coll_comm_t *comm = join_on_store(handle, rank, size, timeout);
  if (timeout != this->timeout()) coll_comm_set_timeout(comm, clamp_to_int(this->timeout()));

  reconfigurable_ = true;
  std::shared_ptr<CommWorker> retired, retired_parent;
  {
    std::lock_guard<std::mutex> lock(worker_mutex_);
    retired = std::move(worker_);
    retired_parent = std::move(parent_);
    worker_ = make_worker(comm, rank, handle);
    rank_ = rank;
    size_ = size;
  }
  seq_ = 0;
  if (retired) retired->abort();  // its destroy then takes no collective step
  retired.reset();                // (a group shrunk from it may hold it a while yet)
  retired_parent.reset();

  auto done = c10::make_intrusive<WorkColl>(rank, c10d::OpType::UNKNOWN, std::vector<at::Tensor>{},
                                            worker_or_null(), 0);
  done->complete_ok(-1, std::chrono::nanoseconds(0));
  return done;
}

c10d::ErrorType ProcessGroupColl::getError() {
  GroupFailures::Kind kind = failures_->kind();
  if (kind == GroupFailures::Kind::kNone && !failures_->aborted()) {
    // No call failed yet here; the communicator may know of a peer's failure already.
    std::shared_ptr<CommWorker> worker = worker_or_null();
    if (worker) kind = GroupFailures::kind_of(worker->async_error());
  }
  switch (kind) {
    case GroupFailures::Kind::kTimeout:
      return c10d::ErrorType::TIMEOUT;
    case GroupFailures::Kind::kRemote:
      return c10d::ErrorType::REMOTE_ERROR;
    case GroupFailures::Kind::kCommunicator:
      return c10d::ErrorType::COMM_ERROR;
    default:
      return c10d::ErrorType::SUCCESS;
  }
}

void ProcessGroupColl::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ms_.store(timeout.count());
  std::shared_ptr<CommWorker> worker = worker_or_null();
  if (!worker) return;
  WithoutGil released;  // the drive lock may be held by a call that needs it
  worker->set_timeout(timeout);
}

}  // namespace torch_coll

#endif

#if TORCH_COLL_HAS_ABORT_HOOKS

namespace torch_coll {

void ProcessGroupColl::registerAbortHook(int64_t hook_id, c10d::AbortHook hook) {
  failures_->add_hook(hook_id, std::move(hook));
}

void ProcessGroupColl::unregisterAbortHook(int64_t hook_id) { failures_->remove_hook(hook_id); }

}  // namespace torch_coll

#endif
