/* Reading a store value as text within the communicator's deadline (the rendezvous, the
 * arena and window set-up read small agreed values this way). */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"

coll_status_t base_store_get_text(const coll_base_t *base, const char *key, char *out, size_t cap) {
  void *value = NULL;
  size_t len = 0;
  coll_status_t st = store_get(base->store, key, &value, &len, base->timeout_ms);
  if (st != COLL_OK) return st;
  snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), (const char *)value);
  free(value);
  return COLL_OK;
}
