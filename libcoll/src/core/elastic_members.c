/* Shrink, grow and join: new communicators of a lineage (docs/elastic.md).
 *
 * Every communicator of a lineage meets through the same store under its own prefix
 * "<root>G<gen>/", where gen comes from the counter "<root>gen" (one per new
 * communicator, so none ever shares a key, connection or segment with an older one).
 * One member allocates it and publishes it under the parent's prefix ("shrink/<k>" or
 * "grow/<k>", k counting the parent's shrinks or grows, equal on every member); the
 * others read it there. A shrink's publisher is the lowest surviving rank, and the
 * record carries the excluded set, so a member passing another set is told so.
 *
 * Joiners register by adding one to "<root>joiners" (their ticket t) and wait for
 * "<root>ticket/<t>" = "<gen> <rank> <size>"; a grow of j joiners (comm's rank 0) takes
 * tickets served+1 .. served+j, writes them and advances "<root>served". Tickets belong to
 * the lineage, not to one communicator, so a joiner that registered while the members
 * shrank is taken in by the next grow of whichever communicator is current. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/test_hook.h"
#include "core/comm.h"
#include "launch/launch_env.h"

#define GROW_MAGIC "collgrow1"
enum { KEY_MAX = 192, RECORD_MAX = 1200, POLL_US = 2000 };

/* The new communicator "<root>G<gen>/" with this rank and size, in comm's lineage. */
static coll_status_t create_member(const char *addr, int port, const char *token,
                                   const char *root, int64_t gen, int rank, int size,
                                   int timeout_ms, const comm_watch_t *watch,
                                   coll_comm_t **out) {
  char prefix[BASE_KEY_PREFIX_MAX];
  int len = snprintf(prefix, sizeof prefix, "%sG%lld/", root, (long long)gen);
  if (len < 0 || (size_t)len >= sizeof prefix)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "the lineage's key prefix '%s' leaves no room for a generation (%d bytes "
                      "at most)",
                      root, BASE_KEY_PREFIX_MAX - 1);
  coll_config_t cfg = {.rank = rank,
                       .size = size,
                       .local_rank = -1,
                       .master_addr = addr,
                       .master_port = port,
                       .token = token[0] ? token : NULL,
                       .host_store = 0,
                       .timeout_ms = timeout_ms};
  coll_status_t st = comm_create_watched(&cfg, prefix, watch, out);
  if (st != COLL_OK) return st;
  snprintf((*out)->lineage_root, sizeof (*out)->lineage_root, "%s", root);
  return COLL_OK;
}

static coll_status_t get_text(store_client_t *c, const char *key, int ms, char *out, size_t cap) {
  void *value = NULL;
  size_t len = 0;
  coll_status_t st = store_get(c, key, &value, &len, ms);
  if (st == COLL_OK)
    snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), (const char *)value);
  free(value);
  return st;
}

static coll_status_t check_members_call(coll_comm_t *comm, coll_comm_t **newcomm,
                                        const char *what) {
  if (newcomm != NULL) *newcomm = NULL;
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  if (newcomm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: newcomm is NULL", comm->base.rank,
                      what);
  if (base_aborted(&comm->base))
    return coll_error(COLL_ERR_ABORTED, "rank %d: %s: the communicator was aborted",
                      comm->base.rank, what);
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: not allowed inside a group",
                      comm->base.rank, what);
  return COLL_OK;
}

/* ---- shrink ---- */

/* Whether rank r is in the excluded list `record` ("2,5", or "-" for none): 1 yes, 0 no. */
static int excluded_in(const char *record, int r) {
  for (const char *p = record; *p != '\0';) {
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p) return 0; /* "-" */
    if (v == r) return 1;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}

