/* Rank bodies shared by the shm/tcp and the ib transport tests (see tp_cases.h). */
#include "tp_cases.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "mem/memops.h"

int tp_ring_copy(tp_rank_t *t, const size_t *sizes, size_t nsizes, int drain_ms) {
  int rank = t->rank, n = t->nranks;
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  void **out = calloc(nsizes, sizeof *out), **in = calloc(nsizes, sizeof *in);
  RANK_CHECK(out != NULL && in != NULL, "no memory");
  for (size_t i = 0; i < nsizes; i++) {
    out[i] = malloc(sizes[i] + 1);
    in[i] = malloc(sizes[i] + 1);
    tp_fill(out[i], sizes[i], rank, (int)i);
    memset(in[i], 0xee, sizes[i] + 1);
    transport_recv_t r = {.dst = in[i], .len = sizes[i]};
    RANK_CHECK(tp_recv(t, prev, &r) == COLL_OK, "post recv");
    RANK_CHECK(tp_send(t, next, out[i], sizes[i]) == COLL_OK, "post send");
  }
  RANK_CHECK(tp_drain(t, drain_ms) == COLL_OK, "drain");
  for (size_t i = 0; i < nsizes; i++) {
    size_t bad = tp_check(in[i], sizes[i], prev, (int)i);
    RANK_CHECK(bad == SIZE_MAX, "size %zu: byte %zu differs", sizes[i], bad);
    RANK_CHECK(((unsigned char *)in[i])[sizes[i]] == 0xee, "size %zu: wrote past the end",
               sizes[i]);
    free(out[i]);
    free(in[i]);
  }
  free(out);
  free(in);
  enum { BURST = 300 };
  static unsigned char small_out[BURST][40], small_in[BURST][40];
  for (int k = 0; k < BURST; k++) {
    size_t len = (size_t)(k % 40);
    tp_fill(small_out[k], len, rank, 100 + k);
    transport_recv_t r = {.dst = small_in[k], .len = len};
    RANK_CHECK(tp_recv(t, prev, &r) == COLL_OK, "post small recv");
    RANK_CHECK(tp_send(t, next, small_out[k], len) == COLL_OK, "post small send");
  }
  RANK_CHECK(tp_drain(t, drain_ms) == COLL_OK, "drain burst");
  for (int k = 0; k < BURST; k++)
    RANK_CHECK(tp_check(small_in[k], (size_t)(k % 40), prev, 100 + k) == SIZE_MAX,
               "small message %d differs", k);
  return 0;
}

typedef struct {
  const tp_job_t *job;
  tp_body_fn body;
  void *arg;
} connected_t;

static int connected_rank(int rank, int n, void *p) {
  const connected_t *c = p;
  tp_rank_t t;
  RANK_CHECK(tp_open(c->job, rank, n, &t) == COLL_OK, "connect");
  int rc = c->body(&t, c->arg);
  tp_close(&t);
  return rc;
}

int tp_run_connected(int n, tp_body_fn body, tp_job_t *job, void *arg, int timeout_ms) {
  connected_t c = {.job = job, .body = body, .arg = arg};
  return tp_run_ranks(n, connected_rank, job, &c, timeout_ms);
}

float tp_float_of(int rank, size_t i) { return (float)(rank + 1) * 8.0f + (float)(i % 13); }

