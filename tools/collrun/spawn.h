/* Starting one rank: its environment (RANK, WORLD_SIZE, ... as torchrun sets them), its
 * output pipes, its own process group, and the exec of PROG. */
#ifndef TOOLS_COLLRUN_SPAWN_H
#define TOOLS_COLLRUN_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "binding.h"

/* What every rank of this node shares. */
typedef struct {
  const char *path;  /* PROG resolved against PATH (spawn_resolve_program) */
  char *const *argv; /* PROG ARGS..., NULL-terminated */
  int nproc;         /* ranks on this node */
  int nnodes;
  int node_rank;
  const char *master_addr;
  int master_port;
  const char *token;        /* NULL: COLL_JOB_TOKEN is removed from the ranks' environment */
  const binding_t *binding; /* each local rank's CPUs; NULL or no sets: left as inherited */
} spawn_plan_t;

/* A started rank: its pid (also its process group id) and the non-blocking, close-on-exec
 * read ends of its stdout and stderr. */
typedef struct {
  pid_t pid;
  int out_fd;
  int err_fd;
} spawn_child_t;

/* Find PROG like execvp would (a name with '/' is taken as is). Returns a malloc'ed path,
 * or NULL after printing why to stderr. */
char *spawn_resolve_program(const char *prog);

/* Fork and exec local rank `local_rank`; a `replacement` (--replace) also gets
 * COLL_ELASTIC_JOIN=1. false (after printing why) when a pipe or the fork failed; a failed
 * exec shows up later as the rank exiting with code 127. */
bool spawn_rank(const spawn_plan_t *plan, int local_rank, bool replacement, spawn_child_t *child);

#endif