static int by_value(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

coll_status_t coll_comm_shrink(coll_comm_t *comm, const int *exclude, int nexclude,
                               coll_comm_t **newcomm) {
  const char *what = "coll_comm_shrink";
  coll_test_hook("shrink");
  coll_status_t st = check_members_call(comm, newcomm, what);
  if (st != COLL_OK) return st;
  coll_base_t *b = &comm->base;
  if (nexclude < 0 || nexclude >= b->nranks || (nexclude > 0 && exclude == NULL))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: %d ranks to exclude of %d (exclude %s)", b->rank, what,
                      nexclude, b->nranks, exclude == NULL ? "NULL" : "given");
  int *sorted = malloc((size_t)(nexclude > 0 ? nexclude : 1) * sizeof *sorted);
  if (sorted == NULL) return coll_error(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  if (nexclude > 0) memcpy(sorted, exclude, (size_t)nexclude * sizeof *sorted);
  qsort(sorted, (size_t)nexclude, sizeof *sorted, by_value);
  int below = 0, lowest = -1;
  char record[RECORD_MAX];
  int len = 0;
  for (int i = 0; i < nexclude; i++) {
    int r = sorted[i];
    const char *bad = r < 0 || r >= b->nranks ? "is not a rank of the communicator"
                      : (i > 0 && sorted[i - 1] == r) ? "is listed twice"
                      : r == b->rank                  ? "is this rank (a rank cannot exclude itself)"
                                                      : NULL;
    if (bad != NULL) {
      free(sorted);
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: excluded rank %d %s", b->rank,
                        what, r, bad);
    }
    if (r < b->rank) below++;
  }
  for (int r = 0, i = 0; r < b->nranks && lowest < 0; r++) {
    while (i < nexclude && sorted[i] < r) i++;
    if (i >= nexclude || sorted[i] != r) lowest = r;
  }
  for (int i = 0; i < nexclude && len >= 0 && (size_t)len < sizeof record - 16; i++)
    len += snprintf(record + len, sizeof record - (size_t)len, "%s%d", i ? "," : "", sorted[i]);
  if (nexclude == 0) snprintf(record, sizeof record, "-");
  free(sorted);
  /* Leaving ranks out ends the parent: revoke it, so every member (an excluded one that
   * is alive too) stops and its destroy takes no collective step. */
  if (nexclude > 0) {
    st = coll_comm_revoke(comm);
    if (st != COLL_OK) return st;
  }
  uint64_t k = ++comm->shrinks;
  store_client_t *c = NULL;
  st = elastic_store(comm, &c);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: %s: ", b->rank, what);
  char key[KEY_MAX], text[RECORD_MAX + 32];
  snprintf(key, sizeof key, "%sshrink/%llu", b->key_prefix, (unsigned long long)k);
  int64_t gen = 0;
  if (b->rank == lowest) {
    char gen_key[KEY_MAX];
    snprintf(gen_key, sizeof gen_key, "%sgen", comm->lineage_root);
    st = store_add(c, gen_key, 1, &gen, b->timeout_ms);
    snprintf(text, sizeof text, "%lld %s", (long long)gen, record);
    if (st == COLL_OK) st = store_set(c, key, text, strlen(text), b->timeout_ms);
  } else {
    st = get_text(c, key, b->timeout_ms, text, sizeof text);
    char theirs[RECORD_MAX] = "";
    if (st == COLL_OK && (sscanf(text, "%lld %1199s", (long long *)&gen, theirs) != 2))
      st = coll_error(COLL_ERR_PROTOCOL, "malformed shrink record '%s'", text);
    if (st == COLL_OK && strcmp(theirs, record) != 0)
      st = coll_error(COLL_ERR_MISMATCH,
                      "rank %d excludes ranks %s but this rank excludes %s (every survivor must "
                      "pass the same set: take it from coll_comm_agree)",
                      lowest, theirs, record);
  }
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: %s #%llu: ", b->rank, what,
                                              (unsigned long long)k);
  /* The survivors in order: new rank i is parent rank parent_rank[i]. */
  int *parent_rank = malloc((size_t)(b->nranks - nexclude) * sizeof *parent_rank);
  if (parent_rank == NULL) return coll_error(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  for (int r = 0, i = 0; r < b->nranks; r++)
    if (excluded_in(record, r) == 0) parent_rank[i++] = r;
  comm_watch_t watch = {.parent_prefix = b->key_prefix, .parent_rank = parent_rank};
  st = create_member(b->store_addr, b->store_port, b->token, comm->lineage_root, gen,
                     b->rank - below, b->nranks - nexclude, b->timeout_ms, &watch, newcomm);
  free(parent_rank);
  if (st != COLL_OK) return coll_error_prefix(st, "%s (without %s): ", what, record);
  return COLL_OK;
}

/* ---- grow ---- */

