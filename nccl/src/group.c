/* ncclGroupStart / ncclGroupEnd: a group belongs to the calling thread (as NCCL's) and
 * may span communicators. Calls inside it are recorded; the outermost end runs each
 * communicator's calls in order, every run of consecutive sends and receives as one
 * libcoll group (posted together, so exchanges cannot deadlock), and the communicators
 * side by side on threads of their own when there are several: one thread driving
 * every rank of a process (ncclCommInitAll, nccl-tests' -g) would otherwise wait in
 * the first rank's call for a rank it has not started yet. A recorded call using a
 * ncclScalarDevice premul op reads its scalar when it is issued here, at the end (after
 * its stream's earlier work for a device scalar), not when it was recorded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

typedef struct {
  int depth;
  nccl_call_t *calls;
  size_t n, cap;
  ncclResult_t error; /* the first recording error; GroupEnd returns it */
} thread_group_t;

static _Thread_local thread_group_t group;

bool nccl_in_group(void) { return group.depth > 0; }

static ncclResult_t run_p2p_batch(const nccl_call_t *calls, size_t n) {
  coll_comm_t *c = calls[0].comm->coll;
  void **staged = calloc(n, sizeof *staged);
  if (staged == NULL)
    return nccl_fail(calls[0].comm, ncclSystemError, "group: out of memory for %zu transfers", n);
  coll_status_t st = COLL_OK;
  for (size_t i = 0; i < n && st == COLL_OK; i++) st = nccl_p2p_stage_in(&calls[i], &staged[i]);
  if (st == COLL_OK) st = coll_group_start(c);
  for (size_t i = 0; i < n && st == COLL_OK; i++) {
    const nccl_call_t *p = &calls[i];
    st = p->kind == NCCL_CALL_SEND
             ? coll_send(staged[i] ? staged[i] : p->sendbuf, p->count, p->dtype, p->root, c)
             : coll_recv(staged[i] ? staged[i] : p->recvbuf, p->count, p->dtype, p->root, c);
  }
  coll_status_t end = coll_group_end(c);
  if (st == COLL_OK) st = end;
  for (size_t i = 0; i < n; i++) {
    coll_status_t out = nccl_p2p_stage_out(&calls[i], staged[i], st == COLL_OK);
    if (st == COLL_OK) st = out;
  }
  free(staged);
  return st == COLL_OK ? ncclSuccess : nccl_fail_coll(calls[0].comm, st);
}

static bool is_p2p(nccl_call_kind_t kind) {
  return kind == NCCL_CALL_SEND || kind == NCCL_CALL_RECV;
}

/* One communicator's recorded calls, in order. */
typedef struct {
  nccl_call_t *calls;
  size_t n;
  ncclResult_t result;
  char error[NCCL_ERROR_MAX]; /* the batch thread's last error, for the calling thread */
  pthread_t thread;
  bool started;
} comm_batch_t;

static ncclResult_t run_batch(const nccl_call_t *calls, size_t n) {
  ncclResult_t first = ncclSuccess;
  for (size_t i = 0; i < n;) {
    ncclResult_t r;
    size_t next = i + 1;
    if (calls[i].kind == NCCL_CALL_INIT) {
      r = nccl_init_now(calls[i].comm);
    } else if (is_p2p(calls[i].kind)) {
      while (next < n && is_p2p(calls[next].kind)) next++;
      r = run_p2p_batch(&calls[i], next - i);
    } else {
      r = nccl_run_call(&calls[i]);
    }
    if (r != ncclSuccess && first == ncclSuccess) first = r;
    /* After a failed init the communicator's other calls cannot run. */
    if (r != ncclSuccess && calls[i].kind == NCCL_CALL_INIT) break;
    i = next;
  }
  return first;
}

static void *batch_thread(void *arg) {
  comm_batch_t *b = arg;
  b->result = run_batch(b->calls, b->n);
  if (b->result != ncclSuccess) snprintf(b->error, sizeof b->error, "%s", pncclGetLastError(NULL));
  return NULL;
}

