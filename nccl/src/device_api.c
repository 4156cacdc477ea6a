/* The host side of NVIDIA's device API (nccl_device.h, NCCL 2.28+): device
 * communicators, symmetric-memory pointers, GIN and LSA barriers, CFT (2.32). libcoll
 * has no device-initiated communication, so a program built against NVIDIA's 2.28+
 * headers (which include nccl_device.h) links and loads, asks ncclCommQueryProperties,
 * reads deviceApiSupport = false, and any device-API request it makes anyway is refused
 * with ncclInvalidUsage and a ncclGetLastError text naming what is missing.
 *
 * The team queries return structs and cannot fail, so they answer with the teams this
 * library has: the world (every rank, stride 1), and load-store-accessible (LSA) teams of
 * one rank each (no rank can load or store a peer's memory through libcoll), which makes
 * the rail team (one rank of each LSA team) the world again; CFT teams are this rank
 * alone. ncclTeamRankToWorld / ncclTeamRankToLsa are the arithmetic NCCL documents:
 * the communicator's rank in the team's space plus the offset times the team's stride.
 *
 * The types below are NVIDIA's ABI (sizes and offsets from nccl_device/host.h and
 * core.h, checked by tests/nccl); the structs the refused calls take are opaque here. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "nccl_internal.h"

typedef struct {
  int nRanks, rank, stride;
} nccl_team_t;

typedef struct {
  void *mcBasePtr;
} nccl_multimem_handle_t;

/* ncclCommProperties_t (2.32's fields; a caller's shorter struct gets those within its
 * size). */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  int ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  int railedGinType;
  uint64_t commHash;
  int ginMinStride;
  int ginConnectionType;
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  bool cftSupport;
  bool cftMulticastSupport;
  bool cftCountedSupport;
} nccl_comm_properties_t;
_Static_assert(sizeof(nccl_comm_properties_t) == 152 &&
                   offsetof(nccl_comm_properties_t, commHash) == 56 &&
                   offsetof(nccl_comm_properties_t, ginSupport) == 72 &&
                   offsetof(nccl_comm_properties_t, cftCountedSupport) == 146,
               "ncclCommProperties_t of NCCL 2.32");
_Static_assert(sizeof(nccl_team_t) == 12, "ncclTeam_t");

static ncclResult_t refuse(ncclComm_t comm, const char *what) {
  /* comm may be NULL or a value the caller made up: only a communicator of this library
   * receives the error. */
  if (comm != NULL && comm->magic != NCCL_COMM_MAGIC) comm = NULL;
  return nccl_fail(comm, ncclInvalidUsage,
                   "%s: NCCL's device API (device communicators, symmetric-memory pointers, "
                   "GIN, LSA and CFT barriers) is not offered by libcoll; "
                   "ncclCommQueryProperties reports deviceApiSupport = 0",
                   what);
}

NCCL_EXPORT(ncclResult_t, ncclCommQueryProperties, (ncclComm_t comm, void *props)) {
  const char *what = "ncclCommQueryProperties";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (props == NULL) return nccl_fail(comm, ncclInvalidArgument, "%s: props is NULL", what);
  nccl_comm_properties_t in;
  memcpy(&in, props, offsetof(nccl_comm_properties_t, rank));
  if (in.magic != NCCL_API_MAGIC || in.size < offsetof(nccl_comm_properties_t, rank))
    return nccl_fail(comm, ncclInvalidArgument,
                     "%s: props has magic 0x%x and size %zu: initialise it with "
                     "NCCL_COMM_PROPERTIES_INITIALIZER",
                     what, in.magic, in.size);
  nccl_comm_properties_t out;
  memset(&out, 0, sizeof out); /* no device API, multimem, GIN, host RMA or CFT */
  out.size = in.size;
  out.magic = in.magic;
  out.version = in.version;
  out.rank = comm->rank;
  out.nRanks = comm->nranks;
  out.cudaDev = comm->device;
  out.nvmlDev = comm->device;
  out.nLsaTeams = comm->nranks; /* one rank each */
  out.commHash = comm->hash;
  memcpy(props, &out, in.size < sizeof out ? in.size : sizeof out);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclDevCommCreate,
            (ncclComm_t comm, const void *reqs, void *outDevComm)) {
  (void)reqs;
  (void)outDevComm;
  return refuse(comm, "ncclDevCommCreate");
}

NCCL_EXPORT(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const void *devComm)) {
  (void)devComm;
  return refuse(comm, "ncclDevCommDestroy");
}

/* Symmetric-memory pointers of a window. */
NCCL_EXPORT(ncclResult_t, ncclGetLsaMultimemDevicePointer,
            (ncclWindow_t window, size_t offset, void **outPtr)) {
  (void)window, (void)offset, (void)outPtr;
  return refuse(NULL, "ncclGetLsaMultimemDevicePointer");
}

NCCL_EXPORT(ncclResult_t, ncclGetMultimemDevicePointer,
            (ncclWindow_t window, size_t offset, nccl_multimem_handle_t multimem, void **outPtr)) {
  (void)window, (void)offset, (void)multimem, (void)outPtr;
  return refuse(NULL, "ncclGetMultimemDevicePointer");
}

