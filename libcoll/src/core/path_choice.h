/* Which execution path runs a prepared call, and why: decided here and nowhere else.
 * dispatch.c runs the path path_choose names; api/prepare.c's INFO line prints the same
 * choice (its name and its reason), so the log cannot name one path while another runs.
 * api_prepare still decides the algorithm (and whether the call carries windows); the
 * path follows from the call it prepared. */
#ifndef COLL_CORE_PATH_CHOICE_H
#define COLL_CORE_PATH_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/comm.h"

/* The ways a prepared call can run (dispatch.c's run_path has one case each). */
typedef enum {
  PATH_NONE,        /* count 0: nothing to move, nothing runs */
  PATH_CUDA,        /* device buffers: cuda/ (its own device links, or staged) */
  PATH_ONE_RANK,    /* one rank: a local copy (all_to_allv: its own block) */
  PATH_WINDOW,      /* both buffers in shared windows: onehost/window_run.c */
  PATH_SMALL,       /* the arena's small-message lines: onehost/small.c */
  PATH_ARENA,       /* the arena: onehost/arena.c */
  PATH_ALL_TO_ALLV, /* all_to_allv: two executor runs, its counts then its data */
  PATH_SCHEDULE,    /* the schedule executor over the host links: exec/exec.c */
} path_t;

/* Why that path (for the CUDA path and the executors: why their algorithm). */
typedef enum {
  PATH_WHY_EMPTY,        /* count 0 */
  PATH_WHY_ONE_RANK,     /* a communicator of one rank */
  PATH_WHY_WINDOW,       /* both buffers from coll_mem_alloc, in shared windows */
  PATH_WHY_SMALL,        /* the message fits the small-message lines (measured threshold) */
  PATH_WHY_FORCED_SMALL, /* the arena is forced and the message fits those lines */
  PATH_WHY_FORCED,       /* the algorithm is forced (COLL_ALGO, coll_comm_set_algo) */
  PATH_WHY_ARENA_RULE,   /* the arena's measured rule (algo_arena_preferred) */
  PATH_WHY_COST_MODEL_ARENA_LATER, /* the cost model; the arena could run it, but only
                                    * from its measured size on */
  PATH_WHY_COST_MODEL,             /* the cost model */
} path_why_t;

typedef struct {
  path_t path;
  path_why_t why;
} path_choice_t;

/* The arena can serve this call: a host all-reduce on a communicator that has one (all
 * ranks on one host over shm, onehost/arena.h). api_prepare asks it before choosing the
 * arena; the chooser, for its reason. */
bool path_arena_can_run(const coll_comm_t *comm, const prepared_call_t *pc);
/* The path that runs pc and why. Cheap (no formatting): the dispatch asks it for every
 * call. The same facts on every rank of a correct program give the same path. */
path_choice_t path_choose(const coll_comm_t *comm, const prepared_call_t *pc);
/* The path's name, as the INFO line prints it ("schedule", "small", ...). */
const char *path_name(path_t path);
/* The reason as the INFO line prints it (with the thresholds that decided it). */
void path_describe(const coll_comm_t *comm, const prepared_call_t *pc, path_choice_t choice,
                   char *out, size_t cap);

#endif
