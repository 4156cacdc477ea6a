/* Several nodes: coordination of the collruns of one job through its store. Keys, all
 * under "collrun/" so that they cannot clash with the ranks' own:
 *   collrun/failed     "<exit code> <message>", set by the first collrun whose job failed
 *                      (compare-and-set on an absent key: later reports do not replace it)
 *   collrun/done/<K>   set by node K's collrun when all its ranks have ended
 * Each collrun reads collrun/failed about once a second while its ranks run (one store
 * round trip, from its event loop); node 0 waits for every collrun/done/<K> before it
 * stops the store, so no rank loses the store while it still uses it. */
#include "nodes.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "common/clock.h"

#define FAILED_KEY "collrun/failed"

enum {
  STEP_MS = 500,  /* slices of the long waits, between looks for SIGINT/SIGTERM */
  CALL_MS = 2000, /* one store call from the event loop */
};

struct nodes {
  store_client_t *client;
  int node_rank;
  int nnodes;
  bool broken; /* the store stopped answering: stop using it */
  int sigfd;   /* SIGINT and SIGTERM (blocked by job_block_signals) for the long waits */
};

static bool stop_signal_pending(const nodes_t *nodes) {
  struct signalfd_siginfo info;
  if (nodes->sigfd < 0 || read(nodes->sigfd, &info, sizeof info) != (ssize_t)sizeof info)
    return false;
  fprintf(stderr, "collrun: got SIG%s while waiting for the store; giving up\n",
          sigabbrev_np((int)info.ssi_signo) != NULL ? sigabbrev_np((int)info.ssi_signo) : "?");
  return true;
}

static void lost_store(nodes_t *nodes, const char *what) {
  if (nodes->broken) return;
  nodes->broken = true;
  fprintf(stderr, "collrun: node %d: %s: %s; no longer watching the other nodes\n",
          nodes->node_rank, what, coll_last_error());
}

nodes_t *nodes_connect(const char *host, int port, const char *token, int node_rank, int nnodes) {
  nodes_t *nodes = calloc(1, sizeof *nodes);
  if (nodes == NULL) return NULL;
  nodes->node_rank = node_rank;
  nodes->nnodes = nnodes;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  nodes->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  /* In slices, so that Ctrl-C still works while node 0 is not up yet. */
  int64_t deadline = coll_deadline_ns(NODES_CONNECT_MS);
  for (;;) {
    int left = coll_ms_left(deadline);
    if (left == 0) { /* (a zero timeout would mean the client's default) */
      fprintf(stderr, "collrun: node %d: the store at %s:%d did not answer within %d s\n",
              node_rank, host, port, NODES_CONNECT_MS / 1000);
      break;
    }
    coll_status_t st = store_client_connect(host, (uint16_t)port, token,
                                            left < STEP_MS ? left : STEP_MS, &nodes->client);
    if (st == COLL_OK) return nodes;
    if (st != COLL_ERR_TIMEOUT) {
      fprintf(stderr, "collrun: node %d cannot reach the store at %s:%d: %s\n", node_rank, host,
              port, coll_last_error());
      break;
    }
    if (stop_signal_pending(nodes)) break;
  }
  nodes_close(nodes);
  return NULL;
}

void nodes_close(nodes_t *nodes) {
  if (nodes == NULL) return;
  store_client_close(nodes->client);
  if (nodes->sigfd >= 0) close(nodes->sigfd);
  free(nodes);
}

bool nodes_check_failure(nodes_t *nodes, int *exit_code, char *message, size_t cap) {
  if (nodes->broken) return false;
  const char *keys[] = {FAILED_KEY};
  bool exists = false;
  if (store_check(nodes->client, keys, 1, &exists, CALL_MS) != COLL_OK) {
    lost_store(nodes, "checking for failed nodes");
    return false;
  }
  if (!exists) return false;
  void *value = NULL;
  size_t len = 0;
  if (store_get(nodes->client, FAILED_KEY, &value, &len, CALL_MS) != COLL_OK) {
    lost_store(nodes, "reading the failure of another node");
    return false;
  }
  /* "<code> <message>", written by nodes_report_failure; be strict anyway. */
  char *text = value;
  char *space = memchr(text, ' ', len);
  long code = strtol(text, NULL, 10);
  *exit_code = code > 0 && code < 256 ? (int)code : 1;
  size_t skip = space != NULL ? (size_t)(space - text) + 1 : 0;
  snprintf(message, cap, "%.*s", (int)(len - skip), text + skip);
  free(value);
  return true;
}

void nodes_report_failure(nodes_t *nodes, int exit_code, const char *message) {
  if (nodes->broken) return;
  char *text = NULL;
  int len = asprintf(&text, "%d node %d: %s", exit_code, nodes->node_rank, message);
  if (len < 0) return;
  void *current = NULL;
  size_t current_len = 0;
  if (store_compare_set(nodes->client, FAILED_KEY, NULL, 0, text, (size_t)len, &current,
                        &current_len, CALL_MS) != COLL_OK)
    lost_store(nodes, "reporting this node's failure");
  free(current);
  free(text);
}

static void done_key(char *key, size_t cap, int node_rank) {
  snprintf(key, cap, "collrun/done/%d", node_rank);
}

void nodes_report_done(nodes_t *nodes) {
  if (nodes->broken || nodes->node_rank == 0) return;
  char key[48];
  done_key(key, sizeof key, nodes->node_rank);
  if (store_set(nodes->client, key, "1", 1, CALL_MS) != COLL_OK)
    lost_store(nodes, "telling node 0 that this node is done");
}

void nodes_wait_for_others(nodes_t *nodes, int timeout_ms) {
  int others = nodes->nnodes - 1;
  char(*names)[48] = calloc((size_t)others, sizeof *names);
  const char **keys = calloc((size_t)others, sizeof *keys);
  if (names == NULL || keys == NULL || nodes->broken) goto cleanup;
  for (int k = 0; k < others; k++) {
    done_key(names[k], sizeof names[k], k + 1);
    keys[k] = names[k];
  }
  bool all_done = false;
  if (store_check(nodes->client, keys, (size_t)others, &all_done, CALL_MS) != COLL_OK || all_done)
    goto cleanup;
  fprintf(stderr,
          "collrun: node 0's ranks have ended; keeping the store up until the other nodes' "
          "ranks end (at most %d s)\n",
          timeout_ms / 1000);
  for (int64_t deadline = coll_deadline_ns(timeout_ms);;) {
    int left = coll_ms_left(deadline);
    if (left == 0) {
      fprintf(stderr, "collrun: not every node finished within %d s; stopping the store\n",
              timeout_ms / 1000);
      break;
    }
    coll_status_t st =
        store_wait(nodes->client, keys, (size_t)others, left < STEP_MS ? left : STEP_MS);
    if (st == COLL_OK) break;
    if (st != COLL_ERR_TIMEOUT) {
      lost_store(nodes, "waiting for the other nodes");
      break;
    }
    if (stop_signal_pending(nodes)) break;
  }
cleanup:
  free(names);
  free(keys);
}
