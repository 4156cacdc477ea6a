/* The caller's configuration structs, read the way NVIDIA's library reads them so that a
 * program built against any NCCL header from 2.14 to 2.32 works: ncclConfig_t (inits,
 * split, shrink, grow), ncclCollConfig_t (the nccl*Config collectives) and
 * ncclSetEncryption's ncclEncryptionConfig_t.
 *
 * A struct begins with size, magic and version. Only the bytes within the caller's
 * `size` are read (a 2.14 program's struct ends after netName, a 2.32 one's after
 * nvlsHostMode), and a field the caller's `version` predates is ignored even when
 * `size` covers it. */
#include <string.h>

#include "coll_config.h"
#include "nccl_internal.h"

/* The NCCL version that introduced each field this library looks at. */
#define FIRST_VERSION_BLOCKING NCCL_VERSION(2, 14, 0)
#define FIRST_VERSION_COLL_CONFIG NCCL_VERSION(2, 32, 0)

/* size, magic and version, the common head of every versioned struct. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
} versioned_head_t;

enum { HEAD_BYTES = sizeof(versioned_head_t) };

static ncclResult_t read_head(ncclComm_t comm, const void *config, const char *initializer,
                              versioned_head_t *head, const char *what) {
  memcpy(head, config, sizeof *head);
  if (head->magic != NCCL_API_MAGIC)
    return nccl_fail(comm, ncclInvalidArgument,
                     "%s: config->magic is 0x%x, not 0x%x: initialise the struct with %s", what,
                     head->magic, NCCL_API_MAGIC, initializer);
  if (head->size < HEAD_BYTES)
    return nccl_fail(comm, ncclInvalidArgument,
                     "%s: config->size is %zu, less than its own header (%zu bytes): "
                     "initialise the struct with %s",
                     what, head->size, (size_t)HEAD_BYTES, initializer);
  return ncclSuccess;
}

/* Copy the caller's struct into ours (of `ours` bytes, already filled with defaults):
 * the bytes both have. */
static void copy_known(void *dst, size_t ours, const void *src, size_t theirs) {
  memcpy(dst, src, theirs < ours ? theirs : ours);
}

/* A field is the caller's when it lies within its size and its version has it. */
static bool has_field(const versioned_head_t *head, size_t offset, size_t bytes, unsigned first) {
  return offset + bytes <= head->size && head->version >= first;
}

ncclResult_t nccl_read_config(ncclComm_t comm, const ncclConfig_t *config, nccl_config_t *out,
                              const char *what) {
  *out = (nccl_config_t){.blocking = 1};
  if (config == NULL) return ncclSuccess;
  versioned_head_t head;
  ncclResult_t r = read_head(comm, config, "NCCL_CONFIG_INITIALIZER", &head, what);
  if (r != ncclSuccess) return r;
  ncclConfig_t c;
  memset(&c, 0, sizeof c);
  c.blocking = NCCL_CONFIG_UNDEF_INT;
  copy_known(&c, sizeof c, config, head.size);
  if (has_field(&head, offsetof(ncclConfig_t, blocking), sizeof c.blocking,
                FIRST_VERSION_BLOCKING) &&
      c.blocking != NCCL_CONFIG_UNDEF_INT) {
    if (c.blocking != 0 && c.blocking != 1)
      return nccl_fail(comm, ncclInvalidArgument, "%s: config->blocking is %d, not 0 or 1", what,
                       c.blocking);
    out->blocking = c.blocking;
  }
  return ncclSuccess;
}

ncclResult_t nccl_read_coll_config(ncclComm_t comm, const ncclCollConfig_t *config, void **event,
                                   const char *what) {
  *event = NULL;
  if (config == NULL) return ncclSuccess;
  versioned_head_t head;
  ncclResult_t r = read_head(comm, config, "NCCL_COLLCONFIG_INITIALIZER", &head, what);
  if (r != ncclSuccess) return r;
  ncclCollConfig_t c;
  memset(&c, 0, sizeof c);
  copy_known(&c, sizeof c, config, head.size);
#define HAS(field) \
  has_field(&head, offsetof(ncclCollConfig_t, field), sizeof c.field, FIRST_VERSION_COLL_CONFIG)
  /* NCCL's algorithm names (ring, tree, nvls, ...) select its kernels; libcoll has its own
   * algorithms, so a forced selection cannot be honoured. An unforced one is a hint. */
  if (HAS(algSelection) && HAS(forceAlgSelection) && c.algSelection != NULL &&
      c.algSelection[0] != '\0' && c.forceAlgSelection != 0)
    return nccl_fail(comm, ncclInvalidUsage,
                     "%s: config->algSelection \"%s\" with forceAlgSelection: libcoll has none of "
                     "NCCL's algorithms to select (set forceAlgSelection to 0 to let it choose, "
                     "or COLL_ALGO for libcoll's own)",
                     what, c.algSelection);
  if (HAS(launchCompletionEvent) && c.launchCompletionEvent != NULL) {
#if COLL_HAVE_CUDA
    *event = (void *)c.launchCompletionEvent;
#else
    return nccl_fail(comm, ncclInvalidArgument,
                     "%s: config->launchCompletionEvent is set, but this library was built "
                     "without CUDA",
                     what);
#endif
  }
#undef HAS
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t *config)) {
  const char *what = "ncclSetEncryption";
  if (config == NULL) return nccl_fail(NULL, ncclInvalidArgument, "%s: config is NULL", what);
  versioned_head_t head;
  ncclResult_t r = read_head(NULL, config, "NCCL_ENCRYPTION_CONFIG_INITIALIZER", &head, what);
  if (r != ncclSuccess) return r;
  ncclEncryptionConfig_t c;
  memset(&c, 0, sizeof c);
  copy_known(&c, sizeof c, config, head.size);
  if (offsetof(ncclEncryptionConfig_t, mode) + sizeof c.mode > head.size ||
      c.mode == NCCL_ENCRYPTION_MODE_NONE)
    return ncclSuccess;
  if (c.mode == NCCL_ENCRYPTION_MODE_PSK)
    return nccl_fail(NULL, ncclInvalidUsage,
                     "%s: mode NCCL_ENCRYPTION_MODE_PSK: libcoll's TCP sockets are not encrypted "
                     "(use a network you trust, or NVIDIA's NCCL built with TLS)",
                     what);
  return nccl_fail(NULL, ncclInvalidArgument, "%s: config->mode is %d, not a known mode", what,
                   c.mode);
}
