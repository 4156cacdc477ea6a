/* Many small asynchronous collectives over real forked ranks, completed the way the
 * torch backend completes them (torch_coll/comm_worker.cpp): a worker thread starts the
 * queued calls and polls them with coll_request_test while the caller sometimes takes
 * over and waits with coll_request_wait, one thread at a time on the communicator. Every
 * call has fresh buffers (malloc'd, freed right after completion) and every received
 * byte is checked: a request must not complete before its output holds the result. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "coll_test_util.h"
#include "mix.h"
#include "multiproc.h"
#include "suite_run.h"

enum { MAX_INFLIGHT = 4, ITERS = 3000 };

typedef enum { K_ALL_GATHER, K_REDUCE_SCATTER, K_ALL_REDUCE, K_BROADCAST, K_COUNT } kind_t;

typedef struct job {
  int iter;
  kind_t kind;
  size_t count; /* elements of the call's count argument */
  unsigned char *send, *recv;
  coll_request_t *req;
  struct job *next;
} job_t;

typedef struct {
  coll_comm_t *comm;
  int rank, nranks, iters;
  pthread_mutex_t mu;    /* guards queue, stop, failures, ended */
  pthread_mutex_t drive; /* held by whichever thread calls libcoll */
  job_t *queue, *queue_tail;
  job_t *inflight[64];
  int ninflight;
  int ended, failures;
  bool stop;
} state_t;

/* Byte i of rank r's input of call `iter`: never zero (a zero is what an unwritten
 * output of calloc'd or fresh pages holds). */
static unsigned char in_byte(int iter, int r, size_t i) {
  return (unsigned char)(1 + mix32((uint32_t)iter * 7919u + (uint32_t)r * 104729u + (uint32_t)i) %
                                 200u);
}

/* The same on every rank: the sequence of calls. */
static void plan(job_t *j, int iter) {
  uint32_t h = mix32((uint32_t)iter + 17u);
  j->iter = iter;
  j->kind = (kind_t)(h % K_COUNT);
  static const size_t counts[] = {1, 4, 8, 16, 32, 48, 64, 256};
  j->count = counts[(h >> 8) % (sizeof counts / sizeof counts[0])];
}

static coll_status_t start(state_t *s, job_t *j) {
  int n = s->nranks, r = s->rank;
  size_t c = j->count, in = c, out = c;
  if (j->kind == K_ALL_GATHER) out = c * (size_t)n;
  if (j->kind == K_REDUCE_SCATTER) in = c * (size_t)n;
  if (j->kind == K_ALL_REDUCE || j->kind == K_REDUCE_SCATTER) in *= 4, out *= 4; /* int32 */
  j->send = malloc(in);
  j->recv = malloc(out);
  if (j->send == NULL || j->recv == NULL) return COLL_ERR_NO_MEMORY;
  memset(j->recv, 0, out);
  if (j->kind == K_ALL_REDUCE || j->kind == K_REDUCE_SCATTER)
    for (size_t i = 0; i < in / 4; i++) ((int32_t *)j->send)[i] = in_byte(j->iter, r, i);
  else
    for (size_t i = 0; i < in; i++) j->send[i] = in_byte(j->iter, r, i);
  switch (j->kind) {
    case K_ALL_GATHER:
      return coll_all_gather_async(j->send, j->recv, c, COLL_UINT8, s->comm, &j->req);
    case K_REDUCE_SCATTER:
      return coll_reduce_scatter_async(j->send, j->recv, c, COLL_INT32, COLL_SUM, s->comm, &j->req);
    case K_ALL_REDUCE:
      return coll_all_reduce_async(j->send, j->recv, c, COLL_INT32, COLL_SUM, s->comm, &j->req);
    default: /* in place, root iter % n */
      memcpy(j->recv, j->send, c);
      return coll_broadcast_async(j->recv, c, COLL_UINT8, j->iter % n, s->comm, &j->req);
  }
}

/* 0 when j's output is right; else prints the first bad byte. */
static int check(const state_t *s, const job_t *j) {
  int n = s->nranks, r = s->rank;
  size_t c = j->count;
  static const char *const names[] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast"};
  size_t outn = j->kind == K_ALL_GATHER ? c * (size_t)n : c;
  for (size_t i = 0; i < outn; i++) {
    long want, got;
    if (j->kind == K_ALL_GATHER) {
      want = in_byte(j->iter, (int)(i / c), i % c);
      got = j->recv[i];
    } else if (j->kind == K_BROADCAST) {
      want = in_byte(j->iter, j->iter % n, i);
      got = j->recv[i];
    } else {
      size_t at = j->kind == K_REDUCE_SCATTER ? (size_t)r * c + i : i;
      want = 0;
      for (int k = 0; k < n; k++) want += in_byte(j->iter, k, at);
      got = ((const int32_t *)j->recv)[i];
    }
    if (want != got) {
      fprintf(stderr, "rank %d: call %d (%s of %zu): element %zu of %zu is %ld, not %ld\n", r,
              j->iter, names[j->kind], c, i, outn, got, want);
      return 1;
    }
  }
  return 0;
}

static void end_job(state_t *s, job_t *j, coll_status_t st) {
  int bad = st != COLL_OK;
  if (bad) fprintf(stderr, "rank %d: call %d failed: %s\n", s->rank, j->iter, coll_last_error());
  if (!bad) bad = check(s, j);
  free(j->send);
  free(j->recv);
  free(j);
  pthread_mutex_lock(&s->mu);
  s->failures += bad;
  s->ended++;
  pthread_mutex_unlock(&s->mu);
}

