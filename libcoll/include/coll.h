/* libcoll public API: communicators (init, split, timeouts, async errors), the
 * collectives (all-reduce, broadcast, reduce, all-gather, reduce-scatter, all-to-all,
 * barrier), point to point and groups, status codes and error messages. The only header a
 * user of the library includes. */
#ifndef COLL_H
#define COLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define COLL_API __attribute__((visibility("default")))
#else
#define COLL_API
#endif

/* Ownership and lifetime rules.
 *  1. coll_comm_t is created by coll_comm_init_* and owned by the caller until
 *     coll_comm_destroy(); every request must be waited for (or the communicator
 *     aborted) before destroy. Using a communicator after destroy is detected only on
 *     a best-effort basis (COLL_ERR_INVALID_ARGUMENT while the freed memory still
 *     holds the dead marker): do not rely on it.
 *  2. Buffers passed to a collective belong to the library from the call until the
 *     request completes (blocking calls: until they return). Do not read the output
 *     or write the input in between. Host buffers may start at any byte address (a
 *     float64 buffer need not start at a multiple of 8); device buffers must be aligned
 *     to their element size.
 *  3. A coll_request_t is owned by the caller; coll_request_wait() or a
 *     coll_request_test() that reports completion frees it and sets it to NULL.
 *  4. Calls on one communicator are issued from one thread at a time and every rank
 *     issues the same collectives in the same order (like NCCL and MPI). One exception:
 *     coll_send_tagged_async and coll_recv_tagged_async may be called from another
 *     thread while a call is running on the communicator, so that a thread blocked in
 *     a collective cannot hold up a send that a peer needs before it joins that
 *     collective. Testing and waiting for their requests follows the rule.
 *  5. Strings returned by coll_status_string() are static; coll_last_error() points
 *     to thread-local storage valid until the next libcoll call on that thread.
 *  6. After coll_comm_abort(), every pending and later call on the communicator
 *     returns COLL_ERR_ABORTED, whatever its other arguments, with a message naming the
 *     rank and the call ("rank 1: coll_group_start: the communicator was aborted"). That
 *     includes the queries: coll_comm_rank, coll_comm_size and coll_comm_mem_stats answer
 *     nothing more, and coll_comm_get_async_error returns COLL_ERR_ABORTED and also sets
 *     *async_error to it. The exceptions: coll_comm_destroy(), which is all that
 *     remains to be called; a second coll_comm_abort(), which returns COLL_OK and does
 *     nothing; coll_trace_enabled(), which returns no status and keeps answering; and
 *     coll_request_wait/test of a request that completed before the abort, which return
 *     its own result. A *failed* communicator (a dead peer, a timeout, a mismatch) is
 *     different: the calls that start work (collectives, send/recv, coll_group_end,
 *     coll_comm_split, coll_mem_alloc) return its error, while the others keep working. */

/* Status codes: 0 is success, positive means "not yet", negative are errors.
 * X(name, value, description) */
#define COLL_STATUS_MAP(X)                                                                 \
  X(COLL_OK, 0, "success")                                                                 \
  X(COLL_IN_PROGRESS, 1, "operation still in progress")                                    \
  X(COLL_ERR_INVALID_ARGUMENT, -1, "invalid argument")                                     \
  X(COLL_ERR_NO_MEMORY, -2, "out of memory")                                               \
  X(COLL_ERR_SYSTEM, -3, "system call failed")                                             \
  X(COLL_ERR_TIMEOUT, -4, "timed out")                                                     \
  X(COLL_ERR_REMOTE, -5, "a peer failed or closed the connection")                        \
  X(COLL_ERR_PROTOCOL, -6, "malformed or unexpected message")                              \
  X(COLL_ERR_MISMATCH, -7, "ranks called different collectives")                           \
  X(COLL_ERR_ABORTED, -8, "communicator aborted")                                          \
  X(COLL_ERR_UNSUPPORTED, -9, "not supported in this build or on this system")             \
  X(COLL_ERR_NOT_FOUND, -10, "not found")                                                  \
  X(COLL_ERR_REFUSED, -11, "refused (wrong job token)")                                    \
  X(COLL_ERR_INTERNAL, -12, "internal error")                                             \
  X(COLL_ERR_REVOKED, -13, "communicator revoked")                                         \
  X(COLL_ERR_FENCED, -14, "this rank was declared failed by the survivors")

typedef enum {
#define COLL_STATUS_ENUM(name, value, text) name = value,
  COLL_STATUS_MAP(COLL_STATUS_ENUM)
#undef COLL_STATUS_ENUM
} coll_status_t;

/* "COLL_ERR_TIMEOUT" for COLL_ERR_TIMEOUT; "COLL_UNKNOWN_STATUS" for other values. */
COLL_API const char *coll_status_name(coll_status_t status);
/* A short English description of the status. */
COLL_API const char *coll_status_string(coll_status_t status);
/* The detailed message of the last failed call on this thread ("" if none):
 * which rank, which peer, which system call. */
COLL_API const char *coll_last_error(void);

typedef enum {
  COLL_INT8 = 0,
  COLL_UINT8,
  COLL_INT32,
  COLL_UINT32,
  COLL_INT64,
  COLL_UINT64,
  COLL_FLOAT16,
  COLL_BFLOAT16,
  COLL_FLOAT32,
  COLL_FLOAT64,
  COLL_FLOAT8E4M3, /* OCP fp8 e4m3 ("float8_e4m3", NVIDIA's __nv_fp8_e4m3): no Inf, +-448 */
  COLL_FLOAT8E5M2, /* OCP fp8 e5m2 ("float8_e5m2", __nv_fp8_e5m2): Inf and NaN, +-57344 */
  COLL_DTYPE_COUNT
} coll_dtype_t;
/* fp8 reductions follow NCCL's rule, one pairwise step at a time: both operands widened
 * to float16, the op in float16 (the exact result rounded to nearest even), the result
 * narrowed to fp8 with round to nearest even and saturation (cuda_fp8.h's
 * __NV_SATFINITE): out-of-range values and infinities become +-448 (e4m3) or +-57344
 * (e5m2), every NaN becomes 0x7F. So an e5m2 reduction never returns Inf, even from an
 * Inf input. MIN and MAX return an operand (NaN on either side gives NaN, as for the
 * other float types; NCCL's __hmin/__hmax would return the other operand). The result
 * depends on the order of the pairwise steps, which is the algorithm's (ring, tree, ...):
 * bit-identical on every rank, not necessarily NCCL's bits. */

