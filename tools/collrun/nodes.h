/* Several nodes: the collruns of one job watch each other through the job's store, so
 * that a failure on one node stops the ranks of every node, and node 0 keeps the store up
 * until the other nodes' ranks have ended. */
#ifndef TOOLS_COLLRUN_NODES_H
#define TOOLS_COLLRUN_NODES_H

#include <stdbool.h>
#include <stddef.h>

enum {
  NODES_CONNECT_MS = 60000, /* how long node K > 0 waits for node 0's store */
  NODES_WATCH_MS = 1000,    /* how often a running job looks for another node's failure */
  NODES_LINGER_MS = 60000,  /* how long node 0 keeps the store up for the other nodes */
  NODES_SLACK_MS = 3000,    /* for a stopped node to report done, on top of its grace period */
};

typedef struct nodes nodes_t;

/* Connect this node's collrun to the store (node 0: its own). Waits up to NODES_CONNECT_MS
 * for the store to appear, returning early (NULL, after saying so) on SIGINT or SIGTERM.
 * NULL after printing why. */
nodes_t *nodes_connect(const char *host, int port, const char *token, int node_rank, int nnodes);
void nodes_close(nodes_t *nodes);

/* One short look at the store: did another node report a failure? Then true, with its exit
 * code and message. After a store error it says so once and stops looking (false). */
bool nodes_check_failure(nodes_t *nodes, int *exit_code, char *message, size_t cap);
/* Tell the other nodes that this one failed; the first report of the job is kept. */
void nodes_report_failure(nodes_t *nodes, int exit_code, const char *message);
/* This node's ranks have all ended (nodes K > 0; node 0 waits for these). */
void nodes_report_done(nodes_t *nodes);
/* Node 0: wait until every other node reported done, at most timeout_ms, returning early
 * on SIGINT or SIGTERM. */
void nodes_wait_for_others(nodes_t *nodes, int timeout_ms);

#endif
