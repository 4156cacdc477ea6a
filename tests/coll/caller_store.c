/* The caller's store of the coll tests (caller_store.h): each handle is a client of the
 * TCP store server the test hosts, each function one request, so the library sees a store
 * that keeps no key for a connection and cannot interrupt a call. */
#include "caller_store.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "bootstrap/store.h"

static atomic_llong n_set, n_get, n_add, n_cas, n_check, n_delete, n_clone;

void *caller_store_open(uint16_t port, int timeout_ms) {
  store_client_t *c = NULL;
  if (store_client_connect("127.0.0.1", port, NULL, timeout_ms, &c) != COLL_OK) {
    fprintf(stderr, "caller_store_open: %s\n", coll_last_error());
    return NULL;
  }
  return c;
}

void caller_store_free(void *store) { store_client_close(store); }

caller_store_counts_t caller_store_counts(void) {
  return (caller_store_counts_t){.set = n_set,
                                 .get = n_get,
                                 .add = n_add,
                                 .compare_set = n_cas,
                                 .check = n_check,
                                 .delete_key = n_delete,
                                 .clone = n_clone};
}

static coll_status_t do_set(void *s, const char *key, const void *value, size_t len, int ms) {
  n_set++;
  return store_set(s, key, value, len, ms);
}

static coll_status_t do_get(void *s, const char *key, void **value, size_t *len, int ms) {
  n_get++;
  return store_get(s, key, value, len, ms);
}

static coll_status_t do_add(void *s, const char *key, int64_t delta, int64_t *out, int ms) {
  n_add++;
  return store_add(s, key, delta, out, ms);
}

static coll_status_t do_compare_set(void *s, const char *key, const void *expected,
                                    size_t expected_len, const void *desired, size_t desired_len,
                                    void **current, size_t *current_len, int ms) {
  n_cas++;
  return store_compare_set(s, key, expected, expected_len, desired, desired_len, current,
                           current_len, ms);
}

static coll_status_t do_check(void *s, const char *const *keys, size_t n, int *all, int ms) {
  n_check++;
  bool b = false;
  coll_status_t st = store_check(s, keys, n, &b, ms);
  *all = b;
  return st;
}

static coll_status_t do_delete(void *s, const char *key, int *deleted, int ms) {
  n_delete++;
  bool b = false;
  coll_status_t st = store_delete(s, key, &b, ms);
  if (deleted != NULL) *deleted = b;
  return st;
}

static coll_status_t do_clone(void *s, int ms, void **copy) {
  n_clone++;
  store_client_t *c = NULL;
  coll_status_t st = store_client_clone(s, ms, &c);
  *copy = c;
  return st;
}

static void do_release(void *s) { store_client_close(s); }

const coll_store_ops_t caller_store_ops = {
    .version = COLL_STORE_OPS_VERSION,
    .set = do_set,
    .get = do_get,
    .add = do_add,
    .compare_set = do_compare_set,
    .check = do_check,
    .delete_key = do_delete,
    .clone = do_clone,
    .release = do_release,
};