/* comm's rank 0: wait for the joiners, hand out their tickets, publish the generation. */
static coll_status_t admit(coll_comm_t *comm, store_client_t *c, int joiners, const char *key,
                           int64_t *gen) {
  coll_base_t *b = &comm->base;
  int64_t deadline = coll_deadline_ns(b->timeout_ms);
  char k[KEY_MAX], text[64];
  int64_t served = 0, registered = 0;
  snprintf(k, sizeof k, "%sserved", comm->lineage_root);
  coll_status_t st = store_add(c, k, 0, &served, b->timeout_ms);
  snprintf(k, sizeof k, "%sjoiners", comm->lineage_root);
  while (st == COLL_OK) {
    st = store_add(c, k, 0, &registered, b->timeout_ms);
    if (st != COLL_OK || registered >= served + joiners) break;
    if (coll_now_ns() >= deadline)
      return coll_error(COLL_ERR_TIMEOUT,
                        "%lld of the %d joiners registered within %d ms (coll_comm_join)",
                        (long long)(registered - served), joiners, b->timeout_ms);
    usleep(POLL_US);
  }
  snprintf(k, sizeof k, "%sgen", comm->lineage_root);
  if (st == COLL_OK) st = store_add(c, k, 1, gen, b->timeout_ms);
  for (int j = 0; j < joiners && st == COLL_OK; j++) {
    snprintf(k, sizeof k, "%sticket/%lld", comm->lineage_root, (long long)(served + 1 + j));
    snprintf(text, sizeof text, "%lld %d %d", (long long)*gen, b->nranks + j, b->nranks + joiners);
    st = store_set(c, k, text, strlen(text), b->timeout_ms);
  }
  int64_t ignored = 0;
  snprintf(k, sizeof k, "%sserved", comm->lineage_root);
  if (st == COLL_OK) st = store_add(c, k, joiners, &ignored, b->timeout_ms);
  snprintf(text, sizeof text, "%lld", (long long)*gen);
  if (st == COLL_OK) st = store_set(c, key, text, strlen(text), b->timeout_ms);
  return st;
}

coll_status_t coll_comm_grow(coll_comm_t *comm, int joiners, coll_comm_t **newcomm) {
  const char *what = "coll_comm_grow";
  coll_test_hook("grow");
  coll_status_t st = check_members_call(comm, newcomm, what);
  if (st != COLL_OK) return st;
  coll_base_t *b = &comm->base;
  if (joiners < 0 || joiners > INT32_MAX / 2 - b->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: %d joiners", b->rank, what,
                      joiners);
  uint64_t k = ++comm->grows;
  store_client_t *c = NULL;
  st = elastic_store(comm, &c);
  char key[KEY_MAX], text[64];
  snprintf(key, sizeof key, "%sgrow/%llu", b->key_prefix, (unsigned long long)k);
  int64_t gen = 0;
  if (st == COLL_OK && b->rank == 0) {
    st = admit(comm, c, joiners, key, &gen);
  } else if (st == COLL_OK) {
    st = get_text(c, key, b->timeout_ms, text, sizeof text);
    if (st == COLL_OK && sscanf(text, "%lld", (long long *)&gen) != 1)
      st = coll_error(COLL_ERR_PROTOCOL, "malformed grow record '%s'", text);
  }
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: %s #%llu (%d joiners): ", b->rank, what,
                             (unsigned long long)k, joiners);
  int *parent_rank = malloc((size_t)(b->nranks + joiners) * sizeof *parent_rank);
  if (parent_rank == NULL) return coll_error(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  for (int r = 0; r < b->nranks + joiners; r++) parent_rank[r] = r < b->nranks ? r : -1;
  comm_watch_t watch = {.parent_prefix = b->key_prefix, .parent_rank = parent_rank};
  st = create_member(b->store_addr, b->store_port, b->token, comm->lineage_root, gen, b->rank,
                     b->nranks + joiners, b->timeout_ms, &watch, newcomm);
  free(parent_rank);
  if (st != COLL_OK) return coll_error_prefix(st, "%s (%d joiners): ", what, joiners);
  return COLL_OK;
}

/* ---- the grow id and joining ---- */

coll_status_t coll_comm_grow_id(coll_comm_t *comm, coll_unique_id_t *id) {
  coll_status_t st = comm_check(comm, "coll_comm_grow_id");
  if (st != COLL_OK) return st;
  if (id == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_grow_id: id is NULL",
                      comm->base.rank);
  memset(id, 0, sizeof *id);
  int len = snprintf(id->internal, sizeof id->internal, "%s|%s|%d|%s|%s", GROW_MAGIC,
                     comm->base.store_addr, comm->base.store_port, comm->base.token,
                     comm->lineage_root);
  if (len < 0 || (size_t)len >= sizeof id->internal)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "rank %d: coll_comm_grow_id: the store address, token and key prefix take "
                      "%d bytes, more than an id holds (%d)",
                      comm->base.rank, len, COLL_UNIQUE_ID_BYTES - 1);
  coll_error_clear();
  return COLL_OK;
}

typedef struct {
  char addr[256];
  int port;
  char token[128];
  char root[BASE_KEY_PREFIX_MAX];
} join_point_t;

