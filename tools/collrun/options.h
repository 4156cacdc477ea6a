/* collrun's command line: the parsed options and the --help text. */
#ifndef TOOLS_COLLRUN_OPTIONS_H
#define TOOLS_COLLRUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "binding.h"

enum {
  OPTIONS_MAX_RANKS_PER_NODE = 256, /* two pipes per rank stay far below the fd limit */
  OPTIONS_MAX_NODES = 65536,
  OPTIONS_DEFAULT_GRACE_MS = 3000,
};

typedef struct {
  int nproc; /* ranks on this node (-n) */
  int nnodes;
  int node_rank;
  const char *master_addr; /* never NULL after parsing */
  int master_port;         /* 0: pick a free one (single node only) */
  const char *token;       /* --token, else $COLL_JOB_TOKEN; NULL when neither */
  bool prefix;
  int grace_ms;
  double timeout_s;      /* 0: no deadline */
  binding_policy_t bind; /* --bind, else $COLLRUN_BIND, else core */
  bool elastic;          /* --elastic (or --replace): a rank that dies does not stop the job */
  int replace;           /* --replace N: new processes for dead ranks, N in all */
  int replace_delay_ms;  /* --replace-delay-ms: from a rank's death to its replacement */
  char **prog_argv;      /* PROG ARGS..., NULL-terminated (points into argv) */
} options_t;

typedef enum {
  OPTIONS_RUN,         /* parsed: start the job */
  OPTIONS_HELP,        /* --help was printed: exit 0 */
  OPTIONS_USAGE_ERROR, /* a message was printed: exit 2 */
} options_result_t;

/* Parse argv; on errors print "collrun: <what is wrong>" and a usage hint to stderr. */
options_result_t options_parse(int argc, char **argv, options_t *options);

#endif
