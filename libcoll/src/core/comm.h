/* The communicator: the base (identity, health; base/base.h) plus what the ranks agreed
 * (algorithm, cost constants, segment size), the host links and the executor, the paths'
 * state (arena and windows, the CUDA path), and the request queue with its progress
 * thread. Also the functions core/ shares: lifetime, rendezvous, the queue (progress.c),
 * the dispatch to a path (dispatch.c) and stream calls. */
#ifndef COLL_CORE_COMM_H
#define COLL_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "algo/schedule.h"
#include "base/base.h"
#include "base/call.h"
#include "coll.h"
#include "cuda/cuda_path.h"
#include "exec/exec.h"
#include "membership/membership.h"
#include "onehost/arena.h"
#include "onehost/small.h"
#include "onehost/window.h"
#include "tagged/tagged.h"
#include "transport/transport.h"

/* A live communicator carries COMM_MAGIC; destroy overwrites it, so most uses after
 * destroy are caught (best effort: the memory may be reused by then). */
#define COMM_MAGIC 0x636f6c6c636f6d6dULL /* "collcomm" */
#define COMM_DEAD_MAGIC 0x6465616463636f6dULL

/* A call as api_prepare leaves it: the user's call with its algorithm resolved, and where
 * its buffers live, which decides the path (path_choice.c): device buffers (the CUDA path)
 * or both buffers in shared windows (the window path). */
typedef struct {
  coll_call_t call;
  cuda_where_t where;
  window_pair_t windows;
} prepared_call_t;

/* A premul_sum op this communicator made (api/ops.c): its handle, type and scalar. */
typedef struct {
  coll_op_t op;
  coll_dtype_t dtype;
  unsigned char scalar[8];
} comm_premul_op_t;

struct coll_request {
  coll_comm_t *comm;
  struct coll_request *next;
  prepared_call_t call;
  atomic_int done;
  int64_t run_after_ns; /* the progress thread leaves it to a waiter until then (cheap clock) */
  int64_t submitted_ns; /* a user's _async call (progress_submit with grace): when, on
                         * coll_cheap_now_ns's clock (common/cheap_clock.h) */
  coll_status_t status;
  char message[BASE_MESSAGE_MAX]; /* coll_last_error() of the executing thread */
  tagged_op_t *tagged; /* a tagged send or receive (tagged/tagged.c), never queued; else NULL */
};

/* Waits at once in a row before an _async call gets the grace (soon_streak below). */
#define GRACE_STREAK 8

struct coll_comm {
  uint64_t magic;
  coll_base_t base; /* identity, health, waiting, fingerprints (base/base.h) */
  transport_set_t *transports;

  /* Agreed at init (rank 0's values) and by coll_comm_set_algo. */
  coll_algo_t algo; /* AUTO: cost model */
  algo_cost_t cost;
  size_t segment_bytes;    /* COLL_CHUNK_SIZE; 0: the algorithm's default */
  bool algo_check_pending; /* set_algo was called: agree before the next collective */
  int algo_epoch;

  exec_t exec;           /* the schedule executor (exec/exec.h) */
  exec_links_t links;    /* the host transports as the executor uses them */
  arena_t *arena;        /* the arena all-reduce's segment (onehost/arena.h); NULL: none */
  window_set_t *windows; /* coll_mem_alloc's windows (onehost/window.h); NULL: none */
  cuda_path_t *cuda;     /* device-buffer state (cuda/cuda_path.h), made at init */
  tagged_t *tagged;      /* tagged point to point (tagged/tagged.h); NULL for one rank */

  /* Progress thread and its FIFO (progress.c); mu guards everything below up to
   * `idle_long` except the two atomics, which the blocking fast path reads without it.
   * Other files use the queue through progress.h's functions. */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t queue_cv; /* work queued or stop requested */
  pthread_cond_t done_cv;  /* a request completed or the communicator aborted */
  coll_request_t *head;
  coll_request_t *tail;
  /* Some thread runs the executor: claimed by compare-and-swap, by the blocking fast
   * path without the mutex, by the queue's runners under it (progress.c). */
  _Atomic bool busy;
  /* Requests linked into the queue and not yet taken off it (changed under mu). A queued
   * request is counted until its runner has claimed `busy`, so while one is pending or
   * running, queued > 0 or busy holds: the fast path's two loads see it. */
  _Atomic int queued;
  bool stop;
  int64_t async_grace_ns; /* COLL_ASYNC_GRACE_US (comm.c); see progress_submit */
  bool idle_long;         /* the progress thread sleeps without looking at the queue */
  /* How many of the user's last _async calls in a row were waited for at once
   * (request.c), up to GRACE_STREAK; zeroed when a graced call's grace ran out with
   * nobody waiting (progress.c). A new call gets the grace once it reaches GRACE_STREAK:
   * the caller submits and waits. One late wait a step (the trainer's first bucket,
   * submitted in the middle of backward) keeps it below. */
  _Atomic int soon_streak;
  /* How long the last _async call of each size ran, in ns (0: none yet), indexed by the
   * bit length of its bytes. The next call of a size that ran a tenth of the grace or
   * longer gets no grace (progress_submit). */
  _Atomic int64_t async_run_ns[65];
  /* Threads inside a done_cv wait loop (counted in before their first look at what they
   * wait for): a finishing request takes the mutex again to wake them only when there
   * are some (progress.c, execute). */
  _Atomic int done_waiters;

  size_t staging_peak;

