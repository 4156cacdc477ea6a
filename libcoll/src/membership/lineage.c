/* Shrink, grow and join: the plans of the new communicators of a lineage (docs/elastic.md);
 * core/ creates each from its plan (comm_create_member).
 *
 * Every communicator of a lineage meets through the same store under its own prefix
 * "<root>G<gen>/", where gen comes from the lineage's counter (key_lineage_gen: one per
 * new communicator, so none ever shares a key, connection or segment with an older one).
 * One member allocates it and publishes it under the parent's prefix (key_shrink_record
 * or key_grow_record, k counting the parent's shrinks or grows, equal on every member);
 * the others read it there. A shrink's publisher is the lowest surviving rank, and the
 * record carries the excluded set, so a member passing another set is told so.
 *
 * Joiners register by adding one to the lineage's joiners counter (their ticket t) and
 * wait for key_lineage_ticket(t) = "<gen> <rank> <size>"; a grow of j joiners (the
 * parent's rank 0) takes tickets served+1 .. served+j, writes them and advances the served
 * counter. Tickets belong to the lineage, not to one communicator, so a joiner that
 * registered while the members shrank is taken in by the next grow of whichever
 * communicator is current. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/store_keys.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "launch/launch_env.h"
#include "membership/membership.h"

#define GROW_MAGIC "collgrow1"
enum { RECORD_MAX = 1200, POLL_US = 2000 };

/* The plan of generation gen's communicator in the lineage `root`, with this rank and
 * size, on the store at place. */
static coll_status_t plan_generation(const store_place_t *place, const char *root, int64_t gen,
                                     int rank, int size, int timeout_ms, member_plan_t *plan) {
  if (!key_generation_prefix(root, gen, plan->prefix, sizeof plan->prefix))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%sthe lineage's key prefix '%s' leaves no room for a generation (%d bytes "
                      "at most)",
                      plan->context, root, BASE_KEY_PREFIX_MAX - 1);
  snprintf(plan->root, sizeof plan->root, "%s", root);
  plan->store_place = *place;
  plan->rank = rank;
  plan->size = size;
  plan->timeout_ms = timeout_ms;
  return COLL_OK;
}

/* A watch of `size` new ranks on the parent prefix; parent_rank to be filled. */
static coll_status_t watch_alloc(member_watch_t *w, const char *parent_prefix, int size,
                                 const char *what) {
  snprintf(w->parent_prefix, sizeof w->parent_prefix, "%s", parent_prefix);
  w->size = size;
  w->parent_rank = malloc((size_t)size * sizeof *w->parent_rank);
  if (w->parent_rank == NULL) return coll_error(COLL_ERR_NO_MEMORY, "%s: out of memory", what);
  return COLL_OK;
}

/* The text under key, within ms. With b, the wait is watched: `publisher`, the parent rank
 * that writes the record (the new communicator's rank 0, in a shrink and in a grow), failing
 * before it wrote it (killed at the very start of its shrink or grow) fails this call within
 * a slice or two ("rank 0 died", membership/watch.c), not at the deadline. b NULL: a plain
 * wait. */
static coll_status_t get_text(store_client_t *c, const coll_base_t *b, int publisher,
                              const char *key, int ms, char *out, size_t cap) {
  member_watch_t watch = {.parent_rank = &publisher, .size = 1};
  if (b != NULL) snprintf(watch.parent_prefix, sizeof watch.parent_prefix, "%s", b->key_prefix);
  void *value = NULL;
  size_t len = 0;
  coll_status_t st = member_watched_get(c, b != NULL ? &watch : NULL, 0, key, ms, &value, &len);
  if (st == COLL_OK)
    snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), (const char *)value);
  free(value);
  return st;
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

