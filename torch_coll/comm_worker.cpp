// CommWorker: the process group's libcoll thread (start in order, poll, complete), the
// waiting thread's turn at the same loop (drive_until), and the error text of a failed
// libcoll call.
#include "comm_worker.hpp"

#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <string>

namespace torch_coll {

namespace {
// How long the worker sleeps between polls of running requests when no new job arrives.
constexpr auto kPollInterval = std::chrono::microseconds(50);
// How long shutdown() (destroy_process_group) lets calls still running finish before it
// aborts them (an irecv nobody matches, a collective a peer never joins): at most the
// group's timeout, and no more than this, so that tearing a group down never waits for
// torch's 30-minute default.
constexpr auto kShutdownGrace = std::chrono::milliseconds(5000);
// A caller that waits for its calls at once (a synchronous call: the Work is waited for
// within kWaitedAtOnce of its submission, kAtOnceRun times in a row) starts them itself
// in wait(); the worker leaves a new call to it for kAsyncGrace before starting it, and
// submit does not wake the worker, which would only take a CPU from a rank the caller
// waits for (libcoll's COLL_ASYNC_GRACE_US rule, one level up).
constexpr auto kWaitedAtOnce = std::chrono::microseconds(100);
constexpr int kAtOnceRun = 8;
constexpr auto kAsyncGrace = std::chrono::microseconds(1000);

bool is_point_to_point(c10d::OpType type) {
  return type == c10d::OpType::SEND || type == c10d::OpType::RECV ||
         type == c10d::OpType::RECVANYSOURCE;
}
}  // namespace

std::string coll_failure_text(int rank, const char *call, coll_status_t status) {
  std::string text = "coll: rank " + std::to_string(rank) + ": " + call +
                     " failed: " + coll_status_name(status) + " (" + coll_status_string(status) +
                     ")";
  const char *detail = coll_last_error();
  if (detail != nullptr && detail[0] != '\0') text += std::string(": ") + detail;
  return text;
}

CommWorker::CommWorker(coll_comm_t *comm, int rank, std::chrono::milliseconds timeout,
                       std::shared_ptr<void> store_keep, FailureFn on_failure)
    : store_keep_(std::move(store_keep)),
      comm_(comm),
      rank_(rank),
      on_failure_(std::move(on_failure)),
      timeout_(timeout),
      completer_(std::make_unique<Completer>([this](JobList &ended) { complete(ended); })),
      thread_([this] { run(); }) {}

CommWorker::~CommWorker() {
  shutdown();
  completer_.reset();                        // the last completions, before the communicator goes
  if (leave_alone_) coll_comm_abort(comm_);  // then its destroy takes no collective step
  // The destroy barrier waits for every peer's destroy, and a peer whose communicator
  // failed (it lost this rank while this one was already here) never comes: on a store
  // that outlives the ranks (torch's, from 2.10) nothing else ends that wait. At most the
  // shutdown grace, then, as for the calls.
  const auto grace = timeout_.count() > 0 ? std::min(timeout_, kShutdownGrace) : kShutdownGrace;
  coll_comm_set_timeout(comm_, static_cast<int>(grace.count()));
  coll_comm_destroy(comm_);
  comm_ = nullptr;
}

void CommWorker::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  std::call_once(joined_, [this] { thread_.join(); });
}

void CommWorker::abort() { coll_comm_abort(comm_); }

bool CommWorker::owns_current_thread() {
  return std::this_thread::get_id() == thread_.get_id() ||
         (completer_ && completer_->owns_current_thread());
}

namespace {
// The thread release_worker hands workers to: made at the first need, never joined (a
// process may exit while it waits).
class Releaser {
 public:
  Releaser() {
    std::thread([this] { run(); }).detach();
  }
  void post(std::shared_ptr<CommWorker> worker) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(worker));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return !queue_.empty(); });
      std::shared_ptr<CommWorker> worker = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      worker.reset();  // joins the thread that posted it, once that one has finished
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<CommWorker>> queue_;
};
}  // namespace

