/* coll_store_connect: libcoll's own store (bootstrap/store_tcp.c) handed to a program
 * through the store interface's table, at an address it gives or the launcher's
 * (MASTER_ADDR, MASTER_PORT, COLL_JOB_TOKEN), so that it can keep its own keys on the
 * store collrun hosts. */
#include <stdint.h>

#include "bootstrap/store_tcp.h"
#include "common/env.h"
#include "common/error.h"

enum { DEFAULT_CONNECT_TIMEOUT_MS = 30000 };

/* host NULL: where the launcher says the store is. */
static coll_status_t find_address(const char *host, int port, const char **where,
                                  int64_t *where_port) {
  if (host != NULL) {
    if (host[0] == '\0')
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "host is empty (NULL: the launcher's MASTER_ADDR and MASTER_PORT)");
    if (port < 1 || port > 65535)
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "port %d is not in 1..65535", port);
    *where = host;
    *where_port = port;
    return COLL_OK;
  }
  if (coll_env_str("MASTER_PORT") == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "environment variable MASTER_PORT is not set: no launcher's store to "
                      "connect to (collrun sets MASTER_ADDR and MASTER_PORT; or pass a host "
                      "and a port)");
  coll_status_t st = coll_env_int("MASTER_PORT", 1, 65535, 0, where_port);
  if (st != COLL_OK) return st;
  *where = coll_env_str("MASTER_ADDR");
  if (*where == NULL) *where = "127.0.0.1";
  return COLL_OK;
}

coll_status_t coll_store_connect(const char *host, int port, const char *token, int timeout_ms,
                                 const coll_store_ops_t **ops, void **store) {
  if (ops == NULL || store == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_store_connect: ops or store is NULL");
  *ops = NULL;
  *store = NULL;
  if (timeout_ms < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_store_connect: timeout_ms is %d (> 0, or 0 for the default)",
                      timeout_ms);
  const char *where = NULL;
  int64_t where_port = 0;
  coll_status_t st = find_address(host, port, &where, &where_port);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_store_connect: ");
  if (token == NULL) token = coll_env_str("COLL_JOB_TOKEN");
  int64_t timeout = timeout_ms;
  if (timeout == 0) {
    st = coll_env_int("COLL_TIMEOUT_MS", 1, INT32_MAX / 2, DEFAULT_CONNECT_TIMEOUT_MS, &timeout);
    if (st != COLL_OK) return coll_error_prefix(st, "coll_store_connect: ");
  }
  tcp_store_t *client = NULL;
  st = tcp_store_connect(where, (uint16_t)where_port, token, (int)timeout, &client);
  if (st != COLL_OK) {
    if (st == COLL_ERR_TIMEOUT)
      return coll_error_prefix(st,
                               "coll_store_connect: nothing answered as libcoll's store at "
                               "%s:%lld (is collrun's store, or a rank 0 hosting it, up?): ",
                               where, (long long)where_port);
    return coll_error_prefix(st, "coll_store_connect: ");
  }
  *ops = &store_tcp_ops;
  *store = client;
  coll_error_clear();
  return COLL_OK;
}
