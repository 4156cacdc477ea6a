/* The request queue: the progress thread of a communicator and its FIFO of queued
 * calls, the blocking fast path (a blocking call with nothing queued runs on the
 * caller's thread, which saves the hand-off (two thread wake-ups) that dominates small
 * messages; it takes no mutex: two atomics tell it the executor is free), the grace
 * that gives a new asynchronous call to its waiter for the same reason, and the two
 * waits other files need (quiet, one request done). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cheap_clock.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/wait.h"
#include "core/comm.h"
#include "trace/trace.h"

enum { IDLE_WAIT_MS = 1000 };

/* The index of a call's size in async_run_ns: the bit length of its bytes. */
static int size_class(const coll_call_t *call) {
  uint64_t bytes = (uint64_t)call->count * coll_dtype_size(call->dtype);
  return bytes == 0 ? 0 : 64 - __builtin_clzll(bytes);
}

/* A call whose size ran a tenth of the grace or longer last time gets no grace: its
 * waiter would run it while the progress thread's looks, one each grace, wake on the same
 * CPU (bound), and under load each of those wakes may hand the CPU to the other program
 * until the next tick (a 4 MiB shm all-reduce, bound, one busy loop: 934-1530 us with the
 * grace, 427-444 without, 500-695 blocking). Run by the progress thread, such a call
 * costs a hand-off of 10-20 us, a tenth of its time or less.
 * Not where the host is crowded (more local ranks than CPUs): there the hand-off is a
 * context switch on a CPU that other ranks wait for, and it costs more than the looks
 * (4 ranks on 2 CPUs, unbound, shm: 64 KiB async 51-191 us against 34-40 blocking, a
 * call that once ran long sending the next ones to the thread; 512 KiB 176-299 against
 * 123-170; with the rule off, 30-38 and 128-138). */
static bool runs_long(coll_comm_t *comm, const coll_call_t *call) {
  if (comm->base.spin_crowded) return false;
  int64_t last = atomic_load_explicit(&comm->async_run_ns[size_class(call)], memory_order_relaxed);
  return last >= comm->async_grace_ns / 10;
}

/* Run a queued request and publish its result. The request may be freed by its waiter
 * as soon as `done` is set, so that is the last thing touched. `done` is set after the
 * mutex is released: a waiter that spins on it and then makes its next call must not
 * find the mutex held by this thread (descheduled right after the store, it would put
 * its own wake-up on that call's path). The mutex is taken again only when a thread
 * sleeps on done_cv or work is queued; a sleeper counts itself in done_waiters before it
 * looks at `done`, so either it sees `done` or this thread sees it counted. */
static void execute(coll_comm_t *comm, coll_request_t *req) {
  base_heartbeat(&comm->base, coll_coarse_now_ns()); /* compared on a scale of seconds */
  bool timed = req->submitted_ns != 0;               /* an _async call: runs_long's record */
  int64_t start_ns = timed ? coll_cheap_now_ns() : 0;
  coll_status_t st = dispatch_run(comm, &req->call);
  if (timed)
    atomic_store_explicit(&comm->async_run_ns[size_class(&req->call.call)],
                          coll_cheap_now_ns() - start_ns, memory_order_relaxed);
  if (st != COLL_OK) snprintf(req->message, sizeof req->message, "%s", coll_last_error());
  pthread_mutex_lock(&comm->mu);
  req->status = st;
  atomic_store(&comm->busy, false);
  bool queued = comm->head != NULL;
  pthread_mutex_unlock(&comm->mu);
  atomic_store(&req->done, 1); /* seq_cst: ordered before the load of done_waiters */
  if (atomic_load(&comm->done_waiters) == 0 && !queued) return;
  pthread_mutex_lock(&comm->mu);
  pthread_cond_broadcast(&comm->done_cv);
  if (comm->head != NULL) pthread_cond_signal(&comm->queue_cv); /* when a waiter ran it */
  pthread_mutex_unlock(&comm->mu);
}

/* Claim the executor if no thread runs it (the mutex need not be held). */
static bool claim_executor(coll_comm_t *comm) {
  bool free_executor = false;
  return atomic_compare_exchange_strong(&comm->busy, &free_executor, true);
}

