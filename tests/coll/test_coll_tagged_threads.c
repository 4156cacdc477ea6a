/* coll.h rule 4's exception, over real forked ranks and real transports (shm and tcp):
 * a tagged send posted from a second thread while the first is blocked in a collective
 * on the same communicator. The peer receives that message before it joins the
 * collective, so the collective can only end if the post did not wait for it and the
 * engine moved the data (eager and RTS/CTS sizes) with nobody testing the requests. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

static const char *const transports[] = {"shm", "tcp"};

enum { SMALL = 1000, LARGE = 3 << 20, FLOATS = 64 };

typedef struct {
  coll_comm_t *comm;
  float x[FLOATS];
  coll_status_t status;
  char message[512];
} reduce_thread_t;

static void *blocking_all_reduce(void *arg) {
  reduce_thread_t *r = arg;
  r->status = coll_all_reduce(r->x, r->x, FLOATS, COLL_FLOAT32, COLL_SUM, r->comm);
  snprintf(r->message, sizeof r->message, "%s", coll_last_error());
  return NULL;
}

static int check_sum(const float *x, int rank, int nranks) {
  for (int i = 0; i < FLOATS; i++)
    if (x[i] != (float)(nranks * i + nranks * (nranks - 1) / 2)) {
      fprintf(stderr, "rank %d: all_reduce element %d is %g\n", rank, i, (double)x[i]);
      return 1;
    }
  return 0;
}

static int rank_send_beside_collective(coll_comm_t *comm, int rank, int nranks) {
  int bad = 0;
  unsigned char *small = malloc(SMALL), *large = malloc(LARGE);
  if (rank == 0) {
    reduce_thread_t r = {.comm = comm};
    for (int i = 0; i < FLOATS; i++) r.x[i] = (float)i;
    ct_fill_bytes(small, SMALL, 1);
    ct_fill_bytes(large, LARGE, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, blocking_all_reduce, &r) != 0) return 1;
    usleep(100 * 1000); /* the other thread is in the all-reduce, waiting for rank 1 */
    coll_request_t *s1 = NULL, *s2 = NULL;
    bad += ct_ok(rank, "isend small",
                 coll_send_tagged_async(small, SMALL, COLL_UINT8, 1, 1, comm, &s1));
    bad += ct_ok(rank, "isend large",
                 coll_send_tagged_async(large, LARGE, COLL_UINT8, 1, 2, comm, &s2));
    pthread_join(t, NULL);
    if (r.status != COLL_OK) {
      fprintf(stderr, "rank 0: all_reduce beside the sends: %s: %s\n", coll_status_name(r.status),
              r.message);
      bad++;
    } else {
      bad += check_sum(r.x, rank, nranks);
    }
    bad += ct_ok(rank, "wait small", coll_request_wait(&s1));
    bad += ct_ok(rank, "wait large", coll_request_wait(&s2));
  } else {
    float x[FLOATS];
    for (int i = 0; i < FLOATS; i++) x[i] = (float)(rank + i);
    if (rank == 1) {
      bad +=
          ct_ok(rank, "recv small", coll_recv_tagged(small, SMALL, COLL_UINT8, 0, 1, comm, NULL));
      bad += ct_check_bytes(small, SMALL, 1, rank, "small message");
      bad +=
          ct_ok(rank, "recv large", coll_recv_tagged(large, LARGE, COLL_UINT8, 0, 2, comm, NULL));
      bad += ct_check_bytes(large, LARGE, 2, rank, "large message");
    }
    bad += ct_ok(rank, "all_reduce", coll_all_reduce(x, x, FLOATS, COLL_FLOAT32, COLL_SUM, comm));
    bad += check_sum(x, rank, nranks);
  }
  free(small);
  free(large);
  if (coll_comm_destroy(comm) != COLL_OK) {
    fprintf(stderr, "rank %d: destroy: %s\n", rank, coll_last_error());
    bad++;
  }
  return bad;
}

START_TEST(a_send_posted_beside_a_blocked_collective_lets_the_peer_join_it) {
  ct_job_t job = {.port = mp_free_port(), .transport = transports[_i % 2], .timeout_ms = 20000};
  ck_assert_int_eq(ct_run(2 + _i / 2, 60000, &job, rank_send_beside_collective), 0);
}
END_TEST

SUITE_MAIN("coll tagged threads",
           suite_loop_tests("threads", 120, 0, 4,
                            a_send_posted_beside_a_blocked_collective_lets_the_peer_join_it))
