/* ncclGroupSimulateEnd: ends the thread's group without running its calls and answers
 * how long they would take, from libcoll's cost model (coll_comm_predict: the algorithm
 * each call would use and algo_predict's time for it, the number coll-sim prints). The
 * calls run one after the other on their streams, so the estimate is their sum; a
 * send/receive pair counts once (its send). Inits recorded in the group do run: a
 * communicator left half-made would be of no use to anyone. */
#include <stdlib.h>

#include "nccl_internal.h"

#define SIM_INFO_MAGIC 0x74685283u

static bool predictable(nccl_call_kind_t kind, coll_predict_t *out) {
  switch (kind) {
    case NCCL_CALL_ALL_REDUCE:
      *out = COLL_PREDICT_ALL_REDUCE;
      return true;
    case NCCL_CALL_BROADCAST:
      *out = COLL_PREDICT_BROADCAST;
      return true;
    case NCCL_CALL_REDUCE:
      *out = COLL_PREDICT_REDUCE;
      return true;
    case NCCL_CALL_ALL_GATHER:
      *out = COLL_PREDICT_ALL_GATHER;
      return true;
    case NCCL_CALL_REDUCE_SCATTER:
      *out = COLL_PREDICT_REDUCE_SCATTER;
      return true;
    case NCCL_CALL_ALL_TO_ALL:
      *out = COLL_PREDICT_ALL_TO_ALL;
      return true;
    case NCCL_CALL_GATHER:
      *out = COLL_PREDICT_GATHER;
      return true;
    case NCCL_CALL_SCATTER:
      *out = COLL_PREDICT_SCATTER;
      return true;
    case NCCL_CALL_SEND:
      *out = COLL_PREDICT_SEND;
      return true;
    case NCCL_CALL_RECV: /* its send is counted */
    case NCCL_CALL_INIT:
      return false;
  }
  return false;
}

NCCL_EXPORT(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo)) {
  const char *what = "ncclGroupSimulateEnd";
  /* Checked before the group ends, so that a bad argument leaves the group open. */
  if (simInfo == NULL) return nccl_fail(NULL, ncclInvalidArgument, "%s: simInfo is NULL", what);
  if (simInfo->magic != SIM_INFO_MAGIC || simInfo->size < sizeof(ncclSimInfo_t))
    return nccl_fail(NULL, ncclInvalidArgument,
                     "%s: simInfo has magic 0x%x and size %zu: initialise it with "
                     "NCCL_SIM_INFO_INITIALIZER",
                     what, simInfo->magic, simInfo->size);
  if (!nccl_in_group())
    return nccl_fail(NULL, ncclInvalidUsage, "%s: no ncclGroupStart on this thread", what);
  nccl_call_t *calls;
  size_t n;
  ncclResult_t recorded;
  ncclResult_t r = nccl_group_take_calls(&calls, &n, &recorded);
  if (r != ncclSuccess) return r;
  if (recorded != ncclSuccess) {
    free(calls);
    return recorded;
  }
  /* The inits first (moved to the front, in order), as the group's end would run them. */
  size_t ninit = 0;
  for (size_t i = 0; i < n; i++) {
    if (calls[i].kind != NCCL_CALL_INIT) continue;
    nccl_call_t init = calls[i];
    for (size_t j = i; j > ninit; j--) calls[j] = calls[j - 1];
    calls[ninit++] = init;
  }
  if (ninit > 0) r = nccl_run_calls(calls, ninit);
  double total = 0.0;
  for (size_t i = ninit; i < n && r == ncclSuccess; i++) {
    coll_predict_t kind;
    if (!predictable(calls[i].kind, &kind)) continue;
    double seconds = 0.0;
    coll_status_t st = coll_comm_predict(calls[i].comm->coll, kind, calls[i].count, calls[i].dtype,
                                         &seconds, NULL);
    if (st != COLL_OK) r = nccl_fail_coll(calls[i].comm, st);
    total += seconds;
  }
  free(calls);
  if (r == ncclSuccess) simInfo->estimatedTime = (float)total;
  return r;
}
