/* The communicator: what one rank holds for one group of ranks (store, transports,
 * agreed constants, executor state, the progress thread and its queue), and the internal
 * functions the core files share. */
#ifndef COLL_CORE_COMM_H
#define COLL_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "algo/schedule.h"
#include "bootstrap/store.h"
#include "coll.h"
#include "core/fp_agree.h"
#include "transport/transport.h"

/* A live communicator carries COMM_MAGIC; destroy overwrites it, so most uses after
 * destroy are caught (best effort: the memory may be reused by then). */
#define COMM_MAGIC 0x636f6c6c636f6d6dULL /* "collcomm" */
#define COMM_DEAD_MAGIC 0x6465616463636f6dULL
#define COMM_KEY_PREFIX_MAX 64
#define COMM_MESSAGE_MAX 1024
/* Schedules kept per communicator: DDP repeats a handful of bucket sizes. */
#define EXEC_CACHE_SIZE 8
/* The executor's window (see exec.c): steps ahead of the oldest unfinished one, and how
 * far back (in ops) hazards are tracked. */
#define EXEC_STEPS_AHEAD 8
#define EXEC_LOOKBACK 256

/* One point-to-point transfer (coll_send / coll_recv), in bytes. */
typedef struct {
  bool send;
  int peer;
  void *buf;
  size_t bytes;
} exec_p2p_t;

/* One collective call as the executor sees it; the algorithm is already resolved. */
typedef struct {
  coll_kind_t kind;
  const void *sendbuf; /* broadcast: same as recvbuf */
  void *recvbuf;
  size_t count; /* per rank (schedule.h); P2P: total bytes */
  coll_dtype_t dtype;
  coll_op_t op;
  int root;
  coll_algo_t algo; /* never AUTO */
  /* Device buffers (exec_cuda.c): set by exec_cuda_classify, never by the caller. */
  bool on_device;    /* sendbuf and recvbuf are CUDA memory on `device` */
  bool device_ready; /* exec_cuda has set the device run up: run the schedule */
  int device;
  void *stream;      /* stream calls: the caller's cudaStream_t */
  atomic_int *gate;  /* stream calls: > 0 once the stream has reached the call */
  /* P2P: the transfers, posted together in one step (a group), or just `one`. */
  const exec_p2p_t *p2p;
  size_t np2p;
  exec_p2p_t one;
  /* Zero-copy window all-reduce (window.h): the windows sendbuf and recvbuf lie in, set
   * by api_call.c when both do; valid while the call runs (freeing them is the caller's
   * error). */
  const struct window *win_send, *win_recv;
} exec_call_t;

/* What the executor is doing now, for the hang report (hang.c). */
typedef struct {
  coll_kind_t kind;
  uint64_t seq;
  size_t count;
  coll_dtype_t dtype;
  size_t step, nsteps;
  int waiting_peer; /* -1: none */
  const char *waiting_what;
} exec_state_t;

/* Per peer, the transport's monotonic counters as last seen and what we posted. */
typedef struct {
  uint64_t sends_posted;
  uint64_t recvs_posted;
  uint64_t sends_done;
  uint64_t recvs_done;
} exec_peer_t;

typedef struct {
  bool valid;
  coll_kind_t kind;
  size_t count;
  coll_dtype_t dtype;
  int root;
  coll_algo_t algo;
  size_t segment_bytes;
  bool in_place; /* hazards differ when INPUT and OUTPUT are one buffer */
  uint64_t last_use;
  sched_t sched;
  uint32_t *op_step;   /* step index of each op */
  uint8_t *state;      /* per op: OP_IDLE, OP_POSTED, OP_DONE (reset every run) */
  uint64_t *seq;       /* per posted op: its index in the peer's send or receive order */
  uint32_t *dep_start; /* nops + 1: op i waits for deps[dep_start[i] .. dep_start[i+1]) */
  uint32_t *deps;
} exec_cache_entry_t;

typedef struct {
  exec_peer_t *peers;    /* nranks */
  uint8_t *chan_blocked; /* 2 * nranks: per peer, send and receive channel (scan scratch) */
  void *scratch;
  size_t scratch_bytes;
  exec_cache_entry_t cache[EXEC_CACHE_SIZE];
  uint64_t use_clock;
  int64_t spin_ns;      /* spin this long on progress() before blocking in set_wait */
  int64_t pure_spin_ns; /* of which this long without yielding the core */
  uint64_t seq;         /* collectives started (fingerprints) */
  exec_fp_t fp_out;     /* this rank's fingerprint of its current (or last) collective */
  fpa_t fpa;            /* the agreement on it (fp_agree.h) */
  exec_state_t state;
} exec_t;

