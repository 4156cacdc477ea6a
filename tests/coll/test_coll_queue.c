/* The request queue's grace over real forked ranks (core/progress.c): while a caller
 * waits for its asynchronous calls at once, a new call is left to its waiter for the
 * grace, unless a call of its size ran a tenth of the grace or longer last time; that
 * one goes to the progress thread at once. Results are checked as well. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "multiproc.h"

enum { SMALL_COUNT = 16, LONG_COUNT = 4 << 20, SMALL_CALLS = 40, LONG_CALLS = 3 };

/* One async sum of count floats, all ones, waited for at once. Sets *graced to whether
 * the queue left it to the waiter. 0 when the result is nranks everywhere. */
static int sum_async(coll_comm_t *comm, float *buf, size_t count, int nranks, bool *graced) {
  for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
  coll_request_t *req = NULL;
  coll_status_t st = coll_all_reduce_async(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm, &req);
  if (st != COLL_OK) {
    fprintf(stderr, "coll_all_reduce_async: %s\n", coll_last_error());
    return 1;
  }
  *graced = req->run_after_ns != 0; /* written at submission only; req lives until the wait */
  if (coll_request_wait(&req) != COLL_OK) {
    fprintf(stderr, "coll_request_wait: %s\n", coll_last_error());
    return 1;
  }
  for (size_t i = 0; i < count; i++)
    if (buf[i] != (float)nranks) {
      fprintf(stderr, "element %zu of %zu is %g, not %d\n", i, count, buf[i], nranks);
      return 1;
    }
  return 0;
}

/* Small calls waited for at once get the grace (in at least one of SMALL_CALLS: the
 * streak needs GRACE_STREAK of them, and a rank descheduled past the grace starts it
 * again). A 16 MiB call takes far more than a tenth of the grace (100 us) on any host, so
 * after the first, no call of that size gets it; small ones still do afterwards. */
static int rank_grace_by_size(int rank, int nranks, void *arg) {
  coll_comm_t *comm;
  if (ct_init(arg, rank, nranks, &comm) != 0) return 1;
  float *buf = malloc((size_t)LONG_COUNT * sizeof *buf);
  if (buf == NULL) return 1;
  int bad = 0, small_graced = 0, small_after = 0;
  bool graced = false;
  for (int i = 0; i < SMALL_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, SMALL_COUNT, nranks, &graced);
    small_graced += graced;
  }
  for (int i = 0; i < LONG_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, LONG_COUNT, nranks, &graced);
    if (i > 0 && graced) {
      int size_class = 64 - __builtin_clzll((unsigned long long)LONG_COUNT * sizeof *buf);
      fprintf(stderr, "rank %d: long call %d got the grace; its size last ran %lld ns\n", rank, i,
              (long long)atomic_load(&comm->async_run_ns[size_class]));
      bad = 1;
    }
  }
  for (int i = 0; i < SMALL_CALLS && !bad; i++) {
    bad |= sum_async(comm, buf, SMALL_COUNT, nranks, &graced);
    small_after += graced;
  }
  if (!bad && (small_graced == 0 || small_after == 0)) {
    fprintf(stderr, "rank %d: small calls with the grace: %d of %d before, %d after\n", rank,
            small_graced, SMALL_CALLS, small_after);
    bad = 1;
  }
  free(buf);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad;
}

START_TEST(calls_of_a_size_that_ran_long_go_to_the_progress_thread_small_ones_keep_the_grace) {
  ct_job_t job = {.port = mp_free_port(), .transport = "shm"};
  ck_assert_int_eq(mp_run(2, 60000, rank_grace_by_size, &job), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("coll queue");
  TCase *tc = tcase_create("grace");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc,
                 calls_of_a_size_that_ran_long_go_to_the_progress_thread_small_ones_keep_the_grace);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
