/* Rendezvous through the store: a key prefix per communicator, each rank's host id, CPU
 * mask and forced choices (COLL_ALGO, COLL_TRANSPORT) and rank 0's tuning constants, then
 * the transports; also the set_algo agreement and the final barrier of destroy. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "core/comm.h"
#include "launch/launch_port.h"

enum {
  HOST_ID_MAX = 256,
  INFO_MAX = 2048,
  KEY_MAX = 160,
  MASK_WORDS = CPU_SETSIZE / 64,
  WATCH_SLICE_MS = 100, /* get_record's look at a shrinking member's liveness */
};

/* What one rank publishes at init. */
typedef struct {
  char host[HOST_ID_MAX];
  char algo[16];
  char transport[32]; /* "-" when not forced */
  size_t chunk;
  algo_cost_t shm;
  algo_cost_t tcp;
  double inter_alpha, inter_beta; /* COLL_INTER_COST; 0: unset (tcp's are used) */
  cpu_set_t cpus; /* where the rank may run at init (empty: unknown) */
} rank_info_t;

/* A CPU mask as hex 64-bit words, the lowest CPUs first, without the empty words at the
 * end ("3" is CPUs 0 and 1; "" an empty mask). */
static void format_mask(const cpu_set_t *mask, char *out, size_t cap) {
  int last = -1;
  uint64_t words[MASK_WORDS] = {0};
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, mask)) {
      words[c / 64] |= (uint64_t)1 << (c % 64);
      last = c / 64;
    }
  size_t used = 0;
  out[0] = '\0';
  for (int w = 0; w <= last && used < cap; w++)
    used += (size_t)snprintf(out + used, cap - used, "%s%" PRIx64, w ? "," : "", words[w]);
}

static bool parse_mask(const char *text, cpu_set_t *mask) {
  CPU_ZERO(mask);
  for (int w = 0; *text != '\0'; w++) {
    if (w >= MASK_WORDS) return false;
    char *end;
    uint64_t bits = strtoull(text, &end, 16);
    if (end == text || (*end != ',' && *end != '\0')) return false;
    for (int b = 0; b < 64; b++)
      if (bits & ((uint64_t)1 << b)) CPU_SET(w * 64 + b, mask);
    text = *end == ',' ? end + 1 : end;
  }
  return true;
}

static void format_info(const rank_info_t *in, char *out, size_t cap) {
  char cpus[MASK_WORDS * 17 + 1];
  format_mask(&in->cpus, cpus, sizeof cpus);
  snprintf(out, cap,
           "host=%s\nalgo=%s\ntransport=%s\nchunk=%zu\nshm=%a,%a,%a\ntcp=%a,%a,%a\ninter=%a,%a\n"
           "cpus=%s\n",
           in->host, in->algo, in->transport, in->chunk, in->shm.alpha, in->shm.beta, in->shm.gamma,
           in->tcp.alpha, in->tcp.beta, in->tcp.gamma, in->inter_alpha, in->inter_beta, cpus);
}

static bool parse_cost(const char *text, algo_cost_t *c) {
  char *end;
  c->alpha = strtod(text, &end);
  if (*end != ',') return false;
  c->beta = strtod(end + 1, &end);
  if (*end != ',') return false;
  c->gamma = strtod(end + 1, &end);
  return *end == '\0';
}

static bool parse_info(char *text, rank_info_t *out) {
  memset(out, 0, sizeof *out);
  int seen = 0;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (eq == NULL) return false;
    *eq = '\0';
    const char *v = eq + 1;
    if (strcmp(line, "host") == 0) {
      snprintf(out->host, sizeof out->host, "%s", v);
      seen |= 1;
    } else if (strcmp(line, "algo") == 0) {
      snprintf(out->algo, sizeof out->algo, "%s", v);
      seen |= 2;
    } else if (strcmp(line, "transport") == 0) {
      snprintf(out->transport, sizeof out->transport, "%s", v);
      seen |= 4;
    } else if (strcmp(line, "chunk") == 0) {
      int64_t n;
      if (!coll_parse_int(v, &n) || n < 0) return false;
      out->chunk = (size_t)n;
      seen |= 8;
    } else if (strcmp(line, "shm") == 0) {
      if (!parse_cost(v, &out->shm)) return false;
      seen |= 16;
    } else if (strcmp(line, "tcp") == 0) {
      if (!parse_cost(v, &out->tcp)) return false;
      seen |= 32;
    } else if (strcmp(line, "inter") == 0) {
      char *end;
      out->inter_alpha = strtod(v, &end);
      if (*end != ',') return false;
      out->inter_beta = strtod(end + 1, &end);
      if (*end != '\0') return false;
    } else if (strcmp(line, "cpus") == 0) {
      if (!parse_mask(v, &out->cpus)) return false;
      seen |= 64;
    }
  }
  return seen == 127;
}

