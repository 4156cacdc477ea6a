/* libcoll's NCCL-compatible API: the header of libnccl.so.2, the drop-in library built on
 * coll.h (nccl/src/). Types, values and signatures are NCCL 2.32.3's ABI, so a program
 * compiled against NVIDIA's nccl.h runs on this library and the other way round; what
 * differs is written in docs/nccl.md and docs/nccl_abi.md. */
#ifndef NCCL_H_
#define NCCL_H_

/* NCCL's own header needs CUDA for cudaStream_t; this one also builds without it (host
 * buffers are an extension of this library: that is how it is tested without a GPU).
 * With CUDA it brings in the half, bfloat16 and fp8 types as NCCL's does (clients such
 * as nccl-tests use `half` without including cuda_fp16.h themselves). */
#if defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#define NCCL_COLL_HAVE_CUDA_RUNTIME 1
#endif
#endif
#ifndef NCCL_COLL_HAVE_CUDA_RUNTIME
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#endif

/* 2.32.3, the newest NCCL on PyPI (nvidia-nccl-cu13) when this was written; PyTorch 2.x
 * CUDA wheels are built against 2.28-2.30, whose functions are all here. NVIDIA's
 * device API (nccl_device.h) is not part of this header: its host functions are exported
 * and refuse (docs/nccl_abi.md), so a program built against NVIDIA's 2.28+ headers, which
 * include it, links and loads. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 23203
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ncclComm *ncclComm_t;
/* NVIDIA names the window's struct ncclWindow_vidmem; only the pointer crosses the ABI. */
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ncclTimeout (8): in 2.30.7, not in 2.28.9; returned here for a passed deadline. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

/* Window flags (ncclCommWindowRegister), CTA policies, shrink and revoke flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
#define NCCL_WIN_CFT_COUNTED 0x08
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00

/* Values of ncclConfig_t's hostCftMode and nvlsHostMode (2.32). */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;

typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* Communicator configuration, in NCCL's field order (2.31 added the last five). NCCL only
 * ever appends, so the library reads the fields that lie within the caller's `size`
 * (a program built against 2.14 passes a shorter struct, a later NCCL a longer one) and
 * that the caller's `version` already had; `magic` must be NCCL_API_MAGIC. `blocking` is
 * used (0: the init returns ncclInProgress and ncclCommGetAsyncError reports it);
 * `commName` names the communicator in errors; the rest are checked for range where
 * NCCL documents one and have no effect (nccl/src/config.c). */
typedef struct ncclConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
  int trafficClass;
  const char *commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                           \
  {                                                                                       \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT                                                             \
  }

/* A vendor's extra option, chained from ncclCollConfig_t's `ext` (2.32). */
typedef struct ncclConfigExt {
  struct ncclConfigExt *next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char *s;
    void *raw;
  } val;
} ncclConfigExt_t;

/* Per-call options of the nccl*Config collectives (2.32). Read like ncclConfig_t: within
 * the caller's size, magic checked. libcoll has no CTAs or NCCL algorithms to select:
 * the call runs as its plain form does; an `algSelection` with `forceAlgSelection` set
 * is refused (it cannot be honoured), `launchCompletionEvent` is recorded on the stream
 * once the call is issued. */
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t *ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char *algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
  cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                       \
  {                                                                                       \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR,   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, 1, NCCL_CONFIG_UNDEF_INT, 0,        \
        NCCL_CONFIG_UNDEF_PTR                                                             \
  }

/* ncclGroupSimulateEnd's answer: estimatedTime in seconds, from libcoll's cost model. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* ncclCommSuspend's flag and ncclCommMemStats' questions. */
#define NCCL_SUSPEND_MEM 0x01
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

/* Reduction operators. Operators made by ncclRedOpCreatePreMulSum are handed out from
 * ncclNumOps (5) up; the enum keeps the size of an int. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Data types. The fp8 types reduce as NCCL states: each pairwise step in half precision,
 * rounded back to fp8 (saturating to the largest finite value). */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* One wait of ncclWaitSignal (one-sided RMA, which this library refuses). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* The parameter API (2.30): a handle names one of the library's parameters. */
typedef struct ncclParamHandle *ncclParamHandle_t;

/* TCP encryption (2.32): libcoll's sockets are not encrypted, so only MODE_NONE is
 * accepted. */
typedef enum { NCCL_ENCRYPTION_MODE_NONE = 0, NCCL_ENCRYPTION_MODE_PSK = 1 } ncclEncryptionMode_t;

typedef struct ncclEncryptionConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int mode;
  const char *psk;
} ncclEncryptionConfig_t;

#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                     \
  {                                                                            \
    sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE,         \
        NCCL_ENCRYPTION_MODE_NONE, NULL                                        \
  }

/* Every function is exported twice: ncclX (weak) and pncclX (strong), as NCCL does, so a
 * profiling layer can define ncclX and call pncclX. */
#define NCCL_COLL_DECLARE(ret, name, args) \
  ret name args;                           \
  ret p##name args

