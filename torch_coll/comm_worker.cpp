// CommWorker: the process group's libcoll thread (start in order, poll, complete), and the
// error text of a failed libcoll call.
#include "comm_worker.hpp"

#include <exception>
#include <string>

namespace torch_coll {

namespace {
// How long the worker sleeps between polls of running requests when no new job arrives.
constexpr auto kPollInterval = std::chrono::microseconds(50);
}  // namespace

std::string coll_failure_text(int rank, const char *call, coll_status_t status) {
  std::string text = "coll: rank " + std::to_string(rank) + ": " + call +
                     " failed: " + coll_status_name(status) + " (" + coll_status_string(status) +
                     ")";
  const char *detail = coll_last_error();
  if (detail != nullptr && detail[0] != '\0') text += std::string(": ") + detail;
  return text;
}

CommWorker::CommWorker(coll_comm_t *comm, int rank, std::chrono::milliseconds timeout)
    : comm_(comm), rank_(rank), timeout_(timeout), thread_([this] { run(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CommWorker::submit(std::unique_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void CommWorker::complete(Job &job, coll_status_t status, const std::string &error) {
  if (job.cleanup) job.cleanup(comm_);
  if (status != COLL_OK) {
    job.work->complete_error(error);
    return;
  }
  try {
    if (job.finish) job.finish();
  } catch (const std::exception &e) {
    job.work->complete_error("coll: rank " + std::to_string(rank_) + ": " + job.call +
                             ": copying the result out failed: " + e.what());
    return;
  }
  job.work->complete_ok(job.source);
}

void CommWorker::start(std::unique_ptr<Job> job) {
  if (job->blocking) drain_in_flight();
  coll_status_t status = COLL_ERR_INTERNAL;
  std::string error;
  try {
    status = job->start(comm_, &job->request, &job->source);
    if (status != COLL_OK) error = coll_failure_text(rank_, job->call, status);
  } catch (const std::exception &e) {
    error = "coll: rank " + std::to_string(rank_) + ": " + job->call + ": " + e.what();
  }
  if (status == COLL_OK && job->request != nullptr) {
    in_flight_.push_back(std::move(job));
    return;
  }
  complete(*job, status, error);
}

// Tests every running request once; completes those that ended. True when one did.
bool CommWorker::poll_in_flight() {
  bool progressed = false;
  for (size_t i = 0; i < in_flight_.size();) {
    Job &job = *in_flight_[i];
    coll_status_t status = coll_request_test(&job.request);
    if (status == COLL_IN_PROGRESS) {
      ++i;
      continue;
    }
    std::string error;
    if (status != COLL_OK) error = coll_failure_text(rank_, job.call, status);
    std::unique_ptr<Job> done = std::move(in_flight_[i]);
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
    complete(*done, status, error);
    progressed = true;
  }
  return progressed;
}

// libcoll fails every request within its deadline, so this ends.
void CommWorker::drain_in_flight() {
  while (!in_flight_.empty()) {
    if (!poll_in_flight()) std::this_thread::sleep_for(kPollInterval);
  }
}

void CommWorker::abort_in_flight() {
  coll_comm_abort(comm_);
  drain_in_flight();
}

void CommWorker::run() {
  std::chrono::steady_clock::time_point stop_deadline{};
  for (;;) {
    std::unique_ptr<Job> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (queue_.empty()) {
        if (stopping_ && in_flight_.empty()) break;
        if (in_flight_.empty())
          wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        else
          wake_.wait_for(lock, kPollInterval);
      }
      if (!queue_.empty()) {
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      if (stopping_ && stop_deadline == std::chrono::steady_clock::time_point{})
        stop_deadline = std::chrono::steady_clock::now() + timeout_;
    }
    if (next) start(std::move(next));
    poll_in_flight();
    // Work nobody waits for (an irecv never matched) must not keep the group alive forever.
    if (stop_deadline != std::chrono::steady_clock::time_point{} && !in_flight_.empty() &&
        std::chrono::steady_clock::now() > stop_deadline)
      abort_in_flight();
  }
  coll_comm_destroy(comm_);
  comm_ = nullptr;
}

}  // namespace torch_coll
