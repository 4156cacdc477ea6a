/* Surviving a lost rank with NCCL 2.29-2.30's calls, on libcoll's elastic API (coll.h
 * "Surviving a lost rank"): ncclCommRevoke is coll_comm_revoke, ncclCommShrink
 * coll_comm_shrink, ncclCommGetUniqueId coll_comm_grow_id, ncclCommGrow coll_comm_grow on
 * the existing ranks and coll_comm_join on the new ones.
 *
 * What differs from NVIDIA's library (docs/nccl.md, docs/nccl_abi.md):
 *  - a revoke reaches the peers: their pending and later calls fail too (ncclInvalidUsage,
 *    "rank R revoked the communicator"), not only this rank's;
 *  - a shrink that leaves ranks out ends the parent (libcoll revokes it): destroy it;
 *  - every grow id of a communicator's lineage is the same id (it names the store, not
 *    one grow), so the one-at-a-time rule is kept here, per communicator;
 *  - libcoll numbers new ranks in the order they registered with the store: a new rank
 *    that asked for another rank than it was given fails with ncclInvalidUsage, and the
 *    grown communicator is revoked so that every member's next call fails as well;
 *  - everything goes through the store of the first ncclGetUniqueId, hosted by the
 *    process that made it: when that process dies, shrink and grow fail (within the
 *    timeout) instead of saving the job, so make the id in a process that outlives the
 *    ranks (the launcher, not a rank that may die). */
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

typedef enum { ELASTIC_SHRINK, ELASTIC_GROW, ELASTIC_JOIN } elastic_kind_t;

struct nccl_elastic_job {
  elastic_kind_t kind;
  const char *what;    /* "ncclCommShrink", for messages */
  coll_comm_t *parent; /* shrink and grow: the communicator they start from */
  int nexclude;        /* shrink */
  int *exclude;
  int joiners;         /* grow */
  coll_unique_id_t id; /* join: the id from ncclCommGetUniqueId */
};

static void job_free(struct nccl_elastic_job *job) {
  if (job == NULL) return;
  free(job->exclude);
  free(job);
}

/* A joiner that got another rank or size than it asked for cannot stay: revoke the new
 * communicator (the members' next call fails with the reason) and close it. */
static ncclResult_t refuse_join(ncclComm_t out, coll_comm_t *child, int rank, int size) {
  coll_comm_revoke(child);
  coll_comm_destroy(child);
  return nccl_fail(out, ncclInvalidUsage,
                   "ncclCommGrow: this new rank asked to be rank %d of %d but was taken in as "
                   "rank %d of %d: libcoll numbers new ranks in the order they reached the "
                   "store, not by the rank they ask for; pass the rank each new process will "
                   "get (the old size plus its place in line), or start them one at a time",
                   out->rank, out->nranks, rank, size);
}

ncclResult_t nccl_elastic_make(ncclComm_t out) {
  struct nccl_elastic_job *job = out->elastic;
  out->elastic = NULL;
  coll_comm_t *child = NULL;
  coll_status_t st = COLL_OK;
  switch (job->kind) {
    case ELASTIC_SHRINK:
      st = coll_comm_shrink(job->parent, job->exclude, job->nexclude, &child);
      break;
    case ELASTIC_GROW:
      st = coll_comm_grow(job->parent, job->joiners, &child);
      break;
    case ELASTIC_JOIN:
      st = coll_comm_join(&job->id, 0, &child);
      break;
  }
  ncclResult_t r = ncclSuccess;
  if (st != COLL_OK) {
    r = nccl_fail_coll(out, st);
  } else {
    int rank = -1, size = 0;
    coll_comm_rank(child, &rank);
    coll_comm_size(child, &size);
    if (rank != out->rank || size != out->nranks) {
      r = refuse_join(out, child, rank, size);
      child = NULL;
    } else if (job->parent != NULL && !nccl_closer_add_child(child, job->parent)) {
      /* Known as the parent's child: the parent's closer waits for it (the parent may
       * host the store the child meets through). */
      coll_comm_revoke(child);
      coll_comm_destroy(child);
      child = NULL;
      r = nccl_fail(out, ncclSystemError, "rank %d: %s: out of memory", out->rank, job->what);
    }
  }
  job_free(job);
  out->coll = child;
  atomic_store(&out->init_result, r);
  return r;
}

/* Run job for the new wrapper out: now (blocking), or on out's init thread. The parent
 * (may be NULL) also receives a failure's message. */
