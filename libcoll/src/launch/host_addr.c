/* Finding this host's IPv4 address among its interfaces (getifaddrs). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>

#include "common/error.h"
#include "launch/host_addr.h"

coll_status_t host_ipv4(const char *ifname, char *ip, size_t cap, bool *found) {
  *found = false;
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "listing the network interfaces (getifaddrs)");
  for (struct ifaddrs *a = list; a != NULL && !*found; a = a->ifa_next) {
    if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET) continue;
    bool wanted = ifname != NULL ? strcmp(a->ifa_name, ifname) == 0
                                 : (a->ifa_flags & IFF_UP) && !(a->ifa_flags & IFF_LOOPBACK);
    if (wanted)
      *found =
          inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)a->ifa_addr)->sin_addr, ip,
                    (socklen_t)cap) != NULL;
  }
  freeifaddrs(list);
  return COLL_OK;
}