/* With drive held: start what is queued, test every running request once. */
static void drive_once(state_t *s) {
  pthread_mutex_lock(&s->mu);
  job_t *q = s->queue;
  s->queue = s->queue_tail = NULL;
  pthread_mutex_unlock(&s->mu);
  while (q != NULL) {
    job_t *j = q;
    q = q->next;
    coll_status_t st = start(s, j);
    if (st != COLL_OK)
      end_job(s, j, st);
    else
      s->inflight[s->ninflight++] = j;
  }
  for (int i = 0; i < s->ninflight;) {
    coll_status_t st = coll_request_test(&s->inflight[i]->req);
    if (st == COLL_IN_PROGRESS) {
      i++;
      continue;
    }
    job_t *j = s->inflight[i];
    s->inflight[i] = s->inflight[--s->ninflight];
    end_job(s, j, st);
  }
}

static void *worker(void *arg) {
  state_t *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    if (pthread_mutex_trylock(&s->drive) == 0) {
      drive_once(s);
      bool idle = s->ninflight == 0;
      pthread_mutex_unlock(&s->drive);
      if (stop && idle) break;
    }
    struct timespec ts = {0, 20000 + (rand() % 3) * 20000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* The caller's turn (comm_worker.cpp's drive_until): start and poll, and when the call
 * it waits for is the only one running, wait for it in libcoll. */
static void drive_until_ended(state_t *s, int target) {
  for (;;) {
    pthread_mutex_lock(&s->mu);
    bool done = s->ended >= target;
    pthread_mutex_unlock(&s->mu);
    if (done) return;
    if (pthread_mutex_trylock(&s->drive) != 0) {
      sched_yield();
      continue;
    }
    drive_once(s);
    if (s->ninflight == 1 && (rand() & 1)) {
      job_t *j = s->inflight[0];
      s->ninflight = 0;
      end_job(s, j, coll_request_wait(&j->req));
    }
    pthread_mutex_unlock(&s->drive);
  }
}

static int rank_stress(coll_comm_t *comm, int rank, int nranks) {
  state_t s = {.comm = comm, .rank = rank, .nranks = nranks, .iters = ITERS};
  pthread_mutex_init(&s.mu, NULL);
  pthread_mutex_init(&s.drive, NULL);
  srand((unsigned)rank * 31u + 7u);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, &s) != 0) return 1;
  int submitted = 0;
  for (int iter = 0; iter < s.iters; iter++) {
    job_t *j = calloc(1, sizeof *j);
    if (j == NULL) return 1;
    plan(j, iter);
    pthread_mutex_lock(&s.mu);
    if (s.queue_tail != NULL)
      s.queue_tail->next = j;
    else
      s.queue = j;
    s.queue_tail = j;
    pthread_mutex_unlock(&s.mu);
    submitted++;
    /* Mostly wait at once (a synchronous torch call), sometimes keep a few running. */
    int mode = rand() % 8;
    if (mode < 5)
      drive_until_ended(&s, submitted);
    else if (mode == 5)
      drive_until_ended(&s, submitted - 1 > 0 ? submitted - 1 : 0);
    else if (submitted - s.ended >= MAX_INFLIGHT)
      drive_until_ended(&s, submitted - MAX_INFLIGHT + 1);
  }
  drive_until_ended(&s, submitted);
  pthread_mutex_lock(&s.mu);
  s.stop = true;
  pthread_mutex_unlock(&s.mu);
  pthread_join(t, NULL);
  int bad = s.failures != 0;
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

static void run_with(int nranks, const char *transport, const char *grace_us, const char *small) {
  setenv("COLL_ASYNC_GRACE_US", grace_us, 1);
  if (small != NULL)
    setenv("COLL_SMALL_BYTES", small, 1);
  else
    unsetenv("COLL_SMALL_BYTES");
  ct_job_t job = {.port = mp_free_port(), .transport = transport};
  ck_assert_int_eq(ct_run(nranks, 120000, &job, rank_stress), 0);
}

START_TEST(small_async_calls_complete_only_with_their_data_over_shm_at_2_ranks) {
  run_with(2, "shm", "1000", NULL);
}
END_TEST

START_TEST(small_async_calls_complete_only_with_their_data_over_shm_at_3_ranks) {
  run_with(3, "shm", "1000", NULL);
}
END_TEST

START_TEST(small_async_calls_complete_only_with_their_data_without_the_grace) {
  run_with(2, "shm", "0", NULL);
}
END_TEST

START_TEST(small_async_calls_complete_only_with_their_data_without_small_lines) {
  run_with(2, "shm", "1000", "0");
}
END_TEST

START_TEST(small_async_calls_complete_only_with_their_data_over_tcp) {
  run_with(2, "tcp", "1000", NULL);
}
END_TEST

SUITE_MAIN("coll async stress",
           suite_tests("stress", 150,
                       small_async_calls_complete_only_with_their_data_over_shm_at_2_ranks,
                       small_async_calls_complete_only_with_their_data_over_shm_at_3_ranks,
                       small_async_calls_complete_only_with_their_data_without_the_grace,
                       small_async_calls_complete_only_with_their_data_without_small_lines,
                       small_async_calls_complete_only_with_their_data_over_tcp))
