// Completer: a small pool of threads that complete finished calls' Works (see completer.hpp).
#include "completer.hpp"

#include "comm_worker.hpp"

namespace torch_coll {

Completer::Completer(std::function<void(JobList &)> complete) : complete_(std::move(complete)) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : threads_) t.join();
}

void Completer::post(JobList jobs) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(jobs));
    // Every batch waiting needs a thread of its own that is not blocked in a callback.
    if (queue_.size() > idle_ && threads_.size() < kMaxThreads) {
      threads_.emplace_back([this] { run(); });
      return;
    }
  }
  wake_.notify_one();
}

bool Completer::owns_current_thread() {
  const std::thread::id me = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::thread &t : threads_)
    if (t.get_id() == me) return true;
  return false;
}

void Completer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;
      ++idle_;
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      --idle_;
      continue;
    }
    JobList batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    complete_(batch);
    batch.clear();  // the jobs' tensors are released here
    lock.lock();
  }
}

}  // namespace torch_coll
