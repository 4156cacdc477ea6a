/* NCCL's parameter API (2.30) over this library's own parameters: the COLL_* environment
 * variables libcoll reads (docs/usage.md, "Environment variables"). A key is the
 * variable's name, as NCCL's keys are its NCCL_* variables' names; the value is read live:
 * the variable's value when it is set, its default otherwise. NCCL_* keys are not parameters here
 * (libcoll reads none of them), so binding one is ncclInvalidArgument naming the list.
 * A handle points into the table below and stays valid for the process's life. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

struct ncclParamHandle {
  const char *key;
  const char *fallback; /* the value when the variable is unset ("" where it depends) */
};

static struct ncclParamHandle params[] = {
    {"COLL_DEBUG", ""},
    {"COLL_TIMEOUT_MS", "300000"},
    {"COLL_ALGO", "auto"},
    {"COLL_ARENA", "1"},
    {"COLL_ARENA_SLOT_BYTES", "1048576"},
    {"COLL_SMALL_BYTES", ""},
    {"COLL_WINDOW", "1"},
    {"COLL_TRANSPORT", "auto"},
    {"COLL_CHUNK_SIZE", ""},
    {"COLL_HOST_ID", ""},
    {"COLL_STORE_HOSTED", "0"},
    {"COLL_SPREAD", "1"},
    {"COLL_SPIN_US", "10000"},
    {"COLL_PURE_SPIN_US", "10000"},
    {"COLL_ASYNC_GRACE_US", "1000"},
    {"COLL_NSOCKS", "4"},
    {"COLL_SOCKET_IFNAME", ""},
    {"COLL_TCP_PIECE_BYTES", "524288"},
    {"COLL_TCP_STAGING_BYTES", "262144"},
    {"COLL_TCP_BUF_BYTES", ""},
    {"COLL_SHM_SLOT_BYTES", "262144"},
    {"COLL_SHM_NSLOTS", "16"},
    {"COLL_SHM_INBOX_BYTES", "67108864"},
    {"COLL_SHM_SPIN_US", "0"},
    {"COLL_IB_DEVICE", ""},
    {"COLL_IB_GID_INDEX", ""},
    {"COLL_CUDA", "1"},
    {"COLL_CUDA_STREAM_MODE", "hostfn"},
    {"COLL_CUDA_IPC_SLOT_BYTES", "4194304"},
    {"COLL_CUDA_IPC_NSLOTS", "8"},
    {"COLL_TRACE", ""},
};
enum { NPARAMS = sizeof params / sizeof params[0] };

static const char *value_of(const struct ncclParamHandle *h) {
  const char *v = getenv(h->key);
  return v != NULL ? v : h->fallback;
}

static struct ncclParamHandle *find(const char *key) {
  for (int i = 0; i < NPARAMS; i++)
    if (strcmp(params[i].key, key) == 0) return &params[i];
  return NULL;
}

static ncclResult_t unknown_key(const char *what, const char *key) {
  return nccl_fail(NULL, ncclInvalidArgument,
                   "%s: \"%s\" is not a parameter of this library (libcoll's are its COLL_* "
                   "environment variables: ncclParamGetAllParameterKeys lists them)",
                   what, key);
}

static bool known_handle(ncclParamHandle_t h) {
  return h != NULL && h >= params && h < params + NPARAMS;
}

NCCL_EXPORT(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char *key)) {
  const char *what = "ncclParamBind";
  if (out == NULL || key == NULL)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: %s is NULL", what, out ? "key" : "out");
  struct ncclParamHandle *h = find(key);
  if (h == NULL) return unknown_key(what, key);
  *out = h;
  return ncclSuccess;
}

/* The value as an integer within [min, max]. */
static ncclResult_t read_int(ncclParamHandle_t h, bool is_signed, int64_t min, uint64_t max,
                             int64_t *s, uint64_t *u, const char *what) {
  if (!known_handle(h))
    return nccl_fail(NULL, ncclInvalidArgument, "%s: the handle is not one ncclParamBind made",
                     what);
  if (s == NULL && u == NULL) return nccl_fail(NULL, ncclInvalidArgument, "%s: out is NULL", what);
  const char *v = value_of(h);
  if (v[0] == '\0')
    return nccl_fail(NULL, ncclInvalidUsage,
                     "%s: %s is unset and its default depends on the communicator (see "
                     "docs/usage.md, \"Environment variables\"); read it with ncclParamGetStr",
                     what, h->key);
  char *end = NULL;
  errno = 0;
  bool ok;
  if (is_signed) {
    long long x = strtoll(v, &end, 10);
    ok = errno == 0 && *end == '\0' && x >= min && (max > (uint64_t)INT64_MAX || x <= (int64_t)max);
    if (ok) *s = x;
  } else {
    ok = v[0] != '-';
    unsigned long long x = ok ? strtoull(v, &end, 10) : 0;
    ok = ok && errno == 0 && *end == '\0' && x <= max;
    if (ok) *u = x;
  }
  if (!ok)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: %s is \"%s\", not a number that fits", what,
                     h->key, v);
  return ncclSuccess;
}

