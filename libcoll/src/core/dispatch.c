/* The one place that decides which execution path runs a prepared call. Every call is
 * checked against the communicator's health first; a collective over more than one rank
 * then starts its fingerprint (base_begin_call), which the arena records for its waiters
 * and each path agrees on with the other ranks. Then:
 *   device buffers             -> the CUDA path (cuda/), over its own device links or
 *                                 staged over the host links;
 *   one rank                   -> a local copy (AVG over one rank divides by 1);
 *   COLL_ALGO_ARENA all-reduce -> the zero-copy window path when both buffers lie in
 *                                 shared windows, else the arena's small-message path
 *                                 when the message fits its lines (small_fits), else
 *                                 the arena (onehost/);
 *   COLL_ALGO_ARENA barrier or broadcast -> the small-message path (prepare.c chose it
 *                                 only where it fits);
 *   anything else              -> the schedule executor over the host links (exec/).
 * A premul_sum call first scales its input and then runs as a SUM: on host buffers here
 * (premul_input.c), on device buffers in the CUDA path, after its stream gate (reading
 * the input here would come before the stream's earlier work wrote it). */
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"

static coll_status_t run_path(coll_comm_t *comm, const prepared_call_t *pc,
                              const coll_call_t *call) {
  if (pc->where.on_device) return cuda_run(comm->cuda, &comm->exec, &comm->links, call, &pc->where);
  if (comm->base.nranks == 1) {
    if (call->kind == COLL_KIND_ALL_TO_ALLV) return exec_alltoallv_one_rank(call);
    if (call->sendbuf != call->recvbuf)
      memcpy(call->recvbuf, call->sendbuf, call->count * coll_dtype_size(call->dtype));
    return COLL_OK;
  }
  /* api/prepare.c chose the arena only where it runs. */
  if (call->algo == COLL_ALGO_ARENA && call->kind != COLL_KIND_ALL_REDUCE) /* see prepare.c */
    return small_run(comm->arena, call); /* a barrier or a broadcast that fits */
  if (call->algo == COLL_ALGO_ARENA && call->kind == COLL_KIND_ALL_REDUCE)
    return pc->windows.send != NULL        ? window_run(comm->arena, call, &pc->windows)
           : small_fits(comm->arena, call) ? small_run(comm->arena, call)
                                           : arena_run(comm->arena, call);
  if (call->kind == COLL_KIND_ALL_TO_ALLV) /* two runs: its counts, then its data */
    return exec_alltoallv_run(&comm->exec, &comm->links, call);
  return exec_run(&comm->exec, &comm->links, call);
}

coll_status_t dispatch_run(coll_comm_t *comm, const prepared_call_t *pc) {
  const coll_call_t *call = &pc->call;
  coll_base_t *base = &comm->base;
  if (call->algo == COLL_ALGO_ARENA && !pc->where.on_device) /* before the work below */
    small_claim_lines(comm->arena, call->count * coll_dtype_size(call->dtype));
  coll_status_t st = base_check_usable(base, sched_kind_name(call->kind));
  if (st != COLL_OK || call->count == 0) return st;
  coll_call_t scaled = *call;
  void *scratch = NULL;
  if (!pc->where.on_device)
    st = premul_scale_input(call, base->rank, base->nranks, &scaled, &scratch);
  if (st != COLL_OK) {
    base_mark_failed(base, st); /* the peers learn of it instead of waiting for this rank */
    return st;
  }
  if (call->kind != COLL_KIND_P2P && base->nranks > 1) {
    coll_op_t fp_op = call->premul ? (coll_op_t)EXEC_FP_OP_PREMUL_SUM : call->op;
    exec_fp_t *fp = base_begin_call(base, call->kind, call->count, call->dtype, fp_op, call->root);
    window_note_fp(&pc->windows, call, fp); /* nothing unless it is a window call */
    arena_note_call(comm->arena, fp);       /* nothing without an arena; else its waiters compare */
  }
  /* The host links' scratch grows with the schedules (the staged device path too). */
  size_t scratch_bytes = comm->links.scratch_bytes;
  st = run_path(comm, pc, &scaled);
  if (comm->links.scratch_bytes != scratch_bytes) comm_update_staging_peak(comm);
  free(scratch);
  return st;
}
