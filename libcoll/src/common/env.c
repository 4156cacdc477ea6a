/* Environment-variable parsing shared by every module. */
#include "common/env.h"

#include <errno.h>
#include <stdlib.h>

#include "common/error.h"

bool coll_parse_int(const char *text, int64_t *out) {
  if (text == NULL || *text == '\0') return false;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = (int64_t)v;
  return true;
}

const char *coll_env_str(const char *name) {
  const char *v = getenv(name);
  return (v == NULL || *v == '\0') ? NULL : v;
}

coll_status_t coll_env_int(const char *name, int64_t min, int64_t max, int64_t fallback,
                           int64_t *out) {
  const char *v = coll_env_str(name);
  if (v == NULL) {
    *out = fallback;
    return COLL_OK;
  }
  int64_t parsed;
  if (!coll_parse_int(v, &parsed))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "environment variable %s='%s' is not an integer",
                      name, v);
  if (parsed < min || parsed > max)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "environment variable %s=%lld is out of range [%lld, %lld]", name,
                      (long long)parsed, (long long)min, (long long)max);
  *out = parsed;
  return COLL_OK;
}
