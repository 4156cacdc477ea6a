/* libcoll's NCCL-compatible API: the header of libnccl.so.2, the drop-in library built on
 * coll.h (nccl/src/). Types, values and signatures are NCCL 2.27.7's ABI, so a program
 * compiled against NVIDIA's nccl.h runs on this library and the other way round; what
 * differs is written in README "Use it in place of NCCL" and docs/nccl_abi.md. */
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
#endif

/* 2.27.7: 2.28 and later make nccl-tests include the device API (nccl_device.h), which
 * this library does not offer. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22707
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow *ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ncclTimeout (8) is a later NCCL's value, which 2.27.7 did not have yet (its
 * ncclNumResults was 8): this library returns it for a passed deadline. */
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

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* Communicator configuration, fields in NCCL 2.27's order. The library reads only the
 * fields that lie within the caller's `size`, so a program built against an older NCCL
 * (a shorter struct) or a newer one (a longer one) works; `magic` must be NCCL_API_MAGIC.
 * Of the fields, `blocking` (0: ncclCommInitRankConfig returns ncclInProgress and
 * ncclCommGetAsyncError reports the init's progress) is used; the others are accepted
 * and have no effect. */
typedef struct ncclConfig_v22700 {
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
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                          \
  {                                                                                      \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,             \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,             \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,             \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT              \
  }

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

/* Data types. The two fp8 types are refused with ncclInvalidArgument (libcoll has no
 * fp8 reduction). */
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

/* Every function is exported twice: ncclX (weak) and pncclX (strong), as NCCL does, so a
 * profiling layer can define ncclX and call pncclX. */
#define NCCL_COLL_DECLARE(ret, name, args) \
  ret name args;                           \
  ret p##name args

NCCL_COLL_DECLARE(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size));
NCCL_COLL_DECLARE(ncclResult_t, ncclMemFree, (void *ptr));
NCCL_COLL_DECLARE(ncclResult_t, ncclGetVersion, (int *version));
NCCL_COLL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank,
                   ncclConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitRank,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                   ncclConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                   ncclConfig_t *config));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommShrink,
                  (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                   ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags));
NCCL_COLL_DECLARE(const char *, ncclGetErrorString, (ncclResult_t result));
NCCL_COLL_DECLARE(const char *, ncclGetLastError, (ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommRegister,
                  (const ncclComm_t comm, void *buff, size_t size, void **handle));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                  (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags));
NCCL_COLL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
NCCL_COLL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype,
                   ncclScalarResidence_t residence, ncclComm_t comm));
NCCL_COLL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));
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
/* AlltoAll, Gather and Scatter have a later NCCL's signatures (2.28), offered here too. */
NCCL_COLL_DECLARE(ncclResult_t, ncclAlltoAll,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclGather,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclScatter,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclSend,
                  (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclRecv,
                  (void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclComm_t comm, cudaStream_t stream));
NCCL_COLL_DECLARE(ncclResult_t, ncclGroupStart, (void));
NCCL_COLL_DECLARE(ncclResult_t, ncclGroupEnd, (void));

#undef NCCL_COLL_DECLARE

#ifdef __cplusplus
}
#endif
#endif /* NCCL_H_ */
