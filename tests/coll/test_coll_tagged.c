/* Tagged point to point (coll_send_tagged / coll_recv_tagged and the _async forms) over
 * real forked ranks, the real store and real transports (shm and tcp): the patterns
 * PyTorch programs use that must not deadlock on one thread (exchanges sent before
 * received, tags in another order, any source, a large blocking send against a receive
 * of another tag, collectives between, groups), order within a tag, size mismatches,
 * deadlines, a killed peer, abort, unexpected messages left at destroy, bad arguments. */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "coll_test_util.h"
#include "common/clock.h"
#include "multiproc.h"
#include "suite_run.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Ranks leave with _exit (multiproc.c), which skips LeakSanitizer's check: ask for it. */
static int leaks_found(void) { return __lsan_do_recoverable_leak_check(); }
#else
static int leaks_found(void) { return 0; }
#endif

typedef struct {
  ct_job_t job;
  const char *eager; /* COLL_P2P_EAGER_BYTES, NULL: the default (64 KiB) */
} case_t;

static const char *const transports[] = {"shm", "tcp"};

static int start(const case_t *c, int rank, int nranks, coll_comm_t **comm) {
  if (ct_init(&c->job, rank, nranks, comm) != 0) return 1; /* clears COLL_* first */
  unsetenv("COLL_P2P_EAGER_BYTES");
  return 0;
}

/* The same with the case's eager limit ("0": every non-empty message goes by rendezvous,
 * RTS/CTS/DATA). ct_init leaves COLL_P2P_EAGER_BYTES alone. */
static int start_eager(const case_t *c, int rank, int nranks, coll_comm_t **comm) {
  if (c->eager == NULL) return start(c, rank, nranks, comm);
  setenv("COLL_P2P_EAGER_BYTES", c->eager, 1);
  int rc = ct_init(&c->job, rank, nranks, comm);
  unsetenv("COLL_P2P_EAGER_BYTES");
  if (rc != 0) return 1;
  return 0;
}

/* Status st, and its message holding every one of the words (NULL-terminated). */
static int expect(int rank, const char *what, coll_status_t st, coll_status_t want,
                  const char *const *words) {
  const char *msg = coll_last_error();
  int bad = st != want;
  for (const char *const *w = words; *w != NULL; w++)
    if (strstr(msg, *w) == NULL) bad = 1;
  if (bad)
    fprintf(stderr, "rank %d: %s: expected %s, got %s: %s\n", rank, what, coll_status_name(want),
            coll_status_name(st), msg);
  return bad;
}

static int finish(coll_comm_t *comm, int bad) {
  if (coll_comm_destroy(comm) != COLL_OK) {
    fprintf(stderr, "destroy: %s\n", coll_last_error());
    bad = 1;
  }
  return bad;
}

enum { SMALL = 1000, LARGE = 3 << 20 };

/* (a) Both ranks isend to each other, then irecv, then wait for all: small and large. */
static int rank_exchange(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start_eager(arg, rank, nranks, &comm) != 0) return 1;
  int peer = 1 - rank, bad = 0;
  const size_t sizes[] = {SMALL, LARGE, 0};
  for (int k = 0; k < 3; k++) {
    size_t n = sizes[k];
    unsigned char *out = malloc(n + 1), *in = malloc(n + 1);
    ct_fill_bytes(out, n, (unsigned)(rank * 10 + k));
    memset(in, 0, n + 1);
    coll_request_t *s = NULL, *r = NULL;
    bad += ct_ok(rank, "isend", coll_send_tagged_async(out, n, COLL_UINT8, peer, 7, comm, &s));
    bad += ct_ok(rank, "irecv", coll_recv_tagged_async(in, n, COLL_UINT8, peer, 7, comm, NULL, &r));
    bad += ct_ok(rank, "wait send", coll_request_wait(&s));
    bad += ct_ok(rank, "wait recv", coll_request_wait(&r));
    bad += ct_check_bytes(in, n, (unsigned)(peer * 10 + k), rank, "exchange");
    free(out);
    free(in);
  }
  return finish(comm, bad);
}

START_TEST(both_ranks_send_before_either_receives_without_deadlock) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]},
              .eager = _i < 2 ? NULL : "0"};
  ck_assert_int_eq(mp_run(2, 60000, rank_exchange, &c), 0);
}
END_TEST

