/* Rendezvous through the store: a key prefix per communicator, each rank's host id, CPU
 * mask and forced choices (COLL_ALGO, COLL_TRANSPORT) and rank 0's tuning constants, then
 * the transports; also the set_algo agreement and the final barrier of destroy.
 * rdv_connect runs in named phases, in this order: the prefix, describe_self,
 * failure_watch_open (this rank alive before anyone is past the rendezvous),
 * publish_self, read_all (watching a new communicator's members: membership/watch.c),
 * check_forced_choices, place_on_hosts, adopt_constants, connect_transports,
 * open_paths. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/store_keys.h"
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

/* Rank r's record; a shrink's or grow's new communicator watches r's liveness in the
 * parent meanwhile (membership/watch.c). */
static coll_status_t read_rank_info(coll_comm_t *comm, const member_watch_t *watch, int r,
                                    rank_info_t *out) {
  char key[KEY_MAX];
  snprintf(key, sizeof key, "%sinfo/%d", comm->base.key_prefix, r);
  void *value = NULL;
  size_t len = 0;
  coll_status_t st =
      member_watched_get(comm->base.store, watch, r, key, comm->base.timeout_ms, &value, &len);
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
  store_key_t counter = key_comm_counter(comm->base.rank);
  int64_t k = 0;
  coll_status_t st = store_add(comm->base.store, counter.text, 1, &k, comm->base.timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: rendezvous: ", comm->base.rank);
  key_comm_prefix(k, comm->base.key_prefix, sizeof comm->base.key_prefix);
  return COLL_OK;
}

/* "<prefix>read/<r>": rank r has read every record (the rendezvous's own key). */
static store_key_t key_read(const char *prefix, int rank) {
  store_key_t key;
  snprintf(key.text, sizeof key.text, "%sread/%d", prefix, rank);
  return key;
}

typedef store_key_t (*rank_key_fn)(const char *prefix, int rank);
static coll_status_t wait_all(coll_comm_t *comm, rank_key_fn key_of, int skip, int timeout_ms);

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

/* Phase 1: what this rank publishes (host id, forced choices, tuning constants, CPUs). */
static coll_status_t describe_self(const coll_comm_t *comm, coll_algo_t env_algo,
                                   rank_info_t *mine) {
  memset(mine, 0, sizeof *mine);
  launch_host_id(mine->host, sizeof mine->host);
  snprintf(mine->algo, sizeof mine->algo, "%s", coll_algo_name(env_algo));
  const char *forced = coll_env_str("COLL_TRANSPORT");
  snprintf(mine->transport, sizeof mine->transport, "%s", forced ? forced : "-");
  int64_t chunk;
  coll_status_t st = coll_env_int("COLL_CHUNK_SIZE", 0, (int64_t)1 << 30, 0, &chunk);
  if (st != COLL_OK) return st;
  mine->chunk = (size_t)chunk;
  mine->shm = algo_cost_shm_default;
  mine->tcp = algo_cost_tcp_default;
  st = rdv_read_inter_cost(&mine->inter_alpha, &mine->inter_beta);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: ", comm->base.rank);
  if (sched_getaffinity(0, sizeof mine->cpus, &mine->cpus) != 0) CPU_ZERO(&mine->cpus);
  return COLL_OK;
}

/* Phase 2: this rank's record into the store. */
static coll_status_t publish_self(coll_comm_t *comm, const rank_info_t *mine) {
  char text[INFO_MAX], key[KEY_MAX];
  format_info(mine, text, sizeof text);
  snprintf(key, sizeof key, "%sinfo/%d", comm->base.key_prefix, comm->base.rank);
  coll_status_t st = store_set(comm->base.store, key, text, strlen(text), comm->base.timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: rendezvous: ", comm->base.rank);
  return COLL_OK;
}

/* Every rank's record, as the later phases read them. */
typedef struct {
  rank_info_t *all;
  const char **hosts; /* all[r].host */
  bool one_host;
} rdv_view_t;

static void view_free(rdv_view_t *v) {
  free(v->all);
  free(v->hosts);
}

/* Phase 3: read every rank's record, then announce it (the store's host waits for that
 * before closing the store on a mismatch, so every rank sees the mismatch itself). */
static coll_status_t read_all(coll_comm_t *comm, const member_watch_t *watch, rdv_view_t *v) {
  int n = comm->base.nranks;
  v->all = calloc((size_t)n, sizeof *v->all);
  v->hosts = calloc((size_t)n, sizeof *v->hosts);
  if (v->all == NULL || v->hosts == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "rank %d: rendezvous: out of memory", comm->base.rank);
  for (int r = 0; r < n; r++) {
    coll_status_t st = read_rank_info(comm, watch, r, &v->all[r]);
    if (st != COLL_OK) return st;
    v->hosts[r] = v->all[r].host;
  }
  store_key_t read = key_read(comm->base.key_prefix, comm->base.rank);
  return store_set(comm->base.store, read.text, "1", 1, comm->base.timeout_ms);
}

/* Phase 4: COLL_ALGO and COLL_TRANSPORT the same on every rank. */
static coll_status_t check_forced_choices(coll_comm_t *comm, const rdv_view_t *v) {
  for (int r = 1; r < comm->base.nranks; r++) {
    coll_status_t st = check_same(comm, "COLL_ALGO", v->all[0].algo, v->all[r].algo, r);
    if (st == COLL_OK)
      st = check_same(comm, "COLL_TRANSPORT", v->all[0].transport, v->all[r].transport, r);
    if (st == COLL_OK) continue;
    if (comm->base.server != NULL) {
      char message[BASE_MESSAGE_MAX];
      snprintf(message, sizeof message, "%s", coll_last_error());
      wait_all(comm, key_read, comm->base.rank, comm->base.timeout_ms);
      coll_error(st, "%s", message);
    }
    return st;
  }
  return COLL_OK;
}

/* Phase 5: this rank among the others of its host (how many, its place, how many compete
 * for its CPUs), and whether every rank is on one host. */
static void place_on_hosts(coll_comm_t *comm, rdv_view_t *v, const rank_info_t *mine) {
  coll_base_t *b = &comm->base;
  v->one_host = true;
  b->local_count = 0;
  b->local_index = 0;
  b->local_within = 0;
  for (int r = 0; r < b->nranks; r++) {
    v->one_host = v->one_host && strcmp(v->hosts[r], v->hosts[0]) == 0;
    bool local = strcmp(v->hosts[r], v->hosts[b->rank]) == 0;
    b->local_count += local;
    b->local_index += local && r < b->rank;
    /* A rank whose mask lies within ours (an unknown, empty one too) competes for our
     * CPUs; bound ranks on CPUs of their own do not. */
    cpu_set_t common;
    CPU_AND(&common, &v->all[r].cpus, &mine->cpus);
    b->local_within += local && CPU_EQUAL(&common, &v->all[r].cpus);
  }
}

/* Phase 6: rank 0's constants for everyone, the node map, the segment size and the
 * algorithm; the transport kind follows from shared facts only. */
static coll_status_t adopt_constants(coll_comm_t *comm, const rdv_view_t *v, coll_algo_t env_algo) {
  const rank_info_t *first = &v->all[0];
  bool tcp = !v->one_host || strcasecmp(first->transport, "tcp") == 0;
  comm->cost = tcp ? first->tcp : first->shm;
  /* Several hosts: the node map, and the constants inside a node (shm, or tcp where
   * forced) apart from those between nodes (tcp), for the node-aware algorithms. */
  algo_topo_free(&comm->base.topo);
  coll_status_t st = algo_topo_from_hosts(&comm->base.topo, comm->base.nranks, v->hosts);
  if (st != COLL_OK) return st;
  if (!v->one_host) {
    bool tcp_inside = strcasecmp(first->transport, "tcp") == 0;
    comm->cost = tcp_inside ? first->tcp : first->shm;
    comm->cost.inter_alpha = first->inter_alpha > 0 ? first->inter_alpha : first->tcp.alpha;
    comm->cost.inter_beta = first->inter_beta > 0 ? first->inter_beta : first->tcp.beta;
    comm->cost.gamma = first->tcp.gamma; /* as before the map: choices stay put */
  }
  comm->segment_bytes = first->chunk;
  comm->algo = env_algo;
  return COLL_OK;
}

/* What a transport set connects with, its keys under "<prefix><sub>". */
static transport_setup_t setup_for(const coll_comm_t *comm, const rdv_view_t *v, char *prefix,
                                   size_t cap, const char *sub) {
  snprintf(prefix, cap, "%s%s", comm->base.key_prefix, sub);
  return (transport_setup_t){
      .store = comm->base.store,
      .key_prefix = prefix,
      .rank = comm->base.rank,
      .nranks = comm->base.nranks,
      .host_ids = v->hosts,
      .forced = coll_env_str("COLL_TRANSPORT"),
      .timeout_ms = comm->base.timeout_ms,
  };
}

/* Phase 7: the collectives' transports ("tp/"), and tagged point to point's own set
 * ("tg/": its messages must not meet the collectives' in a connection's posting order;
 * tagged/tagged.c). */
static coll_status_t connect_transports(coll_comm_t *comm, const rdv_view_t *v) {
  char prefix[BASE_KEY_PREFIX_MAX + 8];
  transport_setup_t setup = setup_for(comm, v, prefix, sizeof prefix, "tp/");
  coll_status_t st = transport_set_connect(&setup, &comm->transports);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: connecting transports: ", comm->base.rank);
  setup = setup_for(comm, v, prefix, sizeof prefix, "tg/");
  return tagged_open(&comm->tagged, &comm->base, &setup);
}

/* Phase 8: the paths' state made at init: CUDA's (counted now, not at the first call:
 * tagged calls may come from another thread than a collective's, coll.h rule 4, and
 * must find it made), and the arena all-reduce's where every rank is on this host and
 * shm serves the pairs. */
static coll_status_t open_paths(coll_comm_t *comm, const rdv_view_t *v) {
  coll_status_t st = cuda_probe(&comm->cuda);
  if (st != COLL_OK) return st;
  return arena_open(&comm->arena, &comm->base, v->one_host, coll_env_str("COLL_TRANSPORT"));
}

coll_status_t rdv_connect(coll_comm_t *comm, coll_algo_t env_algo, const member_watch_t *watch) {
  rank_info_t mine;
  rdv_view_t view = {0};
  coll_status_t st = comm->prefix_preset ? COLL_OK : agree_prefix(comm);
  if (st == COLL_OK) st = describe_self(comm, env_algo, &mine);
  /* Alive before anyone can be past the rendezvous (base/failure_watch.c). */
  if (st == COLL_OK) st = failure_watch_open(&comm->base);
  if (st == COLL_OK) st = publish_self(comm, &mine);
  if (st == COLL_OK) st = read_all(comm, watch, &view);
  if (st == COLL_OK) st = check_forced_choices(comm, &view);
  if (st == COLL_OK) {
    place_on_hosts(comm, &view, &mine);
    st = adopt_constants(comm, &view, env_algo);
  }
  if (st == COLL_OK) st = connect_transports(comm, &view);
  if (st == COLL_OK) st = open_paths(comm, &view);
  if (st == COLL_OK) {
    char nodes[256];
    algo_topo_describe(&comm->base.topo, nodes, sizeof nodes);
    coll_log(COLL_LOG_INFO, "communicator %s: %d ranks, %s (%s), algo %s, chunk %zu",
             comm->base.key_prefix, comm->base.nranks, view.one_host ? "one host" : "several hosts",
             nodes, coll_algo_name(comm->algo), comm->segment_bytes);
  }
  view_free(&view);
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

/* Wait until key_of(r) exists for every rank r but skip. */
static coll_status_t wait_all(coll_comm_t *comm, rank_key_fn key_of, int skip, int timeout_ms) {
  int n = comm->base.nranks;
  const char **keys = calloc((size_t)n, sizeof *keys);
  store_key_t *storage = calloc((size_t)n, sizeof *storage);
  if (keys == NULL || storage == NULL) {
    free(keys);
    free(storage);
    return coll_error(COLL_ERR_NO_MEMORY, "rank %d: destroy: out of memory", comm->base.rank);
  }
  size_t nkeys = 0;
  for (int r = 0; r < n; r++) {
    if (r == skip) continue;
    storage[r] = key_of(comm->base.key_prefix, r);
    keys[nkeys++] = storage[r].text;
  }
  coll_status_t st = store_wait(comm->base.store, keys, nkeys, timeout_ms);
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
  store_key_t done = key_done(comm->base.key_prefix, comm->base.rank);
  coll_status_t st = store_set(comm->base.store, done.text, "1", 1, left_ms(deadline));
  if (st == COLL_OK) st = wait_all(comm, key_done, -1, left_ms(deadline));
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: destroy barrier: ", comm->base.rank);
  if (comm->base.server == NULL) {
    store_key_t left = key_left(comm->base.key_prefix, comm->base.rank);
    return store_set(comm->base.store, left.text, "1", 1, left_ms(deadline));
  }
  /* The host keeps serving until everyone has finished with the store. Ranks that
   * host nothing announce it; a launcher-hosted store needs no wait at all. */
  st = wait_all(comm, key_left, comm->base.rank, left_ms(deadline));
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: destroy barrier: ", comm->base.rank);
  return COLL_OK;
}
