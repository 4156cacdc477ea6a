/* tcp transport, connection establishment: every rank listens on one socket and publishes
 * "ip port nonce" in the store; the higher rank of each pair connects COLL_NSOCKS streams
 * to the lower one and sends a handshake (rank, stream index, the listener's nonce, a hash
 * of the communicator key), which the lower rank checks before it accepts the stream.
 * Connects complete in the kernel's backlog, so no pair waits on another: no deadlock.
 *
 * Environment:
 *   COLL_NSOCKS          sockets (streams) per peer, 1..16 (4: on a 2-core Intel VM, 4
 *                        streams gave 2 ranks about 1.7 GB/s busbw at 16 MiB against 1.4
 *                        with 2, and 4 ranks the same; bench/algorithms/calibrate.md)
 *   COLL_SOCKET_IFNAME   interface whose IPv4 address to listen on and publish (default:
 *                        the local address that reaches the store; 127.0.0.1 when the
 *                        store is on loopback; on the caller's store, whose host is not
 *                        known, 127.0.0.1 when every rank is on this host, else the first
 *                        up, non-loopback interface)
 *   COLL_TCP_BUF_BYTES   SO_SNDBUF/SO_RCVBUF per socket; 0 leaves the kernel's
 *                        autotuning, which measured as fast as fixed sizes here (0) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "launch/host_addr.h"
#include "transport/tcp/tcp.h"

#define HANDSHAKE_MAGIC 0x48534b43u /* "CKSH" */
#define HANDSHAKE_VERSION 1u

typedef struct {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t stream;
  int32_t nsocks;
  uint32_t reserved;
  uint64_t nonce;    /* the listener's, read from the store: proves the store was read */
  uint64_t key_hash; /* of the communicator's key prefix */
} handshake_t;

static uint64_t fnv1a(const char *text) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
    h ^= *p;
    h *= 1099511628211ull;
  }
  return h;
}

static const char *host_name(const transport_setup_t *setup, int rank, const char *fallback) {
  return setup->host_ids != NULL ? setup->host_ids[rank] : fallback;
}

/* The IPv4 address to listen on and publish (see the environment above). */
static coll_status_t listen_address(const transport_setup_t *setup, char *ip, size_t iplen) {
  const char *ifname = coll_env_str("COLL_SOCKET_IFNAME");
  if (ifname != NULL) {
    bool found = false;
    coll_status_t st = host_ipv4(ifname, ip, iplen, &found);
    if (st != COLL_OK) return coll_error_prefix(st, "COLL_SOCKET_IFNAME=%s: ", ifname);
    if (!found)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "COLL_SOCKET_IFNAME=%s: no interface of that name with an IPv4 address",
                        ifname);
    return COLL_OK;
  }
  const char *store_host = NULL;
  if (!store_client_tcp_place(setup->store, &store_host, NULL, NULL)) {
    /* The caller's store, whose host is unknown: loopback when every rank is on this
     * host, else the first up, non-loopback interface (COLL_SOCKET_IFNAME picks another). */
    bool one_host = true;
    for (int r = 0; r < setup->nranks && setup->host_ids != NULL; r++)
      one_host = one_host && strcmp(setup->host_ids[r], setup->host_ids[setup->rank]) == 0;
    bool found = false;
    if (!one_host) {
      coll_status_t st = host_ipv4(NULL, ip, iplen, &found);
      if (st != COLL_OK) return st;
    }
    if (!found) snprintf(ip, iplen, "127.0.0.1");
    return COLL_OK;
  }
  char host[256] = "127.0.0.1";
  snprintf(host, sizeof host, "%s", store_host);
  if (strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0) {
    snprintf(ip, iplen, "127.0.0.1");
    return COLL_OK;
  }
  /* A connected UDP socket sends nothing but tells which local address routes there. */
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host, "9", &hints, &res);
  if (gai != 0)
    return coll_error(COLL_ERR_SYSTEM, "resolving the store host '%s': %s", host,
                      gai_strerror(gai));
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in local;
  socklen_t sl = sizeof local;
  bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&local, &sl) == 0 &&
            inet_ntop(AF_INET, &local.sin_addr, ip, (socklen_t)iplen) != NULL;
  int err = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  if (!ok)
    return coll_error_errno(COLL_ERR_SYSTEM, err, "finding the local address towards store %s",
                            host);
  return COLL_OK;
}

static coll_status_t open_listener(const char *ip, int *fd_out, uint16_t *port) {
  struct sockaddr_in addr = {.sin_family = AF_INET};
  if (inet_pton(AF_INET, ip, &addr.sin_addr) != 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "bad listen address '%s'", ip);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return coll_error_errno(COLL_ERR_SYSTEM, errno, "socket");
  socklen_t len = sizeof addr;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
    int err = errno;
    close(fd);
    return coll_error_errno(COLL_ERR_SYSTEM, err, "listening on %s", ip);
  }
  *fd_out = fd;
  *port = ntohs(addr.sin_port);
  return COLL_OK;
}

