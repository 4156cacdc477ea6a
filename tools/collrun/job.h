/* The running job: start the ranks of this node, relay their output, and bring them all
 * down together when one fails, a signal arrives or the deadline passes (or, in an
 * elastic job, let the others go on when one dies and start its replacement). */
#ifndef TOOLS_COLLRUN_JOB_H
#define TOOLS_COLLRUN_JOB_H

#include <stdbool.h>

#include "nodes.h"
#include "spawn.h"

enum { JOB_EXIT_TIMEOUT = 124, JOB_EXIT_LAUNCH_FAILED = 1 };

typedef struct {
  bool prefix;      /* "[RANK] " before each output line */
  int grace_ms;     /* SIGTERM ... SIGKILL */
  double timeout_s; /* 0: none */
  nodes_t *nodes;   /* several nodes: watch and tell the others; NULL on one node */
  bool elastic;     /* a rank's death does not stop the job */
  int replace;      /* replacements to start in all (elastic only) */
  int replace_delay_ms;
} job_options_t;

/* Block the signals the job's signalfd takes (SIGCHLD, SIGINT, SIGTERM) and ignore
 * SIGPIPE. Call before any thread starts (the store's), so no thread takes them. */
bool job_block_signals(void);

/* Run the job to its end; returns collrun's exit status (see --help). */
int job_run(const spawn_plan_t *plan, const job_options_t *options);

#endif
