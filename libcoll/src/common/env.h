/* Reading COLL_* and launcher environment variables with validation: a malformed value
 * is an error naming the variable, never silently ignored. */
#ifndef COLL_COMMON_ENV_H
#define COLL_COMMON_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "coll.h"

/* *out = value of integer variable `name` within [min, max]; `fallback` when unset or
 * empty. COLL_ERR_INVALID_ARGUMENT with a message when it does not parse or is out of
 * range. */
coll_status_t coll_env_int(const char *name, int64_t min, int64_t max, int64_t fallback,
                           int64_t *out);
/* The variable's value, or NULL when unset or empty. */
const char *coll_env_str(const char *name);
/* Strict parse of a decimal integer (whole string); false when malformed. */
bool coll_parse_int(const char *text, int64_t *out);

#endif
