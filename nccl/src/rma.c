/* One-sided RMA (NCCL 2.29): ncclPutSignal writes into a peer's registered window and
 * raises a signal there, ncclSignal raises one alone, ncclWaitSignal waits for them.
 * libcoll has no one-sided transfers (its transports pair each send with a receive), so
 * all three refuse with ncclInvalidUsage; windows themselves are recorded
 * (ncclCommWindowRegister, ncclWinGetUserPtr: memory.c). */
#include "nccl_internal.h"

static ncclResult_t refuse(ncclComm_t comm, const char *what) {
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  return nccl_fail(comm, ncclInvalidUsage,
                   "rank %d: %s: one-sided RMA (put, signal, wait) is not offered by libcoll: "
                   "use ncclSend/ncclRecv",
                   comm->rank, what);
}

NCCL_EXPORT(ncclResult_t, ncclPutSignal,
            (const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
             ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
             ncclComm_t comm, cudaStream_t stream)) {
  (void)localbuff, (void)count, (void)datatype, (void)peer, (void)peerWin, (void)peerWinOffset;
  (void)sigIdx, (void)ctx, (void)flags, (void)stream;
  return refuse(comm, "ncclPutSignal");
}

NCCL_EXPORT(ncclResult_t, ncclSignal,
            (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
             cudaStream_t stream)) {
  (void)peer, (void)sigIdx, (void)ctx, (void)flags, (void)stream;
  return refuse(comm, "ncclSignal");
}

NCCL_EXPORT(ncclResult_t, ncclWaitSignal,
            (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream)) {
  (void)nDesc, (void)signalDescs, (void)stream;
  return refuse(comm, "ncclWaitSignal");
}