/* Under mu: claim the executor for the queue's head and take it off the queue; NULL
 * when the queue is empty or another thread runs the executor (a waiter running queued
 * work, progress_help, or a blocking call on the fast path, which signals queue_cv under
 * mu after it lets go when work is queued, so a thread that then sleeps is woken). */
static coll_request_t *take_head(coll_comm_t *comm) {
  coll_request_t *req = comm->head;
  if (req == NULL || !claim_executor(comm)) return NULL;
  comm->head = req->next;
  if (comm->head == NULL) comm->tail = NULL;
  atomic_fetch_sub(&comm->queued, 1); /* after busy is claimed: see comm.h */
  return req;
}

/* The queue's head runs when no other thread runs the executor, and once its grace has
 * passed (progress_submit). */
static void *progress_main(void *arg) {
  coll_comm_t *comm = arg;
  coll_log_set_rank(comm->base.rank);
  coll_wait_pure_cap_ns = COLL_WAIT_BACKGROUND_PURE_NS; /* it shares the caller's CPU */
  pthread_mutex_lock(&comm->mu);
  for (;;) {
    if (comm->head != NULL && !atomic_load(&comm->busy)) {
      int64_t run_after_ns = comm->head->run_after_ns;
      int64_t left_ns = run_after_ns - coll_cheap_now_ns();  /* submitted_ns's clock */
      if (run_after_ns != 0 && left_ns > 0 && !comm->stop) { /* a waiter may take it */
        struct timespec ts = coll_timespec_in_ns(left_ns);
        pthread_cond_timedwait(&comm->queue_cv, &comm->mu, &ts);
        continue;
      }
      coll_request_t *req = take_head(comm);
      if (req == NULL) continue; /* a blocking call took the executor first */
      /* Its grace ran out with nobody waiting: the caller computes between its calls
       * and their waits, so it gets background progress again (comm.h soon_streak). */
      if (run_after_ns != 0) atomic_store(&comm->soon_streak, 0);
      pthread_mutex_unlock(&comm->mu);
      execute(comm, req);
      pthread_mutex_lock(&comm->mu);
      continue;
    }
    if (comm->stop && comm->head == NULL) break;
    /* While callers wait at once, graced submissions do not wake this thread
     * (progress_submit): it looks again after one grace instead. */
    bool look = comm->async_grace_ns > 0 && atomic_load(&comm->soon_streak) >= GRACE_STREAK;
    struct timespec ts =
        look ? coll_timespec_in_ns(comm->async_grace_ns) : coll_timespec_in_ms(IDLE_WAIT_MS);
    comm->idle_long = !look;
    pthread_cond_timedwait(&comm->queue_cv, &comm->mu, &ts);
    comm->idle_long = false;
  }
  pthread_mutex_unlock(&comm->mu);
  return NULL;
}

coll_status_t progress_start(coll_comm_t *comm) {
  int rc = pthread_create(&comm->thread, NULL, progress_main, comm);
  if (rc != 0) return coll_error_errno(COLL_ERR_SYSTEM, rc, "creating the progress thread");
  comm->thread_started = true;
  trace_set_progress_thread(comm->base.trace, comm->thread);
  return COLL_OK;
}

void progress_stop(coll_comm_t *comm) {
  if (!comm->thread_started) return;
  pthread_mutex_lock(&comm->mu);
  comm->stop = true;
  pthread_cond_broadcast(&comm->queue_cv);
  pthread_mutex_unlock(&comm->mu);
  pthread_join(comm->thread, NULL);
  comm->thread_started = false;
}

void progress_wake_all(coll_comm_t *comm) {
  pthread_mutex_lock(&comm->mu);
  pthread_cond_broadcast(&comm->queue_cv);
  pthread_cond_broadcast(&comm->done_cv);
  pthread_mutex_unlock(&comm->mu);
}

bool progress_help(coll_comm_t *comm) {
  coll_request_t *req = NULL;
  pthread_mutex_lock(&comm->mu);
  req = take_head(comm);
  pthread_mutex_unlock(&comm->mu);
  if (req == NULL) return false;
  execute(comm, req);
  return true;
}

