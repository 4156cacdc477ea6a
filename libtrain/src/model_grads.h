/* Internal to libtrain: DDP (ddp.c) moves the model's flat gradient buffer into memory
 * registered with libcoll (coll_mem_alloc: zero-copy all-reduce) and back (model.c). */
#ifndef TRAIN_MODEL_GRADS_H
#define TRAIN_MODEL_GRADS_H

#include "train.h"

/* Copy the current gradients into buf (n_params floats, host memory), point the layers
 * and train_model_grads() at it and return the buffer used until now; the caller owns
 * both and must swap the old one back before the model is destroyed. NULL, changing
 * nothing, when the model lives on a device or buf is NULL. */
float *train_model_swap_grads(train_model_t *model, float *buf);

#endif