void release_worker(std::shared_ptr<CommWorker> worker) {
  if (!worker || !worker->owns_current_thread()) return;  // released here, if the last
  static Releaser *releaser = new Releaser();             // never destroyed
  releaser->post(std::move(worker));
}

coll_status_t CommWorker::revoke() { return coll_comm_revoke(comm_); }

coll_status_t CommWorker::async_error() const {
  coll_status_t error = COLL_OK;
  coll_status_t status = coll_comm_get_async_error(comm_, &error);
  return status != COLL_OK ? status : error;
}

coll_status_t CommWorker::set_timeout(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  const int value = ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, INT_MAX));
  return exclusive([value](coll_comm_t *comm) { return coll_comm_set_timeout(comm, value); },
                   false);
}

coll_status_t CommWorker::exclusive(const std::function<coll_status_t(coll_comm_t *)> &fn,
                                    bool revoke) {
  if (revoke) {
    coll_status_t status = coll_comm_revoke(comm_);
    if (status != COLL_OK) return status;
  }
  std::lock_guard<std::mutex> drive(drive_mutex_);
  return fn(comm_);
}

// A job submitted after shutdown() fails at once.
void CommWorker::refuse_stopped(std::unique_ptr<Job> job) {
  job->status = COLL_ERR_ABORTED;
  job->error = "coll: rank " + std::to_string(rank_) + ": " + job->call +
               ": the process group was shut down or aborted";
  JobList ended;
  ended.push_back(std::move(job));
  complete(ended);
}

void CommWorker::submit(std::unique_ptr<Job> job) {
  job->submitted = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) job->status = COLL_ERR_ABORTED;
  }
  if (job->status == COLL_ERR_ABORTED) return refuse_stopped(std::move(job));
  if (is_point_to_point(job->work->retrieveOpType())) {
    // Posted now, even while another thread is in a collective on comm_ (coll.h rule 4's
    // exception for coll_send_tagged_async / coll_recv_tagged_async); the worker or a
    // waiter polls it with the rest.
    JobList ended;
    {
      std::lock_guard<std::mutex> post(post_mutex_);
      post_now(job, ended);
    }
    if (!ended.empty()) {  // it failed at once (its future's callbacks may submit again)
      complete(ended);
      return;
    }
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      wake = driving_ == 0 && !waits_at_once();
    }
  }
  if (job) return refuse_stopped(std::move(job));  // shut down in the meantime
  if (wake) wake_.notify_one();
}

void CommWorker::note_wait(std::chrono::nanoseconds since_submission) {
  if (since_submission > kWaitedAtOnce) {
    waited_at_once_.store(0, std::memory_order_relaxed);
    return;
  }
  if (waited_at_once_.load(std::memory_order_relaxed) >= kAtOnceRun) return;
  if (waited_at_once_.fetch_add(1, std::memory_order_relaxed) + 1 == kAtOnceRun) {
    // From now on submit does not wake the worker: one asleep without a deadline must
    // wake and sleep with one (under mutex_, so that it cannot miss this).
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_one();
  }
}

bool CommWorker::waits_at_once() const {
  return waited_at_once_.load(std::memory_order_relaxed) >= kAtOnceRun;
}

namespace {
// The request ended (or never started): release what start made, keep the outcome.
void end_job(coll_comm_t *comm, std::unique_ptr<Job> job, coll_status_t status, std::string error,
             JobList &ended) {
  job->ran = std::chrono::steady_clock::now() - job->started;
  if (job->cleanup) job->cleanup(comm);
  job->status = status;
  job->error = std::move(error);
  ended.push_back(std::move(job));
}
}  // namespace

