/* The base of a communicator, below every execution path: who this rank is among the
 * others (identity, the store and its key prefix), whether the communicator still works
 * (abort, the first failure, where this rank is for the hang report), how its waits
 * spin, and the fingerprint of the collective it is in. The schedule executor, the
 * one-host paths and the CUDA path read and mark it; nothing in base/ calls above it. */
#ifndef COLL_BASE_BASE_H
#define COLL_BASE_BASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "algo/schedule.h"
#include "base/fp_agree.h"
#include "bootstrap/store.h"
#include "coll.h"

#define BASE_KEY_PREFIX_MAX 64
#define BASE_MESSAGE_MAX 1024

/* What a path is doing now, for the hang report (hang.c). */
typedef struct {
  coll_kind_t kind;
  uint64_t seq;
  size_t count;
  coll_dtype_t dtype;
  size_t step, nsteps;
  int waiting_peer; /* -1: none */
  const char *waiting_what;
} base_where_t;

typedef struct coll_base {
  /* Identity, fixed at init. */
  int rank;
  int nranks;
  int local_rank;
  int local_count;  /* ranks on this host (from the host ids) */
  int local_index;  /* this rank's place among them, in rank order */
  int local_within; /* those of them (this one too) whose CPU masks lie within this
                     * rank's at init: more of them than its CPUs is a crowded host */
  algo_topo_t topo; /* which ranks share a node, from the host ids (algo/topo.h) */
  int timeout_ms;   /* deadline of every wait without progress */
  char key_prefix[BASE_KEY_PREFIX_MAX];
  store_server_t *server; /* when this rank hosts the store */
  store_client_t *store;
  store_place_t store_place; /* where the store is: its other clients (the failure watcher,
                              * membership) and the communicators made from this one */

  /* Waiting: spin this long before blocking, of which this long without yielding. */
  int64_t spin_ns;
  int64_t pure_spin_ns;
  bool spin_crowded;  /* local_within exceeds this rank's CPUs: waits spin briefly */
  bool spin_from_env; /* COLL_SPIN_US was set: coll_comm_set_poll_us leaves it */

  /* Health. The first failure, this rank's or (from the failure watcher) another's,
   * leaves the communicator unusable. failed_mu orders the writers; the message is
   * written before `failed` is published and never changes afterwards. */
  atomic_int aborted;
  atomic_int failed;
  pthread_mutex_t failed_mu;
  char failed_message[BASE_MESSAGE_MAX];
  atomic_llong heartbeat_ns;   /* last time a path saw progress (for waiters) */
  struct failure_watch *watch; /* failure_watch.c; NULL for one rank */
  base_where_t where;

  /* Fingerprints: collectives started, and this rank's fingerprint of its current (or
   * last) one. */
  uint64_t seq;
  exec_fp_t fp_out;

  struct trace *trace; /* COLL_TRACE (trace/trace.h); NULL when off */
} coll_base_t;

/* The node map for schedule requests (sched_params_t.topo); NULL before rendezvous
 * built it. */
static inline const algo_topo_t *base_topo(const coll_base_t *base) {
  return base->topo.nnodes > 0 ? &base->topo : NULL;
}

/* ---- health.c ---- */
void base_init(coll_base_t *base);
void base_destroy(coll_base_t *base);
/* Refuse work on an aborted or failed communicator ("rank R: what: ..."). */
coll_status_t base_check_usable(coll_base_t *base, const char *what);
/* Record a failure that leaves the transports in an unknown state (the message is
 * coll_last_error()). The first one wins. */
void base_mark_failed(coll_base_t *base, coll_status_t status);
/* Another rank failed first (the failure watcher): "first failure in the communicator:
 * <its message>" becomes this communicator's failure. */
void base_mark_failed_by_peer(coll_base_t *base, coll_status_t status, const char *message);
/* The failure mark as a status (0: none), for the paths' waits. */
static inline int base_failed(const coll_base_t *base) {
  return atomic_load_explicit(&base->failed, memory_order_acquire);
}
static inline bool base_aborted(const coll_base_t *base) {
  return atomic_load_explicit(&base->aborted, memory_order_relaxed) != 0;
}
/* When a path last saw progress (request waiters measure staleness from it). */
static inline int64_t base_last_heartbeat(const coll_base_t *base) {
  return atomic_load_explicit(&base->heartbeat_ns, memory_order_relaxed);
}
/* A path saw progress now (request waiters measure staleness from it). */
static inline void base_heartbeat(coll_base_t *base, int64_t now_ns) {
  atomic_store_explicit(&base->heartbeat_ns, now_ns, memory_order_relaxed);
}
/* Start the fingerprint of a collective call: seq advanced, fp_out filled (windows
 * unset: the window path adds them). Returns fp_out. */
exec_fp_t *base_begin_call(coll_base_t *base, coll_kind_t kind, size_t count, coll_dtype_t dtype,
                           coll_op_t op, int root);