static ncclResult_t run_job(ncclComm_t parent, ncclComm_t out, struct nccl_elastic_job *job,
                            bool blocking, ncclComm_t *newcomm) {
  out->elastic = job;
  if (!blocking) {
    ncclResult_t r = nccl_start_init_thread(out, job->what);
    if (r != ncclInProgress) {
      job_free(job);
      nccl_comm_free(out);
      return r;
    }
    *newcomm = out;
    return ncclInProgress;
  }
  ncclResult_t r = nccl_elastic_make(out);
  if (r != ncclSuccess) {
    if (parent != NULL) nccl_fail(parent, r, "%s", out->last_error);
    nccl_comm_free(out);
    return r;
  }
  *newcomm = out;
  return ncclSuccess;
}

static struct nccl_elastic_job *job_new(elastic_kind_t kind, const char *what,
                                        coll_comm_t *parent) {
  struct nccl_elastic_job *job = calloc(1, sizeof *job);
  if (job == NULL) return NULL;
  job->kind = kind;
  job->what = what;
  job->parent = parent;
  return job;
}

static int by_value(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

NCCL_EXPORT(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags)) {
  const char *what = "ncclCommRevoke";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: revokeFlags is %d; NCCL_REVOKE_DEFAULT (0) is the only one",
                     comm->rank, what, revokeFlags);
  /* Later calls are refused here; ncclCommGetAsyncError says ncclSuccess from now on
   * (this rank's calls are host calls: once they returned, nothing of it runs). */
  atomic_store(&comm->revoked, true);
  coll_status_t st = coll_comm_revoke(comm->coll);
  return st == COLL_OK ? ncclSuccess : nccl_fail_coll(comm, st);
}

/* Every survivor passes the same list (any order); the excluded ranks do not call. */
NCCL_EXPORT(ncclResult_t, ncclCommShrink,
            (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
             ncclConfig_t *config, int shrinkFlags)) {
  const char *what = "ncclCommShrink";
  ncclResult_t r = nccl_check_comm(comm, what); /* a revoked one may be shrunk */
  if (r != ncclSuccess) return r;
  if (newcomm == NULL) return nccl_fail(comm, ncclInvalidArgument, "%s: newcomm is NULL", what);
  *newcomm = NULL;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: shrinkFlags is %d; NCCL_SHRINK_DEFAULT (0) or "
                     "NCCL_SHRINK_ABORT (1)",
                     comm->rank, what, shrinkFlags);
  int n = excludeRanksCount;
  if (n < 0 || n >= comm->nranks || (n > 0 && excludeRanksList == NULL))
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: excludeRanksCount is %d (0..%d) and excludeRanksList %s",
                     comm->rank, what, n, comm->nranks - 1, excludeRanksList ? "set" : "NULL");
  nccl_config_t cfg;
  if ((r = nccl_read_config(comm, config, &cfg, what)) != ncclSuccess) return r;
  int *sorted = malloc((size_t)(n > 0 ? n : 1) * sizeof *sorted);
  if (sorted == NULL) return nccl_fail(comm, ncclSystemError, "%s: out of memory", what);
  if (n > 0) memcpy(sorted, excludeRanksList, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, by_value);
  int below = 0;
  for (int i = 0; i < n; i++) {
    int x = sorted[i];
    const char *bad = x < 0 || x >= comm->nranks    ? "is not a rank of the communicator"
                      : i > 0 && sorted[i - 1] == x ? "is listed twice"
                      : x == comm->rank ? "is this rank (excluded ranks do not call ncclCommShrink)"
                                        : NULL;
    if (bad != NULL) {
      free(sorted);
      return nccl_fail(comm, ncclInvalidArgument, "rank %d: %s: excluded rank %d %s", comm->rank,
                       what, x, bad);
    }
    below += x < comm->rank;
  }
  struct nccl_elastic_job *job = job_new(ELASTIC_SHRINK, what, comm->coll);
  ncclComm_t out = job ? nccl_comm_new(comm->nranks - n, comm->rank - below, NULL) : NULL;
  if (out == NULL) {
    free(sorted);
    job_free(job);
    return nccl_fail(comm, ncclSystemError, "%s: out of memory", what);
  }
  job->exclude = sorted;
  job->nexclude = n;
  out->device = comm->device;
  out->hash = nccl_hash(nccl_hash(comm->hash, "shrink", 6), sorted, (size_t)n * sizeof *sorted);
  if (shrinkFlags == NCCL_SHRINK_ABORT) {
    /* The parent's pending work fails first (every member's, as a revoke does). */
    atomic_store(&comm->revoked, true);
    coll_status_t st = coll_comm_revoke(comm->coll);
    if (st != COLL_OK) {
      job_free(job);
      nccl_comm_free(out);
      return nccl_fail_coll(comm, st);
    }
  }
  return run_job(comm, out, job, cfg.blocking, newcomm);
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
  _Static_assert(sizeof(ncclUniqueId) == sizeof(coll_unique_id_t), "ids of one size");
  coll_unique_id_t id;
  coll_status_t st = coll_comm_grow_id(comm->coll, &id);
  if (st != COLL_OK) return nccl_fail_coll(comm, st);
  memcpy(uniqueId->internal, id.internal, sizeof id.internal);
  comm->grow_id_pending = true;
  return ncclSuccess;
}