#define PARAM_GET_SIGNED(name, type, min, max)                                  \
  NCCL_EXPORT(ncclResult_t, name, (ncclParamHandle_t h, type * out)) {          \
    int64_t v = 0;                                                              \
    ncclResult_t r = read_int(h, true, min, max, out ? &v : NULL, NULL, #name); \
    if (r == ncclSuccess) *out = (type)v;                                       \
    return r;                                                                   \
  }
#define PARAM_GET_UNSIGNED(name, type, max)                                    \
  NCCL_EXPORT(ncclResult_t, name, (ncclParamHandle_t h, type * out)) {         \
    uint64_t v = 0;                                                            \
    ncclResult_t r = read_int(h, false, 0, max, NULL, out ? &v : NULL, #name); \
    if (r == ncclSuccess) *out = (type)v;                                      \
    return r;                                                                  \
  }
PARAM_GET_SIGNED(ncclParamGetI8, int8_t, INT8_MIN, INT8_MAX)
PARAM_GET_SIGNED(ncclParamGetI16, int16_t, INT16_MIN, INT16_MAX)
PARAM_GET_SIGNED(ncclParamGetI32, int32_t, INT32_MIN, INT32_MAX)
PARAM_GET_SIGNED(ncclParamGetI64, int64_t, INT64_MIN, INT64_MAX)
PARAM_GET_UNSIGNED(ncclParamGetU8, uint8_t, UINT8_MAX)
PARAM_GET_UNSIGNED(ncclParamGetU16, uint16_t, UINT16_MAX)
PARAM_GET_UNSIGNED(ncclParamGetU32, uint32_t, UINT32_MAX)
PARAM_GET_UNSIGNED(ncclParamGetU64, uint64_t, UINT64_MAX)

/* Strings handed out stay valid until the thread's next call of the same function, as
 * NCCL promises (the environment may change under a pointer into it). */
static _Thread_local char str_value[4096], key_value[4096];

static const char *copy_value(char *dst, size_t cap, const char *v) {
  snprintf(dst, cap, "%s", v);
  return dst;
}

NCCL_EXPORT(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char **out)) {
  if (!known_handle(h) || out == NULL)
    return nccl_fail(NULL, ncclInvalidArgument, "ncclParamGetStr: %s",
                     out == NULL ? "out is NULL" : "the handle is not one ncclParamBind made");
  *out = copy_value(str_value, sizeof str_value, value_of(h));
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void *out, int maxLen, int *len)) {
  const char *what = "ncclParamGet";
  if (!known_handle(h) || out == NULL || len == NULL || maxLen < 0)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: %s", what,
                     !known_handle(h) ? "the handle is not one ncclParamBind made"
                                      : "out or len is NULL, or maxLen negative");
  /* The value's bytes: the variable's text (every parameter here is one). */
  const char *v = value_of(h);
  size_t n = strlen(v);
  if (n > (size_t)maxLen)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: %s's value is %zu bytes, maxLen %d", what,
                     h->key, n, maxLen);
  memcpy(out, v, n);
  *len = (int)n;
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclParamGetParameter,
            (const char *key, const char **value, int *valueLen)) {
  const char *what = "ncclParamGetParameter";
  if (key == NULL || value == NULL || valueLen == NULL)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: key, value and valueLen must be set", what);
  const struct ncclParamHandle *h = find(key);
  if (h == NULL) return unknown_key(what, key);
  *value = copy_value(key_value, sizeof key_value, value_of(h));
  *valueLen = (int)strlen(*value);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclParamGetAllParameterKeys, (const char ***table, int *tableLen)) {
  static _Thread_local const char *keys[NPARAMS];
  if (table == NULL || tableLen == NULL)
    return nccl_fail(NULL, ncclInvalidArgument,
                     "ncclParamGetAllParameterKeys: table and tableLen must be set");
  for (int i = 0; i < NPARAMS; i++) keys[i] = params[i].key;
  *table = keys;
  *tableLen = NPARAMS;
  return ncclSuccess;
}

NCCL_EXPORT(void, ncclParamDumpAll, (void)) {
  for (int i = 0; i < NPARAMS; i++)
    fprintf(stderr, "libnccl (libcoll): %s=%s%s\n", params[i].key, value_of(&params[i]),
            getenv(params[i].key) != NULL ? "" : " (default)");
}
