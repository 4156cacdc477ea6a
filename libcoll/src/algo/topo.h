/* The node map: which ranks share a node (a host), learned once at rendezvous from the
 * ranks' host ids and read by the node-aware algorithms and the cost model as a plain
 * parameter (sched_params_t.topo), so their schedules stay pure functions that coll-sim
 * and the tests can build for any made-up placement.
 *
 * Nodes are numbered by their lowest rank (node 0 holds rank 0, node 1 the lowest rank
 * not on node 0, ...); a node's ranks are listed in rank order, and a rank's local index
 * is its place in that list. Nothing here assumes ranks of a node are contiguous: a
 * launcher that places ranks round-robin (rank r on host r % H) gives the same map with
 * other ranks in it. */
#ifndef COLL_ALGO_TOPO_H
#define COLL_ALGO_TOPO_H

#include <stdbool.h>
#include <stddef.h>

#include "coll.h"

typedef struct algo_topo {
  int nranks;
  int nnodes;
  int max_local;   /* the most ranks on one node */
  int ring_out;    /* the most links of the rank-order ring (r -> r+1) leaving one node
                    * (the cost model's sharing of a node's link; 0 on one node) */
  int *node_of;    /* [nranks] node of each rank */
  int *local_of;   /* [nranks] each rank's index among its node's ranks */
  int *node_start; /* [nnodes + 1] node m's ranks are node_ranks[node_start[m] .. m+1) */
  int *node_ranks; /* [nranks] the ranks node by node, each node's in rank order */
} algo_topo_t;

/* The map from one id per rank (any ints; equal ids: one node). Frees nothing: call on a
 * zeroed or freed map. */
coll_status_t algo_topo_from_ids(algo_topo_t *t, int nranks, const int *ids);
/* The same from host id strings (rendezvous's). */
coll_status_t algo_topo_from_hosts(algo_topo_t *t, int nranks, const char *const *hosts);
/* A made-up placement of nranks over ceil(nranks / per_node) nodes: blocks of per_node
 * consecutive ranks, or round-robin (rank r on node r % nodes) as some launchers do. */
coll_status_t algo_topo_placed(algo_topo_t *t, int nranks, int per_node, bool round_robin);
void algo_topo_free(algo_topo_t *t);

/* Rank at local index l of node m. */
static inline int algo_topo_rank(const algo_topo_t *t, int m, int l) {
  return t->node_ranks[t->node_start[m] + l];
}
static inline int algo_topo_local_count(const algo_topo_t *t, int m) {
  return t->node_start[m + 1] - t->node_start[m];
}
/* Whether every node holds the same number of ranks (two_level needs it). A NULL map
 * (every rank on one node) is uniform. */
bool algo_topo_uniform(const algo_topo_t *t);
/* Nodes of the map, 1 for NULL (the ranks' placement is unknown: one node). */
static inline int algo_topo_nodes(const algo_topo_t *t) { return t != NULL ? t->nnodes : 1; }
/* Whether two ranks are on different nodes (never for a NULL map). */
static inline bool algo_topo_crosses(const algo_topo_t *t, int a, int b) {
  return t != NULL && t->node_of[a] != t->node_of[b];
}
/* "2 nodes x 2 ranks, node of each rank: 0 1 0 1" (cut to cap), for INFO lines. */
void algo_topo_describe(const algo_topo_t *t, char *out, size_t cap);

#endif