struct coll_request {
  coll_comm_t *comm;
  struct coll_request *next;
  exec_call_t call;
  atomic_int done;
  coll_status_t status;
  char message[COMM_MESSAGE_MAX]; /* coll_last_error() of the executing thread */
};

struct coll_comm {
  uint64_t magic;
  int rank;
  int nranks;
  int local_rank;
  int local_count; /* ranks on this host (from the host ids) */
  bool spin_crowded;  /* local_count exceeds the usable CPUs: waits spin briefly */
  bool spin_from_env; /* COLL_SPIN_US was set: coll_comm_set_poll_us leaves it */
  int timeout_ms;
  char key_prefix[COMM_KEY_PREFIX_MAX];
  store_server_t *server; /* when this rank hosts the store */
  store_client_t *store;
  transport_set_t *transports;

  /* Agreed at init (rank 0's values) and by coll_comm_set_algo. */
  coll_algo_t algo; /* AUTO: cost model */
  algo_cost_t cost;
  size_t segment_bytes;    /* COLL_CHUNK_SIZE; 0: the algorithm's default */
  bool algo_check_pending; /* set_algo was called: agree before the next collective */
  int algo_epoch;

  exec_t exec;

  /* Progress thread and its FIFO; mu guards everything below up to `epoch`. */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t queue_cv; /* work queued or stop requested */
  pthread_cond_t done_cv;  /* a request completed or the communicator aborted */
  coll_request_t *head;
  coll_request_t *tail;
  bool busy; /* some thread is running the executor */
  bool stop;
  uint64_t epoch; /* completed operations */

  atomic_int aborted;
  atomic_llong heartbeat_ns; /* last time the executor saw progress (for waiters) */
  /* First failure, this rank's or (from the failure watcher) another's: the
   * communicator is unusable afterwards. failed_mu orders the writers; the message is
   * written before `failed` is published and never changes afterwards. */
  atomic_int failed;
  pthread_mutex_t failed_mu;
  char failed_message[COMM_MESSAGE_MAX];
  struct failure_watch *watch; /* failure_watch.c; NULL for one rank */
  size_t staging_peak;

  /* Groups (group.c): calls recorded between coll_group_start and the outermost end. */
  int group_depth;
  exec_call_t *group_calls;
  size_t group_n, group_cap;
  /* Split (split.c): how the store was reached, and splits done so far. */
  char store_addr[256];
  int store_port;
  char token[128];
  uint64_t splits;
  bool prefix_preset; /* a split child: key_prefix was given, not agreed */
  uint8_t barrier_byte; /* coll_barrier's output */
  struct exec_cuda *cuda; /* device-buffer state (exec_cuda.c); NULL until used */
  struct trace *trace; /* COLL_TRACE (core/trace.h); NULL when off */
  struct arena *arena; /* the arena all-reduce's segment (core/arena.h); NULL: none */
  struct window_set *windows; /* coll_mem_alloc's windows (core/window.h); NULL: none */
};

/* ---- comm.c ---- */
/* COLL_ERR_INVALID_ARGUMENT with a message unless comm is a live communicator. */
coll_status_t comm_check(const coll_comm_t *comm, const char *what);
/* Refuse work on an aborted or failed communicator. */
coll_status_t comm_check_usable(coll_comm_t *comm, const char *what);
/* Record a failure that leaves the transports in an unknown state (the message is
 * coll_last_error()). The first one wins. */
void comm_mark_failed(coll_comm_t *comm, coll_status_t status);
/* Another rank failed first (the failure watcher): "first failure in the communicator:
 * <its message>" becomes this communicator's failure. */
void comm_mark_failed_by_peer(coll_comm_t *comm, coll_status_t status, const char *message);
void comm_update_staging_peak(coll_comm_t *comm);
/* The store value under `key` as text in out (cut to cap - 1 bytes), waiting up to the
 * communicator's timeout for it to appear. */
coll_status_t comm_store_get_text(coll_comm_t *comm, const char *key, char *out, size_t cap);

