/* sim_time's topology: the default machine, the node map, and the price of one round.
 *
 * The model (docs/coll_sim_scale.md): the messages matched in one round of the schedule
 * simulator run at the same time. Each crosses exactly one link kind: a message between
 * two ranks of one node uses the sender's port out and the receiver's port in; a message
 * between nodes uses the sender node's uplink egress and the receiver node's uplink
 * ingress. A link L that carries load_L bytes in the round is busy for
 *     latency_L + load_L / bandwidth_L
 * (its flows share its bandwidth), and the round lasts as long as its busiest link plus
 * message_latency times the most messages any one rank sent in it. The predicted time is
 * the sum of the rounds. With no_sharing each link is busy only for its largest message
 * (every flow gets the whole link), the model that is k times too fast when k flows
 * leave a node at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "sim/sim_links.h"

void sim_topo_default(sim_topo_t *t) {
  memset(t, 0, sizeof *t);
  t->ranks_per_node = 8;
  t->intra_latency_s = 2e-6;
  t->intra_bw = 150e9;
  t->uplink_latency_s = 5e-6;
  t->uplink_bw = 25e9;
  t->message_latency_s = 1e-6;
}

void sim_link_name(sim_link_kind_t kind, int index, char *buf, size_t len) {
  static const char *const names[] = {
      [SIM_LINK_NONE] = "none",
      [SIM_LINK_UPLINK_EGRESS] = "uplink egress of node",
      [SIM_LINK_UPLINK_INGRESS] = "uplink ingress of node",
      [SIM_LINK_PORT_OUT] = "intra-node port out of rank",
      [SIM_LINK_PORT_IN] = "intra-node port in of rank",
  };
  if (kind == SIM_LINK_NONE)
    snprintf(buf, len, "none");
  else
    snprintf(buf, len, "%s %d", names[kind], index);
}

coll_status_t sim_links_init(sim_links_t *l, const sim_topo_t *topo, int n) {
  memset(l, 0, sizeof *l);
  if (topo == NULL || n < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_time: no topology or no ranks");
  if (!(topo->intra_bw > 0) || !(topo->uplink_bw > 0) || !(topo->intra_latency_s >= 0) ||
      !(topo->uplink_latency_s >= 0) || !(topo->message_latency_s >= 0) || topo->ranks_per_node < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "sim_time: bandwidths must be > 0, latencies and ranks per node >= 0");
  l->topo = *topo;
  l->n = n;
  l->node_of = malloc((size_t)n * sizeof *l->node_of);
  if (l->node_of == NULL) return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
  int per = topo->ranks_per_node <= 0 || topo->ranks_per_node > n ? n : topo->ranks_per_node;
  for (int r = 0; r < n; r++) {
    int m = topo->node_of != NULL ? topo->node_of[r] : r / per;
    if (m < 0 || m >= n) {
      free(l->node_of);
      l->node_of = NULL;
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_time: rank %d on node %d (0..%d)", r, m,
                        n - 1);
    }
    l->node_of[r] = m;
    if (m + 1 > l->nnodes) l->nnodes = m + 1;
  }
  l->topo.node_of = l->node_of;
  l->nlinks = 2 * (size_t)l->nnodes + 2 * (size_t)n;
  l->total = calloc(l->nlinks, sizeof *l->total);
  l->load = calloc(l->nlinks, sizeof *l->load);
  l->max_flow = calloc(l->nlinks, sizeof *l->max_flow);
  l->flows = calloc(l->nlinks, sizeof *l->flows);
  l->touched = malloc(l->nlinks * sizeof *l->touched);
  l->sent = calloc((size_t)n, sizeof *l->sent);
  l->senders = malloc((size_t)n * sizeof *l->senders);
  if (!l->total || !l->load || !l->max_flow || !l->flows || !l->touched || !l->sent ||
      !l->senders) {
    sim_links_free(l);
    return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
  }
  return COLL_OK;
}

static void touch(sim_links_t *l, size_t link, uint64_t bytes) {
  if (l->flows[link] == 0) l->touched[l->ntouched++] = link;
  l->flows[link]++;
  l->load[link] += bytes;
  if (bytes > l->max_flow[link]) l->max_flow[link] = bytes;
  l->total[link] += bytes;
}

void sim_links_add(sim_links_t *l, int src, int dst, uint64_t bytes) {
  size_t nn = (size_t)l->nnodes;
  int a = l->node_of[src], b = l->node_of[dst];
  l->messages++;
  l->bytes_total += bytes;
  if (a != b) {
    l->bytes_uplink += bytes;
    touch(l, (size_t)a, bytes);
    touch(l, nn + (size_t)b, bytes);
  } else {
    l->bytes_intra += bytes;
    touch(l, 2 * nn + (size_t)src, bytes);
    touch(l, 2 * nn + (size_t)l->n + (size_t)dst, bytes);
  }
  if (l->sent[src]++ == 0) l->senders[l->nsenders++] = src;
}

void sim_links_end_round(sim_links_t *l) {
  size_t nn = (size_t)l->nnodes;
  double slowest = 0;
  int slowest_is_uplink = 0;
  for (size_t i = 0; i < l->ntouched; i++) {
    size_t link = l->touched[i];
    int uplink = link < 2 * nn;
    double lat = uplink ? l->topo.uplink_latency_s : l->topo.intra_latency_s;
    double bw = uplink ? l->topo.uplink_bw : l->topo.intra_bw;
    uint64_t bytes = l->topo.no_sharing ? l->max_flow[link] : l->load[link];
    double t = lat + (double)bytes / bw;
    if (t > slowest) slowest = t, slowest_is_uplink = uplink;
    if (uplink && l->flows[link] > l->max_round_flows) l->max_round_flows = l->flows[link];
    l->load[link] = l->max_flow[link] = 0;
    l->flows[link] = 0;
  }
  uint32_t most_sent = 0;
  for (size_t i = 0; i < l->nsenders; i++) {
    int r = l->senders[i];
    if (l->sent[r] > most_sent) most_sent = l->sent[r];
    l->sent[r] = 0;
  }
  double round = slowest + l->topo.message_latency_s * most_sent;
  l->time_s += round;
  if (slowest_is_uplink) l->uplink_time_s += round;
  l->ntouched = 0;
  l->nsenders = 0;
}

coll_status_t sim_links_report(const sim_links_t *l, sim_time_result_t *res) {
  size_t nn = (size_t)l->nnodes;
  res->nranks = l->n;
  res->nnodes = l->nnodes;
  res->time_s = l->time_s;
  res->uplink_time_s = l->uplink_time_s;
  res->messages = l->messages;
  res->bytes_total = l->bytes_total;
  res->bytes_intra = l->bytes_intra;
  res->bytes_uplink = l->bytes_uplink;
  res->max_round_flows = l->max_round_flows;
  res->uplink_egress = malloc(nn * sizeof *res->uplink_egress);
  res->uplink_ingress = malloc(nn * sizeof *res->uplink_ingress);
  if (res->uplink_egress == NULL || res->uplink_ingress == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
  memcpy(res->uplink_egress, l->total, nn * sizeof *l->total);
  memcpy(res->uplink_ingress, l->total + nn, nn * sizeof *l->total);
  res->busiest_kind = SIM_LINK_NONE;
  res->busiest_index = -1;
  res->busiest_bytes = 0;
  for (size_t i = 0; i < l->nlinks; i++) {
    if (l->total[i] <= res->busiest_bytes) continue;
    res->busiest_bytes = l->total[i];
    if (i < nn)
      res->busiest_kind = SIM_LINK_UPLINK_EGRESS, res->busiest_index = (int)i;
    else if (i < 2 * nn)
      res->busiest_kind = SIM_LINK_UPLINK_INGRESS, res->busiest_index = (int)(i - nn);
    else if (i < 2 * nn + (size_t)l->n)
      res->busiest_kind = SIM_LINK_PORT_OUT, res->busiest_index = (int)(i - 2 * nn);
    else
      res->busiest_kind = SIM_LINK_PORT_IN, res->busiest_index = (int)(i - 2 * nn - l->n);
  }
  return COLL_OK;
}

void sim_links_free(sim_links_t *l) {
  free(l->node_of);
  free(l->total);
  free(l->load);
  free(l->max_flow);
  free(l->flows);
  free(l->touched);
  free(l->sent);
  free(l->senders);
  memset(l, 0, sizeof *l);
}
