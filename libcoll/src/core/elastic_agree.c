/* Revoke and agreement, the first two links of surviving a lost rank (docs/elastic.md).
 *
 * Revoke publishes the communicator's first failure ("<prefix>failure", as a dead peer's
 * failure does: base/failure.c) with status COLL_ERR_REVOKED; every member's failure
 * watcher wakes on it and fails what is pending there.
 *
 * Agreement is decided in the store, which serialises it: the first decision written
 * under "<prefix>agree/<epoch>/decision" (compare-and-set on an absent key) is the
 * answer, and every member reads that one, so no two members can ever act on different
 * answers. Each member writes "in/<rank>" = its flag and adds one to a counter; the one
 * that makes the counter reach the size decides at once (nobody failed). The others wait
 * for the decision in slices of SLICE_MS; after each slice they look who is in and who is
 * alive ("<prefix>alive/<rank>", a key owned by that rank's failure-watcher connection,
 * which the store deletes when the process dies: base/failure_watch.c). When every rank
 * is in or dead, or when the agreement's deadline passed, the member that looked writes
 * the decision: the ranks not in are failed. A member that finds itself in the failed
 * set (it was stopped, or came late) gets COLL_ERR_FENCED. A member that has waited a
 * quarter of the deadline revokes the communicator (once): a rank still inside a call on
 * it, waiting for a stopped peer that had already sent the others all they needed, stops
 * and comes, instead of arriving after the deadline and being fenced. The decider also writes
 * "<prefix>dead/<rank>" for the failed ranks, so destroy never waits for them.
 * Joiners (elastic_members.c) are counted under the lineage's root prefix: "joiners"
 * (registrations) minus "served" (taken in by grows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/test_hook.h"
#include "core/comm.h"

enum { KEY_MAX = 192, SLICE_MS = 20, DECISION_MAX = 1024, REVOKE_AFTER_PARTS = 4 };

coll_status_t elastic_store(coll_comm_t *comm, store_client_t **client) {
  if (comm->elastic_store == NULL) {
    coll_status_t st = store_client_connect(
        comm->base.store_addr, (uint16_t)comm->base.store_port,
        comm->base.token[0] ? comm->base.token : NULL, comm->base.timeout_ms, &comm->elastic_store);
    if (st != COLL_OK)
      return coll_error_prefix(st, "the store at %s:%d (needed to agree, shrink or grow): ",
                               comm->base.store_addr, comm->base.store_port);
  }
  *client = comm->elastic_store;
  return COLL_OK;
}

/* ---- revoke ---- */

coll_status_t coll_comm_revoke(coll_comm_t *comm) {
  coll_status_t st = comm_check(comm, "coll_comm_revoke");
  if (st != COLL_OK) return st;
  if (base_aborted(&comm->base))
    return coll_error(COLL_ERR_ABORTED, "rank %d: coll_comm_revoke: the communicator was aborted",
                      comm->base.rank);
  if (base_failed(&comm->base) != 0) { /* revoked already, or failed: the same to everyone */
    coll_error_clear();
    return COLL_OK;
  }
  char message[BASE_MESSAGE_MAX];
  snprintf(message, sizeof message, "rank %d revoked the communicator", comm->base.rank);
  coll_error(COLL_ERR_REVOKED, "%s", message);
  base_mark_failed(&comm->base, COLL_ERR_REVOKED);
  if (comm->base.nranks > 1) {
    /* A connection of its own: revoke may come from another thread than the caller's. */
    store_client_t *client = NULL;
    int bound = comm->base.timeout_ms;
    st = store_client_connect(comm->base.store_addr, (uint16_t)comm->base.store_port,
                              comm->base.token[0] ? comm->base.token : NULL, bound, &client);
    if (st == COLL_OK) {
      char key[KEY_MAX], record[BASE_MESSAGE_MAX + 32];
      snprintf(key, sizeof key, "%sfailure", comm->base.key_prefix);
      snprintf(record, sizeof record, "%d|%d|%s", comm->base.rank, (int)COLL_ERR_REVOKED, message);
      void *current = NULL;
      size_t len = 0;
      st = store_compare_set(client, key, NULL, 0, record, strlen(record), &current, &len, bound);
      free(current);
      store_client_close(client);
    }
    if (st != COLL_OK)
      return coll_error_prefix(st,
                               "rank %d: coll_comm_revoke: revoked here, but the others could not "
                               "be told through the store: ",
                               comm->base.rank);
  }
  coll_error_clear();
  return COLL_OK;
}

