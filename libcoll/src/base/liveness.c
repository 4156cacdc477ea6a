/* Liveness: whether a rank's process is still there, by the store. Each rank's failure
 * watcher (failure_watch.c) sets "<prefix>alive/<rank>" owned by its own connection, and
 * the store deletes an owned key when the connection closes, so a missing key means the
 * process died. A live rank whose watcher's connection broke registers again within
 * about 200 ms, so one miss is not yet a death: LIVENESS_MISSES_DEAD looks in a row are.
 * The executor (a silent peer), the agreement (a rank that did not take part) and a new
 * communicator's rendezvous (a member that did not come) all judge by these rules. */
#include "base/base.h"
#include "base/store_keys.h"

coll_status_t liveness_register(store_client_t *c, const char *prefix, int rank, int ms) {
  store_key_t key = key_alive(prefix, rank);
  return store_set_owned(c, key.text, "1", 1, ms);
}

coll_status_t liveness_look(store_client_t *c, const char *prefix, int rank, int ms, bool *alive) {
  store_key_t key = key_alive(prefix, rank);
  const char *keys[1] = {key.text};
  *alive = false;
  return store_check(c, keys, 1, alive, ms);
}

int liveness_peer_alive(coll_base_t *base, int peer) {
  if (base->store == NULL || peer < 0 || peer >= base->nranks) return 1;
  bool alive = false;
  coll_status_t st =
      liveness_look(base->store, base->key_prefix, peer, base_failure_store_ms(base), &alive);
  if (st != COLL_OK) return -1;
  return alive ? 1 : 0;
}

bool liveness_missed(int *misses, bool missing) {
  *misses = missing ? *misses + 1 : 0;
  return *misses >= LIVENESS_MISSES_DEAD;
}
