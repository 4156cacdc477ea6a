/* Helpers shared by the transport tests and the pairwise benchmark (see tp_util.h). */
#include "tp_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"

bool tp_store_start(tp_store_host_t *host) { return tp_store_start_token(host, NULL); }

bool tp_store_start_token(tp_store_host_t *host, const char *token) {
  int port_pipe[2], stop_pipe[2];
  if (pipe(port_pipe) != 0) return false;
  if (pipe(stop_pipe) != 0) {
    close(port_pipe[0]);
    close(port_pipe[1]);
    return false;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(port_pipe[0]);
    close(stop_pipe[1]);
    store_server_options_t opt = {.bind_addr = "127.0.0.1", .token = token};
    store_server_t *server = NULL;
    uint16_t port = 0;
    if (store_server_start(&opt, &server) == COLL_OK)
      port = store_server_port(server);
    else
      fprintf(stderr, "store helper: %s\n", coll_last_error());
    if (write(port_pipe[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
    /* Serve until the test closes its end (or dies: the read sees EOF then too). */
    char c;
    while (port != 0 && read(stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    store_server_stop(server);
    _exit(port != 0 ? 0 : 1);
  }
  close(port_pipe[1]);
  close(stop_pipe[0]);
  host->pid = pid;
  host->stop_fd = stop_pipe[1];
  host->port = 0;
  ssize_t got = pid > 0 ? read(port_pipe[0], &host->port, sizeof host->port) : -1;
  close(port_pipe[0]);
  if (got != (ssize_t)sizeof host->port || host->port == 0) {
    fprintf(stderr, "tp_store_start: no store server\n");
    tp_store_stop(host);
    return false;
  }
  return true;
}

int tp_run_ranks(int n, mp_rank_fn fn, tp_job_t *job, void *arg, int timeout_ms) {
  tp_store_host_t store;
  if (!tp_store_start(&store)) return -1;
  job->port = store.port;
  int failed = mp_run(n, timeout_ms, fn, arg);
  tp_store_stop(&store);
  return failed;
}

void tp_store_stop(tp_store_host_t *host) {
  if (host->stop_fd >= 0) close(host->stop_fd);
  host->stop_fd = -1;
  if (host->pid > 0) {
    /* The helper exits at once; a bounded wait, then SIGKILL, never a hang. */
    for (int i = 0; i < 500; i++) {
      if (waitpid(host->pid, NULL, WNOHANG) == host->pid) {
        host->pid = 0;
        return;
      }
      struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    kill(host->pid, SIGKILL);
    waitpid(host->pid, NULL, 0);
    host->pid = 0;
  }
}

coll_status_t tp_open(const tp_job_t *job, int rank, int nranks, tp_rank_t *out) {
  memset(out, 0, sizeof *out);
  out->rank = rank;
  out->nranks = nranks;
  size_t n = (size_t)nranks;
  out->sends_posted = calloc(n, sizeof(uint64_t));
  out->sends_done = calloc(n, sizeof(uint64_t));
  out->recvs_posted = calloc(n, sizeof(uint64_t));
  out->recvs_done = calloc(n, sizeof(uint64_t));
  int timeout = job->timeout_ms > 0 ? job->timeout_ms : 10000;
  coll_status_t st = store_client_connect("127.0.0.1", job->port, NULL, timeout, &out->store);
  if (st != COLL_OK) return st;
  transport_setup_t setup = {
      .store = out->store,
      .key_prefix = job->prefix,
      .rank = rank,
      .nranks = nranks,
      .host_ids = job->hosts,
      .forced = job->forced,
      .timeout_ms = timeout,
  };
  return transport_set_connect(&setup, &out->set);
}

void tp_close(tp_rank_t *t) {
  transport_set_close(t->set);
  store_client_close(t->store);
  free(t->sends_posted);
  free(t->sends_done);
  free(t->recvs_posted);
  free(t->recvs_done);
  memset(t, 0, sizeof *t);
}

coll_status_t tp_send(tp_rank_t *t, int peer, const void *buf, size_t len) {
  coll_status_t st = transport_post_send(transport_set_conn(t->set, peer), buf, len);
  if (st == COLL_OK) t->sends_posted[peer]++;
  return st;
}

coll_status_t tp_recv(tp_rank_t *t, int peer, const transport_recv_t *recv) {
  coll_status_t st = transport_post_recv(transport_set_conn(t->set, peer), recv);
  if (st == COLL_OK) t->recvs_posted[peer]++;
  return st;
}

coll_status_t tp_drain(tp_rank_t *t, int timeout_ms) {
  int64_t deadline = coll_deadline_ns(timeout_ms);
  int64_t idle_since = 0;
  for (;;) {
    bool pending = false, moved = false;
    for (int p = 0; p < t->nranks; p++) {
      transport_conn_t *c = transport_set_conn(t->set, p);
      if (c == NULL) continue;
      if (t->sends_done[p] == t->sends_posted[p] && t->recvs_done[p] == t->recvs_posted[p])
        continue;
      uint64_t sd = 0, rd = 0;
      coll_status_t st = transport_progress(c, &sd, &rd);
      if (st != COLL_OK) return st;
      moved = moved || sd != t->sends_done[p] || rd != t->recvs_done[p];
      t->sends_done[p] = sd;
      t->recvs_done[p] = rd;
      pending = pending || sd < t->sends_posted[p] || rd < t->recvs_posted[p];
    }
    if (!pending) return COLL_OK;
    if (moved) {
      idle_since = 0;
      continue;
    }
    /* Like the executor: spin on progress for 20 us before blocking. */
    int64_t now = coll_now_ns();
    if (idle_since == 0) idle_since = now;
    if (now - idle_since < 20000) continue;
    int left = coll_ms_left(deadline);
    if (left == 0)
      return coll_error(COLL_ERR_TIMEOUT, "tp_drain: no completion in %d ms", timeout_ms);
    coll_status_t st = transport_set_wait(t->set, left < 10 ? left : 10);
    if (st != COLL_OK) return st;
  }
}

/* One 64-bit word of the pattern: a hash of (word index, sender, tag). Word-wise fill
 * and check keep 40 MiB messages cheap, also under ASan. */
static uint64_t pattern_word(size_t w, int sender, int tag) {
  uint64_t x = (uint64_t)w * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)sender << 40 ^
               (uint64_t)(uint32_t)tag << 20;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ x >> 32;
}

void tp_fill(void *buf, size_t len, int sender, int tag) {
  unsigned char *b = buf;
  size_t words = len / 8;
  for (size_t w = 0; w < words; w++) {
    uint64_t v = pattern_word(w, sender, tag);
    memcpy(b + w * 8, &v, 8);
  }
  uint64_t last = pattern_word(words, sender, tag);
  memcpy(b + words * 8, &last, len - words * 8);
}

size_t tp_check(const void *buf, size_t len, int sender, int tag) {
  const unsigned char *b = buf;
  size_t words = len / 8;
  for (size_t w = 0; w <= words; w++) {
    uint64_t v = pattern_word(w, sender, tag);
    size_t n = w < words ? 8 : len - words * 8;
    if (memcmp(b + w * 8, &v, n) == 0) continue;
    const unsigned char *want = (const unsigned char *)&v;
    for (size_t i = 0; i < n; i++)
      if (b[w * 8 + i] != want[i]) return w * 8 + i;
  }
  return SIZE_MAX;
}