NCCL_EXPORT(ncclResult_t, ncclGetLsaDevicePointer,
            (ncclWindow_t window, size_t offset, int lsaRank, void **outPtr)) {
  (void)window, (void)offset, (void)lsaRank, (void)outPtr;
  return refuse(NULL, "ncclGetLsaDevicePointer");
}

NCCL_EXPORT(ncclResult_t, ncclGetPeerDevicePointer,
            (ncclWindow_t window, size_t offset, int peer, void **outPtr)) {
  (void)window, (void)offset, (void)peer, (void)outPtr;
  return refuse(NULL, "ncclGetPeerDevicePointer");
}

NCCL_EXPORT(ncclResult_t, ncclGetMultimemDeviceLeInfo,
            (ncclWindow_t window, size_t offset, void *leId, size_t *leOffset)) {
  (void)window, (void)offset, (void)leId, (void)leOffset;
  return refuse(NULL, "ncclGetMultimemDeviceLeInfo");
}

NCCL_EXPORT(ncclResult_t, ncclGetCftDeviceLeInfo,
            (ncclWindow_t window, size_t offset, int peerCft, nccl_team_t cftTeam, void *leId,
             size_t *leOffset)) {
  (void)window, (void)offset, (void)peerCft, (void)cftTeam, (void)leId, (void)leOffset;
  return refuse(NULL, "ncclGetCftDeviceLeInfo");
}

NCCL_EXPORT(ncclResult_t, ncclGetPeerDeviceLeInfo,
            (ncclWindow_t window, size_t offset, int peerWorld, void *leId, size_t *leOffset)) {
  (void)window, (void)offset, (void)peerWorld, (void)leId, (void)leOffset;
  return refuse(NULL, "ncclGetPeerDeviceLeInfo");
}

/* Teams. A value that is not a communicator of this library gets the empty team. */
static nccl_team_t team_of(ncclComm_t comm, bool world) {
  if (comm == NULL || comm->magic != NCCL_COMM_MAGIC) return (nccl_team_t){0, 0, 1};
  return world ? (nccl_team_t){comm->nranks, comm->rank, 1} : (nccl_team_t){1, 0, 1};
}

NCCL_EXPORT(nccl_team_t, ncclTeamWorld, (ncclComm_t comm)) { return team_of(comm, true); }
NCCL_EXPORT(nccl_team_t, ncclTeamLsa, (ncclComm_t comm)) { return team_of(comm, false); }
NCCL_EXPORT(nccl_team_t, ncclTeamRail, (ncclComm_t comm)) { return team_of(comm, true); }
NCCL_EXPORT(nccl_team_t, ncclTeamCft, (ncclComm_t comm, int mode)) {
  (void)mode;
  return team_of(comm, false);
}
NCCL_EXPORT(nccl_team_t, ncclTeamCftMultimem, (ncclComm_t comm)) { return team_of(comm, false); }

NCCL_EXPORT(int, ncclTeamRankToWorld, (ncclComm_t comm, nccl_team_t team, int rank)) {
  int me = comm != NULL && comm->magic == NCCL_COMM_MAGIC ? comm->rank : 0;
  return me + (rank - team.rank) * team.stride;
}

NCCL_EXPORT(int, ncclTeamRankToLsa, (ncclComm_t comm, nccl_team_t team, int rank)) {
  (void)comm; /* this rank is rank 0 of its one-rank LSA team */
  return (rank - team.rank) * team.stride;
}

/* Device resources a kernel would need. */
NCCL_EXPORT(ncclResult_t, ncclLsaBarrierCreateRequirement,
            (nccl_team_t team, int nBarriers, void *outHandle, void *outReq)) {
  (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return refuse(NULL, "ncclLsaBarrierCreateRequirement");
}

NCCL_EXPORT(ncclResult_t, ncclGinBarrierCreateRequirement,
            (ncclComm_t comm, nccl_team_t team, int nBarriers, void *outHandle, void *outReq)) {
  (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return refuse(comm, "ncclGinBarrierCreateRequirement");
}

NCCL_EXPORT(ncclResult_t, ncclGinOutboxCreateRequirement,
            (int nBlocks, int size_log2, void *outHandle, void *outReq)) {
  (void)nBlocks, (void)size_log2, (void)outHandle, (void)outReq;
  return refuse(NULL, "ncclGinOutboxCreateRequirement");
}

NCCL_EXPORT(ncclResult_t, ncclGinInboxA2ACreateRequirement,
            (nccl_team_t peers, int nBlocks, int size_log2, void *outHandle, void *outReq)) {
  (void)peers, (void)nBlocks, (void)size_log2, (void)outHandle, (void)outReq;
  return refuse(NULL, "ncclGinInboxA2ACreateRequirement");
}

/* Slots an LL all-to-all of this shape needs: none can be given here (0), and the reason
 * is the thread's last error. */
NCCL_EXPORT(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize)) {
  (void)maxElts, (void)maxEltSize;
  refuse(NULL, "ncclLLA2ACalcSlots");
  return 0;
}

NCCL_EXPORT(ncclResult_t, ncclLLA2ACreateRequirement,
            (int nBlocks, int nSlots, void *outHandle, void *outReq)) {
  (void)nBlocks, (void)nSlots, (void)outHandle, (void)outReq;
  return refuse(NULL, "ncclLLA2ACreateRequirement");
}
