/* Socket plumbing of the store: listening, connecting with a deadline, and sending and
 * receiving whole buffers with a deadline. Messages name the peer and what was waited for. */
#ifndef COLL_BOOTSTRAP_STORE_NET_H
#define COLL_BOOTSTRAP_STORE_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "coll.h"

/* Bind (bind_addr NULL: all interfaces) and listen; *bound_port is the real port. */
coll_status_t store_net_listen(const char *bind_addr, uint16_t port, int *fd, uint16_t *bound_port);
/* "1.2.3.4:5678" or "[::1]:5678". */
void store_net_format_addr(const struct sockaddr *addr, socklen_t len, char *out, size_t size);
/* Raise the soft RLIMIT_NOFILE to the hard limit; false when it already was there or
 * could not be raised. */
bool store_net_raise_nofile(void);
/* TCP_NODELAY: requests and replies are small and latency-bound. */
void store_net_tune(int fd);

/* One connection attempt to host:port, bounded by deadline_ns. Returns the connected
 * non-blocking socket, or -1 with *err set (an errno value; EAI_* failures of name
 * resolution are reported as a negative *err). */
int store_net_connect_once(const char *host, uint16_t port, int64_t deadline_ns, int *err);

/* Outcome of a bounded transfer. */
typedef enum { NET_DONE = 0, NET_TIMEOUT, NET_CLOSED, NET_ERROR } store_net_result_t;

/* Send or receive exactly len bytes before deadline_ns; *err is the errno on NET_ERROR. */
store_net_result_t store_net_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns,
                                      int *err);
store_net_result_t store_net_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns, int *err);

#endif