/* COLL_AVG is the sum divided by the number of ranks. On integer types the sum wraps as
 * COLL_SUM's does and the division truncates toward zero: int32 1, 1 and 2 on three ranks
 * average to 1, and -1, -1 and -2 to -1. Float types sum (in the dtype, step by step, as
 * COLL_SUM) and then divide once, rounded to the dtype (float16 / bfloat16 through
 * float32; fp8 through float16: the exact quotient rounded to float16, then to fp8,
 * saturating). NCCL instead multiplies each input by 1/nranks (rounded to the dtype)
 * before summing: the two orders can differ in the last bit, and an fp8 sum that
 * saturates (or a float16 one that overflows) here averages to max/nranks where NCCL's
 * would not have overflowed.
 * COLL_BAND, COLL_BOR and COLL_BXOR (bitwise and, or, xor) take the integer types only
 * (int8 ... uint64); on a float type every reducing call returns
 * COLL_ERR_INVALID_ARGUMENT ("op band needs an integer type, not float32"). Bool tensors
 * reduce as uint8 (0 or 1): their "sum" (logical or) is COLL_BOR or COLL_MAX, their
 * "product" (logical and) COLL_BAND or COLL_MIN.
 * Values from COLL_OP_COUNT up are ops a communicator made (coll_op_create_premul_sum). */
typedef enum {
  COLL_SUM = 0,
  COLL_PROD,
  COLL_MIN,
  COLL_MAX,
  COLL_AVG,
  COLL_BAND,
  COLL_BOR,
  COLL_BXOR,
  COLL_OP_COUNT
} coll_op_t;

/* Size in bytes of one element, 0 for an unknown type. */
COLL_API size_t coll_dtype_size(coll_dtype_t dtype);
/* "float32", "sum", "band", ...; NULL for unknown values (and for a communicator's
 * premul_sum ops, which only their communicator knows). */
COLL_API const char *coll_dtype_name(coll_dtype_t dtype);
COLL_API const char *coll_op_name(coll_op_t op);

typedef enum {
  COLL_ALGO_AUTO = 0, /* chosen by the cost model (see docs/architecture.md) */
  COLL_ALGO_RING,
  COLL_ALGO_TREE,
  COLL_ALGO_HD, /* recursive halving-doubling (Rabenseifner) */
  COLL_ALGO_MASTER, /* gather to rank 0, reduce, broadcast: DataParallel's pattern */
  COLL_ALGO_ARENA,  /* all-reduce through one shared-memory arena, all ranks on one host;
                     * messages up to COLL_SMALL_BYTES take its one-step small-message path */
  COLL_ALGO_RING_NODES, /* the ring visiting ranks node by node (hosts from rendezvous) */
  COLL_ALGO_TWO_LEVEL,  /* reduce-scatter in each node, all-reduce across nodes, all-gather
                         * in each node; equal ranks per node, else ring_nodes */
  COLL_ALGO_LEADERS,    /* reduce to one rank per node, all-reduce among them, broadcast in
                         * each node (small messages; NCCL's tree shape from 64 KiB) */
  COLL_ALGO_COUNT
} coll_algo_t;

/* "ring", "tree", "hd", "master", "arena", "ring_nodes", "two_level", "leaders", "auto";
 * NULL for unknown values. */
COLL_API const char *coll_algo_name(coll_algo_t algo);

typedef struct coll_comm coll_comm_t;
typedef struct coll_request coll_request_t;

/* ---- The store: libcoll's own, or one the caller provides ----
 * Ranks meet, publish their addresses, learn of each other's failures and agree on who
 * survived through a key-value store that outlives them. By default that is libcoll's own
 * TCP store at MASTER_ADDR:MASTER_PORT, hosted by a launcher (collrun) or by rank 0. A
 * program that already has a store (PyTorch's c10d store, which torchrun's agent hosts
 * outside every rank) hands it in through this table and libcoll keeps everything there;
 * libcoll's own store is one implementation of the same table (docs/architecture.md,
 * "The store").
 * Every function returns COLL_OK or an error status within timeout_ms (always > 0):
 * COLL_ERR_TIMEOUT when the time passed first, COLL_ERR_ABORTED after interrupt, any
 * other error when the store failed (libcoll writes the message, naming the call and the
 * key). Values are bytes; a counter (add) is stored as its decimal text. A handle is used
 * by one thread at a time; libcoll makes more with clone and releases those. */
