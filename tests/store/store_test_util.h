/* Helpers shared by the store test suites: a server on a free loopback port, raw sockets
 * that speak (or break) the wire format by hand, and bounded waits on server state. */
#ifndef TESTS_STORE_TEST_UTIL_H
#define TESTS_STORE_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/store.h"
#include "bootstrap/store_proto.h"

/* Start a server on 127.0.0.1, port 0 unless opt says otherwise; fails the test on error. */
store_server_t *util_start_server(const store_server_options_t *opt);
store_client_t *util_connect(store_server_t *server, const char *token);

/* A checked fixture (suite_fixture_tests): the_server, started with the default options,
 * and the_client connected to it, for each test; both closed after it. */
extern store_server_t *the_server;
extern store_client_t *the_client;
void util_open_store(void);
void util_close_store(void);

/* A blocking socket connected to 127.0.0.1:port (receive timeout 5 s); fails the test. */
int util_raw_connect(uint16_t port);
void util_raw_send(int fd, const void *buf, size_t len);
/* Encode a request with C-string arguments (NULL entries: empty). Returns its size. */
size_t util_frame(uint8_t *out, uint8_t op, uint8_t flags, uint32_t timeout_ms,
                  const char *const *args, uint32_t nargs);
/* Send a hello with the token and check the OK reply. */
void util_raw_hello(int fd, const char *token);
/* Read one reply header (and skip its body); false on EOF, error or timeout. */
bool util_raw_reply(int fd, store_header_t *header);
/* true when the server closes fd within timeout_ms (any reply bytes before are skipped). */
bool util_raw_closed(int fd, int timeout_ms);

/* Poll store_server_client_count until it equals expected; false after timeout_ms. */
bool util_wait_clients(store_server_t *server, int expected, int timeout_ms);

#endif