/* Read or write exactly len bytes on a non-blocking socket before the deadline. */
static coll_status_t io_exact(int fd, void *buf, size_t len, bool writing, int64_t deadline,
                              const char *what) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = writing ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + done, len - done, 0);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0) return coll_error(COLL_ERR_REMOTE, "%s: connection closed", what);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return coll_error_errno(COLL_ERR_REMOTE, errno, "%s", what);
    struct pollfd p = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
    int left = coll_ms_left(deadline);
    if (left == 0) return coll_error(COLL_ERR_TIMEOUT, "%s: timed out", what);
    if (poll(&p, 1, left) < 0 && errno != EINTR)
      return coll_error_errno(COLL_ERR_SYSTEM, errno, "%s: poll", what);
  }
  return COLL_OK;
}

/* Connect one stream to ip:port, retrying refused connects until the deadline. */
static coll_status_t connect_stream(const char *ip, uint16_t port, int64_t deadline, int *out,
                                    const char *what) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, ip, &addr.sin_addr) != 1)
    return coll_error(COLL_ERR_PROTOCOL, "%s: bad address '%s'", what, ip);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return coll_error_errno(COLL_ERR_SYSTEM, errno, "%s: socket", what);
    int err = 0;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int rc = poll(&p, 1, coll_ms_left(deadline));
        socklen_t el = sizeof err;
        if (rc == 0)
          err = ETIMEDOUT;
        else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
          err = errno;
      }
    }
    if (err == 0) {
      *out = fd;
      return COLL_OK;
    }
    close(fd);
    if ((err != ECONNREFUSED && err != EINTR) || coll_ms_left(deadline) == 0)
      return coll_error_errno(err == ETIMEDOUT ? COLL_ERR_TIMEOUT : COLL_ERR_REMOTE, err,
                              "%s: connect to %s:%u", what, ip, (unsigned)port);
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

