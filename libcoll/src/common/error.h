/* Internal error reporting: set the thread-local detailed message that coll_last_error()
 * returns, and return the status in one expression. */
#ifndef COLL_COMMON_ERROR_H
#define COLL_COMMON_ERROR_H

#include "coll.h"

/* Format the detailed message, log it at WARN when COLL_DEBUG asks for it, return status.
 * Usage: return coll_error(COLL_ERR_TIMEOUT, "waiting for key '%s': timed out", key); */
coll_status_t coll_error(coll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Like coll_error() but appends ": <strerror(errnum)>". */
coll_status_t coll_error_errno(coll_status_t status, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix the current message with more context ("rank 3: " + old message). */
coll_status_t coll_error_prefix(coll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clear the thread's message (successful calls of the public API do this). */
void coll_error_clear(void);

#endif