/* ---- agreement ---- */

typedef struct {
  uint32_t flag;
  int nfailed;
  int failed[COLL_AGREE_MAX_FAILED];
  int joiners;
} decision_t;

/* How long the decision's get may park: the rest of the deadline, at most a slice. */
static int slice_ms(int64_t deadline_ns) {
  int64_t left = (deadline_ns - coll_now_ns()) / 1000000;
  if (left < 1) left = 1;
  return left < SLICE_MS ? (int)left : SLICE_MS;
}

static bool key_exists(store_client_t *c, const char *key, int ms, coll_status_t *st) {
  bool exists = false;
  const char *keys[1] = {key};
  *st = store_check(c, keys, 1, &exists, ms);
  return *st == COLL_OK && exists;
}

/* A counter's value (absent: 0) without changing it. */
static coll_status_t read_counter(store_client_t *c, const char *key, int ms, int64_t *value) {
  return store_add(c, key, 0, value, ms);
}

coll_status_t elastic_joiners_waiting(coll_comm_t *comm, store_client_t *c, int ms, int *waiting) {
  char key[KEY_MAX];
  int64_t registered = 0, served = 0;
  snprintf(key, sizeof key, "%sjoiners", comm->lineage_root);
  coll_status_t st = read_counter(c, key, ms, &registered);
  snprintf(key, sizeof key, "%sserved", comm->lineage_root);
  if (st == COLL_OK) st = read_counter(c, key, ms, &served);
  *waiting = st == COLL_OK && registered > served ? (int)(registered - served) : 0;
  return st;
}

static void format_decision(const decision_t *d, char *out, size_t cap) {
  int len = snprintf(out, cap, "%u %d", d->flag, d->nfailed);
  for (int i = 0; i < d->nfailed && len > 0 && (size_t)len < cap; i++)
    len += snprintf(out + len, cap - (size_t)len, " %d", d->failed[i]);
  if (len > 0 && (size_t)len < cap) snprintf(out + len, cap - (size_t)len, " %d", d->joiners);
}

static bool parse_decision(const char *text, int nranks, decision_t *d) {
  char *end = NULL;
  const char *p = text;
  unsigned long flag = strtoul(p, &end, 10);
  if (end == p) return false;
  p = end;
  long nf = strtol(p, &end, 10);
  if (end == p || nf < 0 || nf > COLL_AGREE_MAX_FAILED) return false;
  d->flag = (uint32_t)flag;
  d->nfailed = (int)nf;
  for (int i = 0; i < d->nfailed; i++) {
    p = end;
    long r = strtol(p, &end, 10);
    if (end == p || r < 0 || r >= nranks) return false;
    d->failed[i] = (int)r;
  }
  p = end;
  long j = strtol(p, &end, 10);
  if (end == p || j < 0) return false;
  d->joiners = (int)j;
  return true;
}

