/* The store interface as the rest of libcoll calls it (store.h): a client is a handle and
 * the table of functions that serve it (coll.h's coll_store_ops_t), libcoll's own TCP
 * store (store_tcp.c) or the caller's. Calls are checked and dispatched here; a caller's
 * store returns only a status, so its failures get their message here (the call, the key,
 * the store's name). Every call keeps its deadline: a non-positive timeout is the default
 * 30 s, as the TCP client's. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store.h"
#include "bootstrap/store_tcp.h"
#include "common/clock.h"
#include "common/error.h"

enum { DEFAULT_TIMEOUT_MS = 30000 };

struct store_client {
  const coll_store_ops_t *ops;
  void *handle; /* ours: released at close */
  atomic_bool interrupted;
};

static int effective(int timeout_ms) { return timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS; }

static bool is_tcp(const store_client_t *c) { return c->ops == &store_tcp_ops; }

static coll_status_t wrap(const coll_store_ops_t *ops, void *handle, store_client_t **out) {
  store_client_t *c = calloc(1, sizeof *c);
  if (c == NULL) {
    ops->release(handle);
    return coll_error(COLL_ERR_NO_MEMORY, "store client: out of memory");
  }
  c->ops = ops;
  c->handle = handle;
  atomic_init(&c->interrupted, false);
  *out = c;
  return COLL_OK;
}

coll_status_t store_client_connect(const char *host, uint16_t port, const char *token,
                                   int timeout_ms, store_client_t **client) {
  if (client == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_client_connect: client is NULL");
  *client = NULL;
  tcp_store_t *tcp = NULL;
  coll_status_t st = tcp_store_connect(host, port, token, timeout_ms, &tcp);
  if (st != COLL_OK) return st;
  return wrap(&store_tcp_ops, tcp, client);
}

/* The function a caller's table lacks, or NULL. */
static const char *missing_function(const coll_store_ops_t *ops) {
  if (ops->set == NULL) return "set";
  if (ops->get == NULL) return "get";
  if (ops->add == NULL) return "add";
  if (ops->compare_set == NULL) return "compare_set";
  if (ops->check == NULL) return "check";
  if (ops->delete_key == NULL) return "delete_key";
  if (ops->clone == NULL) return "clone";
  if (ops->release == NULL) return "release";
  return NULL;
}

coll_status_t store_client_from_caller(const coll_store_ops_t *ops, void *store, int timeout_ms,
                                       store_client_t **client) {
  if (client == NULL || ops == NULL || store == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "the caller's store: the table, the handle and the client must be given");
  *client = NULL;
  if (ops->version != COLL_STORE_OPS_VERSION)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "the caller's store table: version is %d, not COLL_STORE_OPS_VERSION (%d)",
                      ops->version, COLL_STORE_OPS_VERSION);
  const char *missing = missing_function(ops);
  if (missing != NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "the caller's store table: %s is missing",
                      missing);
  void *copy = NULL;
  coll_status_t st = ops->clone(store, effective(timeout_ms), &copy);
  if (st == COLL_OK && copy == NULL) st = COLL_ERR_INTERNAL;
  if (st != COLL_OK)
    return coll_error(st, "the caller's store%s%s: clone failed: %s",
                      ops->describe != NULL ? " " : "",
                      ops->describe != NULL ? ops->describe(store) : "", coll_status_name(st));
  return wrap(ops, copy, client);
}

coll_status_t store_place_open(const store_place_t *place, int timeout_ms,
                               store_client_t **client) {
  if (place->ops != NULL)
    return store_client_from_caller(place->ops, place->handle, timeout_ms, client);
  return store_client_connect(place->host, (uint16_t)place->port,
                              place->token[0] ? place->token : NULL, timeout_ms, client);
}