#define COLL_STORE_OPS_VERSION 1
typedef struct coll_store_ops {
  int version; /* COLL_STORE_OPS_VERSION */
  coll_status_t (*set)(void *store, const char *key, const void *value, size_t len,
                       int timeout_ms);
  /* Wait until key exists, then return its value in a buffer from malloc (libcoll frees
   * it) and its length. */
  coll_status_t (*get)(void *store, const char *key, void **value, size_t *len, int timeout_ms);
  /* Add delta to the counter at key (absent: 0); *new_value its value after. */
  coll_status_t (*add)(void *store, const char *key, int64_t delta, int64_t *new_value,
                       int timeout_ms);
  /* If key's value equals expected (expected NULL: if key is absent), set it to desired.
   * *current: the value stored now, from malloc (NULL when the key is still absent). */
  coll_status_t (*compare_set)(void *store, const char *key, const void *expected,
                               size_t expected_len, const void *desired, size_t desired_len,
                               void **current, size_t *current_len, int timeout_ms);
  /* Whether every key exists, without waiting (*all_exist 1 or 0). */
  coll_status_t (*check)(void *store, const char *const *keys, size_t nkeys, int *all_exist,
                         int timeout_ms);
  /* Delete key; *deleted (may be NULL) 1 when it existed. */
  coll_status_t (*delete_key)(void *store, const char *key, int *deleted, int timeout_ms);
  /* Another handle on the same store for another thread (a new connection). */
  coll_status_t (*clone)(void *store, int timeout_ms, void **copy);
  /* Release a handle that clone made. */
  void (*release)(void *store);
  /* Optional (NULL: the store has none). set_owned: set key, and the store deletes it when
   * this handle's connection closes (its process died): how libcoll tells a dead rank from
   * a slow one at no cost. Without it, each rank renews a lease on the store every
   * COLL_LEASE_MS and a rank whose lease stops moving for COLL_LEASE_DEAD_MS is dead. */
  coll_status_t (*set_owned)(void *store, const char *key, const void *value, size_t len,
                             int timeout_ms);
  /* Optional: from another thread, make the call in progress on this handle and every
   * later one return COLL_ERR_ABORTED. Without it libcoll's own calls use short waits. */
  void (*interrupt)(void *store);
  /* Optional: a name for messages ("TCPStore at 10.0.0.1:29500"). */
  const char *(*describe)(void *store);
  /* Optional: wait until every key exists (NULL: libcoll gets them one after another). */
  coll_status_t (*wait)(void *store, const char *const *keys, size_t nkeys, int timeout_ms);
  /* Optional: how many keys the store holds (libcoll never needs it; a program may). */
  coll_status_t (*num_keys)(void *store, int64_t *count, int timeout_ms);
} coll_store_ops_t;

/* libcoll's own store through the same table, for a program that wants to keep its own
 * keys where the ranks meet (the PyTorch backend makes torch.distributed's env://
 * rendezvous use collrun's store this way). Opens one connection to the store at
 * host:port with the job token and returns the table and a handle in *ops and *store (a
 * handle for one thread at a time; ops->clone makes more); release each with
 * ops->release. host NULL: the launcher's environment, MASTER_ADDR (unset: "127.0.0.1")
 * and MASTER_PORT (required), and port is not used; else port is 1..65535. token NULL:
 * COLL_JOB_TOKEN (unset: none). timeout_ms: how long to keep trying to reach the store
 * (it may start later), > 0, or 0 for COLL_TIMEOUT_MS or 30 s. Errors:
 * COLL_ERR_INVALID_ARGUMENT naming what is missing or malformed (no MASTER_PORT, a port
 * out of range), COLL_ERR_TIMEOUT when nothing answered at host:port in time,
 * COLL_ERR_REFUSED when the store wants another token. The store is the one collrun
 * hosts (COLL_STORE_HOSTED=1), which outlives every rank; a rank 0 that hosts it (no
 * launcher) takes it down at its coll_comm_destroy. PyTorch's TCPStore speaks another
 * protocol: connecting to one times out, the message quoting the malformed reply. The
 * table has every optional function (owned keys, interrupt, describe, wait, num_keys). */
COLL_API coll_status_t coll_store_connect(const char *host, int port, const char *token,
                                          int timeout_ms, const coll_store_ops_t **ops,
                                          void **store);

/* Explicit configuration. Zero-initialise, then set what you need:
 *   coll_config_t cfg = {0}; cfg.rank = r; cfg.size = n; cfg.master_addr = "127.0.0.1"; ... */
typedef struct {
  int rank; /* 0 .. size-1 */
  int size; /* number of ranks, >= 1 */
  int local_rank; /* rank among the processes of this host; -1: unknown */
  const char *master_addr; /* store host, not empty; NULL: "127.0.0.1" */
  int master_port;         /* store port, 1..65535; checked for every size, though one rank opens
                              no store */
  const char *token; /* job token shared by all ranks; NULL: COLL_JOB_TOKEN or none */
  int host_store; /* 1: this rank hosts the store; 0: never; -1: rank 0 hosts it
                     unless COLL_STORE_HOSTED=1 says a launcher already does */
  int timeout_ms; /* per-operation deadline; 0: COLL_TIMEOUT_MS or the default */
  /* The caller's store (both set, or both NULL: libcoll's own at master_addr:master_port).
   * libcoll clones the handle for its own use and never releases the one given here;
   * master_addr, master_port, token and host_store are then not used. */
  const coll_store_ops_t *store_ops;
  void *store;
} coll_config_t;

/* Create a communicator from the launcher's environment: RANK/WORLD_SIZE/LOCAL_RANK
 * (collrun, torchrun), SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, or
 * OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK; the store at MASTER_ADDR:MASTER_PORT, which
 * under Slurm and Open MPI may be left unset: then derived from the launcher's variables
 * (docs/cluster.md). A job of one rank opens no store and needs neither (when set, they
 * are checked all the same). */
COLL_API coll_status_t coll_comm_init_env(coll_comm_t **comm);

/* What the launcher tells this process, read the way coll_comm_init_env reads it, without
 * joining anything: whether to join a job at all, and the local rank (which GPU). */
typedef struct {
  int found;      /* 0: no launcher's variables are set (not an error); the rest 0, -1 */
  int rank, size; /* RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS */
  int local_rank; /* LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID; -1: not given */
  const char *launcher; /* "torchrun/collrun", "Open MPI" or "Slurm"; NULL: none */
} coll_launch_info_t;
/* Fill *info; a malformed or out-of-range variable is COLL_ERR_INVALID_ARGUMENT naming
 * it. Open MPI's variables are read before Slurm's (mpirun inside an allocation
 * inherits SLURM_PROCID). */
