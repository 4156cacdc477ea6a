/* The links of sim_time's topology and the price of one round on them (sim_topo.c),
 * internal to the simulator. Links: each node's uplink in two directions (egress,
 * ingress) and each rank's intra-node port in two directions (out, in). */
#ifndef COLL_SIM_SIM_LINKS_H
#define COLL_SIM_SIM_LINKS_H

#include <stddef.h>
#include <stdint.h>

#include "sim/sim_time.h"

typedef struct {
  sim_topo_t topo;
  int n, nnodes;
  int *node_of;       /* [n] (owned copy) */
  size_t nlinks;      /* 2 nnodes + 2 n */
  uint64_t *total;    /* [nlinks] bytes over the whole run */
  uint64_t *load;     /* [nlinks] bytes in the current round */
  uint64_t *max_flow; /* [nlinks] the largest message in the current round */
  uint32_t *flows;    /* [nlinks] messages in the current round */
  uint32_t *sent;     /* [n] messages each rank sent in the current round */
  size_t *touched;    /* links with load in the current round */
  size_t ntouched;
  int *senders; /* ranks with sent > 0 in the current round */
  size_t nsenders;
  double time_s, uplink_time_s;
  size_t max_round_flows;
  uint64_t bytes_total, bytes_intra, bytes_uplink, messages;
} sim_links_t;

coll_status_t sim_links_init(sim_links_t *l, const sim_topo_t *topo, int nranks);
/* A message of `bytes` from src to dst matched in the current round. */
void sim_links_add(sim_links_t *l, int src, int dst, uint64_t bytes);
/* Close the current round: add its time (the slowest link plus message latency). */
void sim_links_end_round(sim_links_t *l);
/* Totals, per-node uplink bytes and the busiest link into res (allocates its arrays). */
coll_status_t sim_links_report(const sim_links_t *l, sim_time_result_t *res);
void sim_links_free(sim_links_t *l);

#endif
