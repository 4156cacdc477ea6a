/* Failure records and the error tail of every execution path. The first failure of a
 * communicator is published through the store ("<prefix>failure" =
 * "rank|status|message", first writer wins), and every connection found dead as
 * "<prefix>dead/<peer>"; the other ranks' failure watchers (failure_watch.c) wait on
 * that key, so they stop within a store round trip. A rank that only sees the cascade (a
 * survivor that failed first closed its connections) appends the first failure to its
 * message, so every rank names the rank that died. At destroy, the store's host keeps
 * serving until the others have left or are known dead, within a short bound. Store
 * calls on this path are short (base_failure_store_ms): a failure is reported within its deadline
 * plus a stated margin even when the store's host is the rank that stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/store_keys.h"
#include "common/clock.h"
#include "common/error.h"

enum { LINGER_MAX_MS = 3000, POLL_MS = 10, STORE_OP_MS = 150 };

int base_failure_store_ms(const coll_base_t *base) {
  return base->timeout_ms < STORE_OP_MS ? base->timeout_ms : STORE_OP_MS;
}

bool failure_parse(const char *value, size_t len, failure_t *out) {
  char text[sizeof out->message + 32];
  snprintf(text, sizeof text, "%.*s", (int)len, value);
  char *bar1 = strchr(text, '|');
  char *bar2 = bar1 != NULL ? strchr(bar1 + 1, '|') : NULL;
  if (bar2 == NULL) return false;
  out->rank = atoi(text);
  out->status = (coll_status_t)atoi(bar1 + 1);
  snprintf(out->message, sizeof out->message, "%s", bar2 + 1);
  return true;
}

coll_status_t failure_record(coll_base_t *base, coll_status_t st, int dead_peer) {
  if (base->store == NULL || base->nranks < 2 || st == COLL_ERR_ABORTED) return st;
  char saved[BASE_MESSAGE_MAX], mine[BASE_MESSAGE_MAX + 16];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  if (dead_peer >= 0) {
    store_key_t dead = key_dead(base->key_prefix, dead_peer);
    if (store_set(base->store, dead.text, "1", 1, base_failure_store_ms(base)) != COLL_OK) {
      coll_error(st, "%s", saved); /* the store is gone too: nothing to learn there */
      return st;
    }
  }
  store_key_t key = key_failure(base->key_prefix);
  snprintf(mine, sizeof mine, "%d|%d|%s", base->rank, (int)st, saved);
  void *current = NULL;
  size_t len = 0;
  coll_status_t s = store_compare_set(base->store, key.text, NULL, 0, mine, strlen(mine), &current,
                                      &len, base_failure_store_ms(base));
  failure_t first;
  bool theirs = s == COLL_OK && current != NULL && failure_parse(current, len, &first) &&
                first.rank != base->rank;
  free(current);
  if (!theirs) {
    coll_error(st, "%s", saved);
    return st;
  }
  /* A broken or closed connection after another rank's mismatch or timeout is its
   * consequence (that rank gave up and left): report the cause's status. */
  bool cascade = st == COLL_ERR_REMOTE || st == COLL_ERR_PROTOCOL;
  if (cascade && first.status < 0) st = first.status;
  /* Every rank of a mismatch names the same pair already. */
  if (st == COLL_ERR_MISMATCH && first.status == COLL_ERR_MISMATCH && !cascade)
    coll_error(st, "%s", saved);
  else
    coll_error(st, "%s; first failure in the communicator: %s", saved, first.message);
  return st;
}

/* Whether rank r has left or was seen dead. */
static bool accounted(coll_base_t *base, int r) {
  store_key_t left = key_left(base->key_prefix, r), dead = key_dead(base->key_prefix, r);
  bool exists = false;
  const char *k1[1] = {left.text}, *k2[1] = {dead.text};
  if (store_check(base->store, k1, 1, &exists, 200) == COLL_OK && exists) return true;
  return store_check(base->store, k2, 1, &exists, 200) == COLL_OK && exists;
}

void failure_linger(coll_base_t *base) {
  if (base->store == NULL || base->nranks < 2) return;
  if (base->server == NULL) {
    store_key_t left = key_left(base->key_prefix, base->rank);
    store_set(base->store, left.text, "1", 1, base_failure_store_ms(base));
    return;
  }
  int bound = base->timeout_ms < LINGER_MAX_MS ? base->timeout_ms : LINGER_MAX_MS;
  int64_t deadline = coll_deadline_ns(bound);
  for (int r = 0; r < base->nranks; r++) {
    if (r == base->rank) continue;
    while (!accounted(base, r) && coll_now_ns() < deadline) usleep(POLL_MS * 1000);
  }
}

coll_status_t failure_conclude(coll_base_t *base, coll_status_t st, int dead_peer,
                               bool stopped_by_peer) {
  if (st == COLL_ERR_ABORTED || st == COLL_OK) return st;
  if (stopped_by_peer) {
    /* The watcher has marked us failed with the first failure's message. */
    if (st == COLL_ERR_TIMEOUT) hang_join(base);
    return st;
  }
  bool store_ok = true;
  if (st == COLL_ERR_TIMEOUT) store_ok = hang_publish(base);
  /* (Our own watcher ignores our record: it names this rank.) */
  if (store_ok) st = failure_record(base, st, dead_peer);
  base_mark_failed(base, st);
  if (st == COLL_ERR_TIMEOUT) hang_collect(base, store_ok);
  return st;
}
