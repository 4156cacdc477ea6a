/* The failure watcher: a thread per communicator (of more than one rank) that holds a
 * parked get on the store key where the communicator's first failure is published
 * (failure.c). When another rank fails, the get returns within one store round trip, the
 * watcher marks this communicator failed with that rank's status and message, and the
 * call in progress stops at its next look at `failed` (the waits sleep in slices of at
 * most 10 ms); later calls refuse at once, and coll_comm_get_async_error reports it.
 * So a failure seen by two ranks reaches all of them in milliseconds on one host, not
 * when each one's own deadline passes. It has its own store connection (a client serves
 * one thread) and is stopped by interrupting that connection. It also keeps this rank's
 * liveness (liveness.c): on libcoll's own store a key its connection owns, on a store
 * without owned keys a lease it renews before every get, whose wait then lasts one lease
 * period (such a store may not be able to interrupt a get: stopping takes up to one). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/store_keys.h"
#include "common/error.h"
#include "common/log.h"

enum { PARK_MS = 60000, RETRY_MS = 200 };

struct failure_watch {
  pthread_t thread;
  bool started;
  store_client_t *client;
  atomic_int stop;
  coll_base_t *base;
  store_key_t key; /* the communicator's first failure */
  int park_ms; /* PARK_MS; COLL_TEST_WATCH_PARK_MS makes it short for a test */
  int lease_ms; /* a store without owned keys: the lease period (its gets last that long);
                 * 0: owned keys */
};

static void pause_unless_stopped(struct failure_watch *w, int ms) {
  for (int slept = 0; slept < ms && !atomic_load(&w->stop); slept += 10) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

static void take(struct failure_watch *w, const char *value, size_t len) {
  failure_t f;
  if (!failure_parse(value, len, &f)) return;
  if (f.rank == w->base->rank || f.status >= 0) return; /* our own: already failed */
  base_mark_failed_by_peer(w->base, f.status, f.message);
  coll_log(COLL_LOG_INFO, "rank %d failed: %s", f.rank, f.message);
}

/* This rank's liveness key, owned by the watcher's connection: the store deletes it when
 * this process dies (or the connection breaks), which is how the others tell a dead rank
 * from a slow one (liveness.c). */
static coll_status_t register_alive(struct failure_watch *w) {
  return liveness_register(w->client, w->base->key_prefix, w->base->rank, w->base->timeout_ms);
}

static void *watch_main(void *arg) {
  struct failure_watch *w = arg;
  coll_log_set_rank(w->base->rank);
  bool reregister = false;
  while (!atomic_load(&w->stop)) {
    /* After a broken connection the client reconnects, and the server dropped the key;
     * on a store of leases, renew this rank's every slice. */
    if (reregister && register_alive(w) == COLL_OK) reregister = false;
    if (w->lease_ms > 0)
      liveness_renew(w->client, w->base->key_prefix, w->base->rank, w->base->timeout_ms);
    void *value = NULL;
    size_t len = 0;
    coll_status_t st = store_get(w->client, w->key.text, &value, &len,
                                 w->lease_ms > 0 ? w->lease_ms : w->park_ms);
    if (atomic_load(&w->stop)) {
      free(value);
      break;
    }
    if (st == COLL_OK) {
      take(w, value, len);
      free(value);
      break; /* the first failure is the only one published */
    }
    /* Nothing yet (the get timed out) or the store is away: ask again. A get that timed
     * out may have left the connection to be replaced by the next call, and the server
     * drops the key with the old one: register again every time (once a minute). */
    reregister = w->lease_ms == 0;
    if (st != COLL_ERR_TIMEOUT) pause_unless_stopped(w, RETRY_MS);
  }
  coll_error_clear();
  return NULL;
}

coll_status_t failure_watch_open(coll_base_t *base) {
  if (base->nranks < 2 || base->store == NULL || base->watch != NULL) return COLL_OK;
  struct failure_watch *w = calloc(1, sizeof *w);
  if (w == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for the failure watcher");
  w->base = base;
  atomic_init(&w->stop, 0);
  const char *park = getenv("COLL_TEST_WATCH_PARK_MS");
  w->park_ms = park != NULL && atoi(park) > 0 ? atoi(park) : PARK_MS;
  w->key = key_failure(base->key_prefix);
  coll_status_t st = store_place_open(&base->store_place, base->timeout_ms, &w->client);
  if (st == COLL_OK && !store_client_owns_keys(w->client))
    st = liveness_lease_ms(&w->lease_ms, NULL);
  if (st != COLL_OK) {
    store_client_close(w->client);
    free(w);
    return coll_error_prefix(st, "rank %d: the failure watcher's store connection: ", base->rank);
  }
  st = register_alive(w);
  if (st != COLL_OK) {
    store_client_close(w->client);
    free(w);
    return coll_error_prefix(st, "rank %d: registering with the failure watcher's store: ",
                             base->rank);
  }
  base->watch = w;
  return COLL_OK;
}

coll_status_t failure_watch_start(coll_base_t *base) {
  coll_status_t st = failure_watch_open(base);
  struct failure_watch *w = base->watch;
  if (st != COLL_OK || w == NULL || w->started) return st;
  int rc = pthread_create(&w->thread, NULL, watch_main, w);
  if (rc != 0)
    return coll_error_errno(COLL_ERR_SYSTEM, rc, "rank %d: creating the failure watcher",
                            base->rank);
  w->started = true;
  return COLL_OK;
}

void failure_watch_stop(coll_base_t *base) {
  struct failure_watch *w = base->watch;
  if (w == NULL) return;
  atomic_store(&w->stop, 1);
  store_client_interrupt(w->client);
  if (w->started) pthread_join(w->thread, NULL);
  store_client_close(w->client);
  free(w);
  base->watch = NULL;
}
