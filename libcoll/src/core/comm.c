/* Communicator lifetime: init from a config or the launcher's environment (hosting the
 * store on rank 0 when no launcher does), destroy with a final barrier, abort, and the
 * small queries.
 *
 * Environment read by the core (defaults in parentheses):
 *   COLL_TIMEOUT_MS    deadline of every wait: no progress for this long is an error (300000)
 *   COLL_ALGO          auto|ring|tree|hd|master|arena; must be equal on every rank (auto)
 *   COLL_TRANSPORT     shm|tcp forces the transport; must be equal on every rank (unset)
 *   COLL_CHUNK_SIZE    bytes per pipelined segment, 0 = the algorithm's; rank 0's wins (0)
 *   COLL_HOST_ID       overrides "hostname/boot id" to group ranks by machine (unset)
 *   COLL_INTER_COST    LATENCY_US,GB_PER_S between nodes for the cost model; rank 0's
 *                      wins (tcp's constants: rendezvous.c)
 *   COLL_SPIN_US       how long the executor polls before sleeping (10000, or 5 when
 *                      more local ranks than this rank's CPUs may run only on them)
 *   COLL_PURE_SPIN_US  of which without sched_yield (all of it; 1 when crowded)
 *   COLL_ASYNC_GRACE_US  how long the progress thread leaves a new asynchronous call to
 *                      a coll_request_wait that runs it on its own thread, while the
 *                      caller waits for its calls at once; none for sizes that last ran
 *                      a tenth of it or longer (1000: progress.c)
 *   COLL_STORE_HOSTED  1: a launcher hosts the store, rank 0 does not (0)
 *   COLL_JOB_TOKEN     the store's job token (none)
 *   COLL_AGREE_MS      how long coll_comm_agree waits for a live rank that has not taken
 *                      part before declaring it failed (membership/agree.c) (the timeout)
 *   COLL_HANG_REPORT   file where the hang report goes after a timeout (hang.c) (unset;
 *                      collrun sets it)
 *   COLL_TRACE         FILE.json: each rank writes FILE.rank<r>.json (trace/trace.c) (unset)
 *   COLL_P2P_EAGER_BYTES  tagged sends up to this many bytes are copied and complete at
 *                      once; larger ones wait for their receive (tagged/tagged.c) (65536)
 * Launchers: RANK/WORLD_SIZE/LOCAL_RANK, SLURM_*, OMPI_COMM_WORLD_* with MASTER_ADDR and
 * MASTER_PORT (launch/launch_env.c). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cheap_clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "core/comm.h"
#include "launch/launch_env.h"
#include "launch/placement.h"
#include "trace/trace.h"

enum { DEFAULT_TIMEOUT_MS = 300000 };

coll_status_t comm_check(const coll_comm_t *comm, const char *what) {
  if (comm == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: comm is NULL", what);
  if (comm->magic != COMM_MAGIC)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: comm is not a live communicator (destroyed or corrupt)", what);
  return COLL_OK;
}

static coll_status_t validate_config(const coll_config_t *cfg) {
  if (cfg->size < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_init_config: size %d must be >= 1",
                      cfg->size);
  if (cfg->rank < 0 || cfg->rank >= cfg->size)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: rank %d is outside [0, %d)", cfg->rank, cfg->size);
  if (cfg->local_rank < -1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: local_rank %d must be >= -1", cfg->local_rank);
  if ((cfg->store_ops == NULL) != (cfg->store == NULL))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: store_ops and store go together (both given: the "
                      "caller's store; both NULL: libcoll's own)");
  if (cfg->store_ops != NULL) return COLL_OK; /* master_* and host_store are not used */
  /* Checked for every size, though one rank opens no store: a configuration that works
   * alone works the same once the job grows. */
  if (cfg->master_port < 1 || cfg->master_port > 65535)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: master_port %d is outside 1..65535",
                      cfg->master_port);
  /* NULL means 127.0.0.1; an address is kept (for split's children) in the store's place. */
  size_t addr_cap = sizeof((coll_comm_t *)NULL)->base.store_place.host;
  if (cfg->master_addr != NULL && cfg->master_addr[0] == '\0')
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: master_addr is empty (NULL means 127.0.0.1)");
  if (cfg->master_addr != NULL && strlen(cfg->master_addr) >= addr_cap)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: master_addr is %zu bytes, over %zu",
                      strlen(cfg->master_addr), addr_cap - 1);
  if (cfg->timeout_ms < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: timeout_ms %d must be >= 0", cfg->timeout_ms);
  if (cfg->host_store < -1 || cfg->host_store > 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_config: host_store %d must be -1, 0 or 1", cfg->host_store);
  return COLL_OK;
}

/* Free whatever init got to; also the tail of destroy. */
static void comm_free(coll_comm_t *comm) {
  failure_watch_stop(&comm->base);
  progress_stop(comm);
  free(comm->group_calls);
  tagged_close(comm->tagged);
  free(comm->premul_ops);
  cuda_free(&comm->cuda);
  window_close_all(&comm->windows, &comm->base);
  arena_close(&comm->arena);
  transport_set_close(comm->transports);
  membership_close(&comm->members);
  store_client_close(comm->base.store);
  store_server_stop(comm->base.server);
  trace_close(&comm->base.trace);
  exec_links_free(&comm->links);
  exec_free(&comm->exec);
  pthread_cond_destroy(&comm->queue_cv);
  pthread_cond_destroy(&comm->done_cv);
  pthread_mutex_destroy(&comm->mu);
  base_destroy(&comm->base);
  /* volatile: a plain store right before free() may be optimised away. */
  *(volatile uint64_t *)&comm->magic = COMM_DEAD_MAGIC;
  free(comm);
}

/* Spinning pays when every rank of this host has a core to itself: the peer answers
 * within microseconds. With more ranks than cores it steals the core the peer needs,
 * so wait mostly by sleeping then. Crowded is counted against this rank's CPU mask:
 * the local ranks whose masks lie within it (rendezvous.c) outnumber its CPUs. Ranks
 * bound to CPUs of their own are not crowded, ranks bound two to a CPU are (counting
 * only the local ranks against this rank's one bound CPU, as before 2026-12-04, gave
 * bound ranks the 5 us poll, and with one busy loop beside 2 bound ranks whole rounds
 * of 8-byte all-reduces took a tick each, 3.99 ms, where the 10 ms poll took 0.24-0.26 us;
 * bench/results/README.md). Otherwise poll for 10 ms, longer than a scheduler
 * tick (4 ms at HZ=250): with other work on the machine, a peer that lost its core for a
 * tick would find this rank asleep, its core taken by that work and the wake-up left to
 * the next tick, on every call (2 ranks over shm with one busy loop beside them, 8-byte
 * all-reduces at 3.99 ms in 14 of 40 cells after a 50 us poll, 7 of 30 after 2 ms, none
 * of 100 after 5, 10 or 20 ms; Open MPI, which never sleeps, stays at 0.3 us). Only a
 * call's waits poll; between calls nothing runs. COLL_SPIN_US / COLL_PURE_SPIN_US
 * override. */
static coll_status_t choose_spin(coll_comm_t *comm) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  bool crowded = comm->base.local_within > cpus;
  /* A rank that is not crowded never yields: nothing of this job needs its CPU, and a
   * yield hands the CPU to whatever else shares it, until the next tick (with one busy
   * loop beside 2 ranks over shm, 4 MiB all-reduces took 3.96-3.99 ms in every round
   * bound, and 3.2-4.0 ms unbound, with a yield after 5 us; 350-520 us bound and 283-302
   * unbound without). An unbound rank that finds itself on another local rank's CPU goes
   * home from its pure spin as well (wait.h), and the arena's waits yield at once when
   * the peer shares the CPU (arena.c). The progress thread, which shares the caller's
   * CPU, yields after 5 us all the same (wait.h). */
  int64_t spin_us, pure_us;
  coll_status_t st = coll_env_int("COLL_SPIN_US", 0, 1000000, crowded ? 5 : 10000, &spin_us);
  if (st == COLL_OK)
    st = coll_env_int("COLL_PURE_SPIN_US", 0, 1000000, crowded ? 1 : spin_us, &pure_us);
  if (st != COLL_OK) return st;
  comm->base.spin_ns = spin_us * 1000;
  comm->base.pure_spin_ns = pure_us * 1000;
  comm->base.spin_crowded = crowded;
  comm->base.spin_from_env = coll_env_str("COLL_SPIN_US") != NULL;
  coll_log(COLL_LOG_INFO,
           "waits poll %lld us (%lld without yielding): %d local ranks may run only on this "
           "rank's %d CPUs%s",
           (long long)spin_us, (long long)pure_us, comm->base.local_within, cpus,
           crowded ? " (crowded)" : "");
  /* Handing a call to the progress thread costs a thread wake-up each way: bound to one
   * CPU, a context switch on the caller's core (8-byte async all-reduce 11-18 us against
   * 0.6 blocking; with the grace 0.8); unbound, on 2 busy CPUs, 17-22 us over shm and
   * 83 us over tcp (with it 0.8 and 11.5, as blocking). A shorter grace measured worse:
   * its timer wakes the thread in the middle of later calls. The grace only applies
   * while the caller waits at once (progress.c), so a caller that computes between its
   * calls and their waits keeps the background progress. */
  int64_t grace_us;
  st = coll_env_int("COLL_ASYNC_GRACE_US", 0, 1000000, 1000, &grace_us);
  if (st != COLL_OK) return st;
  comm->async_grace_ns = grace_us * 1000;
  return COLL_OK;
}