/* (b) Rank 0 isends tags 1, 2, 3 (one large); rank 1 receives 3, 2, 1 (the first blocking). */
static int rank_reverse_tags(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start_eager(arg, rank, nranks, &comm) != 0) return 1;
  const size_t size[4] = {0, SMALL, LARGE, 77};
  int bad = 0;
  unsigned char *buf[4] = {NULL};
  coll_request_t *req[4] = {NULL};
  for (int tag = 1; tag <= 3; tag++) {
    buf[tag] = calloc(1, size[tag]);
    if (rank == 0) {
      ct_fill_bytes(buf[tag], size[tag], (unsigned)tag);
      bad +=
          ct_ok(rank, "isend",
                coll_send_tagged_async(buf[tag], size[tag], COLL_UINT8, 1, tag, comm, &req[tag]));
    }
  }
  if (rank == 1) {
    int src = -5;
    bad += ct_ok(rank, "recv 3", coll_recv_tagged(buf[3], size[3], COLL_UINT8, 0, 3, comm, &src));
    if (src != 0) bad++;
    bad += ct_ok(rank, "irecv 2",
                 coll_recv_tagged_async(buf[2], size[2], COLL_UINT8, 0, 2, comm, NULL, &req[2]));
    bad += ct_ok(rank, "irecv 1",
                 coll_recv_tagged_async(buf[1], size[1], COLL_UINT8, 0, 1, comm, NULL, &req[1]));
  }
  for (int tag = 3; tag >= 1; tag--) {
    if (req[tag] != NULL) bad += ct_ok(rank, "wait", coll_request_wait(&req[tag]));
    if (rank == 1) bad += ct_check_bytes(buf[tag], size[tag], (unsigned)tag, rank, "reverse tags");
    free(buf[tag]);
  }
  return finish(comm, bad);
}

START_TEST(tags_received_in_reverse_order_of_sending_match_by_tag) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]},
              .eager = _i < 2 ? NULL : "0"};
  ck_assert_int_eq(mp_run(2, 60000, rank_reverse_tags, &c), 0);
}
END_TEST

/* Messages of one (sender, tag) arrive in order, eager and rendezvous mixed. */
static int rank_in_order(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start_eager(arg, rank, nranks, &comm) != 0) return 1;
  enum { N = 12 };
  size_t n = 200000; /* above the default 64 KiB eager limit */
  int bad = 0;
  unsigned char *buf = malloc(n);
  for (int k = 0; k < N; k++) {
    size_t len = k % 3 == 0 ? n : 100; /* every third message goes by rendezvous */
    if (rank == 0) {
      ct_fill_bytes(buf, len, (unsigned)k);
      bad += ct_ok(rank, "send", coll_send_tagged(buf, len, COLL_UINT8, 1, 4, comm));
    } else {
      bad += ct_ok(rank, "recv", coll_recv_tagged(buf, len, COLL_UINT8, 0, 4, comm, NULL));
      bad += ct_check_bytes(buf, len, (unsigned)k, rank, "in order");
    }
  }
  free(buf);
  return finish(comm, bad);
}

START_TEST(messages_of_one_tag_arrive_in_the_order_sent) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]},
              .eager = _i < 2 ? NULL : "0"};
  ck_assert_int_eq(mp_run(2, 60000, rank_in_order, &c), 0);
}
END_TEST

/* Many messages at once: every rank sends every other rank N messages over 4 tags with
 * sizes from empty to rendezvous, all async; each receiver posts its receives in its own
 * shuffled order (keeping the order within a (sender, tag)), plus receives from any
 * source on tag 9. Every byte and every source is checked. */
enum { STRESS_N = 24, STRESS_ANY = 6 };

static size_t stress_size(int from, int to, int k) {
  static const size_t sizes[] = {0, 8, 224, 225, 3000, 70000, 200000};
  return sizes[(unsigned)(from * 7 + to * 3 + k * 5) % 7];
}

static unsigned stress_seed(int from, int to, int k) {
  return (unsigned)(from * 1000 + to * 100 + k);
}