static coll_status_t parse_grow_id(const coll_unique_id_t *id, join_point_t *jp) {
  char text[COLL_UNIQUE_ID_BYTES + 1];
  memcpy(text, id->internal, COLL_UNIQUE_ID_BYTES);
  text[COLL_UNIQUE_ID_BYTES] = '\0';
  char *fields[5] = {0};
  char *save = NULL, *p = text;
  int n = 0;
  /* The token may be empty: split on every bar by hand. */
  for (; n < 5; n++) {
    fields[n] = p;
    char *bar = strchr(p, '|');
    if (bar == NULL) break;
    *bar = '\0';
    p = bar + 1;
  }
  (void)save;
  if (n != 4 || strcmp(fields[0], GROW_MAGIC) != 0 || fields[4][0] == '\0')
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_join: the id was not made by coll_comm_grow_id (or was damaged)");
  snprintf(jp->addr, sizeof jp->addr, "%s", fields[1]);
  jp->port = atoi(fields[2]);
  snprintf(jp->token, sizeof jp->token, "%s", fields[3]);
  snprintf(jp->root, sizeof jp->root, "%s", fields[4]);
  if (jp->port < 1 || jp->port > 65535)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_join: port %s in the id",
                      fields[2]);
  return COLL_OK;
}

/* No id: the launcher's store, and the lineage of the first communicator made on it
 * ("coll/c1/": rendezvous.c numbers them). */
static coll_status_t join_point_from_env(join_point_t *jp) {
  coll_config_t cfg;
  char addr[256];
  coll_status_t st = launch_env_config(&cfg, addr, sizeof addr);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_join (no id: the launcher's store): ");
  snprintf(jp->addr, sizeof jp->addr, "%s", cfg.master_addr ? cfg.master_addr : "127.0.0.1");
  jp->port = cfg.master_port;
  const char *token = cfg.token ? cfg.token : coll_env_str("COLL_JOB_TOKEN");
  snprintf(jp->token, sizeof jp->token, "%s", token ? token : "");
  snprintf(jp->root, sizeof jp->root, "coll/c1/");
  return COLL_OK;
}

coll_status_t coll_comm_join(const coll_unique_id_t *id, int timeout_ms, coll_comm_t **newcomm) {
  coll_test_hook("join");
  if (newcomm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_join: newcomm is NULL");
  *newcomm = NULL;
  if (timeout_ms < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_join: timeout_ms %d", timeout_ms);
  if (timeout_ms == 0) {
    int64_t t = 0;
    coll_status_t st = coll_env_int("COLL_TIMEOUT_MS", 1, INT32_MAX / 2, 300000, &t);
    if (st != COLL_OK) return st;
    timeout_ms = (int)t;
  }
  join_point_t jp;
  coll_status_t st = id != NULL ? parse_grow_id(id, &jp) : join_point_from_env(&jp);
  if (st != COLL_OK) return st;
  store_client_t *c = NULL;
  st = store_client_connect(jp.addr, (uint16_t)jp.port, jp.token[0] ? jp.token : NULL, timeout_ms,
                            &c);
  if (st != COLL_OK)
    return coll_error_prefix(st, "coll_comm_join: the store at %s:%d: ", jp.addr, jp.port);
  char key[KEY_MAX], text[64];
  int64_t ticket = 0, gen = 0;
  int rank = -1, size = 0;
  snprintf(key, sizeof key, "%sjoiners", jp.root);
  st = store_add(c, key, 1, &ticket, timeout_ms);
  snprintf(key, sizeof key, "%sticket/%lld", jp.root, (long long)ticket);
  if (st == COLL_OK) st = get_text(c, key, timeout_ms, text, sizeof text);
  store_client_close(c);
  if (st == COLL_OK && (sscanf(text, "%lld %d %d", (long long *)&gen, &rank, &size) != 3 ||
                        rank < 0 || rank >= size))
    st = coll_error(COLL_ERR_PROTOCOL, "malformed ticket '%s'", text);
  if (st == COLL_ERR_TIMEOUT)
    return coll_error(st,
                      "coll_comm_join: registered as joiner %lld of lineage '%s', but no member "
                      "grew to take it in within %d ms",
                      (long long)ticket, jp.root, timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_join: ");
  st = create_member(jp.addr, jp.port, jp.token, jp.root, gen, rank, size, timeout_ms, NULL,
                     newcomm);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_join (as rank %d of %d): ", rank, size);
  coll_test_hook("joined");
  return COLL_OK;
}