COLL_API coll_status_t coll_launch_info(coll_launch_info_t *info);
/* Create a communicator from an explicit configuration. Collective over all ranks. */
COLL_API coll_status_t coll_comm_init_config(const coll_config_t *config, coll_comm_t **comm);

/* Init from an id, as NCCL does: one process calls coll_get_unique_id, the program hands
 * the id to every rank by its own means (its store, a file, MPI_Bcast), and every rank
 * calls coll_comm_init_rank with it. The id names a rendezvous store that the process
 * which made it hosts on a background thread: the first communicator made from the id in
 * that process takes the store over and stops it at destroy; otherwise it lives until
 * the process exits. One id makes one communicator (a subgroup needs an id of its own).
 * The address in the id is this host's: COLL_SOCKET_IFNAME's IPv4 address, else the
 * first non-loopback one, else 127.0.0.1. */
#define COLL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[COLL_UNIQUE_ID_BYTES];
} coll_unique_id_t;
COLL_API coll_status_t coll_get_unique_id(coll_unique_id_t *id);
/* timeout_ms: as coll_config_t's (0: COLL_TIMEOUT_MS or the default). */
COLL_API coll_status_t coll_comm_init_rank(coll_comm_t **comm, int nranks, coll_unique_id_t id,
                                           int rank, int timeout_ms);
/* Free the communicator. Collective only in the sense that peers see the connections
 * close; it never blocks longer than the communicator's timeout. NULL is allowed. */
COLL_API coll_status_t coll_comm_destroy(coll_comm_t *comm);
/* Stop all pending work at once; pending and later calls fail with COLL_ERR_ABORTED
 * (rule 6). Safe to call from another thread; a second call does nothing. */
COLL_API coll_status_t coll_comm_abort(coll_comm_t *comm);
COLL_API coll_status_t coll_comm_rank(const coll_comm_t *comm, int *rank);
COLL_API coll_status_t coll_comm_size(const coll_comm_t *comm, int *size);

/* Sum, product, min, max, average (integer averages truncate toward zero, see COLL_AVG),
 * bitwise and/or/xor (integer types) or a premul_sum (below) of `count` elements across
 * all ranks; every rank gets the (bit-identical) result in recvbuf. sendbuf == recvbuf
 * is in-place. */
COLL_API coll_status_t coll_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm);
COLL_API coll_status_t coll_all_reduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                             coll_dtype_t dtype, coll_op_t op,
                                             coll_comm_t *comm, coll_request_t **request);

/* Pre-multiplied sum (NCCL's ncclRedOpCreatePreMulSum, PyTorch's ReduceOp.PREMUL_SUM).
 * An op valid on comm's reducing calls (all_reduce, reduce, reduce_scatter and their
 * _async and _stream forms): each rank's input times *scalar (one element of dtype, read
 * from host memory now), then summed. Ops are handed out from COLL_OP_COUNT up, never
 * twice in one process, and each belongs to the communicator that made it. Each rank may
 * pass its own scalar; every rank must use a premul_sum op in the same call (the
 * fingerprint says "premul_sum", whatever handle each rank got). Errors
 * (COLL_ERR_INVALID_ARGUMENT): a call whose dtype is not the op's, an op of another
 * communicator, a destroyed one or an unknown value. Integers multiply in their own type
 * (wrapping), float16/bfloat16 through float32. fp8 takes its scalar as one fp8 byte of
 * the op's format (as NCCL's ncclScalarHostImmediate does): each input times the scalar
 * in float16 (the exact product rounded to float16), narrowed to fp8 (nearest even,
 * saturating), then summed by fp8 steps (COLL_SUM's rule above). The input is scaled
 * into recvbuf (in place works) or, where recvbuf cannot hold it (reduce at a non-root,
 * reduce_scatter), into a buffer of the call's own; then summed. These calls never take
 * the zero-copy window path (coll_mem_alloc). On device buffers the input is scaled when
 * the call runs (a _stream call: once its stream reaches it) through pinned host memory
 * (no scaling kernel): in the pinned copy when the call is staged, else into a device
 * buffer of the communicator's own. Calls already issued keep their scalar: the op may
 * be destroyed before they complete. */
COLL_API coll_status_t coll_op_create_premul_sum(coll_comm_t *comm, const void *scalar,
                                                 coll_dtype_t dtype, coll_op_t *op);
/* Forget a premul_sum op of comm; later calls naming it fail. */
COLL_API coll_status_t coll_op_destroy(coll_comm_t *comm, coll_op_t op);
/* Copy `count` elements of rank `root`'s buf to every rank's buf. */
COLL_API coll_status_t coll_broadcast(void *buf, size_t count, coll_dtype_t dtype, int root,
                                      coll_comm_t *comm);
COLL_API coll_status_t coll_broadcast_async(void *buf, size_t count, coll_dtype_t dtype,
                                            int root, coll_comm_t *comm,
                                            coll_request_t **request);

/* CUDA device buffers (builds with CUDA). Every collective accepts device pointers
 * (found with cudaPointerGetAttributes; sendbuf and recvbuf on the same GPU, the same GPU
 * for every call of a communicator, and every rank passing device buffers for the call).
 * The plain and _async calls first wait for the work queued on CUDA's legacy default
 * stream. The _stream calls follow NCCL's contract: they enqueue and return; the
 * collective runs after everything already queued on cuda_stream (a cudaStream_t; NULL
 * is the legacy default stream), and work queued on it afterwards waits for the result.
 * Synchronise the stream before reading the result or destroying the communicator. An
 * error during a stream call fails the communicator: later calls return it.
 * Host buffers work with the _stream calls too (the call waits for the stream, then runs
 * like the blocking one). Ranks of one host use cuda_ipc (device staging, reductions as
 * kernels; several ranks may share a GPU), other pairs stage through pinned host memory.
 * COLL_CUDA=0 makes the library treat every pointer as host memory (no CUDA context).
 * _stream calls are refused inside a group (a recorded call would run at
 * coll_group_end, out of the stream's order). */