int tp_ring_reduce(tp_rank_t *t, const size_t *counts, size_t ncounts, int drain_ms) {
  int rank = t->rank, n = t->nranks;
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  mem_reduce_fn sum = mem_host_reduce_fn(COLL_FLOAT32, COLL_SUM);
  RANK_CHECK(sum != NULL, "no float32 sum");
  /* One more than ncounts: the last count again, in place. */
  float **mine = calloc(ncounts + 1, sizeof *mine), **dst = calloc(ncounts + 1, sizeof *dst),
        **sent = calloc(ncounts + 1, sizeof *sent);
  RANK_CHECK(mine != NULL && dst != NULL && sent != NULL, "no memory");
  for (size_t i = 0; i <= ncounts; i++) {
    bool in_place = i == ncounts;
    size_t count = in_place ? counts[ncounts - 1] : counts[i];
    size_t bytes = count * sizeof(float);
    mine[i] = malloc(bytes + 4);
    for (size_t k = 0; k < count; k++) mine[i][k] = tp_float_of(rank, k);
    /* In place, the receive overwrites `mine`, so the send goes from a copy. */
    dst[i] = in_place ? mine[i] : malloc(bytes + 4);
    sent[i] = in_place ? malloc(bytes + 4) : mine[i];
    if (in_place) memcpy(sent[i], mine[i], bytes);
    transport_recv_t r = {
        .dst = dst[i], .operand = mine[i], .reduce = sum, .elem_size = sizeof(float), .len = bytes};
    RANK_CHECK(tp_recv(t, prev, &r) == COLL_OK, "post reduce recv");
    RANK_CHECK(tp_send(t, next, sent[i], bytes) == COLL_OK, "post send");
  }
  RANK_CHECK(tp_drain(t, drain_ms) == COLL_OK, "drain");
  for (size_t i = 0; i <= ncounts; i++) {
    size_t count = i < ncounts ? counts[i] : counts[ncounts - 1];
    for (size_t k = 0; k < count; k++) {
      float want = tp_float_of(rank, k) + tp_float_of(prev, k);
      RANK_CHECK(dst[i][k] == want, "count %zu%s: element %zu is %g, want %g", count,
                 i < ncounts ? "" : " in place", k, (double)dst[i][k], (double)want);
    }
    free(i == ncounts ? sent[i] : dst[i]);
    free(mine[i]);
  }
  free(mine);
  free(dst);
  free(sent);
  return 0;
}

int tp_sends_first(tp_rank_t *t, const tp_sends_first_t *how) {
  int rank = t->rank;
  enum { LEN = 4096 };
  int partner = rank ^ 1, count = how->count;
  unsigned char *out = malloc((size_t)count * LEN), *in = malloc((size_t)count * LEN);
  RANK_CHECK(out != NULL && in != NULL, "no memory");
  for (int k = 0; k < count; k++) {
    tp_fill(out + (size_t)k * LEN, LEN, rank, k);
    RANK_CHECK(tp_send(t, partner, out + (size_t)k * LEN, LEN) == COLL_OK, "post send");
  }
  /* Progress the sends alone for a while (the FIFO or the credits run out), then post the
   * receives. */
  for (int i = 0; i < how->rounds; i++) {
    uint64_t sd = 0;
    RANK_CHECK(transport_progress(transport_set_conn(t->set, partner), &sd, NULL) == COLL_OK,
               "progress");
    if (how->wait_ms <= 0) continue;
    RANK_CHECK(sd < (uint64_t)count, "all %d sends completed before any receive was posted", count);
    transport_set_wait(t->set, how->wait_ms);
  }
  for (int k = 0; k < count; k++) {
    transport_recv_t r = {.dst = in + (size_t)k * LEN, .len = LEN};
    RANK_CHECK(tp_recv(t, partner, &r) == COLL_OK, "post recv");
  }
  RANK_CHECK(tp_drain(t, how->drain_ms) == COLL_OK, "drain");
  for (int k = 0; k < count; k++)
    RANK_CHECK(tp_check(in + (size_t)k * LEN, LEN, partner, k) == SIZE_MAX, "message %d", k);
  free(out);
  free(in);
  return 0;
}