static coll_status_t connect_peer(const transport_setup_t *setup, transport_group_t *g, int peer,
                                  uint64_t key_hash, int64_t deadline) {
  char key[512];
  snprintf(key, sizeof key, "%stcp/%d", setup->key_prefix, peer);
  void *value = NULL;
  size_t vlen = 0;
  coll_status_t st = store_get(setup->store, key, &value, &vlen, coll_ms_left(deadline));
  if (st != COLL_OK)
    return coll_error_prefix(st, "reading the address of rank %d (does it use tcp too?): ", peer);
  char text[256];
  size_t n = vlen < sizeof text - 1 ? vlen : sizeof text - 1;
  memcpy(text, value, n);
  text[n] = '\0';
  free(value);
  char ip[64];
  unsigned port;
  unsigned long long nonce;
  int nsocks;
  if (sscanf(text, "%63s %u %llu %d", ip, &port, &nonce, &nsocks) != 4 || port == 0 || port > 65535)
    return coll_error(COLL_ERR_PROTOCOL, "rank %d published a bad tcp address '%s'", peer, text);
  if (nsocks != g->nsocks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_NSOCKS differs: rank %d uses %d streams per peer, rank %d uses %d",
                      peer, nsocks, g->rank, g->nsocks);
  tcp_conn_t *c = g->conns[peer];
  snprintf(c->peer_host, sizeof c->peer_host, "%s", host_name(setup, peer, ip));
  for (int i = 0; i < g->nsocks; i++) {
    char what[200];
    snprintf(what, sizeof what, "stream %d to rank %d (host %s)", i, peer, c->peer_host);
    st = connect_stream(ip, (uint16_t)port, deadline, &c->streams[i].fd, what);
    if (st != COLL_OK) return st;
    handshake_t hs = {.magic = HANDSHAKE_MAGIC,
                      .version = HANDSHAKE_VERSION,
                      .rank = g->rank,
                      .stream = i,
                      .nsocks = g->nsocks,
                      .nonce = nonce,
                      .key_hash = key_hash};
    st = io_exact(c->streams[i].fd, &hs, sizeof hs, true, deadline, what);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

/* Accept streams until every higher-ranked peer has connected all of its streams.
 * Strangers (bad magic, nonce or key) are dropped; they cannot take a peer's place. */
static coll_status_t accept_peers(const transport_setup_t *setup, transport_group_t *g,
                                  const bool *peers, int lfd, uint64_t nonce, uint64_t key_hash,
                                  int64_t deadline) {
  int expected = 0;
  for (int r = g->rank + 1; r < g->nranks; r++)
    if (peers[r]) expected += g->nsocks;
  while (expected > 0) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int left = coll_ms_left(deadline);
    if (left == 0) {
      for (int r = g->rank + 1; r < g->nranks; r++)
        if (peers[r] && g->conns[r]->streams[g->nsocks - 1].fd < 0)
          return coll_error(COLL_ERR_TIMEOUT,
                            "timed out waiting for rank %d (host %s) to connect its tcp streams", r,
                            host_name(setup, r, "?"));
      return coll_error(COLL_ERR_TIMEOUT, "timed out accepting tcp streams");
    }
    if (poll(&p, 1, left) < 0 && errno != EINTR)
      return coll_error_errno(COLL_ERR_SYSTEM, errno, "poll on the tcp listener");
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    int fd = accept4(lfd, (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        continue;
      return coll_error_errno(COLL_ERR_SYSTEM, errno, "accept on the tcp listener");
    }
    handshake_t hs;
    char ip[64] = "?";
    inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
    int64_t hs_deadline =
        coll_now_ns() + 2000000000LL < deadline ? coll_now_ns() + 2000000000LL : deadline;
    coll_status_t st = io_exact(fd, &hs, sizeof hs, false, hs_deadline, "tcp handshake");
    bool ours = st == COLL_OK && hs.magic == HANDSHAKE_MAGIC && hs.nonce == nonce &&
                hs.key_hash == key_hash;
    if (ours && hs.version != HANDSHAKE_VERSION) {
      close(fd);
      return coll_error(COLL_ERR_PROTOCOL, "rank %d speaks tcp handshake version %u, not %u",
                        hs.rank, hs.version, HANDSHAKE_VERSION);
    }
    if (ours && hs.nsocks != g->nsocks) {
      close(fd);
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "COLL_NSOCKS differs: rank %d uses %d streams per peer, rank %d uses %d",
                        hs.rank, hs.nsocks, g->rank, g->nsocks);
    }
    if (!ours || hs.rank <= g->rank || hs.rank >= g->nranks || !peers[hs.rank] || hs.stream < 0 ||
        hs.stream >= g->nsocks || g->conns[hs.rank]->streams[hs.stream].fd >= 0) {
      coll_log(COLL_LOG_WARN, "dropping a tcp connection from %s: not a peer stream we expect", ip);
      close(fd);
      continue;
    }
    tcp_conn_t *c = g->conns[hs.rank];
    c->streams[hs.stream].fd = fd;
    snprintf(c->peer_host, sizeof c->peer_host, "%s", host_name(setup, hs.rank, ip));
    expected--;
  }
  return COLL_OK;
}

static coll_status_t arm_streams(transport_group_t *g) {
  int64_t bufsize;
  coll_status_t st = coll_env_int("COLL_TCP_BUF_BYTES", 0, 1 << 30, 0, &bufsize);
  if (st != COLL_OK) return st;
  for (int r = 0; r < g->nranks; r++) {
    tcp_conn_t *c = g->conns[r];
    if (c == NULL) continue;
    for (int i = 0; i < g->nsocks; i++) {
      tcp_stream_t *s = &c->streams[i];
      int one = 1;
      int flags = fcntl(s->fd, F_GETFL);
      if (flags < 0 || fcntl(s->fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
          setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        return coll_error_errno(COLL_ERR_SYSTEM, errno, "configuring a socket to rank %d", r);
      if (bufsize > 0) {
        int b = (int)bufsize;
        setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
        setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
      }
      /* Registered with no interest: hang-ups and errors are still reported. */
      struct epoll_event ev = {.events = 0, .data.ptr = s};
      if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0)
        return coll_error_errno(COLL_ERR_SYSTEM, errno, "epoll_ctl add for rank %d", r);
      s->in_epoll = true;
      s->events = 0;
    }
  }
  return COLL_OK;
}

static void tcp_group_close(transport_group_t *g) {
  if (g == NULL) return;
  if (g->conns != NULL)
    for (int r = 0; r < g->nranks; r++) tcp_conn_free(g->conns[r]);
  free(g->conns);
  if (g->epfd >= 0) close(g->epfd);
  free(g);
}

static coll_status_t tcp_open(const transport_setup_t *setup, const bool *peers,
                              transport_group_t **out) {
  int64_t nsocks;
  coll_status_t st = coll_env_int("COLL_NSOCKS", 1, TCP_MAX_SOCKS, 4, &nsocks);
  if (st != COLL_OK) return st;
  transport_group_t *g = calloc(1, sizeof *g);
  if (g == NULL) return coll_error(COLL_ERR_NO_MEMORY, "tcp: out of memory");
  g->rank = setup->rank;
  g->nranks = setup->nranks;
  g->nsocks = (int)nsocks;
  g->epfd = epoll_create1(EPOLL_CLOEXEC);
  g->conns = calloc((size_t)setup->nranks, sizeof *g->conns);
  int lfd = -1;
  if (g->epfd < 0 || g->conns == NULL) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "tcp: epoll_create1 or calloc");
    goto fail;
  }
  for (int r = 0; r < setup->nranks; r++) {
    if (!peers[r]) continue;
    g->conns[r] = calloc(1, sizeof *g->conns[r]);
    if (g->conns[r] == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "tcp: out of memory");
      goto fail;
    }
    st = tcp_conn_init(g->conns[r], r, host_name(setup, r, "?"), g->nsocks, g->epfd);
    if (st != COLL_OK) goto fail;
  }
  int64_t deadline = coll_deadline_ns(setup->timeout_ms > 0 ? setup->timeout_ms : 30000);
  uint64_t key_hash = fnv1a(setup->key_prefix);
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
    nonce = (uint64_t)coll_now_ns() ^ ((uint64_t)getpid() << 32);
  char ip[64];
  uint16_t port = 0;
  st = listen_address(setup, ip, sizeof ip);
  if (st == COLL_OK) st = open_listener(ip, &lfd, &port);
  if (st != COLL_OK) goto fail;
  char key[512], value[256];
  snprintf(key, sizeof key, "%stcp/%d", setup->key_prefix, setup->rank);
  int vlen = snprintf(value, sizeof value, "%s %u %llu %d", ip, (unsigned)port,
                      (unsigned long long)nonce, g->nsocks);
  st = store_set(setup->store, key, value, (size_t)vlen, coll_ms_left(deadline));
  if (st != COLL_OK) goto fail;
  coll_log(COLL_LOG_INFO, "tcp: listening on %s:%u, %d streams per peer", ip, (unsigned)port,
           g->nsocks);
  for (int r = 0; r < setup->rank; r++) {
    if (!peers[r]) continue;
    st = connect_peer(setup, g, r, key_hash, deadline);
    if (st != COLL_OK) goto fail;
  }
  st = accept_peers(setup, g, peers, lfd, nonce, key_hash, deadline);
  if (st == COLL_OK) st = arm_streams(g);
  if (st != COLL_OK) goto fail;
  close(lfd);
  *out = g;
  return COLL_OK;
