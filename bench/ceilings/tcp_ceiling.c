/* The loopback TCP ceiling for a ring all-reduce on this machine: n processes in a ring,
 * each sending B = 2(n-1)/n * S bytes to the next and receiving B from the previous at the
 * same time, over plain sockets and nothing else (no reduction, no framing, no library).
 * B / time is the bus bandwidth a ring all-reduce of S bytes could reach if reducing were
 * free, so allreduce_bench's tcp busbw can be read as a share of it.
 *
 *   tcp_ceiling [-n ranks] [-b bytes] [-s streams] [-i iterations]
 *
 * One process per rank (fork), one thread each, non-blocking sockets driven by poll(),
 * the way a progress thread drives them. Prints the median over the iterations. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_RANKS = 16, MAX_STREAMS = 8, MAX_ITERS = 101, PIECE = 512 * 1024 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "tcp_ceiling: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int listener(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0) die("listen");
  if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) die("getsockname");
  *port = ntohs(a.sin_port);
  return fd;
}

static void set_stream(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Moves `bytes` out on each of the streams to the next rank and in from the previous. */
static void exchange(const int *out, const int *in, int streams, char *sbuf, char *rbuf,
                     size_t bytes) {
  size_t share = bytes / (size_t)streams;
  size_t sent[MAX_STREAMS] = {0}, got[MAX_STREAMS] = {0};
  int open = 2 * streams;
  while (open > 0) {
    struct pollfd p[2 * MAX_STREAMS];
    int map[2 * MAX_STREAMS], np = 0;
    for (int k = 0; k < streams; k++) {
      size_t want = k == streams - 1 ? bytes - share * (size_t)k : share;
      if (sent[k] < want) p[np] = (struct pollfd){out[k], POLLOUT, 0}, map[np++] = k;
      if (got[k] < want) p[np] = (struct pollfd){in[k], POLLIN, 0}, map[np++] = MAX_STREAMS + k;
    }
    if (poll(p, (nfds_t)np, 10000) <= 0) die("poll (timed out or failed)");
    for (int j = 0; j < np; j++) {
      if (p[j].revents == 0) continue;
      int k = map[j] % MAX_STREAMS;
      size_t base = share * (size_t)k;
      size_t want = k == streams - 1 ? bytes - base : share;
      if (map[j] < MAX_STREAMS) {
        size_t n = want - sent[k] < PIECE ? want - sent[k] : PIECE;
        ssize_t r = send(out[k], sbuf + base + sent[k], n, MSG_NOSIGNAL);
        if (r < 0 && errno != EAGAIN) die("send");
        if (r > 0 && (sent[k] += (size_t)r) == want) open--;
      } else {
        ssize_t r = recv(in[k], rbuf + base + got[k], want - got[k], 0);
        if (r == 0) errno = ECONNRESET;
        if (r <= 0 && errno != EAGAIN) die("recv");
        if (r > 0 && (got[k] += (size_t)r) == want) open--;
      }
    }
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int n = 2, streams = 2, iters = 20;
  size_t size = 16u << 20;
  int c;
  while ((c = getopt(argc, argv, "n:b:s:i:h")) != -1) {
    if (c == 'n') n = atoi(optarg);
    else if (c == 'b') size = strtoull(optarg, NULL, 0);
    else if (c == 's') streams = atoi(optarg);
    else if (c == 'i') iters = atoi(optarg);
    else {
      fprintf(stderr, "usage: tcp_ceiling [-n ranks 2..%d] [-b bytes] [-s streams 1..%d] "
                      "[-i iterations 1..%d]\n", MAX_RANKS, MAX_STREAMS, MAX_ITERS - 1);
      return c == 'h' ? 0 : 2;
    }
  }
  if (n < 2 || n > MAX_RANKS || streams < 1 || streams > MAX_STREAMS || iters < 1 ||
      iters >= MAX_ITERS || size < (size_t)n) {
    fprintf(stderr, "tcp_ceiling: bad -n, -s, -i or -b (see -h)\n");
    return 2;
  }
  size_t bytes = size / (size_t)n * 2 * (size_t)(n - 1); /* what one ring rank sends */
  int lfd[MAX_RANKS];
  uint16_t port[MAX_RANKS];
  for (int r = 0; r < n; r++) lfd[r] = listener(&port[r]);
  int results[2];
  if (pipe(results) != 0) die("pipe");
  for (int r = 0; r < n; r++) {
    if (fork() != 0) continue;
    int out[MAX_STREAMS], in[MAX_STREAMS];
    for (int k = 0; k < streams; k++) {
      out[k] = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {.sin_family = AF_INET,
                              .sin_port = htons(port[(r + 1) % n]),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
      if (connect(out[k], (struct sockaddr *)&a, sizeof a) != 0) die("connect");
      if (send(out[k], &k, sizeof k, 0) != (ssize_t)sizeof k) die("send stream index");
    }
    for (int k = 0; k < streams; k++) {
      int fd = accept(lfd[r], NULL, NULL), idx = -1;
      if (fd < 0 || recv(fd, &idx, sizeof idx, MSG_WAITALL) != (ssize_t)sizeof idx || idx < 0 ||
          idx >= streams)
        die("accept");
      in[idx] = fd;
    }
    for (int k = 0; k < streams; k++) set_stream(out[k]), set_stream(in[k]);
    char *sbuf = malloc(bytes), *rbuf = malloc(bytes);
    if (sbuf == NULL || rbuf == NULL) die("malloc");
    memset(sbuf, 1, bytes), memset(rbuf, 0, bytes);
    double t[MAX_ITERS];
    for (int i = 0; i <= iters; i++) { /* iteration 0 warms up */
      double t0 = now_s();
      exchange(out, in, streams, sbuf, rbuf, bytes);
      t[i] = now_s() - t0;
    }
    qsort(t + 1, (size_t)iters, sizeof *t, cmp_double);
    double med = t[1 + iters / 2];
    if (write(results[1], &med, sizeof med) != (ssize_t)sizeof med) die("write");
    _exit(0);
  }
  close(results[1]);
  double worst = 0, m;
  for (int r = 0; r < n; r++) {
    if (read(results[0], &m, sizeof m) != (ssize_t)sizeof m) {
      fprintf(stderr, "tcp_ceiling: a rank failed\n");
      return 1;
    }
    if (m > worst) worst = m;
  }
  while (wait(NULL) > 0) {
  }
  printf("ranks %d  size %zu  streams %d  ring bytes/rank %zu  median %.3f ms  "
         "busbw ceiling %.2f GB/s\n",
         n, size, streams, bytes, worst * 1e3, (double)bytes / worst / 1e9);
  return 0;
}
