/* libcoll's own store as an implementation of the store interface (store_tcp.c): the
 * client of the TCP server in store_server.c. The rest of libcoll reaches it through
 * store.h; tests reach its server-only calls here. */
#ifndef COLL_BOOTSTRAP_STORE_TCP_H
#define COLL_BOOTSTRAP_STORE_TCP_H

#include <stdint.h>

#include "bootstrap/store.h"

typedef struct tcp_store tcp_store_t;

/* Connect to host:port, retrying until timeout_ms passes (<= 0: 30 s) (the server may
 * start after the client). The token (NULL or "" for none) is sent in a hello frame; a
 * server that wants another one refuses with COLL_ERR_REFUSED. */
coll_status_t tcp_store_connect(const char *host, uint16_t port, const char *token,
                                int timeout_ms, tcp_store_t **client);
/* Where it connects: host, port, token ("" for none); each may be NULL. */
void tcp_store_place(const tcp_store_t *client, const char **host, uint16_t *port,
                     const char **token);
/* "127.0.0.1:29500" — for messages. */
const char *tcp_store_address(const tcp_store_t *client);
/* How many keys the server holds (the interface's optional num_keys). */
coll_status_t tcp_store_num_keys(tcp_store_t *client, int64_t *count, int timeout_ms);

/* The interface's table for handles from tcp_store_connect. */
extern const coll_store_ops_t store_tcp_ops;

#endif
