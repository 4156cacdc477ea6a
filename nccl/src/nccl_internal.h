/* Internals of libnccl.so.2 (the NCCL API on coll.h): the communicator wrapper, the
 * status and type mapping, the thread's group, and the export macro that gives every
 * function its ncclX and pncclX names. */
#ifndef NCCL_INTERNAL_H
#define NCCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "coll.h"
#include "nccl.h"

/* NCCL_EXPORT(ret, name, params) { body }: defines pncclX (strong, exported) and ncclX, a
 * weak alias of it, as NCCL does (a profiler may define ncclX and call pncclX). */
#define NCCL_EXPORT_STR(x) #x
#define NCCL_EXPORT(ret, name, params)                                                           \
  __attribute__((visibility("default"))) ret p##name params;                                     \
  __attribute__((visibility("default"), weak, alias(NCCL_EXPORT_STR(p##name)))) ret name params; \
  ret p##name params

enum { NCCL_COMM_MAGIC = 0x6e63636c, NCCL_MAX_PREMUL_OPS = 64, NCCL_ERROR_MAX = 1024 };

/* One premul-sum operator of a communicator: the ncclRedOp_t handed out is
 * ncclNumOps + its index. ncclScalarHostImmediate: libcoll's op, its scalar copied at
 * creation. ncclScalarDevice: only the pointer, read at each call that uses the op
 * (nccl_premul_at_call), which makes a libcoll op for that call alone. */
typedef struct {
  bool used;
  ncclScalarResidence_t residence;
  coll_op_t coll_op;  /* ncclScalarHostImmediate only */
  const void *scalar; /* ncclScalarDevice only: device, managed or host memory */
  ncclDataType_t dtype;
} nccl_premul_t;

/* A shrink or grow that a non-blocking call runs on the init thread (elastic.c). */
struct nccl_elastic_job;

struct ncclComm {
  unsigned magic;
  coll_comm_t *coll; /* NULL until the init completes */
  int rank, nranks, device;
  /* ncclInProgress while a non-blocking or grouped init runs, then its result. */
  _Atomic int init_result;
  pthread_t init_thread;
  bool init_thread_started;
  ncclUniqueId id; /* kept for a deferred init */
  /* Non-NULL: the init thread makes this one by a shrink or grow instead (elastic.c). */
  struct nccl_elastic_job *elastic;
  pthread_mutex_t error_lock;
  char last_error[NCCL_ERROR_MAX]; /* the message of this communicator's last failure */
  nccl_premul_t premul[NCCL_MAX_PREMUL_OPS];
  /* ncclCommRevoke: pending work stopped, collectives refused (revoke.c). */
  atomic_bool revoked;
  /* ncclCommSuspend .. ncclCommResume: calls refused (suspend.c). */
  atomic_bool suspended;
  bool suspended_mem; /* ... with NCCL_SUSPEND_MEM */
  /* ncclCommGetUniqueId handed out an id that no ncclCommGrow used yet. */
  bool grow_id_pending;
  /* The same on every rank of the communicator (ncclCommQueryProperties' commHash):
   * from the id it was made with, or its parent's hash and its split color. */
  uint64_t hash;
};

/* FNV-1a of bytes, continuing from h. */
static inline uint64_t nccl_hash(uint64_t h, const void *bytes, size_t n) {
  const unsigned char *p = bytes;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* ---- errors.c ---- */
/* libcoll's status as NCCL's result code. */
ncclResult_t nccl_result(coll_status_t status);
/* Record a failure: coll_last_error()'s text (or the formatted one) becomes the thread's
 * and comm's (may be NULL) last error. Returns result. */
ncclResult_t nccl_fail_coll(ncclComm_t comm, coll_status_t status);
__attribute__((format(printf, 3, 4))) ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t result,
                                                             const char *fmt, ...);
/* The communicator if it is one this library made and whose init finished; otherwise the
 * error (named with `what`) as a result. */
ncclResult_t nccl_check_comm(ncclComm_t comm, const char *what);

/* The communicator if it may take calls now: checked as nccl_check_comm, and neither
 * revoked nor suspended (ncclInvalidUsage naming which). */
ncclResult_t nccl_check_usable(ncclComm_t comm, const char *what);

/* ---- config.c ---- */
/* What this library takes from a caller's ncclConfig_t. */
typedef struct {
  int blocking; /* 1 unless the caller set 0 */
} nccl_config_t;
/* Read config (NULL: the defaults) as NVIDIA's library does: its magic checked, only the
 * fields within its `size` and known to its `version`, values in range. comm (may be
 * NULL) receives the error. */
ncclResult_t nccl_read_config(ncclComm_t comm, const ncclConfig_t *config, nccl_config_t *out,
                              const char *what);
/* Check a nccl*Config collective's per-call options (NULL allowed); *event receives its
 * launchCompletionEvent (NULL when none). */
ncclResult_t nccl_read_coll_config(ncclComm_t comm, const ncclCollConfig_t *config, void **event,
                                   const char *what);

/* ---- types.c ---- */
/* NCCL's type as libcoll's; ncclInvalidArgument (recorded) for fp8 and unknown values. */
ncclResult_t nccl_dtype(ncclComm_t comm, ncclDataType_t in, coll_dtype_t *out, const char *what);
/* NCCL's operator as libcoll's (built-ins and this communicator's premul ops). For a
 * ncclScalarDevice premul op *out is left alone and *scalar_at_call is its scalar's
 * pointer (else NULL): the call reads it when it is issued. */
ncclResult_t nccl_op(ncclComm_t comm, ncclRedOp_t in, ncclDataType_t dtype, coll_op_t *out,
                     const void **scalar_at_call, const char *what);

/* ---- group.c ---- */
/* A call the thread's group defers to ncclGroupEnd, or runs now outside a group. */
typedef enum {
  NCCL_CALL_INIT,
  NCCL_CALL_ALL_REDUCE,
  NCCL_CALL_BROADCAST,
  NCCL_CALL_REDUCE,
  NCCL_CALL_ALL_GATHER,
  NCCL_CALL_REDUCE_SCATTER,
  NCCL_CALL_ALL_TO_ALL,
  NCCL_CALL_GATHER,
  NCCL_CALL_SCATTER,
  NCCL_CALL_SEND,
  NCCL_CALL_RECV,
} nccl_call_kind_t;

typedef struct {
  nccl_call_kind_t kind;
  ncclComm_t comm;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  coll_dtype_t dtype;
  coll_op_t op;
  /* Non-NULL: op is a ncclScalarDevice premul op with this scalar, whose value is read
   * when the call is issued to libcoll (nccl_run_call: at the call, or at ncclGroupEnd
   * for a grouped one). */
  const void *premul_scalar;
  int root; /* or the peer of a send/receive */
  cudaStream_t stream;
  /* A nccl*Config call's launchCompletionEvent: recorded on stream once the call is
   * issued (nccl_run_call). */
  void *launch_event;
} nccl_call_t;

/* ---- types.c (calls) ---- */
/* The libcoll op of a call whose premul op is ncclScalarDevice: the scalar's value read
 * now (nccl_read_scalar), made into a libcoll premul op for this call alone. The caller
 * destroys it (coll_op_destroy) once the call is issued: libcoll copies the scalar into
 * the call at submission. */
ncclResult_t nccl_premul_at_call(const nccl_call_t *call, coll_op_t *op);

/* Run the call now (outside a group) or record it for ncclGroupEnd. */
ncclResult_t nccl_submit(const nccl_call_t *call);
/* 1 inside ncclGroupStart/End on this thread. */
bool nccl_in_group(void);
/* Run one call now on its communicator (used by the group and by nccl_submit). */
ncclResult_t nccl_run_call(const nccl_call_t *call);
/* End one level of the thread's group: at the outermost end, *calls (malloc'ed, the
 * caller frees it) and *n are the recorded calls and *recorded the first recording
 * error; inside a nested group *n is 0. ncclInvalidUsage outside any group. */
ncclResult_t nccl_group_take_calls(nccl_call_t **calls, size_t *n, ncclResult_t *recorded);
/* Run calls taken from a group as ncclGroupEnd does. */
ncclResult_t nccl_run_calls(nccl_call_t *calls, size_t n);

/* ---- collectives.c ---- */
/* Check and map a call's communicator, type and operator (op NULL: no reduction). */
ncclResult_t nccl_prepare_call(nccl_call_t *call, ncclComm_t comm, ncclDataType_t datatype,
                               const ncclRedOp_t *op, const char *what);

/* ---- memory.c ---- */
/* The user pointer of a window this library registered (NULL if win is not one of
 * comm's). */
void *nccl_window_user_ptr(ncclComm_t comm, ncclWindow_t win);
/* Read a scalar of `bytes` (at most 8) into host memory dst: from device or managed
 * memory in the order of stream (a copy queued on it, then a wait for the stream), from
 * host memory by a plain read now. ncclUnhandledCudaError (recorded on comm) when the
 * copy fails. */
ncclResult_t nccl_read_scalar(ncclComm_t comm, void *dst, const void *src, size_t bytes,
                              cudaStream_t stream, const char *what);
/* Copy bytes from src to dst in the order of stream: a device copy queued on it, or for
 * host memory a memcpy once the stream's earlier work is done. */
coll_status_t nccl_copy_on_stream(void *dst, const void *src, size_t bytes, void *stream);
/* Device buffers of sends and receives travel through host copies: stage_in gives the
 * host buffer to pass to libcoll (NULL: the user's buffer is host memory; a send's data
 * is copied in after its stream's earlier work), stage_out copies a received one back
 * (when ok) and frees it. */
coll_status_t nccl_p2p_stage_in(const nccl_call_t *p, void **host);
coll_status_t nccl_p2p_stage_out(const nccl_call_t *p, void *host, bool ok);

/* ---- init.c ---- */
/* A wrapper whose init is still to run (init_result ncclInProgress); id may be NULL. */
ncclComm_t nccl_comm_new(int nranks, int rank, const ncclUniqueId *id);
/* The init of comm (blocking), from its stored id and rank. */
ncclResult_t nccl_init_now(ncclComm_t comm);
/* Run comm's init (nccl_init_now, or nccl_elastic_make when comm->elastic is set) on a
 * thread of its own: ncclInProgress, or the failure to start it. */
ncclResult_t nccl_start_init_thread(ncclComm_t comm, const char *what);
/* Wait for a non-blocking init's thread, if there is one. */
void nccl_join_init(ncclComm_t comm);
/* Free the wrapper (not its libcoll communicator). */
void nccl_comm_free(ncclComm_t comm);

/* ---- elastic.c ---- */
/* Make comm by the shrink or grow in comm->elastic (freed here): sets comm->coll and
 * init_result, and returns the result. */
ncclResult_t nccl_elastic_make(ncclComm_t comm);

/* ---- destroy.c ---- */
/* Record that child was split from parent: parent's destroy waits for child's. */
bool nccl_closer_add_child(coll_comm_t *child, coll_comm_t *parent);

#endif