static int rank_stress(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start_eager(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0, nreq = 0;
  int npeers = nranks - 1, total = npeers * (STRESS_N + STRESS_ANY);
  coll_request_t **req = calloc((size_t)total * 2, sizeof *req);
  unsigned char **bufs = calloc((size_t)total * 2, sizeof *bufs);
  int32_t *any_in = calloc((size_t)npeers * STRESS_ANY, sizeof *any_in);
  int32_t *any_out = calloc(STRESS_ANY, sizeof *any_out);
  int *any_src = calloc((size_t)npeers * STRESS_ANY, sizeof *any_src);
  for (int to = 0; to < nranks; to++) {
    if (to == rank) continue;
    for (int k = 0; k < STRESS_N; k++) {
      size_t n = stress_size(rank, to, k);
      bufs[nreq] = malloc(n + 1);
      ct_fill_bytes(bufs[nreq], n, stress_seed(rank, to, k));
      bad += ct_ok(rank, "isend",
                   coll_send_tagged_async(bufs[nreq], n, COLL_UINT8, to, k % 4, comm, &req[nreq]));
      nreq++;
    }
    for (int k = 0; k < STRESS_ANY; k++) {
      any_out[k] = rank * 100 + k;
      bad += ct_ok(rank, "isend any",
                   coll_send_tagged_async(&any_out[k], 1, COLL_INT32, to, 9, comm, &req[nreq++]));
    }
  }
  /* Receives: peers and tags interleaved by a rank-dependent stride, in order per tag. */
  int first_recv = nreq, any_posted = 0;
  int next_k[8][4] = {{0}};
  for (int step = 0; step < npeers * STRESS_N; step++) {
    int pick = (step * 5 + rank) % (npeers * 4);
    int from = pick / 4, tag = pick % 4;
    from += from >= rank;
    for (int tries = 0; tries < npeers * 4 && next_k[from][tag] * 4 + tag >= STRESS_N; tries++) {
      pick = (pick + 1) % (npeers * 4);
      from = pick / 4 + (pick / 4 >= rank);
      tag = pick % 4;
    }
    int k = next_k[from][tag]++ * 4 + tag;
    size_t n = stress_size(from, rank, k);
    bufs[nreq] = calloc(1, n + 1);
    bad +=
        ct_ok(rank, "irecv",
              coll_recv_tagged_async(bufs[nreq], n, COLL_UINT8, from, tag, comm, NULL, &req[nreq]));
    nreq++;
    if (step % 4 == 0 && any_posted < npeers * STRESS_ANY) {
      bad += ct_ok(rank, "irecv any",
                   coll_recv_tagged_async(&any_in[any_posted], 1, COLL_INT32, COLL_ANY_SOURCE, 9,
                                          comm, &any_src[any_posted], &req[nreq]));
      bufs[nreq++] = NULL;
      any_posted++;
    }
  }
  while (any_posted < npeers * STRESS_ANY) {
    bad += ct_ok(rank, "irecv any",
                 coll_recv_tagged_async(&any_in[any_posted], 1, COLL_INT32, COLL_ANY_SOURCE, 9,
                                        comm, &any_src[any_posted], &req[nreq]));
    bufs[nreq++] = NULL;
    any_posted++;
  }
  for (int i = nreq - 1; i >= 0; i--) bad += ct_ok(rank, "wait", coll_request_wait(&req[i]));
  /* Check the data: replay the receive order. */
  memset(next_k, 0, sizeof next_k);
  int r = first_recv;
  for (int step = 0; step < npeers * STRESS_N; step++) {
    int pick = (step * 5 + rank) % (npeers * 4);
    int from = pick / 4 + (pick / 4 >= rank), tag = pick % 4;
    for (int tries = 0; tries < npeers * 4 && next_k[from][tag] * 4 + tag >= STRESS_N; tries++) {
      pick = (pick + 1) % (npeers * 4);
      from = pick / 4 + (pick / 4 >= rank);
      tag = pick % 4;
    }
    int k = next_k[from][tag]++ * 4 + tag;
    while (bufs[r] == NULL) r++;
    bad += ct_check_bytes(bufs[r], stress_size(from, rank, k), stress_seed(from, rank, k), rank,
                          "stress");
    r++;
  }
  int last[8];
  for (int p = 0; p < 8; p++) last[p] = -1;
  for (int i = 0; i < npeers * STRESS_ANY; i++) {
    int src = any_src[i], k = any_in[i] % 100;
    if (src < 0 || src >= nranks || src == rank || any_in[i] / 100 != src || k <= last[src]) {
      fprintf(stderr, "rank %d: any source %d gave %d after %d\n", rank, src, (int)any_in[i],
              src >= 0 && src < 8 ? last[src] : -2);
      bad++;
    } else {
      last[src] = k;
    }
  }
  for (int i = 0; i < nreq; i++) free(bufs[i]);
  free(bufs);
  free(req);
  free(any_in);
  free(any_out);
  free(any_src);
  return finish(comm, bad);
}

START_TEST(many_messages_over_several_tags_and_any_source_all_arrive_intact) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]},
              .eager = _i < 2 ? NULL : "0"};
  ck_assert_int_eq(mp_run(3, 90000, rank_stress, &c), 0);
}
END_TEST