int tp_length_mismatch(tp_rank_t *t, const tp_mismatch_t *mc, int drain_ms) {
  int rank = t->rank;
  size_t cap = mc->send_len > mc->recv_len ? mc->send_len : mc->recv_len;
  char *buf = calloc(1, cap);
  RANK_CHECK(buf != NULL, "no memory");
  if (mc->lead && rank == 0) {
    RANK_CHECK(tp_send(t, 1, buf, 8) == COLL_OK, "post lead send");
    RANK_CHECK(tp_drain(t, drain_ms) == COLL_OK, "drain lead send");
  } else if (mc->lead) {
    transport_recv_t r = {.dst = buf, .len = 8};
    RANK_CHECK(tp_recv(t, 0, &r) == COLL_OK, "post lead recv");
    RANK_CHECK(tp_drain(t, drain_ms) == COLL_OK, "drain lead recv");
  }
  if (rank == 0) {
    RANK_CHECK(tp_send(t, 1, buf, mc->send_len) == COLL_OK, "post send");
    coll_status_t st = tp_drain(t, drain_ms);
    RANK_CHECK(st == COLL_OK || (mc->sender_may_fail && st == COLL_ERR_REMOTE), "drain send: %s",
               coll_status_name(st));
    void *v = NULL;
    size_t len = 0;
    RANK_CHECK(store_get(t->store, "mismatch/checked", &v, &len, drain_ms) == COLL_OK, "wait");
    free(v);
  } else {
    transport_recv_t r = {.dst = buf, .len = mc->recv_len};
    RANK_CHECK(tp_recv(t, 0, &r) == COLL_OK, "post recv");
    coll_status_t st = tp_drain(t, drain_ms);
    store_set(t->store, "mismatch/checked", "1", 1, 1000);
    RANK_CHECK(st == COLL_ERR_PROTOCOL,
               "%zu bytes sent, %zu expected: got %s, want COLL_ERR_PROTOCOL", mc->send_len,
               mc->recv_len, coll_status_name(st));
    RANK_CHECK(strstr(coll_last_error(), "peer rank 0") != NULL,
               "message '%s' does not name rank 0", coll_last_error());
    char sent[32];
    snprintf(sent, sizeof sent, "%zu", mc->send_len);
    RANK_CHECK(strstr(coll_last_error(), sent) != NULL, "message '%s' lacks the length %s",
               coll_last_error(), sent);
    fprintf(stderr, "rank 1: %s\n", coll_last_error());
  }
  free(buf);
  return 0;
}

int tp_killed_peer(tp_rank_t *t, int victim, size_t len, int drain_ms, int within_ms) {
  int rank = t->rank;
  char *buf = calloc(1, len);
  RANK_CHECK(buf != NULL, "no memory");
  if (rank == victim) {
    RANK_CHECK(tp_send(t, 1 - rank, buf, len) == COLL_OK, "post send");
    transport_conn_t *c = transport_set_conn(t->set, 1 - rank);
    for (int i = 0; i < 3; i++) {
      transport_progress(c, NULL, NULL);
      transport_set_wait(t->set, 5);
    }
    kill(getpid(), SIGKILL);
    return 1;
  }
  transport_recv_t r = {.dst = buf, .len = len};
  RANK_CHECK(tp_recv(t, victim, &r) == COLL_OK, "post recv");
  RANK_CHECK(tp_recv(t, victim, &r) == COLL_OK, "post second recv");
  int64_t start = coll_now_ms();
  coll_status_t st = tp_drain(t, drain_ms);
  int64_t took = coll_now_ms() - start;
  RANK_CHECK(st == COLL_ERR_REMOTE || st == COLL_ERR_TIMEOUT, "got %s", coll_status_name(st));
  char want[32];
  snprintf(want, sizeof want, "peer rank %d", victim);
  RANK_CHECK(st != COLL_ERR_REMOTE || strstr(coll_last_error(), want) != NULL,
             "message '%s' does not name %s", coll_last_error(), want);
  RANK_CHECK(took < within_ms, "took %lld ms", (long long)took);
  fprintf(stderr, "rank %d: dead peer reported after %lld ms: %s\n", rank, (long long)took,
          coll_last_error());
  free(buf);
  return 0;
}
