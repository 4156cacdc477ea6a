/* A rank program for the collrun hang-report test: every rank runs one all-reduce, then
 * rank 1 stops itself (SIGSTOP) and the others time out in the next one (1 s deadline). */
#include <signal.h>
#include <stdio.h>

#include "coll.h"

int main(void) {
  coll_comm_t *comm;
  if (coll_comm_init_env(&comm) != COLL_OK) {
    fprintf(stderr, "hang_helper: init: %s\n", coll_last_error());
    return 1;
  }
  int rank = -1;
  coll_comm_rank(comm, &rank);
  coll_comm_set_timeout(comm, 1000);
  float x = 1.0f;
  coll_status_t st = coll_all_reduce(&x, &x, 1, COLL_FLOAT32, COLL_SUM, comm);
  if (st == COLL_OK && rank == 1) raise(SIGSTOP);
  if (st == COLL_OK) st = coll_all_reduce(&x, &x, 1, COLL_FLOAT32, COLL_SUM, comm);
  fprintf(stderr, "hang_helper: rank %d: %s\n", rank, coll_status_name(st));
  coll_comm_destroy(comm);
  return st == COLL_OK ? 0 : 1;
}
