/* The rendezvous store. libcoll's own (like PyTorch's TCPStore): a key-value server hosted
 * by rank 0 or the launcher at MASTER_ADDR:MASTER_PORT (wire format: docs/store-protocol.md);
 * and the client every rank uses to meet, on that store or on one the caller provides
 * through the store interface (coll.h, coll_store_ops_t). */
#ifndef COLL_BOOTSTRAP_STORE_H
#define COLL_BOOTSTRAP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Protocol limits (defaults; the server may be started with other ones). */
#define STORE_KEY_MAX 4096u
#define STORE_VALUE_MAX (64u * 1024u * 1024u)

/* ---- server ---- */
typedef struct store_server store_server_t;

typedef struct {
  const char *bind_addr; /* NULL: all interfaces ("0.0.0.0") */
  uint16_t port;         /* 0: pick a free port (read it back with store_server_port) */
  const char *token;     /* NULL or "": no token required */
  size_t key_max;        /* 0: STORE_KEY_MAX */
  size_t value_max;      /* 0: STORE_VALUE_MAX */
  int max_clients;       /* 0: default (at least 4096) */
  int frame_timeout_ms;  /* a client that stalls this long in the middle of sending a frame,
                            or of reading a reply, is dropped; 0: 30 s */
} store_server_options_t;

/* Bind, listen and start serving on a background thread (epoll). */
coll_status_t store_server_start(const store_server_options_t *options, store_server_t **server);
uint16_t store_server_port(const store_server_t *server);
/* Number of currently connected clients (for tests). */
int store_server_client_count(store_server_t *server);
/* Stop the thread, close every connection, free everything. NULL is allowed. */
void store_server_stop(store_server_t *server);

/* ---- client ---- */
/* A handle on a store through the store interface (coll.h, coll_store_ops_t): libcoll's
 * own TCP store (store_tcp.c) or one the caller provides; store.c dispatches. */
typedef struct store_client store_client_t;

/* Connect to libcoll's TCP store at host:port, retrying until timeout_ms passes (<= 0:
 * 30 s) (the server may start after the client). The token (NULL or "" for none) is sent
 * in a hello frame; a server that wants another one refuses with COLL_ERR_REFUSED. */
coll_status_t store_client_connect(const char *host, uint16_t port, const char *token,
                                   int timeout_ms, store_client_t **client);
/* A client on the caller's store: a clone of `store` (the caller keeps its own handle).
 * The table is checked (version, the functions it must have). */
coll_status_t store_client_from_caller(const coll_store_ops_t *ops, void *store, int timeout_ms,
                                       store_client_t **client);
/* Another client on the same store (a new connection), for another thread. */
coll_status_t store_client_clone(const store_client_t *client, int timeout_ms,
                                 store_client_t **copy);
/* Whether the store deletes a client's owned keys when it goes (store_set_owned works);
 * false: liveness needs leases (base/liveness.c). */
bool store_client_owns_keys(const store_client_t *client);
/* Whether this is libcoll's own TCP store; then *host, *port and *token (may be NULL)
 * say where it is (for an id a joiner connects with). */
bool store_client_tcp_place(const store_client_t *client, const char **host, uint16_t *port,
                            const char **token);
/* Where a store is, enough to open more clients on it: libcoll's own at host:port with
 * its token, or the caller's (its table and the handle it gave, which must outlive every
 * communicator made on it; libcoll never releases it). */
typedef struct {
  const coll_store_ops_t *ops; /* NULL: libcoll's own store */
  void *handle;
  char host[256];
  int port; /* libcoll's own: 1..65535; 0: nowhere (a communicator of one rank without one) */
  char token[128];
} store_place_t;
/* Whether the place names a store. */
static inline bool store_place_known(const store_place_t *place) {
  return place->ops != NULL || place->port > 0;
}
/* A new client on the store at place (a connection, or a clone of the caller's handle). */
coll_status_t store_place_open(const store_place_t *place, int timeout_ms,
                               store_client_t **client);
/* Close the connection and free. NULL is allowed. */
void store_client_close(store_client_t *client);
/* From another thread: end the call in progress (it fails) and every later one
 * (COLL_ERR_ABORTED), so that a thread parked in a long get can be stopped. On a
 * caller's store without an interrupt function only later calls are stopped. The client
 * must still be closed by its own thread afterwards. */
void store_client_interrupt(store_client_t *client);
/* "127.0.0.1:29500", or the caller's store's name — for messages. */
const char *store_client_address(const store_client_t *client);

/* Every call below has a deadline of timeout_ms (<= 0: wait forever is NOT allowed; it is
 * treated as the client's default of 30 s). Errors name the store address and the key.
 * One client is used by one thread at a time. After a failed call the connection is closed
 * and the next call reconnects (within its own deadline). */
coll_status_t store_set(store_client_t *client, const char *key, const void *value, size_t len,
                        int timeout_ms);
/* The same, and the key belongs to this connection: the server deletes it when the
 * connection closes (this process exits or dies, or the client reconnects).
 * COLL_ERR_UNSUPPORTED on a store without owned keys (store_client_owns_keys). */
coll_status_t store_set_owned(store_client_t *client, const char *key, const void *value,
                              size_t len, int timeout_ms);
/* Wait until the key exists, then return a malloc'ed copy of its value (caller frees). */
coll_status_t store_get(store_client_t *client, const char *key, void **value, size_t *len,
                        int timeout_ms);
/* Atomically add delta to the counter stored at key (absent: 0) and return the new value.
 * The counter is stored as its decimal text, so store_get() reads it as a string. */
coll_status_t store_add(store_client_t *client, const char *key, int64_t delta, int64_t *new_value,
                        int timeout_ms);
/* If the key's value equals `expected` (or, with expected == NULL, the key is absent), set
 * it to `desired`. Returns the value now stored (malloc'ed, caller frees) in *current. */
coll_status_t store_compare_set(store_client_t *client, const char *key, const void *expected,
                                size_t expected_len, const void *desired, size_t desired_len,
                                void **current, size_t *current_len, int timeout_ms);
/* Wait until all keys exist. */
coll_status_t store_wait(store_client_t *client, const char *const *keys, size_t nkeys,
                         int timeout_ms);
/* Delete the key; *deleted says whether it existed (may be NULL). */
coll_status_t store_delete(store_client_t *client, const char *key, bool *deleted, int timeout_ms);
/* How many keys the store holds (a table with num_keys, as libcoll's own store's:
 * COLL_ERR_UNSUPPORTED else). */
coll_status_t store_num_keys(store_client_t *client, int64_t *count, int timeout_ms);
/* Non-blocking existence test of all keys. */
coll_status_t store_check(store_client_t *client, const char *const *keys, size_t nkeys,
                          bool *all_exist, int timeout_ms);

#endif