static coll_status_t connect_store(coll_comm_t *comm, const coll_config_t *cfg, const char *token) {
  if (comm->base.store_place.ops != NULL) { /* the caller's: nothing to host */
    coll_status_t st =
        store_place_open(&comm->base.store_place, comm->base.timeout_ms, &comm->base.store);
    return st == COLL_OK ? st : coll_error_prefix(st, "rank %d: ", cfg->rank);
  }
  int64_t hosted = 0;
  coll_status_t st = coll_env_int("COLL_STORE_HOSTED", 0, 1, 0, &hosted);
  if (st != COLL_OK) return st;
  bool host = cfg->host_store == 1 || (cfg->host_store == -1 && cfg->rank == 0 && !hosted);
  if (comm->base.server != NULL) host = false; /* adopted from coll_get_unique_id */
  const char *addr = cfg->master_addr ? cfg->master_addr : "127.0.0.1";
  if (host) {
    /* Like PyTorch: rank 0 serves on all interfaces at MASTER_PORT for the
     * communicator's life. */
    store_server_options_t opts = {
        .bind_addr = NULL, .port = (uint16_t)cfg->master_port, .token = token};
    st = store_server_start(&opts, &comm->base.server);
    if (st != COLL_OK)
      return coll_error_prefix(st, "rank %d: hosting the store on port %d: ", cfg->rank,
                               cfg->master_port);
  }
  st = store_client_connect(addr, (uint16_t)cfg->master_port, token, comm->base.timeout_ms,
                            &comm->base.store);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: ", cfg->rank);
  return COLL_OK;
}

