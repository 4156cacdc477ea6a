/* Distributed sampler with PyTorch DistributedSampler semantics. The shuffle depends
 * only on seed + epoch, so every rank computes the same permutation and takes the
 * positions rank, rank + n, rank + 2n, ...: a global batch of n x b samples (positions
 * k*n*b .. (k+1)*n*b - 1) is exactly the set a single rank with batch n*b would use. */
#include <stdlib.h>
#include <string.h>

#include "error.h"

train_status_t train_sampler_init(train_sampler_t *s, size_t dataset_size, int rank, int nranks,
                                  uint64_t seed, bool shuffle, bool drop_last) {
  memset(s, 0, sizeof *s);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return train_error(TRAIN_ERR_INVALID, "sampler: rank %d of %d", rank, nranks);
  if (dataset_size == 0 || dataset_size > UINT32_MAX)
    return train_error(TRAIN_ERR_INVALID, "sampler: data set of %zu samples", dataset_size);
  size_t n = (size_t)nranks;
  /* As PyTorch: drop_last truncates to a multiple of n, otherwise pad up to one. */
  size_t per_rank = drop_last ? dataset_size / n : (dataset_size + n - 1) / n;
  if (per_rank == 0)
    return train_error(TRAIN_ERR_INVALID,
                       "sampler: %zu samples cannot give each of %d ranks one with drop-last",
                       dataset_size, nranks);
  *s = (train_sampler_t){.dataset_size = dataset_size,
                         .rank = rank,
                         .nranks = nranks,
                         .seed = seed,
                         .shuffle = shuffle,
                         .drop_last = drop_last,
                         .num_samples = per_rank};
  s->indices = malloc(per_rank * sizeof *s->indices);
  s->perm = malloc(dataset_size * sizeof *s->perm);
  if (s->indices == NULL || s->perm == NULL) {
    train_sampler_free(s);
    return train_error(TRAIN_ERR_NO_MEMORY, "sampler: cannot allocate %zu indices", dataset_size);
  }
  train_sampler_set_epoch(s, 0);
  return TRAIN_OK;
}

void train_sampler_set_epoch(train_sampler_t *s, uint64_t epoch) {
  size_t n = s->dataset_size;
  for (size_t i = 0; i < n; i++) s->perm[i] = (uint32_t)i;
  if (s->shuffle) {
    train_rng_t rng;
    train_rng_seed(&rng, s->seed + epoch);
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = (size_t)train_rng_below(&rng, i + 1);
      uint32_t t = s->perm[i];
      s->perm[i] = s->perm[j];
      s->perm[j] = t;
    }
  }
  /* Position p of the padded list is perm[p mod n]: padding wraps around to the start
   * (repeatedly if the data set is smaller than the padding). */
  size_t stride = (size_t)s->nranks;
  for (size_t k = 0; k < s->num_samples; k++)
    s->indices[k] = s->perm[(k * stride + (size_t)s->rank) % n];
}

void train_sampler_free(train_sampler_t *s) {
  free(s->indices);
  free(s->perm);
  s->indices = NULL;
  s->perm = NULL;
}
