/* What NCCL 2.29-2.30 added for fault tolerance and elastic jobs: ncclCommRevoke (stop
 * the communicator's work at once), ncclCommGetUniqueId and ncclCommGrow (add ranks).
 *
 * Revoke is libcoll's abort (coll_comm_abort: pending calls fail with
 * COLL_ERR_ABORTED, later ones are refused) with the communicator kept: the wrapper
 * refuses every later collective with ncclInvalidUsage and ncclCommFinalize too, and
 * ncclCommDestroy / ncclCommAbort still free it. libcoll's abort returns once the work
 * has stopped, so the communicator is quiescent when ncclCommRevoke returns and
 * ncclCommGetAsyncError reports ncclSuccess from then on. NCCL also lets a revoked
 * communicator be split or shrunk; libcoll's split needs every rank of a working
 * communicator, so here those are refused (README: the failure work that will lift it).
 *
 * Growing needs libcoll communicators that can take in new ranks, which they cannot
 * yet: ncclCommGrow refuses with ncclInvalidUsage. ncclCommGetUniqueId is real: it
 * makes a fresh id (a store this process hosts, as ncclGetUniqueId's) and keeps NCCL's
 * rule that a second one waits until a grow has taken the first. */
#include <string.h>

#include "nccl_internal.h"

NCCL_EXPORT(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags)) {
  const char *what = "ncclCommRevoke";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: revokeFlags is %d; NCCL_REVOKE_DEFAULT (0) is the only one",
                     comm->rank, what, revokeFlags);
  atomic_store(&comm->revoked, true);
  coll_status_t st = coll_comm_abort(comm->coll);
  return st == COLL_OK ? ncclSuccess : nccl_fail_coll(comm, st);
}

NCCL_EXPORT(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *uniqueId)) {
  const char *what = "ncclCommGetUniqueId";
  ncclResult_t r = nccl_check_usable(comm, what);
  if (r != ncclSuccess) return r;
  if (uniqueId == NULL)
    return nccl_fail(comm, ncclInvalidArgument, "rank %d: %s: uniqueId is NULL", comm->rank, what);
  if (comm->grow_id_pending)
    return nccl_fail(comm, ncclInvalidUsage,
                     "rank %d: %s: the id this communicator handed out before has not been "
                     "used by ncclCommGrow yet (one at a time)",
                     comm->rank, what);
  if ((r = pncclGetUniqueId(uniqueId)) != ncclSuccess) return r;
  comm->grow_id_pending = true;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommGrow,
            (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
             ncclComm_t *newcomm, ncclConfig_t *config)) {
  const char *what = "ncclCommGrow";
  if (newcomm != NULL) *newcomm = NULL;
  ncclComm_t owner = NULL;
  if (comm != NULL) {
    ncclResult_t r = nccl_check_usable(comm, what);
    if (r != ncclSuccess) return r;
    owner = comm;
    /* The attempt ends here: the id handed out may be replaced. */
    comm->grow_id_pending = false;
  }
  nccl_config_t cfg;
  ncclResult_t r = nccl_read_config(owner, config, &cfg, what);
  if (r != ncclSuccess) return r;
  (void)uniqueId;
  return nccl_fail(owner, ncclInvalidUsage,
                   "%s (to %d ranks, as rank %d): growing a communicator is not supported: "
                   "libcoll's communicators cannot take in new ranks yet; make a new "
                   "communicator over all ranks (ncclCommInitRank) instead",
                   what, nRanks, rank);
}