coll_status_t coll_comm_init_config(const coll_config_t *config, coll_comm_t **out) {
  return comm_create(config, NULL, out);
}

static coll_status_t create(const coll_config_t *config, const char *prefix, store_server_t *adopt,
                            const member_watch_t *watch, coll_comm_t **out) {
  if (config == NULL || out == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_init_config: %s is NULL",
                      config == NULL ? "config" : "comm");
  *out = NULL;
  coll_status_t st = validate_config(config);
  if (st != COLL_OK) return st;
  int64_t timeout = config->timeout_ms;
  if (timeout == 0) {
    st = coll_env_int("COLL_TIMEOUT_MS", 1, INT32_MAX / 2, DEFAULT_TIMEOUT_MS, &timeout);
    if (st != COLL_OK) return st;
  }
  coll_algo_t env_algo;
  st = launch_env_algo(&env_algo);
  if (st != COLL_OK) return st;
  const char *token = config->token ? config->token : coll_env_str("COLL_JOB_TOKEN");

  /* Opens the cheap clock's calibration span; the set-up below (a store round trip at
   * least) usually outlasts it, and the reading after it closes it (cheap_clock.h). */
  (void)coll_cheap_now_ns();
  coll_comm_t *comm = calloc(1, sizeof *comm);
  if (comm == NULL) return coll_error(COLL_ERR_NO_MEMORY, "coll_comm_init: out of memory");
  base_init(&comm->base);
  comm->base.server = adopt;
  comm->base.rank = config->rank;
  comm->base.nranks = config->size;
  comm->base.local_rank = config->local_rank;
  comm->base.local_count = 1;
  comm->base.local_within = 1;
  comm->base.timeout_ms = (int)timeout;
  comm->algo = env_algo;
  comm->cost = algo_cost_shm_default;
  snprintf(comm->base.key_prefix, sizeof comm->base.key_prefix, "%s",
           prefix ? prefix : "coll/single/");
  comm->prefix_preset = prefix != NULL;
  /* Kept for coll_comm_split: children reach the same store. */
  comm_store_place(config, token, &comm->base.store_place);
  pthread_mutex_init(&comm->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&comm->queue_cv, &ca);
  pthread_cond_init(&comm->done_cv, &ca);
  pthread_condattr_destroy(&ca);
  comm->magic = COMM_MAGIC;
  coll_log_set_rank(comm->base.rank);

  st = exec_init(&comm->exec, &comm->base, &comm->cost);
  if (st != COLL_OK) goto fail;
  if (comm->base.nranks > 1) {
    double inter_alpha, inter_beta;
    st = rdv_read_inter_cost(&inter_alpha, &inter_beta);
    if (st != COLL_OK) {
      coll_error_prefix(st, "rank %d: ", config->rank);
      goto fail;
    }
    st = connect_store(comm, config, token);
    if (st == COLL_OK) st = rdv_connect(comm, env_algo, watch);
    if (st != COLL_OK) goto fail;
  }
  st = exec_links_init(&comm->links, comm->transports, comm->base.nranks);
  if (st == COLL_OK) st = choose_spin(comm);
  if (st == COLL_OK)
    st = trace_open(&comm->base.trace, comm->base.rank, comm->base.nranks, comm->base.key_prefix);
  if (st != COLL_OK) goto fail;
  comm_update_staging_peak(comm);
  /* After the last store round of init, before the threads start (launch/placement.c). */
  st = placement_spread_once(comm->base.rank, comm->base.local_index, comm->base.local_count, NULL);
  if (st == COLL_OK) st = failure_watch_start(&comm->base);
  if (st == COLL_OK) st = progress_start(comm);
  if (st != COLL_OK) goto fail;
  /* The first of its lineage (comm_create_member gives it its parent's afterwards). */
  membership_init(&comm->members, comm->base.key_prefix);
  (void)coll_cheap_now_ns();
  *out = comm;
  coll_error_clear();
  return COLL_OK;
fail:
  if (adopt != NULL) comm->base.server = NULL; /* the caller still owns it */
  comm_free(comm);
  return st;
}