static ncclResult_t run_group(nccl_call_t *calls, size_t n) {
  if (n == 0) return ncclSuccess;
  /* Sort the calls by communicator, keeping each one's order (a stable split). */
  comm_batch_t *batches = calloc(n, sizeof *batches);
  nccl_call_t *sorted = malloc(n * sizeof *sorted);
  if (batches == NULL || sorted == NULL) {
    free(batches);
    free(sorted);
    return nccl_fail(NULL, ncclSystemError, "ncclGroupEnd: out of memory for %zu calls", n);
  }
  size_t nb = 0, filled = 0;
  bool *taken = calloc(n, sizeof *taken);
  if (taken == NULL) {
    free(batches);
    free(sorted);
    return nccl_fail(NULL, ncclSystemError, "ncclGroupEnd: out of memory for %zu calls", n);
  }
  for (size_t i = 0; i < n; i++) {
    if (taken[i]) continue;
    batches[nb].calls = &sorted[filled];
    for (size_t j = i; j < n; j++) {
      if (taken[j] || calls[j].comm != calls[i].comm) continue;
      sorted[filled++] = calls[j];
      taken[j] = true;
      batches[nb].n++;
    }
    nb++;
  }
  free(taken);
  ncclResult_t first = ncclSuccess;
  if (nb == 1) {
    first = run_batch(batches[0].calls, batches[0].n);
  } else {
    for (size_t b = 0; b < nb; b++) {
      batches[b].started = pthread_create(&batches[b].thread, NULL, batch_thread, &batches[b]) == 0;
      if (!batches[b].started)
        batches[b].result = nccl_fail(NULL, ncclSystemError,
                                      "ncclGroupEnd: cannot start a thread "
                                      "for communicator %zu of the group",
                                      b);
    }
    for (size_t b = 0; b < nb; b++) {
      if (batches[b].started) pthread_join(batches[b].thread, NULL);
      /* The failure's text was recorded on the batch's thread (and its communicator):
       * the caller's ncclGetLastError(NULL) gets it too. */
      if (batches[b].result != ncclSuccess && first == ncclSuccess)
        first = batches[b].error[0] != '\0'
                    ? nccl_fail(NULL, batches[b].result, "%s", batches[b].error)
                    : batches[b].result;
    }
  }
  free(batches);
  free(sorted);
  return first;
}

ncclResult_t nccl_submit(const nccl_call_t *call) {
  if (group.depth == 0) {
    if (is_p2p(call->kind)) return run_p2p_batch(call, 1);
    return nccl_run_call(call);
  }
  if (group.n == group.cap) {
    size_t cap = group.cap ? group.cap * 2 : 16;
    nccl_call_t *p = realloc(group.calls, cap * sizeof *p);
    if (p == NULL) {
      group.error = ncclSystemError;
      return nccl_fail(call->comm, ncclSystemError, "group: out of memory for %zu calls", cap);
    }
    group.calls = p;
    group.cap = cap;
  }
  group.calls[group.n++] = *call;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclGroupStart, (void)) {
  group.depth++;
  return ncclSuccess;
}

ncclResult_t nccl_group_take_calls(nccl_call_t **calls, size_t *n, ncclResult_t *recorded) {
  *calls = NULL;
  *n = 0;
  *recorded = ncclSuccess;
  if (group.depth == 0)
    return nccl_fail(NULL, ncclInvalidUsage, "no ncclGroupStart on this thread");
  if (--group.depth > 0) return ncclSuccess;
  *calls = group.calls;
  *n = group.n;
  *recorded = group.error;
  group = (thread_group_t){0};
  return ncclSuccess;
}

ncclResult_t nccl_run_calls(nccl_call_t *calls, size_t n) { return run_group(calls, n); }

NCCL_EXPORT(ncclResult_t, ncclGroupEnd, (void)) {
  if (group.depth == 0)
    return nccl_fail(NULL, ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart on this thread");
  nccl_call_t *calls;
  size_t n;
  ncclResult_t recorded;
  ncclResult_t r = nccl_group_take_calls(&calls, &n, &recorded);
  if (r == ncclSuccess) r = run_group(calls, n);
  free(calls);
  return recorded != ncclSuccess ? recorded : r;
}