COLL_API coll_status_t coll_all_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                              coll_dtype_t dtype, coll_op_t op,
                                              coll_comm_t *comm, void *cuda_stream);
COLL_API coll_status_t coll_broadcast_stream(void *buf, size_t count, coll_dtype_t dtype,
                                             int root, coll_comm_t *comm, void *cuda_stream);
/* The other collectives on a stream (buffers and counts as their blocking forms below).
 * Every _stream call is refused inside a group. Point-to-point calls take host buffers only
 * (a device buf is COLL_ERR_UNSUPPORTED). */
COLL_API coll_status_t coll_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                          coll_dtype_t dtype, coll_op_t op, int root,
                                          coll_comm_t *comm, void *cuda_stream);
COLL_API coll_status_t coll_all_gather_stream(const void *sendbuf, void *recvbuf,
                                              size_t sendcount, coll_dtype_t dtype,
                                              coll_comm_t *comm, void *cuda_stream);
COLL_API coll_status_t coll_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
                                                  size_t recvcount, coll_dtype_t dtype,
                                                  coll_op_t op, coll_comm_t *comm,
                                                  void *cuda_stream);
COLL_API coll_status_t coll_all_to_all_stream(const void *sendbuf, void *recvbuf, size_t count,
                                              coll_dtype_t dtype, coll_comm_t *comm,
                                              void *cuda_stream);

/* Wait until the request completes (or the communicator's deadline passes), free it
 * and set *request to NULL. Returns the operation's status. */
COLL_API coll_status_t coll_request_wait(coll_request_t **request);
/* COLL_IN_PROGRESS while running; otherwise the operation's status, and the request is
 * freed and *request set to NULL. */
COLL_API coll_status_t coll_request_test(coll_request_t **request);

/* Library statistics for benchmarks: bytes of staging memory this rank allocated for
 * its transports and schedules (current, and the most at once), and of this rank's
 * shared windows (coll_mem_alloc). device_bytes: of what the communicator holds, the GPU
 * memory (the cuda_ipc rings, which staging_bytes counts too, and the device path's
 * scratch, which it does not); 0 on a communicator that never saw a device buffer. */
typedef struct {
  size_t staging_bytes;
  size_t staging_bytes_peak;
  size_t window_bytes;
  size_t device_bytes;
} coll_mem_stats_t;
COLL_API coll_status_t coll_comm_mem_stats(const coll_comm_t *comm, coll_mem_stats_t *stats);

/* The collectives the cost model can predict (coll_comm_predict). */
typedef enum {
  COLL_PREDICT_ALL_REDUCE = 0,
  COLL_PREDICT_BROADCAST,
  COLL_PREDICT_REDUCE,
  COLL_PREDICT_ALL_GATHER,     /* count: elements each rank sends */
  COLL_PREDICT_REDUCE_SCATTER, /* count: elements each rank receives */
  COLL_PREDICT_ALL_TO_ALL,     /* count: elements per peer */
  COLL_PREDICT_BARRIER,
  COLL_PREDICT_SEND, /* one message of count elements: one step */
  COLL_PREDICT_GATHER,
  COLL_PREDICT_SCATTER,
  COLL_PREDICT_COUNT
} coll_predict_t;
/* The cost model's time for one call on comm, without running it: the algorithm comm
 * would pick (its forced one if coll_comm_set_algo/COLL_ALGO chose one, else
 * algo_select's cheapest) and algo_predict's seconds for it, with the cost constants the
 * ranks agreed at init: the number `coll-sim` prints as "predicted time" for that
 * algorithm, size and rank count. Not modelled: the one-host arena and small-message
 * paths an all-reduce may take instead (predicted as the schedule they replace), and
 * waiting for late peers. algo may be NULL. Local. */
COLL_API coll_status_t coll_comm_predict(const coll_comm_t *comm, coll_predict_t collective,
                                         size_t count, coll_dtype_t dtype, double *seconds,
                                         coll_algo_t *algo);

/* Registered memory (like ncclMemAlloc + ncclCommRegister). COLLECTIVE: every rank calls
 * coll_mem_alloc with the same bytes, in the same order as its other calls on comm.
 * *ptr receives zeroed, page-aligned host memory of at least `bytes`. On a communicator
 * whose ranks all share one host over shm (with the arena, COLL_WINDOW=1), it is a
 * shared segment every peer has mapped: an all-reduce whose sendbuf and recvbuf lie in
 * such windows at the same offsets on every rank then reads and writes the peers'
 * buffers directly (zero-copy, no staging). Elsewhere it is plain memory, so callers need
 * one code path. It first waits for this rank's queued asynchronous calls to finish.
 * coll_mem_free (collective too) releases it; coll_mem_free(comm, NULL) does nothing and
 * is not collective. Every window still allocated is released by coll_comm_destroy. No
 * call may be using it then. */
COLL_API coll_status_t coll_mem_alloc(coll_comm_t *comm, size_t bytes, void **ptr);
COLL_API coll_status_t coll_mem_free(coll_comm_t *comm, void *ptr);

/* Force an algorithm for this communicator's later all-reduces (COLL_ALGO_AUTO restores
 * the cost model). Every rank must choose the same; a disagreement fails the next call
 * with COLL_ERR_MISMATCH. The environment variable COLL_ALGO does the same at init. */
