/* ncclCommSuspend / ncclCommResume and ncclCommMemStats (NCCL 2.29). A suspended
 * communicator refuses calls (ncclInvalidUsage) until it is resumed. NCCL_SUSPEND_MEM
 * asks to release the GPU memory that can be released; libcoll keeps its buffers for the
 * communicator's life (its device scratch is freed only at destroy, see
 * libcoll/src/cuda/cuda_path.c), so none is released, and the statistics say so:
 * GpuMemSuspend (releasable) is 0, GpuMemPersist and GpuMemTotal are the GPU memory
 * libcoll holds for the communicator (coll_comm_mem_stats' device_bytes), and
 * GpuMemSuspended is 1 while a NCCL_SUSPEND_MEM suspension lasts. */
#include "nccl_internal.h"

NCCL_EXPORT(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags)) {
  const char *what = "ncclCommSuspend";
  ncclResult_t r = nccl_check_usable(comm, what);
  if (r != ncclSuccess) return r;
  if ((flags & ~NCCL_SUSPEND_MEM) != 0)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: flags is 0x%x; NCCL_SUSPEND_MEM (0x1) is the only flag",
                     comm->rank, what, (unsigned)flags);
  comm->suspended_mem = (flags & NCCL_SUSPEND_MEM) != 0;
  atomic_store(&comm->suspended, true);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommResume, (ncclComm_t comm)) {
  const char *what = "ncclCommResume";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (!atomic_load(&comm->suspended))
    return nccl_fail(comm, ncclInvalidUsage, "rank %d: %s: the communicator is not suspended",
                     comm->rank, what);
  comm->suspended_mem = false;
  atomic_store(&comm->suspended, false);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommMemStats,
            (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)) {
  const char *what = "ncclCommMemStats";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (value == NULL)
    return nccl_fail(comm, ncclInvalidArgument, "rank %d: %s: value is NULL", comm->rank, what);
  if (stat == ncclStatGpuMemSuspended) {
    *value = atomic_load(&comm->suspended) && comm->suspended_mem ? 1 : 0;
    return ncclSuccess;
  }
  if (stat == ncclStatGpuMemSuspend) {
    *value = 0; /* libcoll releases nothing on suspend */
    return ncclSuccess;
  }
  if (stat != ncclStatGpuMemPersist && stat != ncclStatGpuMemTotal)
    return nccl_fail(comm, ncclInvalidArgument, "rank %d: %s: stat %d is not a ncclCommMemStat_t",
                     comm->rank, what, (int)stat);
  coll_mem_stats_t ms = {0};
  coll_status_t st = coll_comm_mem_stats(comm->coll, &ms);
  if (st != COLL_OK) return nccl_fail_coll(comm, st);
  *value = (uint64_t)ms.device_bytes;
  return ncclSuccess;
}