coll_status_t progress_submit(coll_comm_t *comm, const prepared_call_t *pc, bool grace,
                              coll_request_t **request) {
  /* Not calloc: zeroing the message buffer (1 KiB) on every call is wasted. */
  coll_request_t *req = malloc(sizeof *req);
  if (req == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a request");
  req->comm = comm;
  req->next = NULL;
  req->call = *pc;
  atomic_init(&req->done, 0);
  req->run_after_ns = 0;
  req->submitted_ns = 0;
  req->status = COLL_OK;
  req->message[0] = '\0';
  req->tagged = NULL;
  if (grace) req->submitted_ns = coll_cheap_now_ns();
  if (grace && comm->async_grace_ns > 0 && atomic_load(&comm->soon_streak) >= GRACE_STREAK &&
      !runs_long(comm, &pc->call))
    req->run_after_ns = req->submitted_ns + comm->async_grace_ns;
  pthread_mutex_lock(&comm->mu);
  if (comm->tail != NULL)
    comm->tail->next = req;
  else
    comm->head = req;
  comm->tail = req;
  atomic_fetch_add(&comm->queued, 1);
  /* A graced call needs no wake-up unless the thread sleeps without looking. */
  if (req->run_after_ns == 0 || comm->idle_long) pthread_cond_signal(&comm->queue_cv);
  pthread_mutex_unlock(&comm->mu);
  *request = req;
  return COLL_OK;
}

/* The fast path: nothing queued and the executor free (an earlier call of this thread is
 * then queued or running: comm.h). The claim and the release order this call's work
 * after the previous executor's and before the next one's, as the mutex did. */
coll_status_t progress_run_blocking(coll_comm_t *comm, const prepared_call_t *pc) {
  if (atomic_load(&comm->queued) == 0 && claim_executor(comm)) {
    coll_status_t st = dispatch_run(comm, pc);
    atomic_store(&comm->busy, false);     /* seq_cst: ordered before the load of queued */
    if (atomic_load(&comm->queued) > 0) { /* queued meanwhile: its runner may sleep */
      pthread_mutex_lock(&comm->mu);
      pthread_cond_signal(&comm->queue_cv);
      pthread_mutex_unlock(&comm->mu);
    }
    return st;
  }
  /* Earlier asynchronous work is still running: keep FIFO order behind it. */
  coll_request_t *req;
  coll_status_t st = progress_submit(comm, pc, false, &req);
  if (st != COLL_OK) return st;
  return coll_request_wait(&req);
}

coll_status_t progress_quiet(coll_comm_t *comm, const char *what) {
  int64_t limit = coll_now_ns() + (int64_t)comm->base.timeout_ms * 1000000LL;
  bool idle;
  atomic_fetch_add(&comm->done_waiters, 1);
  pthread_mutex_lock(&comm->mu);
  while (!(idle = comm->head == NULL && !atomic_load(&comm->busy)) && coll_now_ns() < limit &&
         !base_aborted(&comm->base)) {
    struct timespec ts = coll_timespec_in_ms(20);
    pthread_cond_timedwait(&comm->done_cv, &comm->mu, &ts);
  }
  pthread_mutex_unlock(&comm->mu);
  atomic_fetch_sub(&comm->done_waiters, 1);
  if (idle) return COLL_OK;
  return base_aborted(&comm->base)
             ? coll_error(COLL_ERR_ABORTED, "rank %d: %s: the communicator was aborted",
                          comm->base.rank, what)
             : coll_error(COLL_ERR_TIMEOUT,
                          "rank %d: %s: asynchronous calls still running after %d ms",
                          comm->base.rank, what, comm->base.timeout_ms);
}

bool progress_wait_done(coll_comm_t *comm, const coll_request_t *req, int64_t deadline_ns) {
  bool done = false;
  atomic_fetch_add(&comm->done_waiters, 1);
  pthread_mutex_lock(&comm->mu);
  while (!(done = atomic_load(&req->done))) {
    if (coll_now_ns() > deadline_ns) break;
    struct timespec ts = coll_timespec_in_ms(20);
    pthread_cond_timedwait(&comm->done_cv, &comm->mu, &ts);
  }
  pthread_mutex_unlock(&comm->mu);
  atomic_fetch_sub(&comm->done_waiters, 1);
  return done;
}
