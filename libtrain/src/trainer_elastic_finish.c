/* The end of an elastic run with --checkpoint FILE: the final state must reach disk even
 * when its writer dies. Rank 0 of the communicator writes the file (write, fsync, rename:
 * checkpoint.c), then every rank agrees that it did; when the writer died before that
 * agreement, the survivors shrink and the new rank 0 writes it again (every rank holds the
 * same parameters, optimizer state and position, so the file is the same). A rank prints
 * "done" only after the agreement said the file is written, and when it could not be
 * written every rank fails, so collrun does not report success for a job whose promised
 * checkpoint is missing. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "trainer_elastic.h"

enum { MAX_TRIES = 10 };

train_status_t elastic_save_final(trainer_run_t *r) {
  const char *path = r->cfg->checkpoint;
  if (path == NULL) return TRAIN_OK;
  elastic_test_die_at_end("before");
  for (int tries = 1; tries <= MAX_TRIES; tries++) {
    bool writer = r->rank == 0;
    train_status_t st = writer ? trainer_save_checkpoint(r) : TRAIN_OK;
    if (tries == 1) elastic_test_die_at_end("after");
    coll_agreement_t a = {.flag = st == TRAIN_OK};
    coll_status_t cs = coll_comm_agree(r->comm, &a);
    if (cs == COLL_ERR_FENCED)
      return train_error(TRAIN_ERR_FENCED,
                         "rank %d: the other ranks declared this one failed while the final "
                         "checkpoint %s was written (it was stopped or slower than "
                         "--elastic-timeout-ms) and went on without it: %s",
                         r->rank, path, coll_last_error());
    if (cs != COLL_OK) {
      train_comm_error(cs, "agreement on the final checkpoint");
      struct timespec pause = {0, 50 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    if (a.nfailed == 0) {
      if (a.flag == 1) return TRAIN_OK; /* written, and every rank knows */
      if (writer) return st;
      return train_error(TRAIN_ERR_IO,
                         "rank 0 could not write the final checkpoint %s (see its error)", path);
    }
    /* The writer (or another rank) died: go on without it; the new rank 0 writes. */
    char failed[256];
    elastic_list_failed(&a, failed, sizeof failed);
    train_status_t shrunk = elastic_shrink(r, &a);
    if (shrunk != TRAIN_OK) continue; /* agree again on the communicator we still have */
    if (r->rank == 0)
      printf(
          "elastic: rank(s) %s lost after the last step; rank 0 of the %d left writes the "
          "final checkpoint %s\n",
          failed, r->world, path);
    fflush(stdout);
  }
  return train_error(TRAIN_ERR_COMM, "the final checkpoint %s: not confirmed after %d tries: %s",
                     path, MAX_TRIES, train_last_error());
}