/* Memory, version, ids. */
NCCL_COLL_DECLARE(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size));
NCCL_COLL_DECLARE(ncclResult_t, ncclMemFree, (void *ptr));
NCCL_COLL_DECLARE(ncclResult_t, ncclGetVersion, (int *version));
NCCL_COLL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));

/* Communicators. */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank,
                   ncclConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitRank,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
/* Stops the pending work of every member of the communicator (libcoll's revoke reaches the
 * peers: their calls fail too); later collectives are refused with ncclInvalidUsage,
 * ncclCommFinalize too; shrink, destroy and abort remain (nccl/src/elastic.c). */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                   ncclConfig_t *config));
/* Every survivor passes the same excluded ranks, which do not call; the parent may be
 * revoked or failed; NCCL_SHRINK_ABORT revokes its pending work first. A shrink that
 * leaves ranks out ends the parent: destroy it. */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommShrink,
                  (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                   ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags));
/* An id for ncclCommGrow, one at a time per communicator (it names the communicator's
 * store: every id of one communicator is the same bytes). ncclCommGrow: existing ranks
 * pass comm and rank -1, new ones comm NULL, the id and the rank they ask for, which must
 * be the one libcoll gives them (new ranks are numbered in the order they reach the
 * store), else ncclInvalidUsage. */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId * uniqueId));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommGrow,
                  (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                   ncclComm_t *newcomm, ncclConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                   ncclConfig_t *config));

/* Errors. */
NCCL_COLL_DECLARE(const char *, ncclGetErrorString, (ncclResult_t result));
NCCL_COLL_DECLARE(const char *, ncclGetLastError, (ncclComm_t comm));
/* Deprecated by NVIDIA; here it does nothing (libcoll reads COLL_DEBUG at each init). */
NCCL_COLL_DECLARE(void, ncclResetDebugInit, (void));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError));

/* Queries. */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank));

/* Registration (recorded: libcoll needs none) and windows. */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommRegister,
                  (const ncclComm_t comm, void *buff, size_t size, void **handle));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle));

/* Suspend (calls refused until ncclCommResume) and memory statistics of what libcoll
 * holds on the GPU for the communicator. */
NCCL_COLL_DECLARE(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommResume, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommMemStats,
                  (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value));

NCCL_COLL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                  (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
NCCL_COLL_DECLARE(ncclResult_t, ncclWinGetUserPtr,
                  (ncclComm_t comm, ncclWindow_t win, void **outUserPtr));

/* Operators. */
NCCL_COLL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype,
                   ncclScalarResidence_t residence, ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

/* Collectives. */
NCCL_COLL_DECLARE(ncclResult_t, ncclReduce,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclBcast,
                  (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                   cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclBroadcast,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclAllReduce,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclReduceScatter,
                  (const void *sendbuff, void *recvbuff, size_t recvcount,
                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                   cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclAllGather,
                  (const void *sendbuff, void *recvbuff, size_t sendcount,
                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclAlltoAll,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclGather,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclScatter,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));

/* The same with per-call options (2.32). */
NCCL_COLL_DECLARE(ncclResult_t, ncclAllReduceConfig,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                   const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclBroadcastConfig,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream,
                   const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclReduceConfig,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                   const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclAllGatherConfig,
                  (const void *sendbuff, void *recvbuff, size_t sendcount,
                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                   const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclReduceScatterConfig,
                  (const void *sendbuff, void *recvbuff, size_t recvcount,
                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                   cudaStream_t stream, const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclAlltoAllConfig,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclGatherConfig,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream,
                   const ncclCollConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclScatterConfig,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream,
                   const ncclCollConfig_t *config));

/* Point to point. */
NCCL_COLL_DECLARE(ncclResult_t, ncclSend,
                  (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclRecv,
                  (void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclComm_t comm, cudaStream_t stream));

/* One-sided RMA into registered windows (2.29): refused with ncclInvalidUsage. */
NCCL_COLL_DECLARE(ncclResult_t, ncclPutSignal,
                  (const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                   unsigned int flags, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclSignal,
                  (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                   cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclWaitSignal,
                  (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                   cudaStream_t stream));

/* Groups. ncclGroupSimulateEnd ends the group without running it and sets
 * simInfo->estimatedTime to the sum of libcoll's cost-model predictions of its calls. */
NCCL_COLL_DECLARE(ncclResult_t, ncclGroupStart, (void));
NCCL_COLL_DECLARE(ncclResult_t, ncclGroupEnd, (void));
NCCL_COLL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

/* Parameters: the library's own (libcoll's COLL_* environment variables), read live. */
NCCL_COLL_DECLARE(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char *key));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t *out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char **out));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGet,
                  (ncclParamHandle_t h, void *out, int maxLen, int *len));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetParameter,
                  (const char *key, const char **value, int *valueLen));
NCCL_COLL_DECLARE(ncclResult_t, ncclParamGetAllParameterKeys, (const char ***table, int *tableLen));
NCCL_COLL_DECLARE(void, ncclParamDumpAll, (void));

NCCL_COLL_DECLARE(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t *config));

#undef NCCL_COLL_DECLARE

#ifdef __cplusplus
}
#endif
#endif /* NCCL_H_ */
