/* NCCL result codes from libcoll's statuses, the last-error text (per thread and per
 * communicator), ncclGetErrorString and ncclGetLastError. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nccl_internal.h"

static _Thread_local char thread_error[NCCL_ERROR_MAX];

ncclResult_t nccl_result(coll_status_t status) {
  switch (status) {
    case COLL_OK:
      return ncclSuccess;
    case COLL_IN_PROGRESS:
      return ncclInProgress;
    case COLL_ERR_INVALID_ARGUMENT:
    case COLL_ERR_NOT_FOUND:
      return ncclInvalidArgument;
    case COLL_ERR_NO_MEMORY:
    case COLL_ERR_SYSTEM:
      return ncclSystemError;
    case COLL_ERR_TIMEOUT:
      return ncclTimeout;
    case COLL_ERR_REMOTE:
    case COLL_ERR_PROTOCOL:
    case COLL_ERR_FENCED: /* the survivors declared this rank failed */
      return ncclRemoteError;
    /* Ranks that called different collectives, a communicator used after abort, an id
     * of another job, a feature this build lacks: the program used the API wrongly. */
    case COLL_ERR_MISMATCH:
    case COLL_ERR_ABORTED:
    case COLL_ERR_REVOKED: /* NCCL: calls on a revoked communicator are invalid usage */
    case COLL_ERR_REFUSED:
    case COLL_ERR_UNSUPPORTED:
      return ncclInvalidUsage;
    case COLL_ERR_INTERNAL:
      return ncclInternalError;
  }
  return ncclInternalError;
}

static void set_error(ncclComm_t comm, const char *text) {
  snprintf(thread_error, sizeof thread_error, "%s", text);
  if (comm != NULL && comm->magic == NCCL_COMM_MAGIC) {
    pthread_mutex_lock(&comm->error_lock);
    snprintf(comm->last_error, sizeof comm->last_error, "%s", text);
    pthread_mutex_unlock(&comm->error_lock);
  }
}

ncclResult_t nccl_fail_coll(ncclComm_t comm, coll_status_t status) {
  ncclResult_t result = nccl_result(status);
  if (result == ncclSuccess || result == ncclInProgress) return result;
  const char *text = coll_last_error();
  char buf[NCCL_ERROR_MAX];
  snprintf(buf, sizeof buf, "%s", text[0] ? text : coll_status_string(status));
  set_error(comm, buf);
  return result;
}

ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t result, const char *fmt, ...) {
  char buf[NCCL_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  set_error(comm, buf);
  return result;
}

ncclResult_t nccl_check_comm(ncclComm_t comm, const char *what) {
  if (comm == NULL) return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", what);
  if (comm->magic != NCCL_COMM_MAGIC)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is not a communicator of this library",
                     what);
  int init = atomic_load(&comm->init_result);
  if (init == ncclInProgress)
    return nccl_fail(comm, ncclInvalidUsage, "%s: the communicator's init is still in progress",
                     what);
  if (init != ncclSuccess)
    return nccl_fail(comm, (ncclResult_t)init, "%s: the communicator's init failed: %s", what,
                     comm->last_error);
  return ncclSuccess;
}

ncclResult_t nccl_check_usable(ncclComm_t comm, const char *what) {
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (atomic_load(&comm->revoked))
    return nccl_fail(comm, ncclInvalidUsage,
                     "rank %d: %s: the communicator was revoked (ncclCommRevoke): only "
                     "ncclCommShrink, ncclCommDestroy and ncclCommAbort remain",
                     comm->rank, what);
  if (atomic_load(&comm->suspended))
    return nccl_fail(comm, ncclInvalidUsage,
                     "rank %d: %s: the communicator is suspended (ncclCommSuspend): call "
                     "ncclCommResume first",
                     comm->rank, what);
  return ncclSuccess;
}

NCCL_EXPORT(const char *, ncclGetErrorString, (ncclResult_t result)) {
  switch (result) {
    case ncclSuccess:
      return "success";
    case ncclUnhandledCudaError:
      return "a CUDA call failed (ncclGetLastError says which)";
    case ncclSystemError:
      return "a system call failed or memory ran out (ncclGetLastError says which)";
    case ncclInternalError:
      return "internal error in libcoll";
    case ncclInvalidArgument:
      return "invalid argument (ncclGetLastError names it)";
    case ncclInvalidUsage:
      return "invalid usage: ranks disagree or the call does not fit the communicator";
    case ncclRemoteError:
      return "a peer failed or closed the connection";
    case ncclInProgress:
      return "operation still in progress";
    case ncclTimeout:
      return "timed out waiting for a peer";
    case ncclNumResults:
      break;
  }
  return "unknown result code";
}

NCCL_EXPORT(const char *, ncclGetLastError, (ncclComm_t comm)) {
  if (comm != NULL && comm->magic == NCCL_COMM_MAGIC) {
    /* The text stays valid until the communicator's next failure (as NCCL's). */
    pthread_mutex_lock(&comm->error_lock);
    bool has = comm->last_error[0] != '\0';
    pthread_mutex_unlock(&comm->error_lock);
    if (has) return comm->last_error;
  }
  return thread_error;
}

/* Deprecated by NVIDIA (logging is set up again from the environment): libcoll reads
 * COLL_DEBUG when a communicator is made, so there is nothing to reset. The second name
 * is the one NVIDIA's library also exports. */
NCCL_EXPORT(void, ncclResetDebugInit, (void)) {}
__attribute__((visibility("default"))) void ncclResetDebugInitInternal(void);
void ncclResetDebugInitInternal(void) {}
