// The one thread per process group that calls libcoll on its communicator (libcoll allows
// one caller per communicator at a time, and autograd's hooks and the user's thread both
// call): it starts each job's asynchronous call in submission order (point-to-point calls
// are posted at once by the submitting thread, which libcoll allows), polls the requests
// without blocking (so that isend-then-irecv on both sides cannot deadlock), and completes
// each job's Work and future. A thread that waits for a Work may take the worker's place
// for a while (drive_until): it then starts and polls the same jobs itself, without the
// worker's wake-up and poll interval on the path of a small call.
#pragma once

#include <coll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "completer.hpp"
#include "work_coll.hpp"

namespace torch_coll {

struct Job {
  const char *call = "";  // "all_reduce", for messages (a string literal)
  c10::intrusive_ptr<WorkColl> work;
  // Starts the libcoll call and sets *request; a call that completes at once (blocking jobs)
  // leaves it NULL. `source` receives the sender of a receive from any source.
  std::function<coll_status_t(coll_comm_t *comm, coll_request_t **request, int *source)> start;
  // After success, outside libcoll's one-caller lock: copy results out (lists,
  // non-contiguous outputs).
  std::function<void()> finish;
  // Always, by the thread that saw the request end, before finish: releases what start made
  // on the communicator (a PREMUL_SUM op).
  std::function<void(coll_comm_t *comm)> cleanup;
  // 1: start only once nothing else is in flight, and it runs to completion (it may change
  // the communicator's timeout, as monitored_barrier does).
  bool blocking = false;
  int source = -1;
  coll_request_t *request = nullptr;
  bool posted = false;                      // a point-to-point call submit started already
  coll_status_t status = COLL_IN_PROGRESS;  // how it ended, and the message when it failed
  std::string error;
  std::chrono::steady_clock::time_point submitted{};  // when submit took it
  std::chrono::steady_clock::time_point started{};    // when start was called
  std::chrono::nanoseconds ran{0};                    // from started to the end of the call
};

// Told of every call that failed (its status and message), before its Work completes.
using FailureFn = std::function<void(coll_status_t status, const std::string &message)>;

class CommWorker {
 public:
  // Takes over comm: the worker destroys it when it is destroyed itself, then lets go of
  // `store_keep` (what the communicator's store needs, kept as long as the communicator;
  // see c10d_store.hpp). `on_failure` (may be empty) hears of each failed call.
  CommWorker(coll_comm_t *comm, int rank, std::chrono::milliseconds timeout,
             std::shared_ptr<void> store_keep = nullptr, FailureFn on_failure = nullptr);
  // shutdown(), then destroys the communicator (after leave_alone(): aborted first).
  ~CommWorker();
  CommWorker(const CommWorker &) = delete;
  CommWorker &operator=(const CommWorker &) = delete;

  // Finishes the queued and running jobs (aborting those still running after the group's
  // timeout or 5 s, whichever is shorter) and stops the thread; later jobs fail at once
  // ("the group was shut down"). Idempotent.
  void shutdown();
  // coll_comm_abort: every running and later call fails with COLL_ERR_ABORTED, at once.
  // Any thread; idempotent.
  void abort();
  // coll_comm_revoke: every member's running and later calls on this communicator fail
  // (COLL_ERR_REVOKED). Any thread; idempotent.
  coll_status_t revoke();
  // coll_comm_get_async_error: the error that made the communicator unusable, or COLL_OK.
  coll_status_t async_error() const;
  // The deadline of later calls (coll_comm_set_timeout, with the drive lock).
  coll_status_t set_timeout(std::chrono::milliseconds timeout);
  // Destroy the communicator without its destroy barrier (coll_comm_abort first, once the
  // calls are finished): for a group whose members come and go on their own (a
  // reconfigurable group), where the peers may have retired theirs already.
  void leave_alone() { leave_alone_ = true; }
  // What the communicator's store needs kept (given at construction): a communicator made
  // from this one (a shrink's) keeps it too.
  const std::shared_ptr<void> &store_keep() const { return store_keep_; }
  // Whether the calling thread is the worker's or one of its completers'.
  bool owns_current_thread();

