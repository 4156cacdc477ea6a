/* A store the caller provides (coll.h, coll_store_ops_t), as a program with its own store
 * hands it in: a real TCP store server reached through the table, which has no owned keys
 * and no interrupt, like PyTorch's c10d stores, so libcoll must keep its liveness with
 * leases (base/liveness.c). */
#ifndef TESTS_COLL_CALLER_STORE_H
#define TESTS_COLL_CALLER_STORE_H

#include <stdint.h>

#include "coll.h"

/* The table. */
extern const coll_store_ops_t caller_store_ops;
/* A handle on the store at 127.0.0.1:port (NULL with a message on stderr on failure);
 * caller_store_free releases it. */
void *caller_store_open(uint16_t port, int timeout_ms);
void caller_store_free(void *store);
/* How many calls every handle of this process made, by kind (for checks on the load). */
typedef struct {
  int64_t set, get, add, compare_set, check, delete_key, clone;
} caller_store_counts_t;
caller_store_counts_t caller_store_counts(void);

#endif
