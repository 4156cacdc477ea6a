/* Waiting for and testing non-blocking collectives. A waiter runs queued work itself
 * when the progress thread is idle. The executor enforces each operation's deadline;
 * the waiter keeps its own as a backstop, from the executor's last sign of life. */
#include <stdlib.h>

#include "common/cheap_clock.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/wait.h"
#include "core/comm.h"
#include "trace/trace.h"

enum { SPIN_NS = 50000, PURE_SPIN_NS = 2000, WAIT_SLICE_MS = 50, BACKSTOP_GRACE_MS = 5000 };
/* A wait this soon after its call was made counts as "waited for at once" (progress.c). */
enum { WAITED_SOON_NS = 50000 };

/* Hand the result to the caller's thread (messages are thread-local) and free. */
static coll_status_t finish(coll_request_t **request) {
  coll_request_t *req = *request;
  coll_status_t st = req->status;
  if (st != COLL_OK)
    coll_error(st, "%s", req->message);
  else
    coll_error_clear();
  free(req->call.call.owned); /* an _async all_to_allv's copy of its counts */
  free(req);
  *request = NULL;
  return st;
}

static bool is_done(const coll_request_t *req) {
  return atomic_load(&req->done) != 0; /* seq_cst: see done_waiters (progress.c) */
}

/* A tagged send or receive: its engine waits (tagged/tagged.c). */
static coll_status_t finish_tagged(coll_request_t **request, coll_status_t st) {
  free(*request);
  *request = NULL;
  return st;
}

coll_status_t coll_request_test(coll_request_t **request) {
  if (request == NULL || *request == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_request_test: request is NULL");
  if ((*request)->tagged != NULL) {
    coll_status_t st;
    if (!tagged_test((*request)->comm->tagged, (*request)->tagged, &st)) return COLL_IN_PROGRESS;
    return finish_tagged(request, st);
  }
  if (!is_done(*request)) return COLL_IN_PROGRESS;
  return finish(request);
}

coll_status_t coll_request_wait(coll_request_t **request) {
  if (request == NULL || *request == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_request_wait: request is NULL");
  coll_request_t *req = *request;
  coll_comm_t *comm = req->comm;
  if (req->tagged != NULL) return finish_tagged(request, tagged_wait(comm->tagged, req->tagged));
  if (req->submitted_ns != 0) {
    bool soon = coll_cheap_now_ns() - req->submitted_ns < WAITED_SOON_NS;
    int streak = atomic_load(&comm->soon_streak);
    atomic_store(&comm->soon_streak, !soon ? 0 : streak < GRACE_STREAK ? streak + 1 : streak);
  }
  /* Queued work nobody runs yet is run right here, oldest first: waiting right after
   * submitting then costs no hand-off to the progress thread. */
  while (!is_done(req) && progress_help(comm)) {
  }
  if (is_done(req)) return finish(request);
  /* Small operations finish within microseconds: a short spin avoids a sleep. It
   * yields after the first microseconds: the progress thread may need this core. */
  int64_t start = coll_now_ns();
  for (int64_t now = start; !is_done(req) && coll_wait_spin(now - start, SPIN_NS, PURE_SPIN_NS);
       now = coll_now_ns()) {
  }
  if (is_done(req)) return finish(request);

  int64_t limit_ns = ((int64_t)comm->base.timeout_ms + BACKSTOP_GRACE_MS) * 1000000LL;
  bool stale = false;
  int64_t traced = trace_request_wait_start(comm->base.trace);
  atomic_fetch_add(&comm->done_waiters, 1); /* before the next look at done (progress.c) */
  pthread_mutex_lock(&comm->mu);
  while (!is_done(req)) {
    if (!atomic_load(&comm->busy) && comm->head != NULL) {
      pthread_mutex_unlock(&comm->mu);
      progress_help(comm);
      pthread_mutex_lock(&comm->mu);
      continue;
    }
    struct timespec ts = coll_timespec_in_ms(WAIT_SLICE_MS);
    pthread_cond_timedwait(&comm->done_cv, &comm->mu, &ts);
    int64_t now = coll_now_ns();
    int64_t alive = base_last_heartbeat(&comm->base);
    if (alive < start) alive = start;
    if (!is_done(req) && now - alive > limit_ns) {
      stale = true;
      break;
    }
  }
  pthread_mutex_unlock(&comm->mu);
  atomic_fetch_sub(&comm->done_waiters, 1);
  trace_request_wait_done(comm->base.trace, traced);
  if (stale) /* The executor still owns the request: it stays valid (abort, then wait again). */
    return coll_error(COLL_ERR_TIMEOUT,
                      "rank %d: coll_request_wait: the executor showed no progress for %d ms",
                      comm->base.rank, comm->base.timeout_ms + BACKSTOP_GRACE_MS);
  return finish(request);
}