COLL_API coll_status_t coll_comm_set_algo(coll_comm_t *comm, coll_algo_t algo);

/* Tracing (COLL_TRACE=FILE.json writes FILE.rank<r>.json per rank, Trace Event format
 * for Perfetto / chrome://tracing; see docs/algorithms.md). A span marks a phase of the
 * caller's own work on the calling thread's track, on the library's clock, so it lines
 * up with the collectives; spans nest and each begin needs an end on the same thread.
 * Without COLL_TRACE they record nothing and return COLL_OK. */
COLL_API coll_status_t coll_trace_span_begin(coll_comm_t *comm, const char *name);
COLL_API coll_status_t coll_trace_span_end(coll_comm_t *comm, const char *name);
/* 1 when this communicator writes a trace, else 0. */
COLL_API int coll_trace_enabled(const coll_comm_t *comm);

/* ---- More collectives. `count` is per rank, as in NCCL. Every rank must call the same
 * collective with the same arguments (root, count, type, op) in the same order: a
 * difference fails the call on EVERY rank (none returns COLL_OK) with COLL_ERR_MISMATCH
 * and the same message naming two neighbouring calls ("rank 3 called all_reduce(float32,
 * 1048576, sum) #1580, rank 4 called broadcast(float32, 1048576, root 0) #1580").
 * Any other failure (a dead peer, a deadline, a broken link) seen by some ranks reaches
 * the others within a store round trip: their current call fails with its status and
 * "first failure in the communicator: ...", or, outside a call, the async error and the
 * next call report it. A deadline's error comes within the timeout plus 500 ms. */

/* Reduce `count` elements of every rank into recvbuf at `root` (recvbuf is not touched
 * elsewhere and may be NULL there). sendbuf == recvbuf is in-place. */
COLL_API coll_status_t coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_dtype_t dtype, coll_op_t op, int root, coll_comm_t *comm);
COLL_API coll_status_t coll_reduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                         coll_dtype_t dtype, coll_op_t op, int root,
                                         coll_comm_t *comm, coll_request_t **request);
/* recvbuf (nranks * sendcount elements) gets rank r's sendbuf at r * sendcount. In-place:
 * sendbuf == recvbuf + rank * sendcount elements. */
COLL_API coll_status_t coll_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                       coll_dtype_t dtype, coll_comm_t *comm);
COLL_API coll_status_t coll_all_gather_async(const void *sendbuf, void *recvbuf, size_t sendcount,
                                             coll_dtype_t dtype, coll_comm_t *comm,
                                             coll_request_t **request);
/* sendbuf holds nranks blocks of recvcount; rank r gets the reduction of every rank's
 * block r. In-place: recvbuf == sendbuf + rank * recvcount elements. */
COLL_API coll_status_t coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           coll_dtype_t dtype, coll_op_t op, coll_comm_t *comm);
COLL_API coll_status_t coll_reduce_scatter_async(const void *sendbuf, void *recvbuf,
                                                 size_t recvcount, coll_dtype_t dtype,
                                                 coll_op_t op, coll_comm_t *comm,
                                                 coll_request_t **request);
/* Block p (count elements) of sendbuf goes to rank p; block p of recvbuf comes from rank
 * p. The buffers must not overlap. */
COLL_API coll_status_t coll_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_dtype_t dtype, coll_comm_t *comm);
COLL_API coll_status_t coll_all_to_all_async(const void *sendbuf, void *recvbuf, size_t count,
                                             coll_dtype_t dtype, coll_comm_t *comm,
                                             coll_request_t **request);
/* Gather, scatter and all_to_allv take host buffers only: a device buffer is refused with
 * COLL_ERR_UNSUPPORTED (the _stream forms wait for the stream, then run on host buffers
 * like the blocking call). Algorithms: the root talking to every rank (COLL_ALGO_MASTER)
 * or a binomial tree (COLL_ALGO_TREE / COLL_ALGO_HD), chosen by the cost model; all_to_allv
 * is a pairwise exchange.
 * Rank `root` gets every rank's sendbuf (sendcount elements) in recvbuf, rank r's at
 * r * sendcount; recvbuf is not touched elsewhere and may be NULL there. In-place at the root:
 * sendbuf == recvbuf + root * sendcount elements. */
COLL_API coll_status_t coll_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   coll_dtype_t dtype, int root, coll_comm_t *comm);
COLL_API coll_status_t coll_gather_async(const void *sendbuf, void *recvbuf, size_t sendcount,
                                         coll_dtype_t dtype, int root, coll_comm_t *comm,
                                         coll_request_t **request);
COLL_API coll_status_t coll_gather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                          coll_dtype_t dtype, int root, coll_comm_t *comm,
                                          void *cuda_stream);
/* Rank r gets block r (recvcount elements) of root's sendbuf; sendbuf is read only at root and may
 * be NULL elsewhere. In-place at the root: recvbuf == sendbuf + root * recvcount elements. */
COLL_API coll_status_t coll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    coll_dtype_t dtype, int root, coll_comm_t *comm);
COLL_API coll_status_t coll_scatter_async(const void *sendbuf, void *recvbuf, size_t recvcount,
                                          coll_dtype_t dtype, int root, coll_comm_t *comm,
                                          coll_request_t **request);
COLL_API coll_status_t coll_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           coll_dtype_t dtype, int root, coll_comm_t *comm,
                                           void *cuda_stream);
/* Rank r sends sendcounts[p] elements from sendbuf + sdispls[p] to rank p, and receives
 * recvcounts[p] elements from rank p at recvbuf + rdispls[p] (counts and displacements in elements,
 * nranks entries each, copied at the call). sendcounts[p] on rank r must equal recvcounts[r] on
 * rank p; a difference is COLL_ERR_MISMATCH naming both ranks. Zero counts are allowed. The buffers
 * must not overlap. Each call first exchanges the counts (one small message per peer), then the
 * data. Not allowed inside a group (COLL_ERR_UNSUPPORTED). */