/* Wait for rank r's record; for a shrink or grow, in slices, looking at r's liveness key
 * in the communicator it came from between them (comm.h, comm_watch_t). */
static coll_status_t get_record(coll_comm_t *comm, int r, const char *key, void **value,
                                size_t *len) {
  const comm_watch_t *w = comm->watch;
  int parent = w != NULL ? w->parent_rank[r] : -1;
  if (parent < 0) return store_get(comm->base.store, key, value, len, comm->base.timeout_ms);
  char alive[KEY_MAX];
  snprintf(alive, sizeof alive, "%salive/%d", w->parent_prefix, parent);
  int64_t deadline = coll_deadline_ns(comm->base.timeout_ms);
  int misses = 0;
  for (;;) {
    int64_t left = (deadline - coll_now_ns()) / 1000000;
    coll_status_t st = store_get(comm->base.store, key, value, len,
                                 left < WATCH_SLICE_MS ? (int)(left > 1 ? left : 1) : WATCH_SLICE_MS);
    if (st != COLL_ERR_TIMEOUT || coll_now_ns() >= deadline) return st;
    bool exists = false;
    const char *keys[1] = {alive};
    st = store_check(comm->base.store, keys, 1, &exists, comm->base.timeout_ms);
    if (st != COLL_OK) return st;
    misses = exists ? 0 : misses + 1;
    if (misses >= 2)
      return coll_error(COLL_ERR_REMOTE,
                        "rank %d died (rank %d of the communicator this one is made from: the "
                        "store dropped its liveness key)",
                        r, parent);
  }
}

static coll_status_t read_rank_info(coll_comm_t *comm, int r, rank_info_t *out) {
  char key[KEY_MAX];
  snprintf(key, sizeof key, "%sinfo/%d", comm->base.key_prefix, r);
  void *value = NULL;
  size_t len = 0;
  coll_status_t st = get_record(comm, r, key, &value, &len);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: rendezvous, waiting for rank %d: ", comm->base.rank, r);
  char *text = malloc(len + 1);
  if (text == NULL) {
    free(value);
    return coll_error(COLL_ERR_NO_MEMORY, "rank %d: rendezvous: out of memory", comm->base.rank);
  }
  memcpy(text, value, len);
  text[len] = '\0';
  free(value);
  bool ok = parse_info(text, out);
  free(text);
  if (!ok)
    return coll_error(COLL_ERR_PROTOCOL, "rank %d: rendezvous record of rank %d is malformed",
                      comm->base.rank, r);
  return COLL_OK;
}

/* The k-th communicator a rank creates on this store gets prefix "coll/c<k>/": ranks
 * create communicators in the same order (rule 4), so they agree without talking. */
