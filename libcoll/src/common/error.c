/* Status names and strings (from the one list in coll.h) and the thread-local detailed
 * error message behind coll_last_error(). */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

enum { ERROR_MESSAGE_MAX = 1024 };
static _Thread_local char last_error[ERROR_MESSAGE_MAX];

const char *coll_status_name(coll_status_t status) {
  switch (status) {
#define NAME_CASE(name, value, text) \
  case name:                         \
    return #name;
    COLL_STATUS_MAP(NAME_CASE)
#undef NAME_CASE
  }
  return "COLL_UNKNOWN_STATUS";
}

const char *coll_status_string(coll_status_t status) {
  switch (status) {
#define TEXT_CASE(name, value, text) \
  case name:                         \
    return text;
    COLL_STATUS_MAP(TEXT_CASE)
#undef TEXT_CASE
  }
  return "unknown status";
}

const char *coll_last_error(void) { return last_error; }

void coll_error_clear(void) { last_error[0] = '\0'; }

static coll_status_t set_message(coll_status_t status, const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  coll_log(COLL_LOG_WARN, "%s (%s)", last_error, coll_status_name(status));
  return status;
}

coll_status_t coll_error(coll_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(status, fmt, ap);
  va_end(ap);
  return status;
}

coll_status_t coll_error_errno(coll_status_t status, int errnum, const char *fmt, ...) {
  char head[ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  return coll_error(status, "%s: %s", head, strerror(errnum));
}

coll_status_t coll_error_prefix(coll_status_t status, const char *fmt, ...) {
  char head[ERROR_MESSAGE_MAX];
  char old[ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  size_t head_len = strlen(head);
  if (head_len >= sizeof last_error) head_len = sizeof last_error - 1;
  memcpy(last_error, head, head_len);
  size_t old_len = strnlen(old, sizeof old - 1);
  if (old_len > sizeof last_error - 1 - head_len) old_len = sizeof last_error - 1 - head_len;
  memcpy(last_error + head_len, old, old_len);
  last_error[head_len + old_len] = '\0';
  return status;
}