COLL_API coll_status_t coll_all_to_allv(const void *sendbuf, const size_t *sendcounts,
                                        const size_t *sdispls, void *recvbuf,
                                        const size_t *recvcounts, const size_t *rdispls,
                                        coll_dtype_t dtype, coll_comm_t *comm);
COLL_API coll_status_t coll_all_to_allv_async(const void *sendbuf, const size_t *sendcounts,
                                              const size_t *sdispls, void *recvbuf,
                                              const size_t *recvcounts, const size_t *rdispls,
                                              coll_dtype_t dtype, coll_comm_t *comm,
                                              coll_request_t **request);
/* Returns once every rank has entered the barrier. */
COLL_API coll_status_t coll_barrier(coll_comm_t *comm);
COLL_API coll_status_t coll_barrier_async(coll_comm_t *comm, coll_request_t **request);

/* Point to point. The k-th send from a to b meets the k-th receive of b from a, with the
 * same byte count. Not collective (not fingerprinted). A send or receive to oneself (peer
 * == this rank) is refused with COLL_ERR_INVALID_ARGUMENT. A send may wait for the
 * matching receive, and requests (these included) run one at a time in issue order:
 * exchanges in both directions belong in a group (the tagged calls below need none). */
COLL_API coll_status_t coll_send(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                 coll_comm_t *comm);
COLL_API coll_status_t coll_recv(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                 coll_comm_t *comm);
COLL_API coll_status_t coll_send_async(const void *buf, size_t count, coll_dtype_t dtype,
                                       int peer, coll_comm_t *comm, coll_request_t **request);
COLL_API coll_status_t coll_recv_async(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                       coll_comm_t *comm, coll_request_t **request);
#define COLL_ANY_SOURCE (-1)
/* Tagged point to point: a receive matches the first unmatched send to this rank from `peer`
 * with the same tag (tag >= 0), whatever order the sends and receives with different tags were
 * issued in; messages of one (sender, tag) pair arrive in order. peer == COLL_ANY_SOURCE receives
 * the first matching message from any rank and writes the sender's rank to *source (may be NULL;
 * for the _async form written by the time the request completes). The byte counts of the matched
 * send and receive must be equal, else both fail with COLL_ERR_MISMATCH naming peer, tag and both
 * sizes. Not collective.
 * These run outside the request queue's issue order and over connections of their own, so
 * none of these deadlock when every call is on one thread: both ranks sending before either
 * receives, tags received in another order than sent, tagged calls between collectives (a
 * collective issued after pending tagged sends runs and completes), a blocking send while
 * its receiver first posts a receive for another tag. A send of up to COLL_P2P_EAGER_BYTES
 * (64 KiB) is copied and completes at once; a larger one completes once its receive matched
 * and the data left this rank. So the "both fail" of a size mismatch holds for the larger
 * sends; a small send has completed already and only its receive fails (the sender logs a
 * warning). Every wait has the communicator's deadline (an unmatched receive fails with
 * COLL_ERR_TIMEOUT naming peer and tag); a dead peer fails the operations with it with
 * COLL_ERR_REMOTE naming it; after coll_comm_abort they fail with COLL_ERR_ABORTED. Inside
 * a group the blocking forms are posted at once and finish at the outermost coll_group_end
 * (its result); the _async forms are accepted there too. Host buffers only. Messages that
 * arrived before their receive are kept (freed at destroy if never received). */
COLL_API coll_status_t coll_send_tagged(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                        int tag, coll_comm_t *comm);
COLL_API coll_status_t coll_send_tagged_async(const void *buf, size_t count, coll_dtype_t dtype,
                                              int peer, int tag, coll_comm_t *comm,
                                              coll_request_t **request);
COLL_API coll_status_t coll_recv_tagged(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                        int tag, coll_comm_t *comm, int *source);
COLL_API coll_status_t coll_recv_tagged_async(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                              int tag, coll_comm_t *comm, int *source,
                                              coll_request_t **request);
/* Groups (like ncclGroupStart/End, per communicator, may nest): between start and the
 * outermost end, coll_send, coll_recv and blocking collectives are only recorded (they
 * return COLL_OK; their buffers belong to the library until coll_group_end returns).
 * coll_group_end runs them in order, every run of consecutive sends and receives posted
 * together as one step, so exchanges cannot deadlock; it returns the first error.
 * _async calls are refused inside a group. */
COLL_API coll_status_t coll_group_start(coll_comm_t *comm);
COLL_API coll_status_t coll_group_end(coll_comm_t *comm);

/* ---- Communicators ---- */
#define COLL_SPLIT_NOCOLOR (-1)
/* Collective over comm (like MPI_Comm_split / ncclCommSplit): ranks passing the same
 * color >= 0 form a new communicator, ranked by (key, rank in comm). A negative color
 * (COLL_SPLIT_NOCOLOR) takes part but gets *newcomm = NULL. The children meet through
 * comm's store: destroy them before comm. */
COLL_API coll_status_t coll_comm_split(coll_comm_t *comm, int color, int key,
                                       coll_comm_t **newcomm);
/* Deadline of every later operation on comm: no progress for timeout_ms is
 * COLL_ERR_TIMEOUT naming the awaited peer (and a hang report, see docs). Local. */
COLL_API coll_status_t coll_comm_set_timeout(coll_comm_t *comm, int timeout_ms);
/* How long a waiting call polls before it sleeps, when every rank of this host has a
 * CPU of its own (default 10000 us, longer than a scheduler tick, so that a peer
 * delayed by other work on its CPU does not find this rank asleep). With more ranks
 * than CPUs the short spin stays, so that a waiting rank gives its CPU to the rank it
 * waits for, and COLL_SPIN_US, when set, wins. Local; call it with no collective in
 * flight. */
