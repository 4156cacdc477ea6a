/* Internal error reporting of libtrain: format the thread-local message that
 * train_last_error() returns and hand back the status in one expression. */
#ifndef TRAIN_ERROR_H
#define TRAIN_ERROR_H

#include "train.h"

/* Usage: return train_error(TRAIN_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); */
train_status_t train_error(train_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Turn a failed libcoll call into TRAIN_ERR_COMM, keeping libcoll's message. Defined in
 * ddp.c: the core library (layers, data, optimizers) does not link libcoll. */
train_status_t train_comm_error(coll_status_t status, const char *what);

#endif