/* ---- launch_env.c ---- */
/* Fill cfg from the launcher's environment (torchrun, SLURM, Open MPI). Strings in cfg
 * point into the environment, or into addr_buf when the store's host was derived from
 * the launcher's variables (Slurm's node list, Open MPI's URI). */
coll_status_t launch_env_config(coll_config_t *cfg, char *addr_buf, size_t addr_cap);
/* COLL_ALGO as an algorithm (AUTO when unset); an unknown name is an error. */
coll_status_t launch_env_algo(coll_algo_t *algo);

/* ---- rendezvous.c ---- */
/* Agree on the key prefix, host ids, forced algorithm and transport and cost constants,
 * then connect the transports. Collective over all ranks. */
coll_status_t rdv_connect(coll_comm_t *comm, coll_algo_t env_algo);
/* Check through the store that every rank chose the same algorithm with set_algo. */
coll_status_t rdv_check_algo(coll_comm_t *comm);
/* Final barrier at destroy: nobody leaves before all arrived, and the store host waits
 * until all have finished with the store. */
coll_status_t rdv_finish(coll_comm_t *comm);

/* ---- exec.c ---- */
coll_status_t exec_init(exec_t *exec, int rank, int nranks);
void exec_free(exec_t *exec);
/* Run one collective to completion on the calling thread. */
coll_status_t exec_run(coll_comm_t *comm, const exec_call_t *call);
/* ---- exec_cuda.c (device buffers; stubs of mem_cuda.h without CUDA) ---- */
/* Find where call's buffers live (call->on_device, call->device); a host/device mix
 * is an argument error. Caller's thread. */
coll_status_t exec_cuda_classify(coll_comm_t *comm, const char *what, exec_call_t *call);
/* Before a device call is queued (caller's thread): stream, transport path, cuda_ipc
 * connections at the first device call. */
coll_status_t exec_cuda_prepare(coll_comm_t *comm, const exec_call_t *call);
/* Run a device call (exec_run hands them over). */
coll_status_t exec_cuda_run(coll_comm_t *comm, const exec_call_t *call);
/* Device scratch of at least `bytes` for a cuda_ipc run, installed in comm->exec. */
coll_status_t exec_cuda_scratch(coll_comm_t *comm, size_t bytes);
/* How device calls move data, for logs: "cuda_ipc", "pinned staging", "device copy". */
const char *exec_cuda_path_name(const coll_comm_t *comm);
/* COLL_ERR_UNSUPPORTED when buf is device memory (point-to-point calls). */
coll_status_t exec_cuda_refuse_device(coll_comm_t *comm, const char *what, const void *buf);
/* A local copy (reduce false) or reduction of a device run, done before returning. */
coll_status_t exec_cuda_local(coll_comm_t *comm, const exec_call_t *call, void *dst,
                              const void *src, size_t count, bool reduce);
/* Queue call on its CUDA stream (coll_*_stream). */
coll_status_t exec_cuda_submit_stream(coll_comm_t *comm, exec_call_t *call);
/* Plain calls on device buffers: wait for the legacy default stream first. */
coll_status_t exec_cuda_wait_default_stream(coll_comm_t *comm);
void exec_cuda_free(coll_comm_t *comm);


/* ---- exec_deps.c ---- */
/* Fill e->deps for e->sched (op_step must be set). */
coll_status_t exec_deps_build(exec_cache_entry_t *e, bool in_place);

/* Bytes of scratch the executor holds. */
size_t exec_scratch_bytes(const exec_t *exec);
/* The transport name used towards the ring neighbour, for logs. */
const char *exec_transport_name(coll_comm_t *comm);

/* ---- hang.c ---- */
/* The hang report. A rank whose deadline passed (or that a peer's timeout stopped)
 * publishes where it is (exec.state) under "<prefix>hang/<rank>"; false when the store
 * did not answer. */
bool hang_publish(coll_comm_t *comm);
/* A rank whose own deadline passed, after hang_publish and the failure record: gather
 * the others' states for a short grace (they publish as the failure reaches them), name
 * the ranks that are behind, publish the report (the first one wins, and its writer
 * writes COLL_HANG_REPORT) and append it to coll_last_error(). */
void hang_collect(coll_comm_t *comm, bool store_ok);
/* A rank that a peer's timeout stopped: publish, then append the report when it comes
 * within the grace. */
void hang_join(coll_comm_t *comm);