/* (c) Every other rank sends to rank 0, which receives from any source: twice per sender,
 * once blocking and once async, and the source is reported. */
static int rank_any_source(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  int32_t v[2];
  if (rank != 0) {
    for (int k = 0; k < 2; k++) {
      v[k] = rank * 100 + k;
      bad += ct_ok(rank, "send", coll_send_tagged(&v[k], 1, COLL_INT32, 0, 5, comm));
    }
    return finish(comm, bad);
  }
  int seen[8][2] = {{0}};
  for (int k = 0; k < 2 * (nranks - 1); k++) {
    int32_t got = -1;
    int src = -7;
    if (k % 2 == 0) {
      bad += ct_ok(rank, "recv any",
                   coll_recv_tagged(&got, 1, COLL_INT32, COLL_ANY_SOURCE, 5, comm, &src));
    } else {
      coll_request_t *r;
      bad += ct_ok(rank, "irecv any",
                   coll_recv_tagged_async(&got, 1, COLL_INT32, COLL_ANY_SOURCE, 5, comm, &src, &r));
      bad += ct_ok(rank, "wait any", coll_request_wait(&r));
    }
    int which = got % 100;
    if (src < 1 || src >= nranks || got / 100 != src || which < 0 || which > 1 ||
        seen[src][which]++) {
      fprintf(stderr, "rank 0: any source gave %d from source %d\n", (int)got, src);
      bad++;
    } else if (which == 1 && !seen[src][0]) {
      fprintf(stderr, "rank 0: rank %d's second message came before its first\n", src);
      bad++;
    }
  }
  return finish(comm, bad);
}

START_TEST(receive_from_any_source_reports_each_sender) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]}};
  ck_assert_int_eq(mp_run(2 + _i / 2 * 2, 60000, rank_any_source, &c), 0);
}
END_TEST

/* (d) A blocking 64 MiB send while the receiver first posts a receive for another tag. */
static int rank_large_blocking(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  size_t n = 64u << 20;
  unsigned char *big = malloc(n);
  int32_t small = 0;
  int bad = 0;
  if (rank == 0) {
    ct_fill_bytes(big, n, 9);
    small = 4242;
    bad += ct_ok(rank, "send big", coll_send_tagged(big, n, COLL_UINT8, 1, 1, comm));
    bad += ct_ok(rank, "send small", coll_send_tagged(&small, 1, COLL_INT32, 1, 2, comm));
  } else {
    coll_request_t *r;
    bad += ct_ok(rank, "irecv small",
                 coll_recv_tagged_async(&small, 1, COLL_INT32, 0, 2, comm, NULL, &r));
    bad += ct_ok(rank, "recv big", coll_recv_tagged(big, n, COLL_UINT8, 0, 1, comm, NULL));
    bad += ct_ok(rank, "wait small", coll_request_wait(&r));
    bad += ct_check_bytes(big, n, 9, rank, "64 MiB");
    if (small != 4242) bad++;
  }
  free(big);
  return finish(comm, bad);
}

START_TEST(large_blocking_send_completes_while_the_receiver_waits_on_another_tag_first) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i], .timeout_ms = 60000}};
  ck_assert_int_eq(mp_run(2, 120000, rank_large_blocking, &c), 0);
}
END_TEST

/* (e) Pending isends and irecvs, then collectives issued after them, then the receives:
 * the collectives complete first. */