fail:
  if (lfd >= 0) close(lfd);
  tcp_group_close(g);
  return st;
}

static transport_conn_t *tcp_group_conn(transport_group_t *g, int peer) {
  return g->conns[peer] != NULL ? &g->conns[peer]->base : NULL;
}

static bool stream_has_work(const tcp_stream_t *s) {
  const tcp_conn_t *c = s->conn;
  return s->send_msg < c->sends_posted || s->recv_msg < c->recvs_posted;
}

static coll_status_t tcp_wait(transport_group_t *g, int timeout_ms, bool *woke) {
  *woke = false;
  /* A socket that hung up is out of the epoll set; its pending work must still be
   * retried by progress (to read the last bytes, then report the close). Bytes read
   * ahead for a posted receive are work in hand too. */
  for (int r = 0; r < g->nranks; r++) {
    tcp_conn_t *c = g->conns[r];
    if (c == NULL) continue;
    for (int i = 0; i < g->nsocks; i++)
      if ((!c->streams[i].in_epoll && stream_has_work(&c->streams[i])) ||
          tcp_stream_has_ahead(&c->streams[i])) {
        *woke = true;
        return COLL_OK;
      }
  }
  struct epoll_event evs[64];
  int n = epoll_wait(g->epfd, evs, 64, timeout_ms < 0 ? 0 : timeout_ms);
  if (n < 0) {
    if (errno == EINTR) {
      *woke = true;
      return COLL_OK;
    }
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "epoll_wait on tcp sockets");
  }
  for (int i = 0; i < n; i++) {
    tcp_stream_t *s = evs[i].data.ptr;
    if ((evs[i].events & (EPOLLHUP | EPOLLERR)) == 0) {
      if (evs[i].events & EPOLLIN) tcp_stream_readable(s);
      continue;
    }
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    s->in_epoll = false;
  }
  *woke = n > 0;
  return COLL_OK;
}

static size_t tcp_staging_bytes(const transport_group_t *g) {
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++) {
    tcp_conn_t *c = g->conns[r];
    if (c == NULL) continue;
    for (int i = 0; i < c->nsocks; i++) {
      if (c->streams[i].staging != NULL) total += c->staging_cap;
      if (c->streams[i].ahead != NULL) total += TCP_AHEAD_BYTES;
    }
  }
  return total;
}

static bool tcp_probe(const transport_setup_t *setup, int peer) {
  (void)setup;
  (void)peer;
  return true; /* any two ranks with IP connectivity */
}

const transport_kind_t transport_tcp_kind = {
    .name = "tcp",
    .probe = tcp_probe,
    .open = tcp_open,
    .conn = tcp_group_conn,
    .wait = tcp_wait,
    .staging_bytes = tcp_staging_bytes,
    .close = tcp_group_close,
};
