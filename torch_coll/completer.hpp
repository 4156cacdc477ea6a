// The threads that complete the Works whose calls the group's worker saw end: copying the
// results out and marking each Work's future done, which runs the future's callbacks
// there. A callback may start another call and block until it is done (PowerSGD's hook
// does, inside DDP), so the worker must never run one itself: it would wait for a call
// only it can progress. And one completer blocked so must not hold back the completion it
// waits for: a batch that finds no idle completer gets a new thread (up to kMaxThreads).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace torch_coll {

struct Job;
using JobList = std::vector<std::unique_ptr<Job>>;

class Completer {
 public:
  // `complete` is run on a completer thread for every batch posted.
  explicit Completer(std::function<void(JobList &)> complete);
  // Completes what was posted, then joins the threads.
  ~Completer();
  Completer(const Completer &) = delete;
  Completer &operator=(const Completer &) = delete;

  void post(JobList jobs);
  // Whether the calling thread is one of this completer's.
  bool owns_current_thread();

 private:
  static constexpr size_t kMaxThreads = 32;
  void run();

  std::function<void(JobList &)> complete_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<JobList> queue_;
  size_t idle_ = 0;  // threads waiting for a batch
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace torch_coll