static int rank_with_collectives(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  unsigned char *out = malloc(LARGE), *in = malloc(LARGE);
  int32_t s = rank, got = -1;
  ct_fill_bytes(out, LARGE, (unsigned)rank);
  coll_request_t *big = NULL, *tiny = NULL, *r = NULL;
  bad +=
      ct_ok(rank, "isend big", coll_send_tagged_async(out, LARGE, COLL_UINT8, next, 3, comm, &big));
  bad += ct_ok(rank, "isend tiny", coll_send_tagged_async(&s, 1, COLL_INT32, prev, 8, comm, &tiny));
  bad += ct_ok(rank, "irecv tiny",
               coll_recv_tagged_async(&got, 1, COLL_INT32, next, 8, comm, NULL, &r));
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)(rank + i);
  bad += ct_ok(rank, "all_reduce", coll_all_reduce(x, x, 64, COLL_FLOAT32, COLL_SUM, comm));
  for (int i = 0; i < 64; i++)
    if (x[i] != (float)(nranks * i + nranks * (nranks - 1) / 2)) bad++;
  coll_request_t *ar;
  bad += ct_ok(rank, "all_reduce_async",
               coll_all_reduce_async(x, x, 64, COLL_FLOAT32, COLL_SUM, comm, &ar));
  bad += ct_ok(rank, "wait all_reduce", coll_request_wait(&ar));
  /* Untagged point to point keeps its own order, beside the pending tagged calls. */
  int32_t u_out = rank + 1000, u_in = -1;
  bad += ct_ok(rank, "group_start", coll_group_start(comm));
  bad += ct_ok(rank, "untagged send", coll_send(&u_out, 1, COLL_INT32, next, comm));
  bad += ct_ok(rank, "untagged recv", coll_recv(&u_in, 1, COLL_INT32, prev, comm));
  bad += ct_ok(rank, "group_end", coll_group_end(comm));
  if (u_in != prev + 1000) bad++;
  bad += ct_ok(rank, "barrier", coll_barrier(comm));
  bad += ct_ok(rank, "recv big", coll_recv_tagged(in, LARGE, COLL_UINT8, prev, 3, comm, NULL));
  bad += ct_check_bytes(in, LARGE, (unsigned)prev, rank, "after collectives");
  bad += ct_ok(rank, "wait big", coll_request_wait(&big));
  bad += ct_ok(rank, "wait tiny", coll_request_wait(&tiny));
  bad += ct_ok(rank, "wait irecv", coll_request_wait(&r));
  if (got != next) bad++;
  free(out);
  free(in);
  return finish(comm, bad);
}

START_TEST(collectives_issued_after_pending_tagged_calls_complete) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]}};
  ck_assert_int_eq(mp_run(2 + _i / 2, 60000, rank_with_collectives, &c), 0);
}
END_TEST

/* (f) batch_isend_irecv: a ring exchange in a group, blocking calls recorded, async too. */
static int rank_group(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  unsigned char *out = malloc(LARGE), *in = malloc(LARGE);
  int32_t s = rank * 3, got = -1, got2 = -1;
  ct_fill_bytes(out, LARGE, (unsigned)rank + 50);
  coll_request_t *r = NULL;
  bad += ct_ok(rank, "group_start", coll_group_start(comm));
  bad += ct_ok(rank, "send", coll_send_tagged(out, LARGE, COLL_UINT8, next, 0, comm));
  bad += ct_ok(rank, "send small", coll_send_tagged(&s, 1, COLL_INT32, prev, 1, comm));
  bad += ct_ok(rank, "recv", coll_recv_tagged(in, LARGE, COLL_UINT8, prev, 0, comm, NULL));
  bad += ct_ok(rank, "recv small", coll_recv_tagged(&got, 1, COLL_INT32, next, 1, comm, NULL));
  bad += ct_ok(rank, "nested start", coll_group_start(comm));
  bad += ct_ok(rank, "isend", coll_send_tagged(&s, 1, COLL_INT32, next, 2, comm));
  bad +=
      ct_ok(rank, "irecv", coll_recv_tagged_async(&got2, 1, COLL_INT32, prev, 2, comm, NULL, &r));
  bad += ct_ok(rank, "nested end", coll_group_end(comm));
  bad += ct_ok(rank, "group_end", coll_group_end(comm));
  bad += ct_ok(rank, "wait", coll_request_wait(&r));
  bad += ct_check_bytes(in, LARGE, (unsigned)prev + 50, rank, "group ring");
  if (got != next * 3 || got2 != prev * 3) {
    fprintf(stderr, "rank %d: group small values %d %d\n", rank, (int)got, (int)got2);
    bad++;
  }
  free(out);
  free(in);
  return finish(comm, bad);
}

START_TEST(a_ring_of_tagged_calls_in_a_group_completes_at_group_end) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i % 2]}};
  ck_assert_int_eq(mp_run(_i < 2 ? 2 : 4, 60000, rank_group, &c), 0);
}
END_TEST

/* Sizes that differ: a large send and its receive both fail; a small send has completed,
 * its receive fails; the connection still works afterwards. */
