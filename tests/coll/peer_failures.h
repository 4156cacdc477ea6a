/* Failure scenarios shared by the suites of the one-host shared-memory all-reduce paths
 * (arena, zero-copy window): a rank killed mid-call, a rank arriving after the others'
 * deadline, a rank that aborts while the others are still on their way. Each suite
 * says how a rank starts and where its buffers come from; the scenarios and their
 * checks are the same. Run each with mp_run and a pf_case_t as the argument. */
#ifndef TESTS_COLL_PEER_FAILURES_H
#define TESTS_COLL_PEER_FAILURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

enum { PF_VICTIM = 2 }; /* the rank that dies, comes late (rank 0 aborts) */

typedef struct {
  /* Start this rank's communicator the suite's way (suite_case is its own case). */
  int (*init)(const void *suite_case, int rank, int nranks, coll_comm_t **comm);
  const void *suite_case;
  /* Memory the path under test all-reduces (NULL on failure), and how it is given back
   * after the communicator is destroyed (NULL: the communicator owned it). */
  void *(*alloc)(coll_comm_t *comm, size_t bytes);
  void (*release)(void *p);
  int timeout_ms; /* the job's deadline, as in its ct_job_t */
  int variant;    /* killed: which call the victim dies in, and when */
  const char *killed_says; /* words the survivors' error holds besides "rank 2" */
  bool killed_async_error; /* ... and the same status as the async error */
  const char *late_says;   /* words naming rank 2 in the late rank's timeout */
} pf_case_t;

/* PF_VICTIM dies during an async all-reduce (after 0-2 blocking ones); the others must
 * fail within the deadline with an error naming it. Every rank but the victim returns 0
 * when that holds, so mp_run reports 1 (the victim's death). */
int pf_rank_killed(int rank, int nranks, void *arg);
/* PF_VICTIM arrives 1.5 s after the others' deadline: they time out naming it (rank 0
 * with the hang report); the victim then fails too. */
int pf_rank_late(int rank, int nranks, void *arg);
/* Rank 0 aborts while it waits alone; the others, arriving 600 ms later, fail with
 * COLL_ERR_REMOTE naming rank 0 within 2 s rather than at their deadline. */
int pf_rank_abort(int rank, int nranks, void *arg);

#endif
