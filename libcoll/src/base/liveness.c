/* Liveness: whether a rank's process is still there, by the store, in one of two ways.
 *
 * Owned keys (libcoll's own store): each rank's failure watcher (failure_watch.c) sets
 * "<prefix>alive/<rank>" owned by its own connection, and the store deletes an owned key
 * when the connection closes, so a missing key means the process died. A live rank whose
 * watcher's connection broke registers again within about 200 ms, so one miss is not yet
 * a death: LIVENESS_MISSES_DEAD looks in a row are. Costs the store nothing while ranks
 * live.
 *
 * Leases (a caller's store without owned keys, such as PyTorch's c10d stores): the key is
 * a counter the rank's failure watcher adds one to every lease period (COLL_LEASE_MS,
 * 100 ms); a rank whose counter has not moved for COLL_LEASE_DEAD_MS (600 ms) of looks is
 * dead. Costs each rank one store request a period (10 a second at the default), and
 * a death is seen COLL_LEASE_DEAD_MS after the last renewal at the latest.
 *
 * The executor (a silent peer), the agreement (a rank that did not take part) and a new
 * communicator's rendezvous (a member that did not come) all judge by these rules, each
 * keeping a liveness_tracker_t per rank it looks at. */
#include <stdio.h>

#include "base/base.h"
#include "base/store_keys.h"
#include "common/clock.h"
#include "common/env.h"

enum { LEASE_MS_DEFAULT = 100, LEASE_DEAD_MS_DEFAULT = 600 };

coll_status_t liveness_lease_ms(int *period_ms, int *dead_ms) {
  int64_t period = 0, dead = 0;
  coll_status_t st = coll_env_int("COLL_LEASE_MS", 10, 60000, LEASE_MS_DEFAULT, &period);
  if (st == COLL_OK)
    st = coll_env_int("COLL_LEASE_DEAD_MS", 2 * period, 600000,
                      LEASE_DEAD_MS_DEFAULT > 2 * period ? LEASE_DEAD_MS_DEFAULT : 6 * period,
                      &dead);
  if (period_ms != NULL) *period_ms = (int)period;
  if (dead_ms != NULL) *dead_ms = (int)dead;
  return st;
}

coll_status_t liveness_register(store_client_t *c, const char *prefix, int rank, int ms) {
  store_key_t key = key_alive(prefix, rank);
  if (store_client_owns_keys(c)) return store_set_owned(c, key.text, "1", 1, ms);
  return store_add(c, key.text, 1, NULL, ms);
}

coll_status_t liveness_renew(store_client_t *c, const char *prefix, int rank, int ms) {
  if (store_client_owns_keys(c)) return COLL_OK;
  store_key_t key = key_alive(prefix, rank);
  return store_add(c, key.text, 1, NULL, ms);
}

coll_status_t liveness_observe(store_client_t *c, const char *prefix, int rank, int ms,
                               liveness_tracker_t *t, bool *dead) {
  *dead = false;
  if (t->rank != rank || !t->started) *t = (liveness_tracker_t){.rank = rank, .started = true};
  store_key_t key = key_alive(prefix, rank);
  if (store_client_owns_keys(c)) {
    bool alive = false;
    const char *keys[1] = {key.text};
    coll_status_t st = store_check(c, keys, 1, &alive, ms);
    if (st != COLL_OK) return st;
    t->misses = alive ? 0 : t->misses + 1;
    *dead = t->misses >= LIVENESS_MISSES_DEAD;
    return COLL_OK;
  }
  int dead_ms = 0;
  coll_status_t st = liveness_lease_ms(NULL, &dead_ms);
  int64_t lease = 0;
  if (st == COLL_OK) st = store_add(c, key.text, 0, &lease, ms); /* read, absent: 0 */
  if (st != COLL_OK) return st;
  int64_t now = coll_now_ns();
  if (t->moved_ns == 0 || lease != t->lease) {
    t->lease = lease;
    t->moved_ns = now;
    return COLL_OK;
  }
  *dead = now - t->moved_ns >= (int64_t)dead_ms * 1000000;
  return COLL_OK;
}

int liveness_peer_alive(coll_base_t *base, int peer, liveness_tracker_t *t) {
  if (base->store == NULL || peer < 0 || peer >= base->nranks) return 1;
  bool dead = false;
  coll_status_t st = liveness_observe(base->store, base->key_prefix, peer,
                                      base_failure_store_ms(base), t, &dead);
  if (st != COLL_OK) return -1;
  return dead ? 0 : 1;
}
