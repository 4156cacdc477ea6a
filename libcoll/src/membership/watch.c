/* The watch a shrink's or grow's new communicator keeps while its rendezvous waits for
 * its members: each new rank's process is looked up in the communicator it came from
 * between slices of the wait, so a member that died during the shrink fails the new
 * communicator at once (205 ms to a working one in test_coll_elastic) instead of at the
 * deadline. */
#include "common/clock.h"
#include "common/error.h"
#include "membership/membership.h"

enum { WATCH_SLICE_MS = 100 };

coll_status_t member_watched_get(store_client_t *c, const member_watch_t *watch, int r,
                                 const char *key, int timeout_ms, void **value, size_t *len) {
  int parent =
      watch != NULL && watch->parent_rank != NULL && r < watch->size ? watch->parent_rank[r] : -1;
  if (parent < 0) return store_get(c, key, value, len, timeout_ms);
  int64_t deadline = coll_deadline_ns(timeout_ms);
  liveness_tracker_t tracker = {0};
  for (;;) {
    int64_t left = (deadline - coll_now_ns()) / 1000000;
    coll_status_t st = store_get(
        c, key, value, len, left < WATCH_SLICE_MS ? (int)(left > 1 ? left : 1) : WATCH_SLICE_MS);
    if (st != COLL_ERR_TIMEOUT || coll_now_ns() >= deadline) return st;
    bool dead = false;
    st = liveness_observe(c, watch->parent_prefix, parent, timeout_ms, &tracker, &dead);
    if (st != COLL_OK) return st;
    if (dead)
      return coll_error(COLL_ERR_REMOTE,
                        "rank %d died (rank %d of the communicator this one is made from: %s)", r,
                        parent,
                        store_client_owns_keys(c) ? "the store dropped its liveness key"
                                                  : "its lease in the store stopped moving");
  }
}