/* Write the decision (the ranks not in are failed), or read the one written first. */
static coll_status_t decide(coll_comm_t *comm, store_client_t *c, uint64_t epoch,
                            const bool *in, decision_t *out) {
  const coll_base_t *b = &comm->base;
  decision_t d = {.flag = ~0u};
  char key[KEY_MAX], text[DECISION_MAX];
  int ms = b->timeout_ms; /* a store op; the deadline bounds the waiting for ranks */
  coll_status_t st = COLL_OK;
  for (int r = 0; r < b->nranks && st == COLL_OK; r++) {
    if (!in[r]) {
      if (d.nfailed == COLL_AGREE_MAX_FAILED)
        return coll_error(COLL_ERR_UNSUPPORTED,
                          "rank %d: coll_comm_agree: more than %d ranks failed at once",
                          b->rank, COLL_AGREE_MAX_FAILED);
      d.failed[d.nfailed++] = r;
      continue;
    }
    snprintf(key, sizeof key, "%sagree/%llu/in/%d", b->key_prefix, (unsigned long long)epoch, r);
    void *value = NULL;
    size_t len = 0;
    st = store_get(c, key, &value, &len, ms);
    if (st == COLL_OK) {
      snprintf(text, sizeof text, "%.*s", (int)(len < 32 ? len : 31), (const char *)value);
      d.flag &= (uint32_t)strtoul(text, NULL, 10);
    }
    free(value);
  }
  if (st == COLL_OK && d.nfailed == 0) st = elastic_joiners_waiting(comm, c, ms, &d.joiners);
  if (st != COLL_OK) return st;
  format_decision(&d, text, sizeof text);
  snprintf(key, sizeof key, "%sagree/%llu/decision", b->key_prefix, (unsigned long long)epoch);
  void *current = NULL;
  size_t len = 0;
  st = store_compare_set(c, key, NULL, 0, text, strlen(text), &current, &len, ms);
  if (st != COLL_OK) return st;
  snprintf(text, sizeof text, "%.*s", (int)(len < DECISION_MAX ? len : DECISION_MAX - 1),
           current != NULL ? (const char *)current : "");
  free(current);
  if (!parse_decision(text, b->nranks, out))
    return coll_error(COLL_ERR_PROTOCOL, "rank %d: coll_comm_agree: malformed decision '%s'",
                      b->rank, text);
  /* The failed ranks' connections and keys are gone for good: say so to destroy. */
  for (int i = 0; i < out->nfailed && st == COLL_OK; i++) {
    snprintf(key, sizeof key, "%sdead/%d", b->key_prefix, out->failed[i]);
    st = store_set(c, key, "1", 1, ms);
  }
  return st;
}

/* Who is in, and whether every rank is in or dead. */
static coll_status_t survey(coll_comm_t *comm, store_client_t *c, uint64_t epoch, bool *in,
                            int *misses, bool *settled) {
  const coll_base_t *b = &comm->base;
  char key[KEY_MAX];
  int ms = b->timeout_ms; /* a store op; the deadline bounds the waiting for ranks */
  coll_status_t st = COLL_OK;
  *settled = true;
  for (int r = 0; r < b->nranks; r++) {
    snprintf(key, sizeof key, "%sagree/%llu/in/%d", b->key_prefix, (unsigned long long)epoch, r);
    in[r] = key_exists(c, key, ms, &st);
    if (st != COLL_OK) return st;
    if (in[r]) continue;
    snprintf(key, sizeof key, "%salive/%d", b->key_prefix, r);
    bool alive = key_exists(c, key, ms, &st);
    if (st != COLL_OK) return st;
    /* Missing in two looks a slice apart: a live rank whose watcher reconnects has its
     * key back within milliseconds (base/failure_watch.c). */
    misses[r] = alive ? 0 : misses[r] + 1;
    if (misses[r] < 2) *settled = false;
  }
  return COLL_OK;
}

static coll_status_t agree_ms(const coll_comm_t *comm, int64_t *ms) {
  return coll_env_int("COLL_AGREE_MS", 1, INT32_MAX / 2, comm->base.timeout_ms, ms);
}

