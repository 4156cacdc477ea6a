/* Socket plumbing of the store (see store_net.h): every wait here is a poll() bounded by
 * the caller's deadline, so no store call can hang on a silent peer. */
#include "bootstrap/store_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"

coll_status_t store_net_listen(const char *bind_addr, uint16_t port, int *fd_out,
                               uint16_t *bound_port) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char service[8];
  snprintf(service, sizeof service, "%u", (unsigned)port);
  const char *host = bind_addr != NULL && bind_addr[0] != '\0' ? bind_addr : "0.0.0.0";
  int gai = getaddrinfo(host, service, &hints, &res);
  if (gai != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "store server: cannot resolve bind address '%s': %s", host,
                      gai_strerror(gai));
  coll_status_t st = COLL_OK;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "store server: socket");
    goto out;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* A large backlog: a thousand ranks may knock at the same moment. */
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "store server: bind to %s:%u", host,
                          (unsigned)port);
    goto out;
  }
  if (listen(fd, 4096) != 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "store server: listen on %s:%u", host,
                          (unsigned)port);
    goto out;
  }
  struct sockaddr_storage addr;
  socklen_t len = sizeof addr;
  if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
    st = coll_error_errno(COLL_ERR_SYSTEM, errno, "store server: getsockname");
    goto out;
  }
  *bound_port = addr.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&addr)->sin_port);
  *fd_out = fd;
  fd = -1;
out:
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return st;
}

void store_net_format_addr(const struct sockaddr *addr, socklen_t len, char *out, size_t size) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  (void)len;
  if (addr->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    snprintf(out, size, "%s:%u", host, port);
  } else if (addr->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    snprintf(out, size, "[%s]:%u", host, port);
  } else {
    snprintf(out, size, "?");
  }
}

bool store_net_raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return false;
  rl.rlim_cur = rl.rlim_max;
  return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

void store_net_tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Wait for events on fd until the deadline; 1 ready, 0 timed out, -1 error (errno). */
static int wait_fd(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int ms = coll_ms_left(deadline_ns);
    int n = poll(&p, 1, ms);
    if (n > 0) return 1;
    if (n == 0) {
      if (coll_ms_left(deadline_ns) == 0) return 0;
      continue;
    }
    if (errno != EINTR) return -1;
  }
}

int store_net_connect_once(const char *host, uint16_t port, int64_t deadline_ns, int *err) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char service[8];
  snprintf(service, sizeof service, "%u", (unsigned)port);
  int gai = getaddrinfo(host, service, &hints, &res);
  if (gai != 0) {
    *err = gai == EAI_SYSTEM ? errno : -gai;
    return -1;
  }
  int fd = -1;
  *err = ETIMEDOUT;
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *err = errno;
      continue;
    }
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      int ready = wait_fd(fd, POLLOUT, deadline_ns);
      if (ready == 1) {
        int so_error = 0;
        socklen_t len = sizeof so_error;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        rc = so_error == 0 ? 0 : -1;
        errno = so_error;
      } else {
        rc = -1;
        errno = ready == 0 ? ETIMEDOUT : errno;
      }
    }
    if (rc == 0) break;
    *err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) store_net_tune(fd);
  return fd;
}

store_net_result_t store_net_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns,
                                      int *err) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int ready = wait_fd(fd, POLLOUT, deadline_ns);
      if (ready == 0) return NET_TIMEOUT;
      if (ready < 0) {
        *err = errno;
        return NET_ERROR;
      }
      continue;
    }
    *err = n < 0 ? errno : EPIPE;
    return (n < 0 && (errno == EPIPE || errno == ECONNRESET)) ? NET_CLOSED : NET_ERROR;
  }
  return NET_DONE;
}

store_net_result_t store_net_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns,
                                      int *err) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) return NET_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int ready = wait_fd(fd, POLLIN, deadline_ns);
      if (ready == 0) return NET_TIMEOUT;
      if (ready < 0) {
        *err = errno;
        return NET_ERROR;
      }
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? NET_CLOSED : NET_ERROR;
  }
  return NET_DONE;
}
