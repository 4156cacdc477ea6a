/* premul_sum's first step at run time (not at submission: a queued or grouped call must
 * read its input when it runs, after the calls before it wrote it): each rank scales its
 * input, then the call runs as a plain SUM on the scaled copy. */
#include <stdlib.h>

#include "common/error.h"
#include "core/comm.h"
#include "mem/memops.h"

coll_status_t premul_scale_input(const coll_call_t *call, int rank, int nranks, coll_call_t *scaled,
                                 void **scratch) {
  *scaled = *call;
  *scratch = NULL;
  if (!call->premul || call->count == 0) return COLL_OK;
  size_t in_count, out_count;
  sched_buffer_counts(call->kind, call->count, nranks, &in_count, &out_count);
  size_t esz = coll_dtype_size(call->dtype);
  /* recvbuf takes the scaled input when it is meant to hold that many elements on this
   * rank (all_reduce; reduce at the root): the SUM then runs in place. */
  bool into_recv = call->recvbuf != NULL && out_count >= in_count &&
                   !(call->kind == COLL_KIND_REDUCE && rank != call->root);
  void *dst = call->recvbuf;
  if (!into_recv) {
    dst = malloc(in_count * esz);
    if (dst == NULL)
      return coll_error(COLL_ERR_NO_MEMORY, "rank %d: premul_sum %s: no memory for %zu bytes", rank,
                        sched_kind_name(call->kind), in_count * esz);
    *scratch = dst;
  }
  mem_host_scale(dst, call->sendbuf, in_count, call->dtype, call->premul_scalar);
  scaled->sendbuf = dst;
  return COLL_OK;
}
