// The one thread per process group that calls libcoll on its communicator (libcoll allows
// one caller per communicator at a time, and autograd's hooks and the user's thread both
// call): it starts each job's asynchronous call in submission order, polls the requests
// without blocking (so that isend-then-irecv on both sides cannot deadlock), and completes
// each job's Work and future.
#pragma once

#include <coll.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "work_coll.hpp"

namespace torch_coll {

struct Job {
  const char *call = "";  // "all_reduce", for messages (a string literal)
  c10::intrusive_ptr<WorkColl> work;
  // Starts the libcoll call and sets *request; a call that completes at once (blocking jobs)
  // leaves it NULL. `source` receives the sender of a receive from any source.
  std::function<coll_status_t(coll_comm_t *comm, coll_request_t **request, int *source)> start;
  // After success, on the worker: copy results out (lists, non-contiguous outputs).
  std::function<void()> finish;
  // Always, on the worker, after the request ended: releases what start made on the
  // communicator (a PREMUL_SUM op).
  std::function<void(coll_comm_t *comm)> cleanup;
  // 1: start only once nothing else is in flight, and it runs to completion (it may change
  // the communicator's timeout, as monitored_barrier does).
  bool blocking = false;
  int source = -1;
  coll_request_t *request = nullptr;
};

class CommWorker {
 public:
  // Takes over comm: the worker destroys it when it stops.
  CommWorker(coll_comm_t *comm, int rank, std::chrono::milliseconds timeout);
  // Finishes the queued and running jobs (aborting those still running after the timeout),
  // then destroys the communicator.
  ~CommWorker();
  CommWorker(const CommWorker &) = delete;
  CommWorker &operator=(const CommWorker &) = delete;

  void submit(std::unique_ptr<Job> job);

 private:
  void run();
  void start(std::unique_ptr<Job> job);
  bool poll_in_flight();
  void drain_in_flight();
  void abort_in_flight();
  void complete(Job &job, coll_status_t status, const std::string &error);

  coll_comm_t *comm_;
  const int rank_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Job>> queue_;       // guarded by mutex_
  bool stopping_ = false;                        // guarded by mutex_
  std::vector<std::unique_ptr<Job>> in_flight_;  // the worker thread's only
  std::thread thread_;
};

// "coll: rank 1: all_reduce failed: COLL_ERR_REMOTE (a peer failed ...): <coll_last_error()>",
// read on the thread that made the failed libcoll call.
std::string coll_failure_text(int rank, const char *call, coll_status_t status);

}  // namespace torch_coll
