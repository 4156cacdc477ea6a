/* The one place that chooses the execution path of a prepared call (path_choice.h), in
 * this order:
 *   count 0                    -> nothing runs;
 *   device buffers             -> the CUDA path (cuda/);
 *   one rank                   -> a local copy (AVG over one rank divides by 1);
 *   COLL_ALGO_ARENA barrier or broadcast -> the small-message lines (api_prepare chose
 *                                 the arena for them only where they fit);
 *   COLL_ALGO_ARENA all-reduce -> the zero-copy window when both buffers lie in shared
 *                                 windows, else the small-message lines when the message
 *                                 fits them (small_fits), else the arena (onehost/);
 *   all_to_allv                -> the executor's two runs (counts, then data);
 *   anything else              -> the schedule executor over the host links (exec/).
 * The reason goes with the path, so the INFO line (api/prepare.c) and the dispatch
 * (dispatch.c) read one answer. */
#include "core/path_choice.h"

#include <stdio.h>

bool path_arena_can_run(const coll_comm_t *comm, const prepared_call_t *pc) {
  return comm->arena != NULL && pc->call.kind == COLL_KIND_ALL_REDUCE && !pc->where.on_device;
}

/* Why the executor (host links or the CUDA path's) runs the call's algorithm. */
static path_why_t algorithm_why(const coll_comm_t *comm, const prepared_call_t *pc) {
  if (comm->algo == pc->call.algo) return PATH_WHY_FORCED;
  return path_arena_can_run(comm, pc) ? PATH_WHY_COST_MODEL_ARENA_LATER : PATH_WHY_COST_MODEL;
}

path_choice_t path_choose(const coll_comm_t *comm, const prepared_call_t *pc) {
  const coll_call_t *call = &pc->call;
  if (call->count == 0) return (path_choice_t){PATH_NONE, PATH_WHY_EMPTY};
  if (pc->where.on_device) return (path_choice_t){PATH_CUDA, algorithm_why(comm, pc)};
  if (comm->base.nranks == 1) return (path_choice_t){PATH_ONE_RANK, PATH_WHY_ONE_RANK};
  if (call->algo == COLL_ALGO_ARENA) {
    bool forced = comm->algo == COLL_ALGO_ARENA;
    path_why_t small_why = forced ? PATH_WHY_FORCED_SMALL : PATH_WHY_SMALL;
    if (call->kind != COLL_KIND_ALL_REDUCE) /* a barrier or a broadcast that fits */
      return (path_choice_t){PATH_SMALL, small_why};
    if (pc->windows.send != NULL) return (path_choice_t){PATH_WINDOW, PATH_WHY_WINDOW};
    if (small_fits(comm->arena, call)) return (path_choice_t){PATH_SMALL, small_why};
    return (path_choice_t){PATH_ARENA, forced ? PATH_WHY_FORCED : PATH_WHY_ARENA_RULE};
  }
  path_t path = call->kind == COLL_KIND_ALL_TO_ALLV ? PATH_ALL_TO_ALLV : PATH_SCHEDULE;
  return (path_choice_t){path, algorithm_why(comm, pc)};
}

const char *path_name(path_t path) {
  switch (path) {
    case PATH_NONE:
      return "none";
    case PATH_CUDA:
      return "cuda";
    case PATH_ONE_RANK:
      return "local copy";
    case PATH_WINDOW:
      return "window";
    case PATH_SMALL:
      return "small";
    case PATH_ARENA:
      return "arena";
    case PATH_ALL_TO_ALLV:
      return "all_to_allv";
    case PATH_SCHEDULE:
      return "schedule";
  }
  return "?";
}

void path_describe(const coll_comm_t *comm, const prepared_call_t *pc, path_choice_t choice,
                   char *out, size_t cap) {
  const coll_call_t *call = &pc->call;
  size_t bytes = call->count * coll_dtype_size(call->dtype);
  int nranks = comm->base.nranks;
  switch (choice.why) {
    case PATH_WHY_EMPTY:
      snprintf(out, cap, "count 0");
      return;
    case PATH_WHY_ONE_RANK:
      snprintf(out, cap, "one rank");
      return;
    case PATH_WHY_WINDOW:
      snprintf(out, cap, "zero-copy window: buffers from coll_mem_alloc");
      return;
    case PATH_WHY_SMALL:
    case PATH_WHY_FORCED_SMALL:
      snprintf(out, cap, "%ssmall-message lines: %zu B <= %u B, measured threshold",
               choice.why == PATH_WHY_FORCED_SMALL ? "forced; " : "", bytes,
               (unsigned)comm->arena->small_bytes);
      return;
    case PATH_WHY_FORCED:
      snprintf(out, cap, "forced");
      return;
    case PATH_WHY_ARENA_RULE:
      snprintf(out, cap, "measured rule: arena from %zu B at %d ranks",
               algo_arena_min_bytes(nranks), nranks);
      return;
    case PATH_WHY_COST_MODEL_ARENA_LATER:
      snprintf(out, cap, "cost model; arena only from %zu B at %d ranks, measured",
               algo_arena_min_bytes(nranks), nranks);
      return;
    case PATH_WHY_COST_MODEL:
      snprintf(out, cap, "cost model");
      return;
  }
  snprintf(out, cap, "?");
}