static coll_status_t agree_prefix(coll_comm_t *comm) {
  char key[KEY_MAX];
  snprintf(key, sizeof key, "coll/comms/%d", comm->base.rank);
  int64_t k = 0;
  coll_status_t st = store_add(comm->base.store, key, 1, &k, comm->base.timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: rendezvous: ", comm->base.rank);
  snprintf(comm->base.key_prefix, sizeof comm->base.key_prefix, "coll/c%lld/", (long long)k);
  return COLL_OK;
}

static coll_status_t wait_all(coll_comm_t *comm, const char *what, int skip, int timeout_ms);

/* COLL_INTER_COST="LATENCY_US,GBYTES_PER_S": the link between nodes as the cost model
 * should see it (bench/calibrate -H prints it; rank 0's wins); unset: tcp's constants. */
coll_status_t rdv_read_inter_cost(double *alpha, double *beta) {
  *alpha = *beta = 0;
  const char *v = coll_env_str("COLL_INTER_COST");
  if (v == NULL || v[0] == '\0') return COLL_OK;
  char *end;
  double us = strtod(v, &end);
  double gbps = *end == ',' ? strtod(end + 1, &end) : -1;
  if (*end != '\0' || !(us > 0) || !(gbps > 0) || us > 1e7 || gbps > 1e6)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_INTER_COST='%s': expected LATENCY_US,GBYTES_PER_S, both positive "
                      "(e.g. 25,1.2)",
                      v);
  *alpha = us * 1e-6;
  *beta = 1.0 / (gbps * 1e9);
  return COLL_OK;
}

/* Every rank checks every record, so all ranks fail together on a mismatch. */
static coll_status_t check_same(const coll_comm_t *comm, const char *var, const char *mine0,
                                const char *theirs, int r) {
  if (strcasecmp(mine0, theirs) == 0) return COLL_OK;
  if (r == comm->base.rank)
    return coll_error(COLL_ERR_MISMATCH,
                      "rank %d: %s differs between ranks: this rank has '%s' but rank 0 has "
                      "'%s' (every rank must use the same value)",
                      comm->base.rank, var, theirs, mine0);
  return coll_error(COLL_ERR_MISMATCH,
                    "rank %d: %s differs between ranks: rank %d has '%s' but rank 0 has '%s' "
                    "(every rank must use the same value)",
                    comm->base.rank, var, r, theirs, mine0);
}