/* The existing ranks: coll_comm_grow by nRanks - size. */
static ncclResult_t grow_members(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                 int rank, ncclComm_t *newcomm, ncclConfig_t *config) {
  const char *what = "ncclCommGrow";
  ncclResult_t r = nccl_check_usable(comm, what);
  if (r != ncclSuccess) return r;
  comm->grow_id_pending = false; /* the attempt ends here: a new id may be handed out */
  nccl_config_t cfg;
  if ((r = nccl_read_config(comm, config, &cfg, what)) != ncclSuccess) return r;
  if (rank != -1 && rank != comm->rank)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: an existing rank passes rank -1 (or its own), not %d",
                     comm->rank, what, rank);
  if (nRanks <= comm->nranks)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: nRanks %d does not add ranks to the %d there are", comm->rank,
                     what, nRanks, comm->nranks);
  coll_unique_id_t mine;
  coll_status_t st = coll_comm_grow_id(comm->coll, &mine);
  if (st != COLL_OK) return nccl_fail_coll(comm, st);
  if (uniqueId != NULL && memcmp(uniqueId->internal, mine.internal, sizeof mine.internal) != 0)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: uniqueId is not one of this communicator's "
                     "(ncclCommGetUniqueId)",
                     comm->rank, what);
  struct nccl_elastic_job *job = job_new(ELASTIC_GROW, what, comm->coll);
  ncclComm_t out = job ? nccl_comm_new(nRanks, comm->rank, NULL) : NULL;
  if (out == NULL) {
    job_free(job);
    return nccl_fail(comm, ncclSystemError, "%s: out of memory", what);
  }
  job->joiners = nRanks - comm->nranks;
  out->device = comm->device;
  /* What the new ranks can compute too: the lineage's id and the size. */
  out->hash = nccl_hash(nccl_hash(14695981039346656037ull, mine.internal, sizeof mine.internal),
                        &nRanks, sizeof nRanks);
  return run_job(comm, out, job, cfg.blocking, newcomm);
}

/* A new rank: coll_comm_join, then the rank it was given must be the one it asked for. */
static ncclResult_t grow_joiner(int nRanks, const ncclUniqueId *uniqueId, int rank,
                                ncclComm_t *newcomm, ncclConfig_t *config) {
  const char *what = "ncclCommGrow";
  if (uniqueId == NULL)
    return nccl_fail(NULL, ncclInvalidArgument,
                     "%s: a new rank (comm NULL) needs the uniqueId of ncclCommGetUniqueId", what);
  if (nRanks < 2 || rank < 0 || rank >= nRanks)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: new rank %d is not in 0..nRanks-1 (nRanks %d)",
                     what, rank, nRanks);
  nccl_config_t cfg;
  ncclResult_t r = nccl_read_config(NULL, config, &cfg, what);
  if (r != ncclSuccess) return r;
  struct nccl_elastic_job *job = job_new(ELASTIC_JOIN, what, NULL);
  ncclComm_t out = job ? nccl_comm_new(nRanks, rank, NULL) : NULL;
  if (out == NULL) {
    job_free(job);
    return nccl_fail(NULL, ncclSystemError, "%s: out of memory", what);
  }
  memcpy(job->id.internal, uniqueId->internal, sizeof job->id.internal);
  out->hash =
      nccl_hash(nccl_hash(14695981039346656037ull, uniqueId->internal, sizeof uniqueId->internal),
                &nRanks, sizeof nRanks);
  return run_job(NULL, out, job, cfg.blocking, newcomm);
}

NCCL_EXPORT(ncclResult_t, ncclCommGrow,
            (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
             ncclComm_t *newcomm, ncclConfig_t *config)) {
  if (newcomm == NULL) return nccl_fail(NULL, ncclInvalidArgument, "ncclCommGrow: newcomm is NULL");
  *newcomm = NULL;
  if (comm != NULL) return grow_members(comm, nRanks, uniqueId, rank, newcomm, config);
  return grow_joiner(nRanks, uniqueId, rank, newcomm, config);
}