/* ---- store_text.c ---- */
/* The store value under `key` as text in out (cut to cap - 1 bytes), waiting up to the
 * communicator's timeout for it to appear. */
coll_status_t base_store_get_text(const coll_base_t *base, const char *key, char *out, size_t cap);

/* ---- hang.c ---- */
/* The hang report. A rank whose deadline passed (or that a peer's timeout stopped)
 * publishes where it is (base->where) under "<prefix>hang/<rank>"; false when the store
 * did not answer. */
bool hang_publish(coll_base_t *base);
/* A rank whose own deadline passed, after hang_publish and the failure record: gather
 * the others' states for a short grace (they publish as the failure reaches them), name
 * the ranks that are behind, publish the report (the first one wins, and its writer
 * writes COLL_HANG_REPORT) and append it to coll_last_error(). */
void hang_collect(coll_base_t *base, bool store_ok);
/* A rank that a peer's timeout stopped: publish, then append the report when it comes
 * within the grace. */
void hang_join(coll_base_t *base);

/* ---- failure.c ---- */
/* The bound of every store call on a failure's path (failure records, hang reports):
 * min(timeout, 150 ms), so that an unreachable store costs a failure little time. */
int base_failure_store_ms(const coll_base_t *base);
/* A parsed failure record, "rank|status|message". */
typedef struct {
  int rank;
  coll_status_t status;
  char message[BASE_MESSAGE_MAX];
} failure_t;
bool failure_parse(const char *value, size_t len, failure_t *out);
/* After a failure: publish the communicator's first failure (and dead_peer, >= 0 when a
 * connection failed) through the store; when another rank failed first, append its
 * message to coll_last_error(), so a rank that only saw the cascade names the cause.
 * Returns the status to report: st, or the first failure's when st is a broken
 * connection (COLL_ERR_REMOTE, COLL_ERR_PROTOCOL) that another rank's failure explains. */
coll_status_t failure_record(coll_base_t *base, coll_status_t st, int dead_peer);
/* The error tail of every execution path (exec/, onehost/), once the message has its
 * "rank R: what: " prefix: mark the communicator failed and publish the failure (a
 * timeout with the hang report); for a call a peer's failure stopped, only join the
 * hang report. Returns st. */
coll_status_t failure_conclude(coll_base_t *base, coll_status_t st, int dead_peer,
                               bool stopped_by_peer);
/* Destroy of a failed communicator, after its connections closed: ranks announce they
 * left; the store's host keeps serving until every rank left or was seen dead (bounded),
 * so the others can still read the failure record. */
void failure_linger(coll_base_t *base);

/* ---- liveness.c: whether a rank's process is still there ---- */
/* Looks in a row that must miss a rank's owned liveness key before it counts as dead. */
enum { LIVENESS_MISSES_DEAD = 2 };
/* What a looker remembers of one rank between its looks (zero-initialise). */
typedef struct {
  int rank;
  bool started;
  int misses;       /* owned keys: looks in a row that found no key */
  int64_t lease;    /* leases: the counter when it last moved */
  int64_t moved_ns; /* leases: when that was */
} liveness_tracker_t;
/* The lease period and how long a lease may stand still before its rank is dead
 * (COLL_LEASE_MS, COLL_LEASE_DEAD_MS; a bad value is an error). Either may be NULL. */
coll_status_t liveness_lease_ms(int *period_ms, int *dead_ms);
/* This rank alive under prefix through connection c: its owned key, or its lease's first
 * renewal on a store without owned keys (store_client_owns_keys). */
coll_status_t liveness_register(store_client_t *c, const char *prefix, int rank, int ms);
/* Renew this rank's lease (nothing to do on a store with owned keys). */
coll_status_t liveness_renew(store_client_t *c, const char *prefix, int rank, int ms);
/* Look at rank's liveness once, within ms; *dead when, with what t remembers of earlier
 * looks, the rules say its process is gone. */
coll_status_t liveness_observe(store_client_t *c, const char *prefix, int rank, int ms,
                               liveness_tracker_t *t, bool *dead);
/* The same for a peer of this communicator, on its store, within the failure path's bound
 * (base_failure_store_ms): 1 alive (or outside it, or no store), 0 dead, -1 the store
 * did not answer (coll_last_error() says why). */
int liveness_peer_alive(coll_base_t *base, int peer, liveness_tracker_t *t);

/* ---- failure_watch.c ---- */
/* Open the watcher's store connection and register this rank as alive
 * ("<prefix>alive/<rank>", owned by that connection): during the rendezvous, once the key
 * prefix is known and before this rank's record is published, so that a rank past the
 * rendezvous finds every other rank's key (elastic agreement reads them). */
coll_status_t failure_watch_open(coll_base_t *base);
/* Start (at init, after the rendezvous; opens first when not open) and stop (first thing
 * at destroy) the thread that learns of other ranks' failures through the store. */
coll_status_t failure_watch_start(coll_base_t *base);
void failure_watch_stop(coll_base_t *base);

#endif