  /* Groups (api/p2p_group.c): calls recorded between coll_group_start and the outermost end. */
  int group_depth;
  prepared_call_t *group_calls;
  size_t group_n, group_cap;
  /* Split (split.c): splits done so far. */
  uint64_t splits;
  bool prefix_preset; /* key_prefix was given (a split child, or a communicator
                       * membership/ planned), not agreed */
  /* premul_sum ops (api/ops.c), live ones only; used by the calling thread alone. */
  comm_premul_op_t *premul_ops;
  size_t premul_n, premul_cap;
  uint8_t barrier_byte; /* coll_barrier's output */

  membership_t members; /* its lineage, agreements, shrinks and grows (membership/) */
};

/* ---- comm.c ---- */
/* COLL_ERR_INVALID_ARGUMENT with a message unless comm is a live communicator. */
coll_status_t comm_check(const coll_comm_t *comm, const char *what);
/* Create a communicator; prefix (NULL: agreed through the store) names its keys. */
coll_status_t comm_create(const coll_config_t *config, const char *prefix, coll_comm_t **out);
/* Where config's store is (token: config's or COLL_JOB_TOKEN's), and the reverse: the
 * store fields of a child's config (split, shrink, grow) on the parent's place. */
void comm_store_place(const coll_config_t *config, const char *token, store_place_t *place);
void comm_config_on(const store_place_t *place, coll_config_t *config);
/* The new communicator a shrink, grow or join planned (membership/), in the plan's
 * lineage; its rendezvous watches the members' liveness in the parent. */
coll_status_t comm_create_member(const member_plan_t *plan, coll_comm_t **out);
/* The same from coll_comm_init_rank: server (NULL: none here) is the id's store, which
 * this communicator then hosts and stops at destroy; on failure the caller keeps it. */
coll_status_t comm_create_hosted(const coll_config_t *config, store_server_t *server,
                                 coll_comm_t **out);

/* ---- staging.c ---- */
/* Staging bytes held now; comm_update_staging_peak keeps the peak. */
size_t comm_staging_now(const coll_comm_t *comm);
void comm_update_staging_peak(coll_comm_t *comm);

/* ---- rendezvous.c ---- */
/* Agree on the key prefix, host ids, forced algorithm and transport and cost constants,
 * then connect the transports. Collective over all ranks. watch (NULL: none): a shrink's
 * or grow's look at its members' liveness in the parent while it waits for them. */
coll_status_t rdv_connect(coll_comm_t *comm, coll_algo_t env_algo, const member_watch_t *watch);
/* COLL_INTER_COST as cost constants (0, 0: unset); checked again before the store is
 * touched, so a malformed value fails every rank at once. */
coll_status_t rdv_read_inter_cost(double *alpha, double *beta);
/* Check through the store that every rank chose the same algorithm with set_algo. */
coll_status_t rdv_check_algo(coll_comm_t *comm);
/* Final barrier at destroy: nobody leaves before all arrived, and the store host waits
 * until all have finished with the store. */
coll_status_t rdv_finish(coll_comm_t *comm);

/* ---- dispatch.c ---- */
/* Run one prepared call to completion on the calling thread, on the path path_choose
 * names (path_choice.h): the CUDA path for device buffers, a local copy for one rank,
 * the window, small-message or arena path for COLL_ALGO_ARENA calls, else the executor. */
coll_status_t dispatch_run(coll_comm_t *comm, const prepared_call_t *pc);

/* ---- premul_input.c ---- */
/* A premul_sum call's first step, run just before its SUM: scale the input into recvbuf
 * where recvbuf holds an input's worth (all_reduce, reduce at the root), else into a new
 * buffer (*scratch; free() it after the run). *scaled is call reading the scaled input;
 * calls that are not premul_sum come back unchanged. */
coll_status_t premul_scale_input(const coll_call_t *call, int rank, int nranks, coll_call_t *scaled,
                                 void **scratch);

/* ---- stream_calls.c ---- */
/* Queue call on its CUDA stream (coll_*_stream, device buffers). */
coll_status_t stream_call_submit(coll_comm_t *comm, prepared_call_t *pc);

/* ---- progress.c: the request queue ---- */
coll_status_t progress_start(coll_comm_t *comm);
/* Drain the queue (aborted work completes at once) and join the thread. */
void progress_stop(coll_comm_t *comm);
/* Run call: on the calling thread when nothing is queued (blocking fast path), else
 * through the queue and wait. */
coll_status_t progress_run_blocking(coll_comm_t *comm, const prepared_call_t *pc);
/* Queue call for the progress thread. `grace` (a user's _async call): when the last such
 * call was waited for at once, the thread leaves this one for the communicator's
 * async_grace_ns to a coll_request_wait, which then runs it itself, so a call waited for
 * right after it was made crosses no thread (bound, the progress thread shares the
 * rank's core and its taking the call costs a context switch each way). A caller that
 * computes between the call and the wait keeps the thread's background progress. A
 * call of a size that last ran a tenth of the grace or longer gets no grace, unless the
 * host is crowded (progress.c).
 * Stream calls and the queue's own uses pass false. */
coll_status_t progress_submit(coll_comm_t *comm, const prepared_call_t *pc, bool grace,
                              coll_request_t **request);
/* When no thread runs the executor and work is queued, run the oldest queued request
 * on this thread; false when there was nothing to do. */
bool progress_help(coll_comm_t *comm);
/* Wake every waiter (abort). */
void progress_wake_all(coll_comm_t *comm);
/* Wait until nothing is queued or running (the store client is then free to use), up
 * to the communicator's timeout; an error naming `what` on timeout or abort. */
coll_status_t progress_quiet(coll_comm_t *comm, const char *what);
/* Wait until req is done or deadline_ns (CLOCK_MONOTONIC) passed; true when done. */
bool progress_wait_done(coll_comm_t *comm, const coll_request_t *req, int64_t deadline_ns);

#endif
