/* Facts about the launch that every rank derives alone: the store's port from the job ids,
 * mpirun's host from Open MPI's URI, and this host's id (see launch_port.h). */
#include "launch/launch_port.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/error.h"

int launch_port_derive(const char *job, const char *step) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bit */
  const char *parts[] = {job != NULL ? job : "", ".", step != NULL ? step : ""};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    for (const unsigned char *p = (const unsigned char *)parts[i]; *p != '\0'; p++) {
      h ^= *p;
      h *= 1099511628211ull;
    }
  }
  return LAUNCH_PORT_BASE + (int)(h % LAUNCH_PORT_SPAN);
}

coll_status_t launch_uri_ipv4(const char *uri, char addrs[][LAUNCH_ADDR_LEN], int max, int *n) {
  *n = 0;
  if (uri == NULL) return COLL_OK;
  const char *p = uri;
  while (*p != '\0') {
    const char *end = strchr(p, ';');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len > 6 && strncmp(p, "tcp://", 6) == 0) {
      /* "tcp://a,b,c:port": addresses up to the last colon. */
      const char *list = p + 6;
      const char *colon = NULL;
      for (const char *q = list; q < p + len; q++)
        if (*q == ':') colon = q;
      if (colon == NULL || colon == list)
        return coll_error(COLL_ERR_INVALID_ARGUMENT,
                          "Open MPI URI '%.200s': no 'address:port' after tcp://", uri);
      for (const char *a = list; a < colon;) {
        const char *comma = memchr(a, ',', (size_t)(colon - a));
        const char *a_end = comma != NULL ? comma : colon;
        char text[LAUNCH_ADDR_LEN];
        struct in_addr ia;
        int tl = snprintf(text, sizeof text, "%.*s", (int)(a_end - a), a);
        if (tl <= 0 || (size_t)tl >= sizeof text || inet_pton(AF_INET, text, &ia) != 1)
          return coll_error(COLL_ERR_INVALID_ARGUMENT,
                            "Open MPI URI '%.200s': '%.*s' is not an IPv4 address", uri,
                            (int)(a_end - a), a);
        if (*n < max) snprintf(addrs[(*n)++], LAUNCH_ADDR_LEN, "%s", text);
        a = a_end + (comma != NULL ? 1 : 0);
      }
    }
    p += len;
    if (*p == ';') p++;
  }
  return COLL_OK;
}

/* Calls match(address, netmask) for every IPv4 interface address until it returns true. */
static bool any_interface(bool (*match)(uint32_t addr, uint32_t mask, uint32_t want),
                          uint32_t want) {
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (struct ifaddrs *a = list; a != NULL && !found; a = a->ifa_next) {
    if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET) continue;
    uint32_t addr = ntohl(((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr);
    uint32_t mask = a->ifa_netmask != NULL
                        ? ntohl(((struct sockaddr_in *)a->ifa_netmask)->sin_addr.s_addr)
                        : 0xffffffffu;
    found = match(addr, mask, want);
  }
  freeifaddrs(list);
  return found;
}

static bool same_address(uint32_t addr, uint32_t mask, uint32_t want) {
  (void)mask;
  return addr == want;
}

/* Loopback subnets say nothing about reaching another host. */
static bool same_subnet(uint32_t addr, uint32_t mask, uint32_t want) {
  return (addr >> 24) != 127 && (addr & mask) == (want & mask);
}

static bool parse_ipv4(const char *text, uint32_t *out) {
  struct in_addr ia;
  if (inet_pton(AF_INET, text, &ia) != 1) return false;
  *out = ntohl(ia.s_addr);
  return true;
}

int launch_pick_reachable(char addrs[][LAUNCH_ADDR_LEN], int n) {
  for (int i = 0; i < n; i++) {
    uint32_t want;
    if (parse_ipv4(addrs[i], &want) && any_interface(same_subnet, want)) return i;
  }
  /* A loopback address would make every rank publish loopback for tcp (see tcp_setup.c). */
  for (int i = 0; i < n; i++)
    if (strncmp(addrs[i], "127.", 4) != 0) return i;
  return 0;
}

bool launch_addr_is_local(const char *ipv4) {
  uint32_t want;
  return parse_ipv4(ipv4, &want) && any_interface(same_address, want);
}

void launch_host_id(char *out, size_t cap) {
  const char *forced = coll_env_str("COLL_HOST_ID");
  if (forced != NULL) {
    snprintf(out, cap, "%s", forced);
  } else {
    char host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
      if (fgets(boot, sizeof boot, f) == NULL) boot[0] = '\0';
      fclose(f);
    }
    boot[strcspn(boot, "\r\n")] = '\0';
    /* Containers and `ip netns` share the kernel (and its boot id) but not the network
     * or, usually, /dev/shm: a namespace of its own is a host of its own. */
    struct stat ns;
    unsigned long long net =
        stat("/proc/self/ns/net", &ns) == 0 ? (unsigned long long)ns.st_ino : 0;
    /* Slurm's multiple-slurmd test setups run several nodes in one namespace; on a real
     * cluster the node name only repeats what the hostname says. */
    const char *node = coll_env_str("SLURMD_NODENAME");
    snprintf(out, cap, "%s/%s/net:%llu%s%s", host, boot, net, node != NULL ? "/slurm:" : "",
             node != NULL ? node : "");
  }
  /* The rendezvous record is line-based. */
  for (char *p = out; *p; p++)
    if (*p == '\n' || *p == '\r') *p = '_';
}
