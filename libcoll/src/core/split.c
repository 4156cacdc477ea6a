/* coll_comm_split: like MPI_Comm_split. Every rank publishes (color, key) under the
 * parent's key prefix, reads everyone's, and the ranks of one color create a child
 * communicator on the parent's store with the prefix "<parent>s<k>-c<color>/" (k counts
 * this parent's splits, equal on every rank by rule 4), so children of different colors
 * and of different splits never share a key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "core/comm.h"

enum { KEY_MAX = 160 };

typedef struct {
  int color, key, rank;
} member_t;

static int by_key_then_rank(const void *a, const void *b) {
  const member_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Everyone's (color, key) in m[0..n). */
static coll_status_t exchange(coll_comm_t *comm, uint64_t k, int color, int key, member_t *m) {
  char name[KEY_MAX], value[64];
  snprintf(name, sizeof name, "%ssplit/%llu/%d", comm->base.key_prefix, (unsigned long long)k,
           comm->base.rank);
  snprintf(value, sizeof value, "%d %d", color, key);
  coll_status_t st = store_set(comm->base.store, name, value, strlen(value), comm->base.timeout_ms);
  for (int r = 0; r < comm->base.nranks && st == COLL_OK; r++) {
    snprintf(name, sizeof name, "%ssplit/%llu/%d", comm->base.key_prefix, (unsigned long long)k, r);
    void *val = NULL;
    size_t len = 0;
    st = store_get(comm->base.store, name, &val, &len, comm->base.timeout_ms);
    if (st != COLL_OK) break;
    snprintf(value, sizeof value, "%.*s", (int)(len < sizeof value ? len : sizeof value - 1),
             (const char *)val);
    free(val);
    m[r].rank = r;
    if (sscanf(value, "%d %d", &m[r].color, &m[r].key) != 2)
      st = coll_error(COLL_ERR_PROTOCOL, "split: rank %d published a malformed record '%s'", r,
                      value);
  }
  return st;
}

coll_status_t coll_comm_split(coll_comm_t *comm, int color, int key, coll_comm_t **newcomm) {
  if (newcomm != NULL) *newcomm = NULL;
  coll_status_t st = comm_check(comm, "coll_comm_split");
  if (st == COLL_OK) st = base_check_usable(&comm->base, "coll_comm_split");
  if (st != COLL_OK) return st;
  if (newcomm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_split: newcomm is NULL",
                      comm->base.rank);
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_split: not allowed inside a group", comm->base.rank);
  uint64_t k = ++comm->splits;
  int n = comm->base.nranks;
  member_t *m = calloc((size_t)n, sizeof *m);
  if (m == NULL) return coll_error(COLL_ERR_NO_MEMORY, "coll_comm_split: out of memory");
  if (n > 1) {
    st = exchange(comm, k, color < 0 ? -1 : color, key, m);
  } else {
    m[0] = (member_t){.color = color, .key = key, .rank = 0};
  }
  if (st != COLL_OK) {
    free(m);
    return coll_error_prefix(st, "rank %d: coll_comm_split: ", comm->base.rank);
  }
  if (color < 0) {
    free(m);
    coll_error_clear();
    return COLL_OK;
  }
  int size = 0, me = -1;
  for (int r = 0; r < n; r++)
    if (m[r].color == color) m[size++] = m[r];
  qsort(m, (size_t)size, sizeof *m, by_key_then_rank);
  for (int i = 0; i < size; i++)
    if (m[i].rank == comm->base.rank) me = i;
  free(m);
  char prefix[BASE_KEY_PREFIX_MAX];
  int len = snprintf(prefix, sizeof prefix, "%ss%llu-c%d/", comm->base.key_prefix,
                     (unsigned long long)k, color);
  if (len < 0 || (size_t)len >= sizeof prefix)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_split: splits nested too deep (key prefix over %d "
                      "bytes)",
                      comm->base.rank, BASE_KEY_PREFIX_MAX - 1);
  coll_config_t cfg = {
      .rank = me, .size = size, .local_rank = -1, .host_store = 0, .timeout_ms = comm->base.timeout_ms};
  comm_config_on(&comm->base.store_place, &cfg);
  st = comm_create(&cfg, prefix, newcomm);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_comm_split (color %d): ", color);
  return COLL_OK;
}
