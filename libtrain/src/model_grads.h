/* Internal to libtrain: what DDP (ddp.c) and the elastic trainer ask of the model's flat
 * gradient buffer (model.c): where each layer's gradients end, and moving the buffer into
 * memory registered with libcoll (coll_mem_alloc: zero-copy all-reduce) and back, or
 * into a row of the caller's. */
#ifndef TRAIN_MODEL_GRADS_H
#define TRAIN_MODEL_GRADS_H

#include "train.h"

/* The end of linear layer `index`'s gradients (dW then db) in the flat buffer, in floats
 * from its start: the value train_model_backward announces once that layer is done.
 * index in 0 .. train_model_linear_count() - 1. */
size_t train_model_grad_end(const train_model_t *model, int index);

/* Copy the current gradients into buf (n_params floats, host memory), point the layers
 * and train_model_grads() at it and return the buffer used until now; the caller owns
 * both and must swap the old one back before the model is destroyed. NULL, changing
 * nothing, when the model lives on a device or buf is NULL. */
float *train_model_swap_grads(train_model_t *model, float *buf);

/* The same without the copy: buf's contents are what the next backward without
 * accumulation overwrites (train --elastic --bit-identical has each shard's backward
 * write into that shard's row). */
float *train_model_use_grads(train_model_t *model, float *buf);

#endif
