/* Internal to the elastic trainer (--elastic): which samples a step and a shard take, the
 * per-sample log, the communicator's changes (shrink, grow, join) and the hand-over of the
 * state to a replacement. The loop itself is trainer_elastic.c. */
#ifndef TRAIN_TRAINER_ELASTIC_H
#define TRAIN_TRAINER_ELASTIC_H

#include <stdio.h>

#include "trainer_run.h"

/* Exit status of tools/train when this rank was fenced (TRAIN_ERR_FENCED). */
#define TRAINER_EXIT_FENCED 3

/* ---- trainer_elastic_shards.c: positions and the sample log.
 * An epoch's order is the sampler's permutation of the whole data set (seed + epoch, no
 * padding). Step k of an epoch takes positions [k*S*b, min((k+1)*S*b, N)) of it (S
 * shards of b = --batch samples; the last step of an epoch may be short), and shard s of
 * that step the positions [k*S*b + s*b, +b), clipped to the step. So every sample of an
 * epoch is in exactly one shard of one step, whatever the world size. Shard s is
 * computed by rank s mod world. */
uint64_t elastic_steps_per_epoch(size_t samples, size_t batch, int shards);
void elastic_step_range(size_t samples, size_t batch, int shards, uint64_t step_in_epoch,
                        size_t *first, size_t *count);
void elastic_shard_range(size_t step_first, size_t step_count, size_t batch, int shard,
                         size_t *first, size_t *count);
/* <path>.<pid>, appended to; NULL path: *log = NULL and nothing is written. */
train_status_t elastic_log_open(const char *path, FILE **log);
/* One line per committed step: "step G epoch E k K n N: i0 i1 ... iN-1 end", written
 * with one write and flushed (a line cut by a kill lacks its "end"). */
train_status_t elastic_log_step(FILE *log, uint64_t global_step, uint64_t epoch,
                                uint64_t step_in_epoch, const uint32_t *indices, size_t n);

/* ---- trainer_elastic_comm.c: the communicator's changes. Each leaves r->comm, r->rank
 * and r->world describing the new communicator, with the elastic deadline set. */
/* Without the failed ranks of agreement `a` (revokes the old one first, destroys it
 * after). On failure r->comm is the old one, to agree on again. */
train_status_t elastic_shrink(trainer_run_t *r, const coll_agreement_t *a);
/* Take `joiners` waiting replacements in (members). */
train_status_t elastic_grow(trainer_run_t *r, int joiners);
/* A replacement: wait in coll_comm_join (the launcher's store) to be taken in. */
train_status_t elastic_join(trainer_run_t *r);
/* Milliseconds on a monotonic clock, and the wall clock (for logs a harness compares). */
double elastic_now_ms(void);
double elastic_unix_s(void);

/* ---- trainer_elastic_exact.c: the sum of --bit-identical. This rank (`rank` of `world`)
 * holds the rows of shards rank, rank + world, ... (those < shards), one after the other,
 * `row` floats each (the gradients, then the loss). The sum of all the shards' rows lands
 * in `sum` on every rank, the same bits whatever the world and whichever rank held which
 * shard (exact_sum.h): an all-reduce MAX of the largest |value| gives the fixed-point
 * scale, an int64 reduce-scatter SUM the sum, an all-gather the floats. A NaN or
 * infinite value anywhere makes every rank return TRAIN_ERR_NOT_FINITE (the same shards
 * give it again: no retry helps). */
typedef struct {
  const float *rows;
  size_t row;
  int rank, world, shards;
  uint64_t step;  /* for the message */
  int64_t *fixed; /* scratch: row + world int64 (blocks padded for the reduce-scatter) */
  float *sum;     /* row + world floats; the first row are the result */
} elastic_exact_t;
train_status_t elastic_exact_sum(coll_comm_t *comm, const elastic_exact_t *x);

/* ---- trainer_elastic_state.c: rank 0 of a grown communicator broadcasts parameters,
 * optimizer state and position (epoch, step, optimizer steps; the order follows from
 * seed + epoch) with their hashes; every other rank takes them and checks the hashes,
 * the sizes and that its command line agrees (shards, seed, bit-identical). */
train_status_t elastic_state_share(trainer_run_t *r);

/* ---- trainer_elastic_agree.c: a step's agreement. Its flag says whether the step went
 * well on this rank and, if not, on which: bit 0 is cleared by a rank whose step failed,
 * and so is bit 1 + rank % 31, so the AND that every rank receives names the ranks it
 * failed on (exactly up to 31 ranks; beyond, the ranks congruent mod 31 are listed too). */
uint32_t elastic_step_flag(int rank, bool ok);
bool elastic_step_ok(uint32_t agreed_flag);
/* "2,5": the ranks the agreement declared failed, or those whose step failed (returns
 * how many). */
void elastic_list_failed(const coll_agreement_t *a, char *out, size_t size);
int elastic_list_flagged(uint32_t agreed_flag, int world, char *out, size_t size);

/* ---- trainer_elastic_finish.c: the final checkpoint (--checkpoint FILE; nothing
 * without it). Rank 0 writes it and every rank agrees that it did; when the writer died,
 * the survivors shrink and the new rank 0 writes it. TRAIN_OK on every rank alive only
 * when the file is written; an error on every rank when it could not be. */
train_status_t elastic_save_final(trainer_run_t *r);

/* ---- trainer_elastic_hooks.c: test hooks, read from the environment (its comment). */
/* TRAIN_TEST_DIE_AT_END: SIGKILL `when` ("before" or "after") the final checkpoint. */
void elastic_test_die_at_end(const char *when);
/* TRAIN_TEST_FAIL_AT: an error for the chosen rank's first try of the chosen step. */
train_status_t elastic_test_fail(uint64_t global_step);

#endif
