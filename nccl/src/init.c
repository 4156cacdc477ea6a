/* Communicators of the NCCL API on libcoll: the id, the inits (blocking, non-blocking,
 * grouped, several ranks in one process), split and the queries (destroy.c ends them;
 * elastic.c revokes, shrinks and grows them).
 * Each ncclComm wraps one coll_comm_t made by coll_comm_init_rank from the same id. */
#include <stdlib.h>
#include <string.h>

#include "coll_config.h"
#include "nccl_internal.h"

#if COLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int current_device(void) {
#if COLL_HAVE_CUDA
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) return device;
  (void)cudaGetLastError();
#endif
  return 0;
}

NCCL_EXPORT(ncclResult_t, ncclGetVersion, (int *version)) {
  if (version == NULL)
    return nccl_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId)) {
  if (uniqueId == NULL)
    return nccl_fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  _Static_assert(sizeof(ncclUniqueId) == sizeof(coll_unique_id_t), "ids of one size");
  coll_unique_id_t id;
  coll_status_t st = coll_get_unique_id(&id);
  if (st != COLL_OK) return nccl_fail_coll(NULL, st);
  memcpy(uniqueId->internal, id.internal, sizeof id.internal);
  return ncclSuccess;
}

ncclComm_t nccl_comm_new(int nranks, int rank, const ncclUniqueId *id) {
  ncclComm_t comm = calloc(1, sizeof *comm);
  if (comm == NULL) return NULL;
  comm->magic = NCCL_COMM_MAGIC;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = current_device();
  if (id != NULL) {
    comm->id = *id;
    comm->hash = nccl_hash(14695981039346656037ull, id->internal, sizeof id->internal);
  }
  atomic_init(&comm->init_result, ncclInProgress);
  pthread_mutex_init(&comm->error_lock, NULL);
  return comm;
}

void nccl_comm_free(ncclComm_t comm) {
  pthread_mutex_destroy(&comm->error_lock);
  comm->magic = 0;
  free(comm);
}

ncclResult_t nccl_init_now(ncclComm_t comm) {
  coll_unique_id_t id;
  memcpy(id.internal, comm->id.internal, sizeof id.internal);
  coll_comm_t *coll = NULL;
  /* Deadline 0: COLL_TIMEOUT_MS or libcoll's default (NCCL's API has no timeout). */
  coll_status_t st = coll_comm_init_rank(&coll, comm->nranks, id, comm->rank, 0);
  ncclResult_t r = st == COLL_OK ? ncclSuccess : nccl_fail_coll(comm, st);
  comm->coll = coll;
  atomic_store(&comm->init_result, r);
  return r;
}

static void *init_thread_main(void *arg) {
  ncclComm_t comm = arg;
  if (comm->elastic != NULL)
    nccl_elastic_make(comm);
  else
    nccl_init_now(comm);
  return NULL;
}

ncclResult_t nccl_start_init_thread(ncclComm_t comm, const char *what) {
  if (pthread_create(&comm->init_thread, NULL, init_thread_main, comm) != 0)
    return nccl_fail(NULL, ncclSystemError, "%s: cannot start the init thread", what);
  comm->init_thread_started = true;
  return ncclInProgress;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                              const ncclConfig_t *config, const char *what) {
  if (out == NULL) return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", what);
  *out = NULL;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: rank %d is not in 0..nranks-1 (nranks %d)",
                     what, rank, nranks);
  nccl_config_t cfg;
  ncclResult_t r = nccl_read_config(NULL, config, &cfg, what);
  if (r != ncclSuccess) return r;
  int blocking = cfg.blocking;
  ncclComm_t comm = nccl_comm_new(nranks, rank, id);
  if (comm == NULL) return nccl_fail(NULL, ncclSystemError, "%s: out of memory", what);
  if (nccl_in_group()) {
    /* The init runs at ncclGroupEnd, beside the group's other inits (one thread may
     * start every rank of a process this way, as nccl-tests does). */
    nccl_call_t call = {.kind = NCCL_CALL_INIT, .comm = comm};
    if ((r = nccl_submit(&call)) != ncclSuccess) {
      nccl_comm_free(comm);
      return r;
    }
    *out = comm;
    return ncclSuccess;
  }
  if (!blocking) {
    if ((r = nccl_start_init_thread(comm, what)) != ncclInProgress) {
      nccl_comm_free(comm);
      return r;
    }
    *out = comm;
    return ncclInProgress;
  }
  r = nccl_init_now(comm);
  if (r != ncclSuccess) {
    nccl_comm_free(comm);
    return r;
  }
  *out = comm;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommInitRank,
            (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank)) {
  return init_rank(comm, nranks, &commId, rank, NULL, "ncclCommInitRank");
}

NCCL_EXPORT(ncclResult_t, ncclCommInitRankConfig,
            (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)) {
  return init_rank(comm, nranks, &commId, rank, config, "ncclCommInitRankConfig");
}

/* Every id names a store of its own (the process that made it hosts it); the ranks all
 * meet at the first, which every rank was given. */
