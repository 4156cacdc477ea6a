/* Internal to the trainer: its input batches. Rows are gathered from a data set into a
 * host buffer and copied to the backend's memory; the next step's first micro-batch is
 * gathered ahead, while this step's gradients are being reduced. */
#ifndef TRAIN_TRAINER_BATCHES_H
#define TRAIN_TRAINER_BATCHES_H

#include "train.h"

typedef struct {
  float *x; /* one micro-batch of inputs, host memory */
  uint8_t *labels;
  /* The prefetched micro-batch (next_ready): rows next_indices of next_set. It is
   * swapped with x and labels when a load asks for exactly those rows. */
  float *next_x;
  uint8_t *next_labels;
  const train_dataset_t *next_set;
  const uint32_t *next_indices;
  bool next_ready;
  /* x and labels in the backend's memory (x and labels themselves on the CPU). */
  float *dev_x;
  uint8_t *dev_labels;
} trainer_batches_t;

/* Buffers for up to max_rows rows of `inputs` floats each, on the host and in the
 * backend's memory. On failure, trainer_batches_close releases what was allocated. */
train_status_t trainer_batches_open(trainer_batches_t *b, train_backend_t *be, size_t max_rows,
                                    size_t inputs);
void trainer_batches_close(trainer_batches_t *b, train_backend_t *be);
/* Rows `indices[0..n)` of ds into dev_x and dev_labels: from the prefetched batch when it
 * holds these rows, else gathered now. */
train_status_t trainer_batches_load(trainer_batches_t *b, train_backend_t *be,
                                    const train_dataset_t *ds, const uint32_t *indices, size_t n);
/* Gather rows `indices[0..n)` of ds ahead, for the load that asks for them. */
void trainer_batches_prefetch(trainer_batches_t *b, const train_dataset_t *ds,
                              const uint32_t *indices, size_t n);

#endif