/* ---- failure.c ---- */
/* The bound of every store call on a failure's path (failure records, hang reports):
 * min(timeout, 150 ms), so that an unreachable store costs a failure little time. */
int comm_failure_store_ms(const coll_comm_t *comm);
/* A parsed failure record, "rank|status|message". */
typedef struct {
  int rank;
  coll_status_t status;
  char message[COMM_MESSAGE_MAX];
} failure_t;
bool failure_parse(const char *value, size_t len, failure_t *out);
/* After a failure: publish the communicator's first failure (and dead_peer, >= 0 when a
 * connection failed) through the store; when another rank failed first, append its
 * message to coll_last_error(), so a rank that only saw the cascade names the cause.
 * Returns the status to report: st, or the first failure's when st is a broken
 * connection (COLL_ERR_REMOTE, COLL_ERR_PROTOCOL) that another rank's failure explains. */
coll_status_t failure_record(coll_comm_t *comm, coll_status_t st, int dead_peer);
/* The error tail of every execution path (exec.c, arena.c), once the message has its
 * "rank R: what: " prefix: mark the communicator failed and publish the failure (a
 * timeout with the hang report); for a call a peer's failure stopped, only join the
 * hang report. Returns st. */
coll_status_t failure_conclude(coll_comm_t *comm, coll_status_t st, int dead_peer,
                               bool stopped_by_peer);
/* Destroy of a failed communicator, after its connections closed: ranks announce they
 * left; the store's host keeps serving until every rank left or was seen dead (bounded),
 * so the others can still read the failure record. */
void failure_linger(coll_comm_t *comm);

/* ---- failure_watch.c ---- */
/* Start (at init, after the rendezvous) and stop (first thing at destroy) the thread
 * that learns of other ranks' failures through the store. */
coll_status_t failure_watch_start(coll_comm_t *comm);
void failure_watch_stop(coll_comm_t *comm);

/* ---- api_call.c ---- */
/* Argument checks, algorithm choice and the INFO line for a collective call (all kinds
 * but P2P); on success *call is ready for the executor. */
coll_status_t api_prepare(coll_comm_t *comm, const char *what, exec_call_t *call);
/* The INFO line of a call: algorithm and transport chosen, and why (the cost model's
 * estimate of every algorithm that implements the collective). */
void api_log_choice(coll_comm_t *comm, const char *what, const exec_call_t *call);
/* Run a prepared call: recorded inside a group, else blocking or through *request. */
coll_status_t api_submit(coll_comm_t *comm, const char *what, exec_call_t *call,
                         coll_request_t **request);
/* A collective call from its entry point: prepared, then submitted (async: through
 * *request, which must not be NULL). Plain and async calls on device buffers first wait
 * for the legacy default stream. */
coll_status_t api_run(coll_comm_t *comm, const char *what, exec_call_t call,
                      coll_request_t **request, bool async);
/* A _stream call: device buffers are queued on `stream` (exec_cuda.c); host buffers wait
 * for it, then run like the blocking call. Refused inside a group. */
coll_status_t api_run_stream(coll_comm_t *comm, const char *what, exec_call_t call, void *stream);

/* ---- group.c ---- */
/* Record a prepared call in the open group. */
coll_status_t group_record(coll_comm_t *comm, const exec_call_t *call);
void group_free(coll_comm_t *comm);

/* ---- comm.c ---- */
/* Create a communicator; prefix (NULL: agreed through the store) names its keys. */
coll_status_t comm_create(const coll_config_t *config, const char *prefix, coll_comm_t **out);

/* ---- progress.c ---- */
coll_status_t progress_start(coll_comm_t *comm);
/* Drain the queue (aborted work completes at once) and join the thread. */
void progress_stop(coll_comm_t *comm);
/* Run call: on the calling thread when nothing is queued (blocking fast path), else
 * through the queue and wait. */
coll_status_t progress_run_blocking(coll_comm_t *comm, const exec_call_t *call);
/* Queue call for the progress thread. */
coll_status_t progress_submit(coll_comm_t *comm, const exec_call_t *call, coll_request_t **request);
/* When no thread runs the executor and work is queued, run the oldest queued request
 * on this thread; false when there was nothing to do. */
bool progress_help(coll_comm_t *comm);
/* Wake every waiter (abort). */
void progress_wake_all(coll_comm_t *comm);

#endif
