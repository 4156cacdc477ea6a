/* The exchange of train --elastic --bit-identical: the sum of every shard's gradient row,
 * exact and independent of which rank computed which shard (exact_sum.h), in three
 * collectives: an all-reduce MAX of the largest |value| (exact), a reduce-scatter SUM of
 * the rows in int64 fixed point, and an all-gather of the blocks turned back into
 * floats. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "exact_sum.h"
#include "trainer_elastic.h"

/* The largest |gradient| and |loss| of this rank's shard rows; both +Inf, and the shard
 * in *bad, when one is NaN or infinite. */
static void local_max(const float *rows, size_t nrows, size_t row, int rank, int world,
                      float max[2], int *bad) {
  max[0] = max[1] = 0.0f;
  for (size_t j = 0; j < nrows; j++) {
    const float *r = rows + j * row;
    float g, l;
    bool ok = exact_sum_max_abs(r, row - 1, &g) & exact_sum_max_abs(r + row - 1, 1, &l);
    if (!ok) {
      *bad = rank + (int)j * world;
      max[0] = max[1] = INFINITY; /* every rank's MAX sees it */
      return;
    }
    if (g > max[0]) max[0] = g;
    if (l > max[1]) max[1] = l;
  }
}

train_status_t elastic_exact_sum(coll_comm_t *comm, const elastic_exact_t *x) {
  size_t row = x->row, nrows = 0;
  while (x->rank + (int)nrows * x->world < x->shards) nrows++;
  float max[2];
  int bad = -1;
  local_max(x->rows, nrows, row, x->rank, x->world, max, &bad);
  coll_status_t cs = coll_all_reduce(max, max, 2, COLL_FLOAT32, COLL_MAX, comm);
  if (cs != COLL_OK)
    return train_comm_error(cs, "all-reduce (max) of the shards' largest |gradient|");
  if (!isfinite(max[0]) || !isfinite(max[1])) {
    char where[64];
    if (bad >= 0)
      snprintf(where, sizeof where, "shard %d's (computed on this rank)", bad);
    else
      snprintf(where, sizeof where, "a shard's (computed on another rank)");
    return train_error(TRAIN_ERR_NOT_FINITE,
                       "step %llu: %s gradient or loss is NaN or infinite; --bit-identical "
                       "sums in fixed point, which has no value for it, so the run stops (the "
                       "step computed again gives the same; a smaller --lr may help)",
                       (unsigned long long)x->step, where);
  }
  /* Every rank derives the same exponents from the same maxima; --shards is at most
   * EXACT_SUM_MAX_TERMS (trainer_elastic_validate). */
  int e_grad = exact_sum_exponent(max[0]);
  int e_loss = exact_sum_exponent(max[1]);
  /* This rank's shards summed, then padded to world blocks of `block` for the
   * reduce-scatter. */
  size_t world = (size_t)x->world, block = (row + world - 1) / world;
  size_t first = (size_t)x->rank * block;
  exact_sum_rows(x->rows, nrows, row, row - 1, e_grad, x->fixed);
  exact_sum_rows(x->rows + row - 1, nrows, row, 1, e_loss, x->fixed + row - 1);
  memset(x->fixed + row, 0, (world * block - row) * sizeof(int64_t));
  /* Rank r gets the sum of block r (in place), turns it into floats, and the all-gather
   * hands every rank every block. Per value, 8 bytes are reduce-scattered and 4
   * all-gathered, where an int64 all-reduce would reduce-scatter and all-gather 8 each
   * (and the default mode's float all-reduce moves 4 each): 1.5 times the default's
   * bytes, not 2; and each rank converts only its own block back. */
  cs = coll_reduce_scatter(x->fixed, x->fixed + first, block, COLL_INT64, COLL_SUM, comm);
  if (cs != COLL_OK)
    return train_comm_error(cs, "reduce-scatter of the shards' fixed-point gradients");
  size_t end = first + block < row ? first + block : row; /* of the block's real values */
  if (first < end) {
    size_t grads_end = end < row - 1 ? end : row - 1; /* element row - 1 is the loss */
    if (grads_end > first)
      exact_sum_to_float(x->fixed + first, grads_end - first, e_grad, x->sum + first);
    if (end == row) exact_sum_to_float(x->fixed + row - 1, 1, e_loss, x->sum + row - 1);
  }
  cs = coll_all_gather(x->sum + first, x->sum, block, COLL_FLOAT32, comm);
  if (cs != COLL_OK) return train_comm_error(cs, "all-gather of the summed gradients");
  return TRAIN_OK;
}
