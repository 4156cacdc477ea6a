/* Test hooks of the elastic trainer, read only from the environment (tests/train/
 * elastic_test.py sets them; unset, each costs a getenv):
 *   TRAIN_TEST_DIE_AT_END=RANK:before|after  the process started as RANK (not a
 *       replacement) raises SIGKILL after the last step was committed, before the final
 *       checkpoint is written (rank 0 writes it) or after the write, before the agreement
 *       that confirms it.
 *   TRAIN_TEST_FAIL_AT=RANK:STEP  the process started as RANK reports global step STEP as
 *       failed on its first try, as a collective that returned an error would, without
 *       dying: the ranks agree that the step failed, lose nobody and redo it.
 * (TRAIN_TEST_DIE_AT and TRAIN_TEST_AWAIT_JOIN are read by the loop, trainer_elastic.c.) */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "trainer_elastic.h"

/* The rank this process was started as, -1 for a replacement or without a launcher. */
static int started_as(void) {
  coll_launch_info_t launch;
  if (trainer_elastic_joining() || coll_launch_info(&launch) != COLL_OK || !launch.found) return -1;
  return launch.rank;
}

void elastic_test_die_at_end(const char *when) {
  const char *v = getenv("TRAIN_TEST_DIE_AT_END");
  int rank = -1;
  char phase[16] = "";
  if (v == NULL || sscanf(v, "%d:%15s", &rank, phase) != 2 || strcmp(phase, when) != 0 ||
      started_as() != rank)
    return;
  fprintf(stderr, "elastic: rank %d dies %s the final checkpoint (TRAIN_TEST_DIE_AT_END)\n", rank,
          when);
  fflush(stderr);
  raise(SIGKILL);
}

train_status_t elastic_test_fail(uint64_t global_step) {
  static bool done;
  const char *v = getenv("TRAIN_TEST_FAIL_AT");
  int rank = -1;
  unsigned long long step = 0;
  if (done || v == NULL || sscanf(v, "%d:%llu", &rank, &step) != 2 || step != global_step ||
      started_as() != rank)
    return TRAIN_OK;
  done = true;
  return train_error(TRAIN_ERR_COMM, "step %llu failed on purpose (TRAIN_TEST_FAIL_AT=%s)", step,
                     v);
}