static int rank_mismatch(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  unsigned char *buf = calloc(1, LARGE);
  const char *large_send[] = {"rank 1", "tag 6", "3145728", "3145000", NULL};
  const char *large_recv[] = {"rank 0", "tag 6", "3145728", "3145000", NULL};
  const char *small_recv[] = {"rank 0", "tag 2", "40", "44", NULL};
  if (rank == 0) {
    bad += expect(rank, "large send", coll_send_tagged(buf, LARGE, COLL_UINT8, 1, 6, comm),
                  COLL_ERR_MISMATCH, large_send);
    bad += ct_ok(rank, "small send", coll_send_tagged(buf, 10, COLL_INT32, 1, 2, comm));
    ct_fill_bytes(buf, 64, 1);
    bad += ct_ok(rank, "send after", coll_send_tagged(buf, 64, COLL_UINT8, 1, 6, comm));
  } else {
    /* The small message first waits unmatched, then meets a receive of the wrong size. */
    bad += expect(rank, "large recv", coll_recv_tagged(buf, 3145000, COLL_UINT8, 0, 6, comm, NULL),
                  COLL_ERR_MISMATCH, large_recv);
    usleep(100000);
    bad += expect(rank, "small recv", coll_recv_tagged(buf, 11, COLL_INT32, 0, 2, comm, NULL),
                  COLL_ERR_MISMATCH, small_recv);
    bad += ct_ok(rank, "recv after", coll_recv_tagged(buf, 64, COLL_UINT8, 0, 6, comm, NULL));
    bad += ct_check_bytes(buf, 64, 1, rank, "after the mismatches");
  }
  free(buf);
  bad += ct_ok(rank, "barrier", coll_barrier(comm));
  return finish(comm, bad);
}

START_TEST(a_size_mismatch_fails_with_both_sizes_and_the_tag) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i]}};
  ck_assert_int_eq(mp_run(2, 60000, rank_mismatch, &c), 0);
}
END_TEST

/* A receive nobody sends to times out within the deadline, naming the peer and tag; so
 * does one from any source and a large send nobody receives. */
static int rank_timeout(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  if (rank == 1) {
    int32_t v;
    const char *peer_words[] = {"rank 0", "tag 9", "coll_recv_tagged", NULL};
    const char *any_words[] = {"any rank", "tag 9", NULL};
    int64_t t0 = coll_now_ms();
    bad += expect(rank, "recv", coll_recv_tagged(&v, 1, COLL_INT32, 0, 9, comm, NULL),
                  COLL_ERR_TIMEOUT, peer_words);
    coll_request_t *r;
    bad += ct_ok(rank, "irecv any",
                 coll_recv_tagged_async(&v, 1, COLL_INT32, COLL_ANY_SOURCE, 9, comm, NULL, &r));
    bad += expect(rank, "wait any", coll_request_wait(&r), COLL_ERR_TIMEOUT, any_words);
    int64_t took = coll_now_ms() - t0;
    if (took < 900 || took > 3000) {
      fprintf(stderr, "rank 1: two 500 ms deadlines took %lld ms\n", (long long)took);
      bad++;
    }
  } else {
    unsigned char *big = calloc(1, LARGE);
    const char *send_words[] = {"rank 1", "tag 4", "no matching receive", NULL};
    bad += expect(rank, "send", coll_send_tagged(big, LARGE, COLL_UINT8, 1, 4, comm),
                  COLL_ERR_TIMEOUT, send_words);
    free(big);
  }
  coll_comm_set_timeout(comm, 10000);
  bad += ct_ok(rank, "barrier", coll_barrier(comm));
  return finish(comm, bad);
}

START_TEST(an_unmatched_receive_times_out_naming_peer_and_tag) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i], .timeout_ms = 500}};
  ck_assert_int_eq(mp_run(2, 60000, rank_timeout, &c), 0);
}
END_TEST

/* Rank 2 dies; rank 0's receive from it, rank 1's receive from any source and rank 1's
 * large send to it fail with COLL_ERR_REMOTE naming rank 2, well before the deadline;
 * the communicator is failed afterwards (async error, the next collective refused). */
