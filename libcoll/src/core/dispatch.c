/* Runs a prepared call on the path path_choice.c chooses (path_choose: the INFO line
 * prints the same answer). Every call is checked against the communicator's health
 * first; a collective over more than one rank then starts its fingerprint
 * (base_begin_call), which the arena records for its waiters and each path agrees on
 * with the other ranks. A premul_sum call first scales its input and then runs as a SUM:
 * on host buffers here (premul_input.c), on device buffers in the CUDA path, after its
 * stream gate (reading the input here would come before the stream's earlier work wrote
 * it). */
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/path_choice.h"

static coll_status_t run_path(coll_comm_t *comm, path_t path, const prepared_call_t *pc,
                              const coll_call_t *call) {
  switch (path) {
    case PATH_NONE:
      return COLL_OK;
    case PATH_CUDA:
      return cuda_run(comm->cuda, &comm->exec, &comm->links, call, &pc->where);
    case PATH_ONE_RANK:
      if (call->kind == COLL_KIND_ALL_TO_ALLV) return exec_alltoallv_one_rank(call);
      if (call->sendbuf != call->recvbuf)
        memcpy(call->recvbuf, call->sendbuf, call->count * coll_dtype_size(call->dtype));
      return COLL_OK;
    case PATH_WINDOW:
      return window_run(comm->arena, call, &pc->windows);
    case PATH_SMALL:
      return small_run(comm->arena, call);
    case PATH_ARENA:
      return arena_run(comm->arena, call);
    case PATH_ALL_TO_ALLV:
      return exec_alltoallv_run(&comm->exec, &comm->links, call);
    case PATH_SCHEDULE:
      return exec_run(&comm->exec, &comm->links, call);
  }
  return COLL_OK;
}

coll_status_t dispatch_run(coll_comm_t *comm, const prepared_call_t *pc) {
  const coll_call_t *call = &pc->call;
  coll_base_t *base = &comm->base;
  path_t path = path_choose(comm, pc).path;
  if (path == PATH_SMALL) /* before the work below */
    small_claim_lines(comm->arena, call->count * coll_dtype_size(call->dtype));
  coll_status_t st = base_check_usable(base, sched_kind_name(call->kind));
  if (st != COLL_OK || path == PATH_NONE) return st;
  coll_call_t scaled = *call;
  void *scratch = NULL;
  if (path != PATH_CUDA) /* the CUDA path scales after its stream gate */
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
  st = run_path(comm, path, pc, &scaled);
  if (comm->links.scratch_bytes != scratch_bytes) comm_update_staging_peak(comm);
  free(scratch);
  return st;
}
