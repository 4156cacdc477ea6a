/* The node map (topo.h): built from the ranks' host ids at rendezvous, or from a made-up
 * placement for coll-sim and the tests. Sorting the ids keeps it O(n log n), so a
 * 16k-rank map is built in milliseconds. */
#include "algo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

typedef struct {
  const char *host;
  int id;
  int rank;
} keyed_t;

static int by_host(const void *a, const void *b) {
  const keyed_t *x = a, *y = b;
  int c = strcmp(x->host, y->host);
  return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static int by_id(const void *a, const void *b) {
  const keyed_t *x = a, *y = b;
  if (x->id != y->id) return (x->id > y->id) - (x->id < y->id);
  return (x->rank > y->rank) - (x->rank < y->rank);
}

void algo_topo_free(algo_topo_t *t) {
  if (t == NULL) return;
  free(t->node_of);
  free(t->local_of);
  free(t->node_start);
  free(t->node_ranks);
  memset(t, 0, sizeof *t);
}

/* first[r]: the lowest rank on r's node. Nodes are numbered in order of their lowest
 * rank, ranks of a node listed in rank order. */
static coll_status_t build(algo_topo_t *t, int n, const int *first) {
  memset(t, 0, sizeof *t);
  t->nranks = n;
  t->node_of = malloc((size_t)n * sizeof *t->node_of);
  t->local_of = malloc((size_t)n * sizeof *t->local_of);
  t->node_start = calloc((size_t)n + 1, sizeof *t->node_start);
  t->node_ranks = malloc((size_t)n * sizeof *t->node_ranks);
  if (t->node_of == NULL || t->local_of == NULL || t->node_start == NULL || t->node_ranks == NULL) {
    algo_topo_free(t);
    return coll_error(COLL_ERR_NO_MEMORY, "node map of %d ranks: out of memory", n);
  }
  for (int r = 0; r < n; r++) {
    t->node_of[r] = first[r] == r ? t->nnodes++ : t->node_of[first[r]];
    t->node_start[t->node_of[r] + 1]++;
  }
  for (int m = 0; m < t->nnodes; m++) {
    int count = t->node_start[m + 1];
    if (count > t->max_local) t->max_local = count;
    t->node_start[m + 1] = t->node_start[m] + count;
  }
  int *fill = calloc((size_t)t->nnodes, sizeof *fill);
  if (fill == NULL) {
    algo_topo_free(t);
    return coll_error(COLL_ERR_NO_MEMORY, "node map of %d ranks: out of memory", n);
  }
  for (int r = 0; r < n; r++) {
    int m = t->node_of[r];
    t->local_of[r] = fill[m]++;
    t->node_ranks[t->node_start[m] + t->local_of[r]] = r;
  }
  /* the rank-order ring's links out of each node, counted again in fill */
  memset(fill, 0, (size_t)t->nnodes * sizeof *fill);
  for (int r = 0; r < n; r++)
    if (t->node_of[r] != t->node_of[(r + 1) % n] && ++fill[t->node_of[r]] > t->ring_out)
      t->ring_out = fill[t->node_of[r]];
  free(fill);
  return COLL_OK;
}

static coll_status_t from_keyed(algo_topo_t *t, int n, keyed_t *k,
                                int (*cmp)(const void *, const void *)) {
  int *first = malloc((size_t)n * sizeof *first);
  if (first == NULL) return coll_error(COLL_ERR_NO_MEMORY, "node map: out of memory");
  qsort(k, (size_t)n, sizeof *k, cmp);
  int lead = 0;
  for (int i = 0; i < n; i++) {
    /* sorted by (key, rank): a group's first entry is its lowest rank */
    if (k[i].id != k[lead].id || strcmp(k[i].host, k[lead].host) != 0) lead = i;
    first[k[i].rank] = k[lead].rank;
  }
  coll_status_t st = build(t, n, first);
  free(first);
  return st;
}

coll_status_t algo_topo_from_ids(algo_topo_t *t, int nranks, const int *ids) {
  if (t == NULL || nranks < 1 || ids == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "node map: no ranks");
  keyed_t *k = malloc((size_t)nranks * sizeof *k);
  if (k == NULL) return coll_error(COLL_ERR_NO_MEMORY, "node map: out of memory");
  for (int r = 0; r < nranks; r++) k[r] = (keyed_t){.host = "", .id = ids[r], .rank = r};
  coll_status_t st = from_keyed(t, nranks, k, by_id);
  free(k);
  return st;
}

coll_status_t algo_topo_from_hosts(algo_topo_t *t, int nranks, const char *const *hosts) {
  if (t == NULL || nranks < 1 || hosts == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "node map: no ranks");
  keyed_t *k = malloc((size_t)nranks * sizeof *k);
  if (k == NULL) return coll_error(COLL_ERR_NO_MEMORY, "node map: out of memory");
  for (int r = 0; r < nranks; r++)
    k[r] = (keyed_t){.host = hosts[r] != NULL ? hosts[r] : "", .id = 0, .rank = r};
  coll_status_t st = from_keyed(t, nranks, k, by_host);
  free(k);
  return st;
}

coll_status_t algo_topo_placed(algo_topo_t *t, int nranks, int per_node, bool round_robin) {
  if (t == NULL || nranks < 1 || per_node < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "node map: %d ranks, %d per node", nranks,
                      per_node);
  int nodes = (nranks + per_node - 1) / per_node;
  int *ids = malloc((size_t)nranks * sizeof *ids);
  if (ids == NULL) return coll_error(COLL_ERR_NO_MEMORY, "node map: out of memory");
  for (int r = 0; r < nranks; r++) ids[r] = round_robin ? r % nodes : r / per_node;
  coll_status_t st = algo_topo_from_ids(t, nranks, ids);
  free(ids);
  return st;
}

bool algo_topo_uniform(const algo_topo_t *t) {
  return t == NULL || t->nnodes < 1 || t->max_local * t->nnodes == t->nranks;
}

void algo_topo_describe(const algo_topo_t *t, char *out, size_t cap) {
  if (cap == 0) return;
  out[0] = '\0';
  if (t == NULL || t->nnodes < 1) {
    snprintf(out, cap, "node map unknown");
    return;
  }
  size_t len;
  if (algo_topo_uniform(t))
    len = (size_t)snprintf(out, cap, "%d node%s x %d rank%s", t->nnodes, t->nnodes == 1 ? "" : "s",
                           t->max_local, t->max_local == 1 ? "" : "s");
  else
    len =
        (size_t)snprintf(out, cap, "%d nodes of up to %d ranks (unequal)", t->nnodes, t->max_local);
  if (len < cap) len += (size_t)snprintf(out + len, cap - len, ", node of each rank:");
  for (int r = 0; r < t->nranks && len < cap; r++) {
    if (r == 32 && t->nranks > 33) {
      snprintf(out + len, cap - len, " ... (%d more)", t->nranks - r);
      break;
    }
    len += (size_t)snprintf(out + len, cap - len, " %d", t->node_of[r]);
  }
}
