/* Evaluation of a training run: test accuracy and loss, each rank on its slice of the
 * test set in chunks of max_batch rows, the counts summed across ranks. */
#include <stdlib.h>

#include "error.h"
#include "trainer_run.h"

train_status_t trainer_evaluate(trainer_run_t *r, double *accuracy) {
  size_t n = r->test.count;
  size_t first = n * (size_t)r->rank / (size_t)r->world;
  size_t last = n * (size_t)(r->rank + 1) / (size_t)r->world;
  uint32_t *idx = malloc(r->max_batch * sizeof *idx);
  if (idx == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "evaluation indices");
  double loss = 0.0;
  size_t correct = 0;
  train_status_t st = TRAIN_OK;
  for (size_t i = first; i < last && st == TRAIN_OK; i += r->max_batch) {
    size_t nb = last - i < r->max_batch ? last - i : r->max_batch;
    for (size_t k = 0; k < nb; k++) idx[k] = (uint32_t)(i + k);
    st = trainer_batches_load(&r->batches, r->be, &r->test, idx, nb);
    if (st == TRAIN_OK) st = train_model_forward(r->model, r->batches.dev_x, nb);
    if (st == TRAIN_OK)
      st = train_model_loss(r->model, r->batches.dev_labels, nb, 0.0f, &loss, &correct);
  }
  free(idx);
  double counts[3] = {(double)correct, (double)(last - first), loss};
  if (st == TRAIN_OK) st = train_ddp_sum(r->ddp, counts, 3);
  if (st == TRAIN_OK) *accuracy = counts[0] / counts[1];
  return st;
}
