/* Status strings and the thread-local detailed message of libtrain. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

const char *train_status_string(train_status_t status) {
  switch (status) {
    case TRAIN_OK:
      return "success";
    case TRAIN_ERR_INVALID:
      return "invalid argument";
    case TRAIN_ERR_IO:
      return "input/output error";
    case TRAIN_ERR_FORMAT:
      return "corrupt or mismatched data";
    case TRAIN_ERR_NO_MEMORY:
      return "out of memory";
    case TRAIN_ERR_COMM:
      return "communication failed";
    case TRAIN_ERR_UNSUPPORTED:
      return "not supported";
    case TRAIN_ERR_DIVERGED:
      return "ranks diverged";
    case TRAIN_ERR_FENCED:
      return "declared failed by the other ranks";
    case TRAIN_ERR_NOT_FINITE:
      return "a gradient or loss is not finite";
  }
  return "unknown status";
}

const char *train_last_error(void) { return last_error; }

train_status_t train_error(train_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}