coll_status_t member_plan_shrink(coll_base_t *b, membership_t *m, const int *exclude, int nexclude,
                                 member_plan_t *plan) {
  const char *what = "coll_comm_shrink";
  memset(plan, 0, sizeof *plan);
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
    const char *bad = r < 0 || r >= b->nranks         ? "is not a rank of the communicator"
                      : (i > 0 && sorted[i - 1] == r) ? "is listed twice"
                      : r == b->rank ? "is this rank (a rank cannot exclude itself)"
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
  coll_status_t st = COLL_OK;
  if (nexclude > 0) {
    st = member_revoke(b);
    if (st != COLL_OK) return st;
  }
  uint64_t k = ++m->shrinks;
  store_client_t *c = NULL;
  st = member_store(b, m, &c);
  if (st != COLL_OK) return coll_error_prefix(st, "rank %d: %s: ", b->rank, what);
  char text[RECORD_MAX + 32];
  store_key_t key = key_shrink_record(b->key_prefix, k);
  int64_t gen = 0;
  if (b->rank == lowest) {
    store_key_t gen_key = key_lineage_gen(m->lineage_root);
    st = store_add(c, gen_key.text, 1, &gen, b->timeout_ms);
    snprintf(text, sizeof text, "%lld %s", (long long)gen, record);
    if (st == COLL_OK) st = store_set(c, key.text, text, strlen(text), b->timeout_ms);
  } else {
    st = get_text(c, b, lowest, key.text, b->timeout_ms, text, sizeof text);
    char theirs[RECORD_MAX] = "";
    if (st == COLL_OK && (sscanf(text, "%lld %1199s", (long long *)&gen, theirs) != 2))
      st = coll_error(COLL_ERR_PROTOCOL, "malformed shrink record '%s'", text);
    if (st == COLL_OK && strcmp(theirs, record) != 0)
      st = coll_error(COLL_ERR_MISMATCH,
                      "rank %d excludes ranks %s but this rank excludes %s (every survivor must "
                      "pass the same set: take it from coll_comm_agree)",
                      lowest, theirs, record);
  }
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: %s #%llu: ", b->rank, what, (unsigned long long)k);
  snprintf(plan->context, sizeof plan->context, "%s (without %s): ", what, record);
  /* The survivors in order: new rank i is parent rank parent_rank[i]. */
  st = watch_alloc(&plan->watch, b->key_prefix, b->nranks - nexclude, what);
  if (st != COLL_OK) return st;
  for (int r = 0, i = 0; r < b->nranks; r++)
    if (excluded_in(record, r) == 0) plan->watch.parent_rank[i++] = r;
  st = plan_generation(&b->store_place, m->lineage_root, gen, b->rank - below, b->nranks - nexclude, b->timeout_ms, plan);
  if (st != COLL_OK) member_plan_free(plan);
  return st;
}

/* ---- grow ---- */

/* The parent's rank 0: wait for the joiners, hand out their tickets, publish the
 * generation under `key`. */
static coll_status_t admit(const coll_base_t *b, const membership_t *m, store_client_t *c,
                           int joiners, const char *key, int64_t *gen) {
  int64_t deadline = coll_deadline_ns(b->timeout_ms);
  char text[64];
  int64_t served = 0, registered = 0;
  store_key_t served_key = key_lineage_served(m->lineage_root);
  store_key_t joiners_key = key_lineage_joiners(m->lineage_root);
  store_key_t gen_key = key_lineage_gen(m->lineage_root);
  coll_status_t st = store_add(c, served_key.text, 0, &served, b->timeout_ms);
  while (st == COLL_OK) {
    st = store_add(c, joiners_key.text, 0, &registered, b->timeout_ms);
    if (st != COLL_OK || registered >= served + joiners) break;
    if (coll_now_ns() >= deadline)
      return coll_error(COLL_ERR_TIMEOUT,
                        "%lld of the %d joiners registered within %d ms (coll_comm_join)",
                        (long long)(registered - served), joiners, b->timeout_ms);
    usleep(POLL_US);
  }
  if (st == COLL_OK) st = store_add(c, gen_key.text, 1, gen, b->timeout_ms);
  for (int j = 0; j < joiners && st == COLL_OK; j++) {
    store_key_t ticket = key_lineage_ticket(m->lineage_root, served + 1 + j);
    snprintf(text, sizeof text, "%lld %d %d", (long long)*gen, b->nranks + j, b->nranks + joiners);
    st = store_set(c, ticket.text, text, strlen(text), b->timeout_ms);
  }
  int64_t ignored = 0;
  if (st == COLL_OK) st = store_add(c, served_key.text, joiners, &ignored, b->timeout_ms);
  snprintf(text, sizeof text, "%lld", (long long)*gen);
  if (st == COLL_OK) st = store_set(c, key, text, strlen(text), b->timeout_ms);
  return st;
}

coll_status_t member_plan_grow(coll_base_t *b, membership_t *m, int joiners, member_plan_t *plan) {
  const char *what = "coll_comm_grow";
  memset(plan, 0, sizeof *plan);
  if (joiners < 0 || joiners > INT32_MAX / 2 - b->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: %d joiners", b->rank, what, joiners);
  uint64_t k = ++m->grows;
  store_client_t *c = NULL;
  coll_status_t st = member_store(b, m, &c);
  char text[64];
  store_key_t key = key_grow_record(b->key_prefix, k);
  int64_t gen = 0;
  if (st == COLL_OK && b->rank == 0) {
    st = admit(b, m, c, joiners, key.text, &gen);
  } else if (st == COLL_OK) {
    st = get_text(c, b, 0, key.text, b->timeout_ms, text, sizeof text);
    if (st == COLL_OK && sscanf(text, "%lld", (long long *)&gen) != 1)
      st = coll_error(COLL_ERR_PROTOCOL, "malformed grow record '%s'", text);
  }
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: %s #%llu (%d joiners): ", b->rank, what,
                             (unsigned long long)k, joiners);
  snprintf(plan->context, sizeof plan->context, "%s (%d joiners): ", what, joiners);
  st = watch_alloc(&plan->watch, b->key_prefix, b->nranks + joiners, what);
  if (st != COLL_OK) return st;
  for (int r = 0; r < b->nranks + joiners; r++) plan->watch.parent_rank[r] = r < b->nranks ? r : -1;
  st = plan_generation(&b->store_place, m->lineage_root, gen, b->rank, b->nranks + joiners,
                       b->timeout_ms, plan);
  if (st != COLL_OK) member_plan_free(plan);
  return st;
}

