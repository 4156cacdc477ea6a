/* coll_get_unique_id / coll_comm_init_rank: one rank makes the id and hosts its store, the
 * program hands the id over by its own means (here: shared memory between the forked
 * ranks), every rank joins with it; several communicators from several ids live in one
 * process side by side; an id that coll_get_unique_id did not make is refused. */
#include <check.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "coll.h"
#include "coll_test_util.h"
#include "multiproc.h"
#include "suite_run.h"

enum { NIDS = 2, WAIT_MS = 20000 };

/* What the ranks share: the ids and whether each is published. */
typedef struct {
  atomic_int ready[NIDS];
  coll_unique_id_t id[NIDS];
} board_t;

/* mp_run of fn on n ranks sharing a fresh board (shared memory). */
static int run_on_a_board(int n, mp_rank_fn fn) {
  board_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(b, MAP_FAILED);
  memset(b, 0, sizeof *b);
  int failed = mp_run(n, 60000, fn, b);
  munmap(b, sizeof *b);
  return failed;
}

/* Rank `maker` makes id k and publishes it; everyone reads it (bounded wait). */
static int share_id(board_t *b, int k, int rank, int maker, coll_unique_id_t *out) {
  if (rank == maker) {
    if (coll_get_unique_id(&b->id[k]) != COLL_OK) {
      fprintf(stderr, "rank %d: coll_get_unique_id: %s\n", rank, coll_last_error());
      return 1;
    }
    atomic_store(&b->ready[k], 1);
  }
  for (int waited = 0; !atomic_load(&b->ready[k]); waited++) {
    if (waited > WAIT_MS) {
      fprintf(stderr, "rank %d: id %d never published\n", rank, k);
      return 1;
    }
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
    nanosleep(&ts, NULL);
  }
  *out = b->id[k];
  return 0;
}

/* An all-reduce of (rank + salt) on comm: every rank must get the sum over the ranks. */
static int check_sum(coll_comm_t *comm, int rank, int nranks, int salt) {
  int32_t x[3] = {rank + salt, 2 * rank, 1}, want0 = 0;
  for (int r = 0; r < nranks; r++) want0 += r + salt;
  if (coll_all_reduce(x, x, 3, COLL_INT32, COLL_SUM, comm) != COLL_OK) {
    fprintf(stderr, "rank %d: all_reduce: %s\n", rank, coll_last_error());
    return 1;
  }
  if (x[0] != want0 || x[1] != nranks * (nranks - 1) || x[2] != nranks) {
    fprintf(stderr, "rank %d: sum %d %d %d, want %d %d %d\n", rank, x[0], x[1], x[2], want0,
            nranks * (nranks - 1), nranks);
    return 1;
  }
  return 0;
}

static int rank_one_id(int rank, int nranks, void *arg) {
  ct_clean_env();
  coll_unique_id_t id;
  if (share_id(arg, 0, rank, 0, &id)) return 1;
  coll_comm_t *comm = NULL;
  if (coll_comm_init_rank(&comm, nranks, id, rank, 20000) != COLL_OK) {
    fprintf(stderr, "rank %d: coll_comm_init_rank: %s\n", rank, coll_last_error());
    return 1;
  }
  int size = 0, me = -1, bad = check_sum(comm, rank, nranks, 7);
  bad |= coll_comm_size(comm, &size) != COLL_OK || size != nranks;
  bad |= coll_comm_rank(comm, &me) != COLL_OK || me != rank;
  bad |= coll_comm_destroy(comm) != COLL_OK;
  return bad;
}

START_TEST(ranks_meet_through_an_id_one_rank_made) {
  ck_assert_int_eq(run_on_a_board(3, rank_one_id), 0);
}
END_TEST

/* Two ids made by two different ranks: two communicators in each process, used in turn. */
static int rank_two_ids(int rank, int nranks, void *arg) {
  ct_clean_env();
  coll_unique_id_t a, c;
  if (share_id(arg, 0, rank, 0, &a) || share_id(arg, 1, rank, nranks - 1, &c)) return 1;
  coll_comm_t *first = NULL, *second = NULL;
  if (coll_comm_init_rank(&first, nranks, a, rank, 20000) != COLL_OK ||
      coll_comm_init_rank(&second, nranks, c, rank, 20000) != COLL_OK) {
    fprintf(stderr, "rank %d: coll_comm_init_rank: %s\n", rank, coll_last_error());
    return 1;
  }
  int bad = 0;
  for (int i = 0; i < 3 && !bad; i++)
    bad = check_sum(first, rank, nranks, i) || check_sum(second, rank, nranks, 10 + i);
  bad |= coll_comm_destroy(second) != COLL_OK;
  bad |= coll_comm_destroy(first) != COLL_OK;
  return bad;
}

START_TEST(two_ids_make_two_communicators_in_one_process) {
  ck_assert_int_eq(run_on_a_board(2, rank_two_ids), 0);
}
END_TEST

START_TEST(an_id_it_did_not_make_is_refused) {
  ct_clean_env();
  coll_unique_id_t id;
  memset(&id, 0, sizeof id);
  snprintf(id.internal, sizeof id.internal, "hello");
  coll_comm_t *comm = (coll_comm_t *)&id;
  EXPECT_INVALID(coll_comm_init_rank(&comm, 2, id, 0, 1000), "not made by coll_get_unique_id");
  ck_assert_ptr_null(comm);
  ck_assert_int_eq(coll_get_unique_id(&id), COLL_OK);
  EXPECT_INVALID(coll_comm_init_rank(&comm, 2, id, 2, 1000), "rank 2 of 2");
  EXPECT_INVALID(coll_comm_init_rank(NULL, 2, id, 0, 1000), "comm is NULL");
  EXPECT_INVALID(coll_get_unique_id(NULL), "id is NULL");
  /* One rank needs no peer: the id's store is taken over and stopped at destroy. */
  ck_assert_int_eq(coll_comm_init_rank(&comm, 1, id, 0, 1000), COLL_OK);
  int32_t v = 5;
  ck_assert_int_eq(coll_all_reduce(&v, &v, 1, COLL_INT32, COLL_SUM, comm), COLL_OK);
  ck_assert_int_eq(v, 5);
  ck_assert_int_eq(coll_comm_destroy(comm), COLL_OK);
}
END_TEST

SUITE_MAIN("coll unique id", suite_tests("unique id", 120, ranks_meet_through_an_id_one_rank_made,
                                         two_ids_make_two_communicators_in_one_process,
                                         an_id_it_did_not_make_is_refused))