coll_status_t comm_create(const coll_config_t *config, const char *prefix, coll_comm_t **out) {
  return create(config, prefix, NULL, NULL, out);
}

void comm_store_place(const coll_config_t *config, const char *token, store_place_t *place) {
  memset(place, 0, sizeof *place);
  if (config->store_ops != NULL) {
    place->ops = config->store_ops;
    place->handle = config->store;
    return;
  }
  snprintf(place->host, sizeof place->host, "%s",
           config->master_addr ? config->master_addr : "127.0.0.1");
  place->port = config->master_port;
  snprintf(place->token, sizeof place->token, "%s", token ? token : "");
}

void comm_config_on(const store_place_t *place, coll_config_t *config) {
  if (place->ops != NULL) {
    config->store_ops = place->ops;
    config->store = place->handle;
    return;
  }
  config->master_addr = place->host;
  config->master_port = place->port;
  config->token = place->token[0] ? place->token : NULL;
  config->host_store = 0;
}

coll_status_t comm_create_member(const member_plan_t *plan, coll_comm_t **out) {
  coll_config_t cfg = {.rank = plan->rank,
                       .size = plan->size,
                       .local_rank = -1,
                       .host_store = 0,
                       .timeout_ms = plan->timeout_ms};
  comm_config_on(&plan->store_place, &cfg);
  coll_status_t st = create(&cfg, plan->prefix, NULL, &plan->watch, out);
  if (st != COLL_OK) return st;
  membership_init(&(*out)->members, plan->root);
  return COLL_OK;
}