void CommWorker::complete(JobList &ended) {
  for (std::unique_ptr<Job> &job : ended) {
    if (job->status != COLL_OK) {
      if (on_failure_) on_failure_(job->status, job->error);  // abort hooks, before the Work
      job->work->complete_error(job->error);
      continue;
    }
    try {
      // Below autograd, as the collective's own kernel ran: the outputs of a functional
      // collective called with autograd (funcol's *_autograd) already carry its node when
      // the call ends after the op returned, and a copy recorded there (CopyBackwards,
      // CopySlices) replaced that node and gave its backward a zero gradient.
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      if (job->finish) job->finish();
    } catch (const std::exception &e) {
      job->work->complete_error("coll: rank " + std::to_string(rank_) + ": " + job->call +
                                ": copying the result out failed: " + e.what());
      continue;
    }
    job->work->complete_ok(job->source, job->ran);
  }
  ended.clear();  // the jobs' tensors are released here, outside drive_mutex_
}

// Calls job.start; a failure's text goes to `error`.
coll_status_t CommWorker::call_start(Job &job, std::string &error) {
  coll_status_t status = COLL_ERR_INTERNAL;
  job.started = std::chrono::steady_clock::now();
  try {
    status = job.start(comm_, &job.request, &job.source);
    if (status != COLL_OK) error = coll_failure_text(rank_, job.call, status);
  } catch (const std::exception &e) {
    error = "coll: rank " + std::to_string(rank_) + ": " + job.call + ": " + e.what();
  }
  return status;
}

// Starts a tagged call on the submitting thread; `job` stays set when it is running.
void CommWorker::post_now(std::unique_ptr<Job> &job, JobList &ended) {
  std::string error;
  coll_status_t status = call_start(*job, error);
  if (status == COLL_OK && job->request != nullptr) {
    job->posted = true;
    return;
  }
  end_job(comm_, std::move(job), status, std::move(error), ended);
}

void CommWorker::start(std::unique_ptr<Job> job, JobList &ended) {
  if (job->posted) {
    in_flight_.push_back(std::move(job));
    return;
  }
  if (job->blocking) drain_in_flight(ended);
  std::string error;
  coll_status_t status = call_start(*job, error);
  if (status == COLL_OK && job->request != nullptr) {
    in_flight_.push_back(std::move(job));
    return;
  }
  end_job(comm_, std::move(job), status, std::move(error), ended);
}

void CommWorker::start_queued(JobList &ended) {
  std::deque<std::unique_ptr<Job>> next;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next.swap(queue_);
  }
  for (std::unique_ptr<Job> &job : next) start(std::move(job), ended);
}

// Tests every running request once; those that ended move to `ended`. True when one did.
bool CommWorker::poll_in_flight(JobList &ended) {
  bool progressed = false;
  for (size_t i = 0; i < in_flight_.size();) {
    coll_status_t status = coll_request_test(&in_flight_[i]->request);
    if (status == COLL_IN_PROGRESS) {
      ++i;
      continue;
    }
    std::string error;
    if (status != COLL_OK) error = coll_failure_text(rank_, in_flight_[i]->call, status);
    std::unique_ptr<Job> done = std::move(in_flight_[i]);
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
    end_job(comm_, std::move(done), status, std::move(error), ended);
    progressed = true;
  }
  return progressed;
}

// libcoll fails every request within its deadline, so this ends.
void CommWorker::drain_in_flight(JobList &ended) {
  while (!in_flight_.empty()) {
    if (!poll_in_flight(ended)) std::this_thread::sleep_for(kPollInterval);
  }
}

// `work`'s request is the only one running and a collective: wait for it in libcoll (see
// drive_until). Never a receive: blocked in one, this thread would hold back a collective
// another thread submits, which the sender may have to finish before it sends.
bool CommWorker::wait_alone(WorkColl &work, JobList &ended) {
  if (in_flight_.size() != 1 || in_flight_[0]->work.get() != &work) return false;
  if (is_point_to_point(work.retrieveOpType())) return false;
  std::unique_ptr<Job> job = std::move(in_flight_[0]);
  in_flight_.clear();
  coll_status_t status = coll_request_wait(&job->request);
  std::string error;
  if (status != COLL_OK) error = coll_failure_text(rank_, job->call, status);
  end_job(comm_, std::move(job), status, std::move(error), ended);
  return true;
}

