/* This host's IPv4 address as peers should reach it: that of a named interface
 * (COLL_SOCKET_IFNAME, for the tcp transport and coll_get_unique_id), or the first
 * non-loopback one that is up. */
#ifndef COLL_LAUNCH_HOST_ADDR_H
#define COLL_LAUNCH_HOST_ADDR_H

#include <stdbool.h>
#include <stddef.h>

#include "coll.h"

/* The IPv4 address of interface `ifname` (NULL: the first up, non-loopback interface)
 * as text in ip; *found false when there is none. An error only when the interfaces
 * cannot be listed (getifaddrs). */
coll_status_t host_ipv4(const char *ifname, char *ip, size_t cap, bool *found);

#endif