coll_status_t store_client_clone(const store_client_t *client, int timeout_ms,
                                 store_client_t **copy) {
  if (client == NULL || copy == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_client_clone: client or copy is NULL");
  *copy = NULL;
  void *handle = NULL;
  coll_status_t st = client->ops->clone(client->handle, effective(timeout_ms), &handle);
  if (st == COLL_OK && handle == NULL) st = COLL_ERR_INTERNAL;
  if (st != COLL_OK) {
    if (is_tcp(client)) return st; /* the TCP client's message says what failed */
    return coll_error(st, "%s: clone failed: %s", store_client_address(client),
                      coll_status_name(st));
  }
  return wrap(client->ops, handle, copy);
}

bool store_client_owns_keys(const store_client_t *client) {
  return client != NULL && client->ops->set_owned != NULL;
}

bool store_client_tcp_place(const store_client_t *client, const char **host, uint16_t *port,
                            const char **token) {
  if (client == NULL || !is_tcp(client)) return false;
  tcp_store_place(client->handle, host, port, token);
  return true;
}

void store_client_close(store_client_t *client) {
  if (client == NULL) return;
  client->ops->release(client->handle);
  free(client);
}

void store_client_interrupt(store_client_t *client) {
  if (client == NULL) return;
  atomic_store(&client->interrupted, true);
  if (client->ops->interrupt != NULL) client->ops->interrupt(client->handle);
}

const char *store_client_address(const store_client_t *client) {
  if (client == NULL) return "(no store)";
  if (client->ops->describe != NULL) return client->ops->describe(client->handle);
  return "the caller's store";
}

/* ---- calls ---- */

/* Refuse once interrupted (a caller's store may have no interrupt of its own). */
static coll_status_t refuse_interrupted(const store_client_t *c, const char *op) {
  if (!atomic_load(&c->interrupted)) return COLL_OK;
  return coll_error(COLL_ERR_ABORTED, "%s on %s: interrupted", op, store_client_address(c));
}

/* A caller's store failed: say which call, on which key, how. */
static coll_status_t explain(const store_client_t *c, coll_status_t st, const char *op,
                             const char *key, int timeout_ms) {
  if (st == COLL_OK || is_tcp(c)) return st;
  if (st == COLL_ERR_TIMEOUT)
    return coll_error(st, "%s: waiting for %s for key '%.256s': timed out after %d ms", op,
                      store_client_address(c), key, timeout_ms);
  return coll_error(st, "%s of key '%.256s' on %s failed: %s", op, key, store_client_address(c),
                    coll_status_string(st));
}

static coll_status_t check_args(const store_client_t *c, const char *op, const char *key) {
  if (c == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_%s: client is NULL", op);
  if (key == NULL || key[0] == '\0')
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: empty or NULL key", op);
  return refuse_interrupted(c, op);
}

coll_status_t store_set(store_client_t *client, const char *key, const void *value, size_t len,
                        int timeout_ms) {
  coll_status_t st = check_args(client, "set", key);
  if (st != COLL_OK) return st;
  int ms = effective(timeout_ms);
  return explain(client, client->ops->set(client->handle, key, value, len, ms), "set", key, ms);
}

coll_status_t store_set_owned(store_client_t *client, const char *key, const void *value,
                              size_t len, int timeout_ms) {
  coll_status_t st = check_args(client, "set", key);
  if (st != COLL_OK) return st;
  if (client->ops->set_owned == NULL)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "set of owned key '%.256s': %s deletes no key when its owner goes", key,
                      store_client_address(client));
  int ms = effective(timeout_ms);
  return explain(client, client->ops->set_owned(client->handle, key, value, len, ms), "set", key,
                 ms);
}

coll_status_t store_get(store_client_t *client, const char *key, void **value, size_t *len,
                        int timeout_ms) {
  if (value == NULL || len == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_get: value or len is NULL");
  *value = NULL;
  *len = 0;
  coll_status_t st = check_args(client, "get", key);
  if (st != COLL_OK) return st;
  int ms = effective(timeout_ms);
  st = client->ops->get(client->handle, key, value, len, ms);
  if (st != COLL_OK) {
    free(*value);
    *value = NULL;
    *len = 0;
  }
  return explain(client, st, "get", key, ms);
}

coll_status_t store_add(store_client_t *client, const char *key, int64_t delta, int64_t *new_value,
                        int timeout_ms) {
  coll_status_t st = check_args(client, "add", key);
  if (st != COLL_OK) return st;
  int64_t ignored = 0;
  int ms = effective(timeout_ms);
  st = client->ops->add(client->handle, key, delta, new_value != NULL ? new_value : &ignored, ms);
  return explain(client, st, "add", key, ms);
}

coll_status_t store_compare_set(store_client_t *client, const char *key, const void *expected,
                                size_t expected_len, const void *desired, size_t desired_len,
                                void **current, size_t *current_len, int timeout_ms) {
  if (current == NULL || current_len == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "store_compare_set: current or current_len is NULL");
  *current = NULL;
  *current_len = 0;
  coll_status_t st = check_args(client, "compare_set", key);
  if (st != COLL_OK) return st;
  int ms = effective(timeout_ms);
  st = client->ops->compare_set(client->handle, key, expected, expected_len, desired, desired_len,
                                current, current_len, ms);
  return explain(client, st, "compare_set", key, ms);
}

coll_status_t store_wait(store_client_t *client, const char *const *keys, size_t nkeys,
                         int timeout_ms) {
  if (client == NULL || (keys == NULL && nkeys > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_wait: client or keys is NULL");
  if (nkeys == 0) return COLL_OK;
  coll_status_t st = refuse_interrupted(client, "wait");
  if (st != COLL_OK) return st;
  int ms = effective(timeout_ms);
  if (client->ops->wait != NULL)
    return explain(client, client->ops->wait(client->handle, keys, nkeys, ms), "wait", keys[0], ms);
  /* One key after another, within the one deadline. */
  int64_t deadline = coll_deadline_ns(ms);
  for (size_t i = 0; i < nkeys; i++) {
    int left = coll_ms_left(deadline);
    void *value = NULL;
    size_t len = 0;
    st = store_get(client, keys[i], &value, &len, left > 0 ? left : 1);
    free(value);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

coll_status_t store_check(store_client_t *client, const char *const *keys, size_t nkeys,
                          bool *all_exist, int timeout_ms) {
  if (client == NULL || all_exist == NULL || (keys == NULL && nkeys > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_check: client, keys or all_exist is NULL");
  *all_exist = true;
  if (nkeys == 0) return COLL_OK;
  coll_status_t st = refuse_interrupted(client, "check");
  if (st != COLL_OK) return st;
  int all = 0, ms = effective(timeout_ms);
  st = client->ops->check(client->handle, keys, nkeys, &all, ms);
  *all_exist = st == COLL_OK && all != 0;
  return explain(client, st, "check", keys[0], ms);
}

coll_status_t store_delete(store_client_t *client, const char *key, bool *deleted, int timeout_ms) {
  coll_status_t st = check_args(client, "delete", key);
  if (st != COLL_OK) return st;
  int d = 0, ms = effective(timeout_ms);
  st = client->ops->delete_key(client->handle, key, &d, ms);
  if (deleted != NULL) *deleted = st == COLL_OK && d != 0;
  return explain(client, st, "delete", key, ms);
}

coll_status_t store_num_keys(store_client_t *client, int64_t *count, int timeout_ms) {
  if (client == NULL || count == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "store_num_keys: client or count is NULL");
  if (client->ops->num_keys == NULL)
    return coll_error(COLL_ERR_UNSUPPORTED, "num_keys: %s has no such call",
                      store_client_address(client));
  coll_status_t st = refuse_interrupted(client, "num_keys");
  if (st != COLL_OK) return st;
  st = client->ops->num_keys(client->handle, count, effective(timeout_ms));
  if (st == COLL_OK || is_tcp(client)) return st;
  return coll_error(st, "num_keys on %s failed: %s", store_client_address(client),
                    coll_status_string(st));
}