static int rank_killed(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = ct_ok(rank, "barrier", coll_barrier(comm));
  if (rank == 2) {
    usleep(200000);
    raise(SIGKILL);
  }
  const char *words[] = {"rank 2", NULL};
  int32_t v;
  int64_t t0 = coll_now_ms();
  if (rank == 0) {
    bad += expect(rank, "recv", coll_recv_tagged(&v, 1, COLL_INT32, 2, 1, comm, NULL),
                  COLL_ERR_REMOTE, words);
  } else {
    unsigned char *big = calloc(1, LARGE);
    coll_request_t *r, *s;
    bad += ct_ok(rank, "irecv any",
                 coll_recv_tagged_async(&v, 1, COLL_INT32, COLL_ANY_SOURCE, 1, comm, NULL, &r));
    bad += ct_ok(rank, "isend", coll_send_tagged_async(big, LARGE, COLL_UINT8, 2, 1, comm, &s));
    bad += expect(rank, "wait send", coll_request_wait(&s), COLL_ERR_REMOTE, words);
    bad += expect(rank, "wait any", coll_request_wait(&r), COLL_ERR_REMOTE, words);
    free(big);
  }
  int64_t took = coll_now_ms() - t0;
  if (took > 8000) {
    fprintf(stderr, "rank %d: the dead peer was seen after %lld ms\n", rank, (long long)took);
    bad++;
  }
  /* The communicator is failed now, as a collective meeting the dead peer leaves it. */
  coll_status_t async_err = COLL_OK;
  bad += ct_ok(rank, "async error", coll_comm_get_async_error(comm, &async_err));
  bad += expect(rank, "async error", async_err, COLL_ERR_REMOTE, words);
  t0 = coll_now_ms();
  bad += expect(rank, "barrier after", coll_barrier(comm), COLL_ERR_REMOTE, words);
  if (coll_now_ms() - t0 > 1000) bad++;
  coll_comm_destroy(comm); /* a failed peer: destroy's status is not the point */
  return bad;
}

START_TEST(a_killed_peer_fails_the_pending_operations_naming_it) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i], .timeout_ms = 20000}};
  /* mp_run counts the killed rank as failed. */
  ck_assert_int_eq(mp_run(3, 60000, rank_killed, &c), 1);
}
END_TEST

/* Abort fails a pending receive and a pending large send at once. */
static int rank_abort(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  if (rank == 0) {
    int32_t v;
    unsigned char *big = calloc(1, LARGE);
    coll_request_t *r, *s;
    bad += ct_ok(rank, "irecv", coll_recv_tagged_async(&v, 1, COLL_INT32, 1, 3, comm, NULL, &r));
    bad += ct_ok(rank, "isend", coll_send_tagged_async(big, LARGE, COLL_UINT8, 1, 3, comm, &s));
    usleep(50000);
    int64_t t0 = coll_now_ms();
    bad += ct_ok(rank, "abort", coll_comm_abort(comm));
    const char *words[] = {"aborted", NULL};
    bad += expect(rank, "wait recv", coll_request_wait(&r), COLL_ERR_ABORTED, words);
    bad += expect(rank, "wait send", coll_request_wait(&s), COLL_ERR_ABORTED, words);
    if (coll_now_ms() - t0 > 1000) bad++;
    bad += expect(rank, "send after abort", coll_send_tagged(&v, 1, COLL_INT32, 1, 3, comm),
                  COLL_ERR_ABORTED, words);
    free(big);
  }
  coll_comm_destroy(comm);
  return bad;
}

START_TEST(abort_fails_pending_tagged_operations) {
  case_t c = {.job = {.port = mp_free_port(), .transport = "shm", .timeout_ms = 1500}};
  ck_assert_int_eq(mp_run(2, 60000, rank_abort, &c), 0);
}
END_TEST

/* Messages never received (arrived unexpected, or still arriving) are freed at destroy:
 * the ASan build's leak check is the judge. */
static int rank_unreceived(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  unsigned char buf[40000];
  ct_fill_bytes(buf, sizeof buf, 3);
  if (rank == 0) {
    for (int tag = 1; tag <= 6; tag++)
      bad += ct_ok(rank, "send", coll_send_tagged(buf, sizeof buf, COLL_UINT8, 1, tag, comm));
  } else {
    /* Tags 1 to 5 arrive before 6, unexpected, and are never received. */
    bad += ct_ok(rank, "recv 6", coll_recv_tagged(buf, sizeof buf, COLL_UINT8, 0, 6, comm, NULL));
    bad += ct_check_bytes(buf, sizeof buf, 3, rank, "tag 6");
  }
  bad += ct_ok(rank, "barrier", coll_barrier(comm));
  bad = finish(comm, bad);
  if (leaks_found()) {
    fprintf(stderr, "rank %d: memory left after destroy\n", rank);
    bad = 1;
  }
  return bad;
}

