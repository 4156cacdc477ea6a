/* Timing-only simulator for large jobs: runs every rank's schedule (algo_build, the same
 * schedules the executor runs) with sim.c's round semantics, but moves no data, records no
 * events, keeps identical schedules once and never allocates anything of size nranks^2
 * beyond what the schedules themselves hold, so 16,384 ranks fit in memory and a minute.
 * Each round's messages are priced on a topology of nodes: ranks' own intra-node ports
 * and each node's uplink, whose bandwidth the round's crossing flows share (sim_topo.c).
 *
 * Round semantics (identical to sim.c, checked by tests/algo/test_sim_scale.c): a rank
 * enters step 0 in round 0; a message is matched in the round in which both its sender
 * and its receiver are in the steps that hold it (the k-th send from a to b with the
 * k-th receive of b from a); a rank that finished its step in round t enters the next
 * one in round t + 1. */
#ifndef COLL_SIM_SIM_TIME_H
#define COLL_SIM_SIM_TIME_H

#include <stddef.h>
#include <stdint.h>

#include "algo/schedule.h"

/* The machine the ranks run on. Bandwidths in bytes per second, latencies in seconds. */
typedef struct {
  int ranks_per_node;       /* 0 or >= nranks: every rank on one node */
  const int *node_of;       /* [nranks] node of each rank (nodes 0..max); NULL: blocks of
                             * ranks_per_node consecutive ranks. algo_topo_t.node_of fits. */
  double intra_latency_s;   /* a message between two ranks of one node */
  double intra_bw;          /* each rank's port to its node's other ranks, per direction */
  double uplink_latency_s;  /* a message that leaves its node */
  double uplink_bw;         /* each node's uplink, per direction (egress, ingress) */
  double message_latency_s; /* per message a rank sends in a round (software, alpha) */
  int no_sharing;           /* 1: the naive model, every flow gets the whole uplink
                             * (for showing what sharing changes); 0: shared */
} sim_topo_t;

/* Defaults: 8-GPU nodes of a DGX-like cluster (NVLink port 150 GB/s per direction, one
 * 25 GB/s uplink per node, i.e. 200 Gb/s), documented in docs/coll_sim_scale.md. */
void sim_topo_default(sim_topo_t *t);

/* Where the busiest link is. */
typedef enum {
  SIM_LINK_NONE = 0,
  SIM_LINK_UPLINK_EGRESS,  /* index: node */
  SIM_LINK_UPLINK_INGRESS, /* index: node */
  SIM_LINK_PORT_OUT,       /* index: rank (intra-node sends) */
  SIM_LINK_PORT_IN,        /* index: rank (intra-node receives) */
} sim_link_kind_t;

typedef struct {
  int nranks;
  int nnodes;
  double time_s;                /* predicted time: the sum of the rounds' times */
  double uplink_time_s;         /* the part of it in rounds where an uplink was the slowest */
  size_t nrounds;               /* as sim_result_t.nrounds */
  size_t max_steps;             /* the longest schedule, in steps */
  uint64_t messages;            /* matched messages */
  uint64_t bytes_total;         /* bytes of all messages */
  uint64_t bytes_intra;         /* of them between ranks of one node */
  uint64_t bytes_uplink;        /* of them crossing nodes (each counted once) */
  uint64_t *uplink_egress;      /* [nnodes] bytes leaving each node */
  uint64_t *uplink_ingress;     /* [nnodes] bytes entering each node */
  sim_link_kind_t busiest_kind; /* the link with the most bytes (ties: the first) */
  int busiest_index;
  uint64_t busiest_bytes;
  size_t max_round_flows;    /* the most flows one uplink direction carried in one round */
  size_t distinct_schedules; /* schedules kept after merging identical ones */
} sim_time_result_t;

/* Build the schedule of `algo` for every rank of p (p->rank ignored; every other field,
 * including whatever topology map p carries for node-aware algorithms, is passed to
 * algo_build unchanged) and time it on topo. Fails like sim_run on a schedule that
 * deadlocks or whose messages do not pair; COLL_ERR_INVALID_ARGUMENT for a bad topo. */
coll_status_t sim_time_algo(coll_algo_t algo, const sched_params_t *p, const sim_topo_t *topo,
                            sim_time_result_t *res);
void sim_time_result_free(sim_time_result_t *res);

/* "uplink egress of node 3", "port out of rank 17" */
void sim_link_name(sim_link_kind_t kind, int index, char *buf, size_t len);

#endif