NCCL_EXPORT(ncclResult_t, ncclCommInitRankScalable,
            (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
             ncclConfig_t *config)) {
  const char *what = "ncclCommInitRankScalable";
  if (nId < 1 || commIds == NULL)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: nId is %d and commIds %s: need >= 1 id", what,
                     nId, commIds ? "set" : "NULL");
  return init_rank(newcomm, nranks, &commIds[0], myrank, config, what);
}

NCCL_EXPORT(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int *devlist)) {
  const char *what = "ncclCommInitAll";
  if (comms == NULL || ndev < 1)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: comms is %s and ndev %d (need >= 1)", what,
                     comms ? "set" : "NULL", ndev);
  (void)devlist; /* the device of each rank is the caller's current one (docs/nccl.md) */
  ncclUniqueId id;
  ncclResult_t r = pncclGetUniqueId(&id);
  if (r != ncclSuccess) return r;
  /* One group of ndev inits: they run side by side at the group's end. */
  if ((r = pncclGroupStart()) != ncclSuccess) return r;
  for (int i = 0; i < ndev; i++) {
    r = init_rank(&comms[i], ndev, &id, i, NULL, what);
    if (r != ncclSuccess) break;
  }
  ncclResult_t end = pncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

NCCL_EXPORT(ncclResult_t, ncclCommSplit,
            (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)) {
  const char *what = "ncclCommSplit";
  ncclResult_t r = nccl_check_usable(comm, what);
  if (r != ncclSuccess) return r;
  if (newcomm == NULL) return nccl_fail(comm, ncclInvalidArgument, "%s: newcomm is NULL", what);
  *newcomm = NULL;
  nccl_config_t cfg;
  if ((r = nccl_read_config(comm, config, &cfg, what)) != ncclSuccess) return r;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: color %d is negative and not NCCL_SPLIT_NOCOLOR", comm->rank,
                     what, color);
  coll_comm_t *child = NULL;
  coll_status_t st = coll_comm_split(comm->coll, color, key, &child);
  if (st != COLL_OK) return nccl_fail_coll(comm, st);
  if (child == NULL) return ncclSuccess;
  int rank = 0, size = 0;
  coll_comm_rank(child, &rank);
  coll_comm_size(child, &size);
  ncclComm_t out = nccl_comm_new(size, rank, NULL);
  if (out == NULL) {
    coll_comm_destroy(child);
    return nccl_fail(comm, ncclSystemError, "rank %d: %s: out of memory", comm->rank, what);
  }
  out->coll = child;
  out->device = comm->device;
  out->hash = nccl_hash(comm->hash, &color, sizeof color);
  /* Known as the parent's child from now on: its closer waits for this one. */
  if (!nccl_closer_add_child(child, comm->coll)) {
    coll_comm_destroy(child);
    nccl_comm_free(out);
    return nccl_fail(comm, ncclSystemError, "rank %d: %s: out of memory", comm->rank, what);
  }
  atomic_store(&out->init_result, ncclSuccess);
  *newcomm = out;
  return ncclSuccess;
}

void nccl_join_init(ncclComm_t comm) {
  if (comm->init_thread_started) {
    pthread_join(comm->init_thread, NULL);
    comm->init_thread_started = false;
  }
}

NCCL_EXPORT(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError)) {
  const char *what = "ncclCommGetAsyncError";
  if (comm == NULL || comm->magic != NCCL_COMM_MAGIC)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is not a communicator of this library",
                     what);
  if (asyncError == NULL)
    return nccl_fail(comm, ncclInvalidArgument, "%s: asyncError is NULL", what);
  int init = atomic_load(&comm->init_result);
  if (init != ncclSuccess) {
    if (init != ncclInProgress) nccl_join_init(comm);
    *asyncError = (ncclResult_t)init;
    return ncclSuccess;
  }
  nccl_join_init(comm);
  if (atomic_load(&comm->revoked)) {
    /* Revoked: quiescent once ncclCommRevoke returned (revoke.c). */
    *asyncError = ncclSuccess;
    return ncclSuccess;
  }
  coll_status_t async = COLL_OK;
  coll_status_t st = coll_comm_get_async_error(comm->coll, &async);
  if (st != COLL_OK && st != COLL_ERR_ABORTED) return nccl_fail_coll(comm, st);
  *asyncError = async == COLL_OK ? ncclSuccess : nccl_fail_coll(comm, async);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count)) {
  ncclResult_t r = nccl_check_comm(comm, "ncclCommCount");
  if (r != ncclSuccess) return r;
  if (count == NULL) return nccl_fail(comm, ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device)) {
  ncclResult_t r = nccl_check_comm(comm, "ncclCommCuDevice");
  if (r != ncclSuccess) return r;
  if (device == NULL)
    return nccl_fail(comm, ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->device;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank)) {
  ncclResult_t r = nccl_check_comm(comm, "ncclCommUserRank");
  if (r != ncclSuccess) return r;
  if (rank == NULL) return nccl_fail(comm, ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}
