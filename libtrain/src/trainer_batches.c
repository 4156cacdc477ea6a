/* The trainer's input batches: host buffers, their copies in the backend's memory, and
 * the prefetched next micro-batch that a step swaps in instead of gathering it. */
#include "trainer_batches.h"

#include <stdlib.h>

#include "backend.h"
#include "error.h"

train_status_t trainer_batches_open(trainer_batches_t *b, train_backend_t *be, size_t max_rows,
                                    size_t inputs) {
  *b = (trainer_batches_t){0};
  b->x = malloc(max_rows * inputs * sizeof *b->x);
  b->labels = malloc(max_rows);
  b->next_x = malloc(max_rows * inputs * sizeof *b->x); /* swapped with x */
  b->next_labels = malloc(max_rows);
  if (b->x == NULL || b->labels == NULL || b->next_x == NULL || b->next_labels == NULL)
    return train_error(TRAIN_ERR_NO_MEMORY, "cannot allocate the input batch");
  b->dev_x = b->x;
  b->dev_labels = b->labels;
  if (backend_is_host(be)) return TRAIN_OK;
  void *p = NULL;
  train_status_t st = be->alloc(be, max_rows * inputs * sizeof *b->x, &p);
  b->dev_x = p;
  if (st == TRAIN_OK) st = be->alloc(be, max_rows, &p);
  if (st != TRAIN_OK) return st;
  b->dev_labels = p;
  return TRAIN_OK;
}

void trainer_batches_close(trainer_batches_t *b, train_backend_t *be) {
  if (b->dev_x != b->x && b->dev_x != NULL) be->release(be, b->dev_x);
  if (b->dev_labels != b->labels && b->dev_labels != NULL) be->release(be, b->dev_labels);
  free(b->x);
  free(b->labels);
  free(b->next_x);
  free(b->next_labels);
  *b = (trainer_batches_t){0};
}

train_status_t trainer_batches_load(trainer_batches_t *b, train_backend_t *be,
                                    const train_dataset_t *ds, const uint32_t *indices, size_t n) {
  if (b->next_ready && ds == b->next_set && indices == b->next_indices) {
    float *x = b->x;
    uint8_t *labels = b->labels;
    b->x = b->next_x;
    b->labels = b->next_labels;
    b->next_x = x;
    b->next_labels = labels;
    if (backend_is_host(be)) {
      b->dev_x = b->x;
      b->dev_labels = b->labels;
    }
  } else {
    train_dataset_gather(ds, indices, n, b->x, b->labels);
  }
  b->next_ready = false;
  size_t inputs = ds->rows * ds->cols;
  train_status_t st = backend_upload(be, b->dev_x, b->x, n * inputs * sizeof *b->x);
  if (st == TRAIN_OK) st = backend_upload(be, b->dev_labels, b->labels, n);
  return st;
}

void trainer_batches_prefetch(trainer_batches_t *b, const train_dataset_t *ds,
                              const uint32_t *indices, size_t n) {
  train_dataset_gather(ds, indices, n, b->next_x, b->next_labels);
  b->next_set = ds;
  b->next_indices = indices;
  b->next_ready = true;
}
