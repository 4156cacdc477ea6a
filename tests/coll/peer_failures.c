/* Failure scenarios shared by the arena and window suites (peer_failures.h). */
#include "peer_failures.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"

enum { BIG = 1 << 18, LATE_COUNT = 64, ABORT_COUNT = 4096 };

static void finish(const pf_case_t *c, coll_comm_t *comm, void *buf) {
  coll_comm_destroy(comm);
  if (c->release != NULL) c->release(buf);
}

int pf_rank_killed(int rank, int nranks, void *arg) {
  const pf_case_t *c = arg;
  coll_comm_t *comm;
  if (c->init(c->suite_case, rank, nranks, &comm) != 0) return 1;
  float *x = c->alloc(comm, BIG * sizeof *x);
  if (x == NULL) return 1;
  if (rank == PF_VICTIM) {
    coll_request_t *req = NULL;
    for (int k = 0; k < c->variant % 3; k++) coll_all_reduce(x, x, BIG, COLL_FLOAT32, COLL_SUM, comm);
    coll_all_reduce_async(x, x, BIG, COLL_FLOAT32, COLL_SUM, comm, &req);
    usleep((useconds_t)(c->variant * 173 % 2000));
    raise(SIGKILL);
  }
  coll_status_t st = COLL_OK;
  int64_t took = 0;
  for (int k = 0; k < 1000 && st == COLL_OK; k++) {
    int64_t start = coll_now_ms();
    st = coll_all_reduce(x, x, BIG, COLL_FLOAT32, COLL_SUM, comm);
    took = coll_now_ms() - start;
  }
  const char *msg = coll_last_error();
  int bad = st == COLL_OK || took > c->timeout_ms || strstr(msg, "rank 2") == NULL ||
            strstr(msg, c->killed_says) == NULL;
  if (bad)
    fprintf(stderr, "rank %d: expected an error naming rank 2 and '%s' within %d ms, got %s after "
                    "%lld ms: %s\n",
            rank, c->killed_says, c->timeout_ms, coll_status_name(st), (long long)took, msg);
  coll_status_t async_err = COLL_OK;
  if (c->killed_async_error &&
      (coll_comm_get_async_error(comm, &async_err) != COLL_OK || async_err != st))
    bad = 1;
  finish(c, comm, x);
  return bad;
}

int pf_rank_late(int rank, int nranks, void *arg) {
  const pf_case_t *c = arg;
  coll_comm_t *comm;
  if (c->init(c->suite_case, rank, nranks, &comm) != 0) return 1;
  int32_t *v = c->alloc(comm, LATE_COUNT * sizeof *v);
  if (v == NULL) return 1;
  memset(v, 0, LATE_COUNT * sizeof *v);
  if (rank == PF_VICTIM) usleep((useconds_t)(c->timeout_ms + 1500) * 1000);
  int64_t start = coll_now_ms();
  coll_status_t st = coll_all_reduce(v, v, LATE_COUNT, COLL_INT32, COLL_SUM, comm);
  int64_t took = coll_now_ms() - start;
  const char *msg = coll_last_error();
  int bad;
  if (rank == PF_VICTIM)
    bad = st == COLL_OK;
  else
    bad = st != COLL_ERR_TIMEOUT || strstr(msg, c->late_says) == NULL ||
          took > c->timeout_ms + 3000 || (rank == 0 && strstr(msg, "hang report") == NULL);
  if (bad)
    fprintf(stderr, "rank %d: unexpected %s after %lld ms: %s\n", rank, coll_status_name(st),
            (long long)took, msg);
  finish(c, comm, v);
  return bad;
}

static void *abort_soon(void *arg) {
  usleep(200 * 1000);
  coll_comm_abort(arg);
  return NULL;
}

int pf_rank_abort(int rank, int nranks, void *arg) {
  const pf_case_t *c = arg;
  coll_comm_t *comm;
  if (c->init(c->suite_case, rank, nranks, &comm) != 0) return 1;
  float *v = c->alloc(comm, ABORT_COUNT * sizeof *v);
  if (v == NULL) return 1;
  memset(v, 0, ABORT_COUNT * sizeof *v);
  int bad = 0;
  if (rank == 0) {
    pthread_t t;
    pthread_create(&t, NULL, abort_soon, comm);
    coll_status_t st = coll_all_reduce(v, v, ABORT_COUNT, COLL_FLOAT32, COLL_SUM, comm);
    pthread_join(t, NULL);
    bad = st != COLL_ERR_ABORTED;
    usleep(1000 * 1000); /* keep the process (and its lock) while the others look */
  } else {
    usleep(600 * 1000);
    int64_t start = coll_now_ms();
    coll_status_t st = coll_all_reduce(v, v, ABORT_COUNT, COLL_FLOAT32, COLL_SUM, comm);
    int64_t took = coll_now_ms() - start;
    bad = st != COLL_ERR_REMOTE || strstr(coll_last_error(), "rank 0") == NULL || took > 2000;
  }
  if (bad) fprintf(stderr, "rank %d: %s\n", rank, coll_last_error());
  finish(c, comm, v);
  return bad;
}