START_TEST(messages_never_received_are_freed_at_destroy) {
  case_t c = {.job = {.port = mp_free_port(), .transport = transports[_i]}};
  ck_assert_int_eq(mp_run(2, 60000, rank_unreceived, &c), 0);
}
END_TEST

static int rank_bad_args(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (start(arg, rank, nranks, &comm) != 0) return 1;
  int bad = 0;
  int32_t v = 0;
  coll_request_t *r;
  const char *neg[] = {"tag -1 is negative", "coll_send_tagged", NULL};
  const char *range[] = {"peer 5 is outside", NULL};
  const char *any_send[] = {"peer -1 is outside", NULL};
  const char *self[] = {"is this rank", NULL};
  const char *null_req[] = {"request is NULL", NULL};
  const char *null_buf[] = {"buf is NULL", NULL};
  int other = 1 - rank;
  bad += expect(rank, "tag", coll_send_tagged(&v, 1, COLL_INT32, other, -1, comm),
                COLL_ERR_INVALID_ARGUMENT, neg);
  bad += expect(rank, "peer", coll_recv_tagged(&v, 1, COLL_INT32, 5, 0, comm, NULL),
                COLL_ERR_INVALID_ARGUMENT, range);
  bad += expect(rank, "any send", coll_send_tagged(&v, 1, COLL_INT32, COLL_ANY_SOURCE, 0, comm),
                COLL_ERR_INVALID_ARGUMENT, any_send);
  bad += expect(rank, "self", coll_recv_tagged(&v, 1, COLL_INT32, rank, 0, comm, NULL),
                COLL_ERR_INVALID_ARGUMENT, self);
  bad += expect(rank, "request", coll_send_tagged_async(&v, 1, COLL_INT32, other, 0, comm, NULL),
                COLL_ERR_INVALID_ARGUMENT, null_req);
  bad += expect(rank, "buf", coll_recv_tagged_async(NULL, 1, COLL_INT32, other, 0, comm, NULL, &r),
                COLL_ERR_INVALID_ARGUMENT, null_buf);
  /* Zero-byte messages are fine, NULL buffer included. */
  if (rank == 0) {
    bad += ct_ok(rank, "empty send", coll_send_tagged(NULL, 0, COLL_INT32, 1, 0, comm));
  } else {
    int src = -1;
    bad += ct_ok(rank, "empty recv",
                 coll_recv_tagged(NULL, 0, COLL_INT32, COLL_ANY_SOURCE, 0, comm, &src));
    if (src != 0) bad++;
  }
  bad += ct_ok(rank, "barrier", coll_barrier(comm));
  return finish(comm, bad);
}

START_TEST(bad_arguments_are_refused_with_a_message_and_empty_messages_work) {
  case_t c = {.job = {.port = mp_free_port(), .transport = "shm"}};
  ck_assert_int_eq(mp_run(2, 30000, rank_bad_args, &c), 0);
}
END_TEST

SUITE_MAIN(
    "coll tagged",
    suite_loop_tests("tagged", 150, 0, 4, both_ranks_send_before_either_receives_without_deadlock,
                     tags_received_in_reverse_order_of_sending_match_by_tag,
                     messages_of_one_tag_arrive_in_the_order_sent,
                     receive_from_any_source_reports_each_sender,
                     many_messages_over_several_tags_and_any_source_all_arrive_intact),
    suite_loop_tests("tagged", 150, 0, 2,
                     large_blocking_send_completes_while_the_receiver_waits_on_another_tag_first),
    suite_loop_tests("tagged", 150, 0, 4, collectives_issued_after_pending_tagged_calls_complete,
                     a_ring_of_tagged_calls_in_a_group_completes_at_group_end),
    suite_loop_tests("tagged", 150, 0, 2, a_size_mismatch_fails_with_both_sizes_and_the_tag,
                     an_unmatched_receive_times_out_naming_peer_and_tag,
                     a_killed_peer_fails_the_pending_operations_naming_it),
    suite_tests("tagged", 150, abort_fails_pending_tagged_operations),
    suite_loop_tests("tagged", 150, 0, 2, messages_never_received_are_freed_at_destroy),
    suite_tests("tagged", 150, bad_arguments_are_refused_with_a_message_and_empty_messages_work))