void CommWorker::drive_until(WorkColl &work, std::chrono::microseconds spin, bool may_block) {
  const auto end = std::chrono::steady_clock::now() + spin;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++driving_;  // the worker keeps off meanwhile
  }
  while (!work.isCompleted() && std::chrono::steady_clock::now() < end) {
    JobList ended;
    bool progressed = false;
    {
      std::unique_lock<std::mutex> drive(drive_mutex_, std::try_to_lock);
      if (drive.owns_lock()) {
        start_queued(ended);
        progressed = poll_in_flight(ended) || !ended.empty();
        if (!progressed && may_block) progressed = wait_alone(work, ended);
        std::lock_guard<std::mutex> lock(mutex_);
        in_flight_count_ = in_flight_.size();
      }
    }
    complete(ended);
    if (!progressed) std::this_thread::yield();
  }
  // What this thread started and did not see end is the worker's to poll again.
  bool running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --driving_;
    running = driving_ == 0 && (in_flight_count_ > 0 || !queue_.empty());
  }
  if (running) wake_.notify_one();
}

// With mutex_ held: waits until the worker has calls to start or poll and nobody else is
// driving them; true when it should stop.
bool CommWorker::wait_for_turn(std::unique_lock<std::mutex> &lock) {
  for (;;) {
    const bool at_once = waits_at_once();
    if (driving_ > 0) {  // a waiting thread drives; it wakes the worker if it leaves calls
      if (at_once)
        wake_.wait_for(lock, kAsyncGrace);  // submit does not wake the worker then
      else
        wake_.wait(lock);
      continue;
    }
    if (!queue_.empty()) {
      if (at_once && !stopping_) {
        const auto due = queue_.front()->submitted + kAsyncGrace;
        if (std::chrono::steady_clock::now() < due) {
          wake_.wait_until(lock, due);  // left to the caller's wait() for the grace
          continue;
        }
        // Nobody came for it (a call waited through its future, as DDP's are): the
        // next ones start at once, until callers wait at once kAtOnceRun times again.
        waited_at_once_.store(0, std::memory_order_relaxed);
      }
      return false;
    }
    if (in_flight_count_ > 0) {
      wake_.wait_for(lock, kPollInterval);
      return false;
    }
    if (stopping_) return true;
    if (at_once)
      wake_.wait_for(lock, kAsyncGrace);
    else
      wake_.wait(lock);
  }
}

void CommWorker::run() {
  std::chrono::steady_clock::time_point stop_deadline{};
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wait_for_turn(lock)) break;
      if (stopping_ && stop_deadline == std::chrono::steady_clock::time_point{})
        stop_deadline =
            std::chrono::steady_clock::now() +
            (timeout_.count() > 0 ? std::min(timeout_, kShutdownGrace) : kShutdownGrace);
    }
    JobList ended;
    {
      // A waiter may have taken the calls meanwhile: then it is its turn, not the worker's.
      std::unique_lock<std::mutex> drive(drive_mutex_, std::try_to_lock);
      if (!drive.owns_lock()) continue;
      start_queued(ended);
      poll_in_flight(ended);
      // Work nobody waits for (an irecv never matched) must not keep the group alive forever.
      if (stop_deadline != std::chrono::steady_clock::time_point{} && !in_flight_.empty() &&
          std::chrono::steady_clock::now() > stop_deadline) {
        coll_comm_abort(comm_);
        drain_in_flight(ended);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_count_ = in_flight_.size();
    }
    if (!ended.empty()) completer_->post(std::move(ended));
  }
}

}  // namespace torch_coll