static coll_status_t agree(coll_comm_t *comm, decision_t *d, uint32_t flag) {
  coll_base_t *b = &comm->base;
  uint64_t epoch = ++comm->agree_epoch;
  int64_t bound = 0;
  coll_status_t st = agree_ms(comm, &bound);
  if (st != COLL_OK) return st;
  int64_t deadline = coll_deadline_ns((int)bound);
  /* Ranks missing this long may be stuck in a call on comm (waiting for a stopped rank
   * that had sent them nothing more): revoke it, so that they stop and come. */
  int64_t revoke_at = coll_deadline_ns((int)(bound / REVOKE_AFTER_PARTS));
  bool revoked = false;
  store_client_t *c = NULL;
  st = elastic_store(comm, &c);
  if (st != COLL_OK) return st;
  char key[KEY_MAX], text[32];
  snprintf(key, sizeof key, "%sagree/%llu/in/%d", b->key_prefix, (unsigned long long)epoch,
           b->rank);
  snprintf(text, sizeof text, "%u", flag);
  st = store_set(c, key, text, strlen(text), b->timeout_ms);
  int64_t arrived = 0;
  snprintf(key, sizeof key, "%sagree/%llu/n", b->key_prefix, (unsigned long long)epoch);
  if (st == COLL_OK) st = store_add(c, key, 1, &arrived, b->timeout_ms);
  if (st != COLL_OK) return st;
  bool *in = calloc((size_t)b->nranks, sizeof *in);
  int *misses = calloc((size_t)b->nranks, sizeof *misses);
  if (in == NULL || misses == NULL) {
    free(in);
    free(misses);
    return coll_error(COLL_ERR_NO_MEMORY, "coll_comm_agree: out of memory");
  }
  if (arrived >= b->nranks) {
    for (int r = 0; r < b->nranks; r++) in[r] = true;
    st = decide(comm, c, epoch, in, d);
    free(in);
    free(misses);
    return st;
  }
  snprintf(key, sizeof key, "%sagree/%llu/decision", b->key_prefix, (unsigned long long)epoch);
  for (;;) {
    void *value = NULL;
    size_t len = 0;
    st = store_get(c, key, &value, &len, slice_ms(deadline));
    if (st == COLL_OK) {
      char dtext[DECISION_MAX];
      snprintf(dtext, sizeof dtext, "%.*s", (int)(len < DECISION_MAX ? len : DECISION_MAX - 1),
               (const char *)value);
      free(value);
      if (!parse_decision(dtext, b->nranks, d))
        st = coll_error(COLL_ERR_PROTOCOL, "rank %d: coll_comm_agree: malformed decision '%s'",
                        b->rank, dtext);
      break;
    }
    free(value);
    if (st != COLL_ERR_TIMEOUT) break;
    bool settled = false;
    st = survey(comm, c, epoch, in, misses, &settled);
    if (st != COLL_OK) break;
    if (settled || coll_now_ns() >= deadline) {
      st = decide(comm, c, epoch, in, d);
      break;
    }
    if (!revoked && coll_now_ns() >= revoke_at) {
      revoked = true;
      st = coll_comm_revoke(comm);
      if (st != COLL_OK) break;
    }
  }
  free(in);
  free(misses);
  return st;
}

coll_status_t coll_comm_agree(coll_comm_t *comm, coll_agreement_t *agreement) {
  coll_test_hook("agree");
  coll_status_t st = comm_check(comm, "coll_comm_agree");
  if (st != COLL_OK) return st;
  const coll_base_t *b = &comm->base;
  if (agreement == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_agree: agreement is NULL",
                      b->rank);
  if (base_aborted(b))
    return coll_error(COLL_ERR_ABORTED, "rank %d: coll_comm_agree: the communicator was aborted",
                      b->rank);
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_agree: not allowed inside a group", b->rank);
  decision_t d = {.flag = agreement->flag};
  if (b->nranks > 1) {
    st = agree(comm, &d, agreement->flag);
    if (st != COLL_OK)
      return coll_error_prefix(st, "rank %d: coll_comm_agree #%llu: ", b->rank,
                               (unsigned long long)comm->agree_epoch);
    for (int i = 0; i < d.nfailed; i++)
      if (d.failed[i] == b->rank)
        return coll_error(COLL_ERR_FENCED,
                          "rank %d: coll_comm_agree #%llu: the other ranks declared this rank "
                          "failed (it did not take part in time); it must stop using this "
                          "communicator and those made from it",
                          b->rank, (unsigned long long)comm->agree_epoch);
  } else if (b->store_port > 0 && comm->lineage_root[0] != '\0') {
    /* Alone, nobody to agree with; but replacements may wait for this rank to grow. */
    store_client_t *c = NULL;
    st = elastic_store(comm, &c);
    if (st == COLL_OK) st = elastic_joiners_waiting(comm, c, b->timeout_ms, &d.joiners);
    if (st != COLL_OK) return coll_error_prefix(st, "rank 0: coll_comm_agree (alone): ");
  }
  agreement->flag = d.flag;
  agreement->nfailed = d.nfailed;
  memcpy(agreement->failed, d.failed, (size_t)d.nfailed * sizeof d.failed[0]);
  agreement->joiners = d.joiners;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_comm_agree_failed(coll_comm_t *comm, int *failed, int capacity, int *nfailed) {
  if (nfailed == NULL || capacity < 0 || (failed == NULL && capacity > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_agree_failed: nfailed is NULL or failed/capacity disagree");
  coll_agreement_t a = {.flag = ~0u};
  coll_status_t st = coll_comm_agree(comm, &a);
  if (st != COLL_OK) return st;
  *nfailed = a.nfailed;
  for (int i = 0; i < a.nfailed && i < capacity; i++) failed[i] = a.failed[i];
  return COLL_OK;
}
