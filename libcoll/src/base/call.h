/* One collective or point-to-point call as the execution paths see it: what the user
 * asked for, with the algorithm already resolved. Filled by the API layer. Where the
 * buffers live is not here: the CUDA path's cuda_where_t and the window path's
 * window_pair_t travel beside it (core/comm.h's prepared_call_t). */
#ifndef COLL_BASE_CALL_H
#define COLL_BASE_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include "algo/schedule.h"
#include "coll.h"

/* One point-to-point transfer (coll_send / coll_recv), in bytes. */
typedef struct {
  bool send;
  int peer;
  void *buf;
  size_t bytes;
} coll_p2p_t;

typedef struct {
  coll_kind_t kind;
  const void *sendbuf; /* broadcast: same as recvbuf */
  void *recvbuf;
  size_t count; /* per rank (schedule.h); P2P: total bytes */
  coll_dtype_t dtype;
  coll_op_t op; /* a built-in op (api/ops.c resolved a premul_sum one to SUM) */
  int root;
  /* premul_sum (coll_op_create_premul_sum): each rank's input is first multiplied by
   * premul_scalar (one element of dtype), then summed with op == COLL_SUM; the
   * fingerprint says "premul_sum" (core/premul_input.c scales host buffers, the CUDA
   * path device ones, after the stream gate). */
  bool premul;
  unsigned char premul_scalar[8];
  coll_algo_t algo;     /* never AUTO */
  size_t segment_bytes; /* the agreed COLL_CHUNK_SIZE; 0: the algorithm's default */
  /* all_to_allv (count == nranks): this rank's 4 * nranks counts, schedule.h's SCHED_V_*,
   * copied at the call (api/all_to_allv.c). An _async call's copy is `owned` and freed
   * with its request (core/request.c); NULL otherwise. */
  const size_t *vcounts;
  void *owned;
  /* P2P: the transfers, posted together in one step (a group), or just `one`. */
  const coll_p2p_t *p2p;
  size_t np2p;
  coll_p2p_t one;
} coll_call_t;

#endif
