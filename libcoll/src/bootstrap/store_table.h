/* The store server's key-value table: a chained hash table of byte-string keys and values,
 * owned and used by the server thread only. */
#ifndef COLL_BOOTSTRAP_STORE_TABLE_H
#define COLL_BOOTSTRAP_STORE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store_entry {
  struct store_entry *next;
  uint64_t hash;
  uint8_t *value; /* malloc'ed; NULL when value_len == 0 */
  size_t value_len;
  size_t key_len;
  uint8_t key[]; /* not NUL-terminated */
} store_entry_t;

typedef struct {
  store_entry_t **buckets;
  size_t nbuckets; /* power of two */
  size_t count;
} store_table_t;

/* false when out of memory. */
bool store_table_init(store_table_t *table);
void store_table_free(store_table_t *table);
store_entry_t *store_table_find(const store_table_t *table, const uint8_t *key, size_t key_len);
/* Insert or replace; copies key and value. NULL when out of memory (table unchanged). */
store_entry_t *store_table_put(store_table_t *table, const uint8_t *key, size_t key_len,
                               const uint8_t *value, size_t value_len);
/* true when the key existed. */
bool store_table_delete(store_table_t *table, const uint8_t *key, size_t key_len);

#endif