/* ---- the grow id and joining ---- */

coll_status_t member_grow_id(const coll_base_t *b, const membership_t *m, coll_unique_id_t *id) {
  memset(id, 0, sizeof *id);
  const store_place_t *p = &b->store_place;
  if (p->ops != NULL)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "rank %d: coll_comm_grow_id: the communicator keeps its keys in the "
                      "caller's store, which an id cannot name (a joiner reaches it by the "
                      "caller's own means; torch_coll: reconfigure)",
                      b->rank);
  int len = snprintf(id->internal, sizeof id->internal, "%s|%s|%d|%s|%s", GROW_MAGIC, p->host,
                     p->port, p->token, m->lineage_root);
  if (len < 0 || (size_t)len >= sizeof id->internal)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "rank %d: coll_comm_grow_id: the store address, token and key prefix take "
                      "%d bytes, more than an id holds (%d)",
                      b->rank, len, COLL_UNIQUE_ID_BYTES - 1);
  coll_error_clear();
  return COLL_OK;
}

coll_status_t member_join_point_from_id(const coll_unique_id_t *id, member_join_point_t *jp) {
  char text[COLL_UNIQUE_ID_BYTES + 1];
  memcpy(text, id->internal, COLL_UNIQUE_ID_BYTES);
  text[COLL_UNIQUE_ID_BYTES] = '\0';
  char *fields[5] = {0};
  char *p = text;
  int n = 0;
  /* The token may be empty: split on every bar by hand. */
  for (; n < 5; n++) {
    fields[n] = p;
    char *bar = strchr(p, '|');
    if (bar == NULL) break;
    *bar = '\0';
    p = bar + 1;
  }
  if (n != 4 || strcmp(fields[0], GROW_MAGIC) != 0 || fields[4][0] == '\0')
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_join: the id was not made by coll_comm_grow_id (or was damaged)");
  snprintf(jp->addr, sizeof jp->addr, "%s", fields[1]);
  jp->port = atoi(fields[2]);
  snprintf(jp->token, sizeof jp->token, "%s", fields[3]);
  snprintf(jp->root, sizeof jp->root, "%s", fields[4]);
  if (jp->port < 1 || jp->port > 65535)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_join: port %s in the id", fields[2]);
  return COLL_OK;
}

coll_status_t member_join_point_from_env(member_join_point_t *jp) {
  coll_config_t cfg;
  char addr[256];
  coll_status_t st = launch_env_config(&cfg, addr, sizeof addr);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_join (no id: the launcher's store): ");
  snprintf(jp->addr, sizeof jp->addr, "%s", cfg.master_addr ? cfg.master_addr : "127.0.0.1");
  jp->port = cfg.master_port;
  const char *token = cfg.token ? cfg.token : coll_env_str("COLL_JOB_TOKEN");
  snprintf(jp->token, sizeof jp->token, "%s", token ? token : "");
  snprintf(jp->root, sizeof jp->root, "%s", KEY_FIRST_COMM_PREFIX);
  return COLL_OK;
}

coll_status_t member_plan_join(const member_join_point_t *jp, int timeout_ms, member_plan_t *plan) {
  memset(plan, 0, sizeof *plan);
  store_client_t *c = NULL;
  coll_status_t st = store_client_connect(jp->addr, (uint16_t)jp->port,
                                          jp->token[0] ? jp->token : NULL, timeout_ms, &c);
  if (st != COLL_OK)
    return coll_error_prefix(st, "coll_comm_join: the store at %s:%d: ", jp->addr, jp->port);
  char text[64];
  int64_t ticket = 0, gen = 0;
  int rank = -1, size = 0;
  store_key_t joiners = key_lineage_joiners(jp->root);
  st = store_add(c, joiners.text, 1, &ticket, timeout_ms);
  store_key_t mine = key_lineage_ticket(jp->root, ticket);
  if (st == COLL_OK) st = get_text(c, NULL, -1, mine.text, timeout_ms, text, sizeof text);
  store_client_close(c);
  if (st == COLL_OK && (sscanf(text, "%lld %d %d", (long long *)&gen, &rank, &size) != 3 ||
                        rank < 0 || rank >= size))
    st = coll_error(COLL_ERR_PROTOCOL, "malformed ticket '%s'", text);
  if (st == COLL_ERR_TIMEOUT)
    return coll_error(st,
                      "coll_comm_join: registered as joiner %lld of lineage '%s', but no member "
                      "grew to take it in within %d ms",
                      (long long)ticket, jp->root, timeout_ms);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_join: ");
  snprintf(plan->context, sizeof plan->context, "coll_comm_join (as rank %d of %d): ", rank, size);
  store_place_t place = {.port = jp->port};
  snprintf(place.host, sizeof place.host, "%s", jp->addr);
  snprintf(place.token, sizeof place.token, "%s", jp->token);
  return plan_generation(&place, jp->root, gen, rank, size, timeout_ms, plan);
}