coll_status_t comm_create_hosted(const coll_config_t *config, store_server_t *server,
                                 coll_comm_t **out) {
  return create(config, NULL, server, NULL, out);
}

coll_status_t coll_comm_init_env(coll_comm_t **comm) {
  if (comm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_init_env: comm is NULL");
  *comm = NULL;
  coll_config_t cfg;
  char addr[256]; /* the store's host when derived from Slurm's or Open MPI's variables */
  coll_status_t st = launch_env_config(&cfg, addr, sizeof addr);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_init_env: ");
  return coll_comm_init_config(&cfg, comm);
}

coll_status_t coll_comm_destroy(coll_comm_t *comm) {
  if (comm == NULL) return COLL_OK;
  coll_status_t st = comm_check(comm, "coll_comm_destroy");
  if (st != COLL_OK) return st;
  progress_stop(comm);
  /* Tagged sends that completed early (eager) may still be on their way: the tagged
   * engine's thread keeps moving them through the barrier, so a peer still receiving
   * them can get there too. */
  tagged_closing(comm->tagged);
  failure_watch_stop(&comm->base);
  /* Skip the barrier when the peers may be gone (abort, failure): it could only time
   * out. Otherwise nobody closes its connections, nor rank 0 its store, while a peer
   * may still need them. */
  bool healthy = !base_aborted(&comm->base) && !base_failed(&comm->base);
  if (comm->base.nranks > 1 && healthy) st = rdv_finish(comm);
  tagged_stop(comm->tagged);
  if (comm->base.nranks > 1 && base_failed(&comm->base)) {
    /* Peers learn of the failure from the closed connections, then the cause from the
     * store, which must outlive that (failure.c). */
    transport_set_close(comm->transports);
    comm->transports = NULL;
    failure_linger(&comm->base);
  }
  comm_free(comm);
  if (st == COLL_OK) coll_error_clear();
  return st;
}

coll_status_t coll_comm_abort(coll_comm_t *comm) {
  coll_status_t st = comm_check(comm, "coll_comm_abort");
  if (st != COLL_OK) return st;
  /* A second abort finds the flag set and does nothing (rule 6). */
  if (atomic_exchange(&comm->base.aborted, 1) == 0) progress_wake_all(comm);
  coll_error_clear();
  return COLL_OK;
}

/* Rule 6 of coll.h for the calls below, which start no work: after coll_comm_abort they
 * refuse (same message as base_check_usable), while a failed communicator still answers
 * them. */
static coll_status_t refuse_if_aborted(const coll_comm_t *comm, const char *what) {
  if (!base_aborted(&comm->base)) return COLL_OK;
  return coll_error(COLL_ERR_ABORTED, "rank %d: %s: the communicator was aborted", comm->base.rank,
                    what);
}

coll_status_t coll_comm_rank(const coll_comm_t *comm, int *rank) {
  coll_status_t st = comm_check(comm, "coll_comm_rank");
  if (st == COLL_OK) st = refuse_if_aborted(comm, "coll_comm_rank");
  if (st != COLL_OK) return st;
  if (rank == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_rank: rank is NULL",
                      comm->base.rank);
  *rank = comm->base.rank;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_size(const coll_comm_t *comm, int *size) {
  coll_status_t st = comm_check(comm, "coll_comm_size");
  if (st == COLL_OK) st = refuse_if_aborted(comm, "coll_comm_size");
  if (st != COLL_OK) return st;
  if (size == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_size: size is NULL",
                      comm->base.rank);
  *size = comm->base.nranks;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_mem_stats(const coll_comm_t *comm, coll_mem_stats_t *stats) {
  coll_status_t st = comm_check(comm, "coll_comm_mem_stats");
  if (st == COLL_OK) st = refuse_if_aborted(comm, "coll_comm_mem_stats");
  if (st != COLL_OK) return st;
  if (stats == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_mem_stats: stats is NULL",
                      comm->base.rank);
  stats->staging_bytes = comm_staging_now(comm);
  stats->staging_bytes_peak =
      comm->staging_peak > stats->staging_bytes ? comm->staging_peak : stats->staging_bytes;
  stats->window_bytes = window_bytes(comm->windows);
  stats->device_bytes = transport_set_device_staging_bytes(comm->transports) +
                        cuda_path_device_bytes(comm->cuda);
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_set_algo(coll_comm_t *comm, coll_algo_t algo) {
  coll_status_t st = comm_check(comm, "coll_comm_set_algo");
  if (st == COLL_OK) st = refuse_if_aborted(comm, "coll_comm_set_algo");
  if (st != COLL_OK) return st;
  if ((unsigned)algo >= COLL_ALGO_COUNT)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_set_algo: unknown algorithm %d", comm->base.rank,
                      (int)algo);
  comm->algo = algo;
  /* Agreement costs a store round trip; it is paid once, at the next collective. */
  if (comm->base.nranks > 1) comm->algo_check_pending = true;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_set_timeout(coll_comm_t *comm, int timeout_ms) {
  coll_status_t st = comm_check(comm, "coll_comm_set_timeout");
  if (st == COLL_OK) st = refuse_if_aborted(comm, "coll_comm_set_timeout");
  if (st != COLL_OK) return st;
  if (timeout_ms < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_set_timeout: timeout_ms %d must be >= 1", comm->base.rank,
                      timeout_ms);
  /* Read by the executor at the start of each operation. */
  comm->base.timeout_ms = timeout_ms;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_set_poll_us(coll_comm_t *comm, int poll_us) {
  coll_status_t st = comm_check(comm, "coll_comm_set_poll_us");
  if (st == COLL_OK) st = refuse_if_aborted(comm, "coll_comm_set_poll_us");
  if (st != COLL_OK) return st;
  if (poll_us < 0 || poll_us > 1000000)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_set_poll_us: poll_us %d is outside [0, 1000000]",
                      comm->base.rank, poll_us);
  /* Crowded ranks keep their short spin (choose_spin); the user's COLL_SPIN_US wins. */
  if (!comm->base.spin_crowded && !comm->base.spin_from_env)
    comm->base.spin_ns = (int64_t)poll_us * 1000;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_get_async_error(coll_comm_t *comm, coll_status_t *async_error) {
  coll_status_t st = comm_check(comm, "coll_comm_get_async_error");
  if (st != COLL_OK) return st;
  if (base_aborted(&comm->base)) {
    if (async_error != NULL) *async_error = COLL_ERR_ABORTED;
    return refuse_if_aborted(comm, "coll_comm_get_async_error");
  }
  if (async_error == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_get_async_error: async_error is NULL", comm->base.rank);
  int failed = base_failed(&comm->base);
  *async_error = (coll_status_t)failed;
  if (failed != 0)
    coll_error((coll_status_t)failed, "rank %d: %s", comm->base.rank, comm->base.failed_message);
  else
    coll_error_clear();
  return COLL_OK;
}