coll_status_t rdv_connect(coll_comm_t *comm, coll_algo_t env_algo) {
  coll_status_t st = comm->prefix_preset ? COLL_OK : agree_prefix(comm);
  if (st != COLL_OK) return st;

  rank_info_t mine;
  memset(&mine, 0, sizeof mine);
  launch_host_id(mine.host, sizeof mine.host);
  snprintf(mine.algo, sizeof mine.algo, "%s", coll_algo_name(env_algo));
  const char *forced = coll_env_str("COLL_TRANSPORT");
  snprintf(mine.transport, sizeof mine.transport, "%s", forced ? forced : "-");
  int64_t chunk;
  st = coll_env_int("COLL_CHUNK_SIZE", 0, (int64_t)1 << 30, 0, &chunk);
  if (st != COLL_OK) return st;
  mine.chunk = (size_t)chunk;
  mine.shm = algo_cost_shm_default;
  mine.tcp = algo_cost_tcp_default;
  st = rdv_read_inter_cost(&mine.inter_alpha, &mine.inter_beta);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: ", comm->base.rank);
  if (sched_getaffinity(0, sizeof mine.cpus, &mine.cpus) != 0) CPU_ZERO(&mine.cpus);

  /* Alive before anyone can be past the rendezvous (base/failure_watch.c). */
  st = failure_watch_open(&comm->base);
  if (st != COLL_OK) return st;
  char text[INFO_MAX], key[KEY_MAX];
  format_info(&mine, text, sizeof text);
  snprintf(key, sizeof key, "%sinfo/%d", comm->base.key_prefix, comm->base.rank);
  st = store_set(comm->base.store, key, text, strlen(text), comm->base.timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: rendezvous: ", comm->base.rank);

  int n = comm->base.nranks;
  rank_info_t *all = calloc((size_t)n, sizeof *all);
  const char **hosts = calloc((size_t)n, sizeof *hosts);
  if (all == NULL || hosts == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "rank %d: rendezvous: out of memory", comm->base.rank);
    goto out;
  }
  for (int r = 0; r < n; r++) {
    st = read_rank_info(comm, r, &all[r]);
    if (st != COLL_OK) goto out;
    hosts[r] = all[r].host;
  }
  /* Announce that this rank has read every record, so that on a mismatch the store's
   * host can wait before closing the store: every rank then sees the mismatch itself. */
  snprintf(key, sizeof key, "%sread/%d", comm->base.key_prefix, comm->base.rank);
  st = store_set(comm->base.store, key, "1", 1, comm->base.timeout_ms);
  if (st != COLL_OK) goto out;
  for (int r = 1; r < n; r++) {
    st = check_same(comm, "COLL_ALGO", all[0].algo, all[r].algo, r);
    if (st == COLL_OK)
      st = check_same(comm, "COLL_TRANSPORT", all[0].transport, all[r].transport, r);
    if (st != COLL_OK) {
      if (comm->base.server != NULL) {
        char message[BASE_MESSAGE_MAX];
        snprintf(message, sizeof message, "%s", coll_last_error());
        wait_all(comm, "read", comm->base.rank, comm->base.timeout_ms);
        coll_error(st, "%s", message);
      }
      goto out;
    }
  }
  /* Rank 0's constants for everyone; the transport kind follows from shared facts only. */
  bool one_host = true;
  comm->base.local_count = 0;
  comm->base.local_index = 0;
  comm->base.local_within = 0;
  for (int r = 0; r < n; r++) {
    one_host = one_host && strcmp(hosts[r], hosts[0]) == 0;
    bool local = strcmp(hosts[r], hosts[comm->base.rank]) == 0;
    comm->base.local_count += local;
    comm->base.local_index += local && r < comm->base.rank;
    /* A rank whose mask lies within ours (an unknown, empty one too) competes for our
     * CPUs; bound ranks on CPUs of their own do not. */
    cpu_set_t common;
    CPU_AND(&common, &all[r].cpus, &mine.cpus);
    comm->base.local_within += local && CPU_EQUAL(&common, &all[r].cpus);
  }
  bool tcp = !one_host || strcasecmp(all[0].transport, "tcp") == 0;
  comm->cost = tcp ? all[0].tcp : all[0].shm;
  /* Several hosts: the node map, and the constants inside a node (shm, or tcp where
   * forced) apart from those between nodes (tcp), for the node-aware algorithms. */
  algo_topo_free(&comm->base.topo);
  st = algo_topo_from_hosts(&comm->base.topo, n, hosts);
  if (st != COLL_OK) goto out;
  if (!one_host) {
    bool tcp_inside = strcasecmp(all[0].transport, "tcp") == 0;
    comm->cost = tcp_inside ? all[0].tcp : all[0].shm;
    comm->cost.inter_alpha = all[0].inter_alpha > 0 ? all[0].inter_alpha : all[0].tcp.alpha;
    comm->cost.inter_beta = all[0].inter_beta > 0 ? all[0].inter_beta : all[0].tcp.beta;
    comm->cost.gamma = all[0].tcp.gamma; /* as before the map: choices stay put */
  }
  comm->segment_bytes = all[0].chunk;
  comm->algo = env_algo;

  char tp_prefix[BASE_KEY_PREFIX_MAX + 8];
  snprintf(tp_prefix, sizeof tp_prefix, "%stp/", comm->base.key_prefix);
  transport_setup_t setup = {
      .store = comm->base.store,
      .key_prefix = tp_prefix,
      .rank = comm->base.rank,
      .nranks = n,
      .host_ids = hosts,
      .forced = forced,
      .timeout_ms = comm->base.timeout_ms,
  };
  st = transport_set_connect(&setup, &comm->transports);
  if (st != COLL_OK) {
    coll_error_prefix(st, "rank %d: connecting transports: ", comm->base.rank);
    goto out;
  }
  /* Tagged point to point has a set of its own: its messages must not meet the
   * collectives' in a connection's posting order (tagged/tagged.c). */
  snprintf(tp_prefix, sizeof tp_prefix, "%stg/", comm->base.key_prefix);
  st = tagged_open(&comm->tagged, &comm->base, &setup);
  if (st != COLL_OK) goto out;
  /* Counted now, not at the first call: tagged calls may come from another thread than
   * a collective's (coll.h, rule 4) and must find the CUDA state made. */
  st = cuda_probe(&comm->cuda);
  if (st != COLL_OK) goto out;
  /* The arena all-reduce, where every rank is on this host and shm serves the pairs. */
  st = arena_open(&comm->arena, &comm->base, one_host, forced);
  if (st != COLL_OK) goto out;
  char nodes[256];
  algo_topo_describe(&comm->base.topo, nodes, sizeof nodes);
  coll_log(COLL_LOG_INFO, "communicator %s: %d ranks, %s (%s), algo %s, chunk %zu",
           comm->base.key_prefix, n, one_host ? "one host" : "several hosts", nodes,
           coll_algo_name(comm->algo), comm->segment_bytes);
out:
  free(all);
  free(hosts);
  return st;
}

