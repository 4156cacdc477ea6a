/* Chained hash table behind the store server (FNV-1a hashes, doubling at load 1). */
#include "bootstrap/store_table.h"

#include <stdlib.h>
#include <string.h>

enum { INITIAL_BUCKETS = 64 };

static uint64_t hash_key(const uint8_t *key, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) {
    h ^= key[i];
    h *= 1099511628211ull;
  }
  return h;
}

bool store_table_init(store_table_t *table) {
  table->buckets = calloc(INITIAL_BUCKETS, sizeof *table->buckets);
  table->nbuckets = INITIAL_BUCKETS;
  table->count = 0;
  return table->buckets != NULL;
}

void store_table_free(store_table_t *table) {
  if (table->buckets == NULL) return;
  for (size_t b = 0; b < table->nbuckets; b++) {
    store_entry_t *e = table->buckets[b];
    while (e != NULL) {
      store_entry_t *next = e->next;
      free(e->value);
      free(e);
      e = next;
    }
  }
  free(table->buckets);
  table->buckets = NULL;
  table->nbuckets = 0;
  table->count = 0;
}

static store_entry_t **slot_of(const store_table_t *table, uint64_t hash, const uint8_t *key,
                               size_t key_len) {
  store_entry_t **slot = &table->buckets[hash & (table->nbuckets - 1)];
  while (*slot != NULL) {
    store_entry_t *e = *slot;
    if (e->hash == hash && e->key_len == key_len && memcmp(e->key, key, key_len) == 0) break;
    slot = &e->next;
  }
  return slot;
}

store_entry_t *store_table_find(const store_table_t *table, const uint8_t *key, size_t key_len) {
  return *slot_of(table, hash_key(key, key_len), key, key_len);
}

/* Growing is best effort: a failed allocation leaves longer chains, not an error. */
static void grow(store_table_t *table) {
  size_t n = table->nbuckets * 2;
  store_entry_t **buckets = calloc(n, sizeof *buckets);
  if (buckets == NULL) return;
  for (size_t b = 0; b < table->nbuckets; b++) {
    store_entry_t *e = table->buckets[b];
    while (e != NULL) {
      store_entry_t *next = e->next;
      e->next = buckets[e->hash & (n - 1)];
      buckets[e->hash & (n - 1)] = e;
      e = next;
    }
  }
  free(table->buckets);
  table->buckets = buckets;
  table->nbuckets = n;
}

store_entry_t *store_table_put(store_table_t *table, const uint8_t *key, size_t key_len,
                               const uint8_t *value, size_t value_len) {
  uint8_t *copy = NULL;
  if (value_len > 0) {
    copy = malloc(value_len);
    if (copy == NULL) return NULL;
    memcpy(copy, value, value_len);
  }
  uint64_t hash = hash_key(key, key_len);
  store_entry_t **slot = slot_of(table, hash, key, key_len);
  store_entry_t *e = *slot;
  if (e == NULL) {
    e = malloc(sizeof *e + key_len);
    if (e == NULL) {
      free(copy);
      return NULL;
    }
    e->next = NULL;
    e->hash = hash;
    e->key_len = key_len;
    memcpy(e->key, key, key_len);
    e->value = NULL;
    *slot = e;
    table->count++;
    if (table->count > table->nbuckets) grow(table);
  }
  free(e->value);
  e->value = copy;
  e->value_len = value_len;
  return e;
}

bool store_table_delete(store_table_t *table, const uint8_t *key, size_t key_len) {
  store_entry_t **slot = slot_of(table, hash_key(key, key_len), key, key_len);
  store_entry_t *e = *slot;
  if (e == NULL) return false;
  *slot = e->next;
  free(e->value);
  free(e);
  table->count--;
  return true;
}