COLL_API coll_status_t coll_comm_set_poll_us(coll_comm_t *comm, int poll_us);
/* The error that made comm unusable (a dead peer, a timeout, a mismatch), or COLL_OK;
 * with an error, coll_last_error() holds its message. Safe from any thread, like
 * ncclCommGetAsyncError. */
COLL_API coll_status_t coll_comm_get_async_error(coll_comm_t *comm, coll_status_t *async_error);


/* ---- Surviving a lost rank (docs/elastic.md) ----
 * The chain: a call fails (a dead peer: COLL_ERR_REMOTE naming it) or someone revokes;
 * every survivor calls coll_comm_agree on the broken communicator and gets the same
 * answer (who failed, the AND of everyone's flag, how many processes wait to join);
 * they coll_comm_shrink without the failed ranks and go on; later coll_comm_grow takes
 * joiners (coll_comm_join) in. Agreement is decided in the rendezvous store, so it needs
 * a store that outlives the ranks: collrun's (COLL_STORE_HOSTED=1), or a process that
 * is not a rank. When the store is unreachable these calls fail with a clear error
 * within the communicator's timeout, never hang. */

/* Make every member's pending and later calls on comm fail with COLL_ERR_REVOKED ("rank
 * R revoked the communicator"), within a store round trip of this call on one host; the
 * failure of a dead peer does the same with that failure's status. Local and
 * idempotent (a second call returns COLL_OK); safe from another thread. What is left
 * to call on comm: coll_comm_agree, coll_comm_shrink, coll_comm_grow_id and
 * coll_comm_destroy. */
COLL_API coll_status_t coll_comm_revoke(coll_comm_t *comm);

#define COLL_AGREE_MAX_FAILED 64
typedef struct {
  uint32_t flag;  /* in: this rank's; out: the bitwise AND over the ranks that took part */
  int nfailed;    /* out: ranks declared failed, ascending in failed[] */
  int failed[COLL_AGREE_MAX_FAILED];
  int joiners;    /* out: processes waiting in coll_comm_join for this communicator's
                   * lineage when the answer was decided (0 when nfailed > 0) */
} coll_agreement_t;
/* Fault-tolerant agreement over comm's members (MPI ULFM's MPI_Comm_agree plus the
 * failed set): every rank that takes part gets the same answer. A rank is declared
 * failed when it has not taken part once every other rank has and it is known dead (its
 * process is gone: the store dropped the liveness key its connection owned), or when the
 * agreement deadline passes without it (COLL_AGREE_MS, default the communicator's
 * timeout). A member that has waited a quarter of the deadline revokes comm, so a rank
 * stuck in a call on it comes to agree in time. A rank that arrives after it was declared failed
 * (it was stopped, or slow) gets COLL_ERR_FENCED and must stop using the lineage: so
 * there is never a split. Works on a revoked or failed communicator (that is what it
 * is for) and on a healthy one (one per training step answers "did the last call
 * succeed on every rank?"). Every member must call it the same number of times.
 * The agreement also writes each failed rank as dead, so the shrink and destroy never
 * wait for them. COLL_ERR_TIMEOUT / COLL_ERR_REMOTE when the store is unreachable. */
COLL_API coll_status_t coll_comm_agree(coll_comm_t *comm, coll_agreement_t *agreement);
/* The same without a flag: only the failed set (ranks ascending, *nfailed of them,
 * at most `capacity` written). */
COLL_API coll_status_t coll_comm_agree_failed(coll_comm_t *comm, int *failed, int capacity,
                                              int *nfailed);

/* A new communicator of comm's members without the `nexclude` ranks in `exclude`
 * (normally an agreement's failed set: every survivor must pass the same set), ranked in
 * comm's order. Only the survivors take part and no failed rank is contacted; comm may
 * be revoked or failed, with calls still pending (they fail with its error). comm stays
 * to be destroyed, which then takes no collective step. Excluding this rank is
 * COLL_ERR_INVALID_ARGUMENT. The new communicator uses new connections, segments and
 * store keys: nothing of comm's traffic can reach it. */
COLL_API coll_status_t coll_comm_shrink(coll_comm_t *comm, const int *exclude, int nexclude,
                                        coll_comm_t **newcomm);

/* The id joiners pass to coll_comm_join: it names comm's store and lineage (comm and
 * every communicator shrunk or grown from it), not one communicator, so it stays valid
 * after shrinks and grows. Local; any member gives the same id. */
COLL_API coll_status_t coll_comm_grow_id(coll_comm_t *comm, coll_unique_id_t *id);
/* Collective over comm's members: take the next `joiners` processes waiting in
 * coll_comm_join (in the order they registered) as ranks size..size+joiners-1 of a new
 * communicator; comm's ranks keep theirs. Waits up to comm's timeout for that many to
 * have registered. comm stays usable and must be destroyed by the caller. */
COLL_API coll_status_t coll_comm_grow(coll_comm_t *comm, int joiners, coll_comm_t **newcomm);
/* A new process: register with the lineage named by id (NULL: the launcher's store,
 * MASTER_ADDR/MASTER_PORT/COLL_JOB_TOKEN, and the lineage of coll_comm_init_env's
 * communicator), wait up to timeout_ms (0: COLL_TIMEOUT_MS or the default) for the
 * members to grow, and return the new communicator (coll_comm_rank says the rank). A
 * member lineage that shrinks meanwhile is followed. */
COLL_API coll_status_t coll_comm_join(const coll_unique_id_t *id, int timeout_ms,
                                      coll_comm_t **newcomm);

#ifdef __cplusplus
}
#endif
#endif /* COLL_H */