coll_status_t rdv_check_algo(coll_comm_t *comm) {
  int epoch = ++comm->algo_epoch;
  char key[KEY_MAX];
  const char *mine = coll_algo_name(comm->algo);
  snprintf(key, sizeof key, "%salgo/%d/%d", comm->base.key_prefix, epoch, comm->base.rank);
  coll_status_t st = store_set(comm->base.store, key, mine, strlen(mine), comm->base.timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: coll_comm_set_algo: ", comm->base.rank);
  char first[32] = "";
  for (int r = 0; r < comm->base.nranks; r++) {
    snprintf(key, sizeof key, "%salgo/%d/%d", comm->base.key_prefix, epoch, r);
    void *value = NULL;
    size_t len = 0;
    st = store_get(comm->base.store, key, &value, &len, comm->base.timeout_ms);
    if (st != COLL_OK)
      return coll_error_prefix(
          st, "rank %d: coll_comm_set_algo, waiting for rank %d: ", comm->base.rank, r);
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(len < 31 ? len : 31), (const char *)value);
    free(value);
    if (r == 0) {
      memcpy(first, name, sizeof first);
    } else if (strcmp(first, name) != 0) {
      return coll_error(COLL_ERR_MISMATCH,
                        "rank %d: coll_comm_set_algo differs between ranks: rank %d chose "
                        "'%s' but rank 0 chose '%s'",
                        comm->base.rank, r, name, first);
    }
  }
  return COLL_OK;
}

static coll_status_t wait_all(coll_comm_t *comm, const char *what, int skip, int timeout_ms) {
  int n = comm->base.nranks;
  char **keys = calloc((size_t)n, sizeof *keys);
  char *storage = calloc((size_t)n, KEY_MAX);
  if (keys == NULL || storage == NULL) {
    free(keys);
    free(storage);
    return coll_error(COLL_ERR_NO_MEMORY, "rank %d: destroy: out of memory", comm->base.rank);
  }
  size_t nkeys = 0;
  for (int r = 0; r < n; r++) {
    if (r == skip) continue;
    keys[nkeys] = storage + (size_t)r * KEY_MAX;
    snprintf(keys[nkeys], KEY_MAX, "%s%s/%d", comm->base.key_prefix, what, r);
    nkeys++;
  }
  coll_status_t st = store_wait(comm->base.store, (const char *const *)keys, nkeys, timeout_ms);
  free(keys);
  free(storage);
  return st;
}

/* One deadline for the whole barrier: destroy never blocks longer than the timeout. */
static int left_ms(int64_t deadline_ns) {
  int ms = coll_ms_left(deadline_ns);
  return ms < 1 ? 1 : ms;
}

coll_status_t rdv_finish(coll_comm_t *comm) {
  int64_t deadline = coll_deadline_ns(comm->base.timeout_ms);
  char key[KEY_MAX];
  snprintf(key, sizeof key, "%sdone/%d", comm->base.key_prefix, comm->base.rank);
  coll_status_t st = store_set(comm->base.store, key, "1", 1, left_ms(deadline));
  if (st == COLL_OK) st = wait_all(comm, "done", -1, left_ms(deadline));
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: destroy barrier: ", comm->base.rank);
  if (comm->base.server == NULL) {
    snprintf(key, sizeof key, "%sleft/%d", comm->base.key_prefix, comm->base.rank);
    return store_set(comm->base.store, key, "1", 1, left_ms(deadline));
  }
  /* The host keeps serving until everyone has finished with the store. Ranks that
   * host nothing announce it; a launcher-hosted store needs no wait at all. */
  st = wait_all(comm, "left", comm->base.rank, left_ms(deadline));
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: destroy barrier: ", comm->base.rank);
  return COLL_OK;
}