  // Runs fn on the communicator on this thread, with the drive lock held like every other
  // libcoll call (coll.h rule 4): the elastic calls (coll_comm_agree, coll_comm_shrink). With
  // `revoke`, coll_comm_revoke first (any thread may), so that running calls fail at once
  // and a waiter blocked in one lets go of the lock; the worker then sees them end.
  coll_status_t exclusive(const std::function<coll_status_t(coll_comm_t *)> &fn, bool revoke);

  void submit(std::unique_ptr<Job> job);
  // On a thread waiting for `work`: starts the queued jobs and polls the running ones in
  // the worker's place, without sleeping, until `work` completes or `spin` has passed
  // (then the worker goes on alone). With `may_block` (a wait without a timeout), when
  // `work` is a collective and the only call running, this thread waits in libcoll
  // itself, which runs it right here (no hand-off to libcoll's progress thread); tagged
  // point-to-point calls are posted by submit on the submitting thread meanwhile (coll.h
  // rule 4's exception), as a peer may need a send before it can join the collective.
  void drive_until(WorkColl &work, std::chrono::microseconds spin, bool may_block);
  // A Work was waited for `since_submission` after it was made: callers that wait at once
  // run their calls themselves (see kAsyncGrace in comm_worker.cpp).
  void note_wait(std::chrono::nanoseconds since_submission);

 private:
  void run();
  bool wait_for_turn(std::unique_lock<std::mutex> &lock);
  bool waits_at_once() const;
  void refuse_stopped(std::unique_ptr<Job> job);
  // These call libcoll: only with drive_mutex_ held. Jobs that ended go to `ended`.
  void start(std::unique_ptr<Job> job, JobList &ended);
  void post_now(std::unique_ptr<Job> &job, JobList &ended);
  coll_status_t call_start(Job &job, std::string &error);
  bool poll_in_flight(JobList &ended);
  void drain_in_flight(JobList &ended);
  void start_queued(JobList &ended);
  bool wait_alone(WorkColl &work, JobList &ended);
  // Without drive_mutex_: the results copied out, the Work and future completed.
  void complete(JobList &ended);

  std::shared_ptr<void> store_keep_;  // released after comm_ is destroyed
  coll_comm_t *comm_;
  const int rank_;
  const FailureFn on_failure_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;  // guards queue_, stopping_, in_flight_count_, driving_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stopping_ = false;
  std::once_flag joined_;
  std::atomic<bool> leave_alone_{false};
  size_t in_flight_count_ = 0;
  size_t driving_ = 0;                  // waiters in drive_until
  std::atomic<int> waited_at_once_{0};  // Works waited for at once in a row, up to kAtOnceRun
  std::mutex post_mutex_;               // point-to-point posts, in submission order
  // Held by whichever thread calls libcoll on comm_: the worker, or a waiter driving.
  std::mutex drive_mutex_;
  JobList in_flight_;  // guarded by drive_mutex_
  // Completes what the worker thread saw end (never on the worker thread itself).
  std::unique_ptr<Completer> completer_;
  std::thread thread_;
};

// Lets go of `worker`: destroyed here, unless this is one of its own threads (a completion
// whose abort hook dropped the last reference to the group: PyTorch's flight recorder's
// hook can), where its destructor would join this very thread; then on a thread kept for
// that, once this one has left the worker's code.
void release_worker(std::shared_ptr<CommWorker> worker);

// "coll: rank 1: all_reduce failed: COLL_ERR_REMOTE (a peer failed ...): <coll_last_error()>",
// read on the thread that made the failed libcoll call.
std::string coll_failure_text(int rank, const char *call, coll_status_t status);

}  // namespace torch_coll
