/* One collective or point-to-point call as the execution paths see it: what the user
 * asked for, with the algorithm already resolved. Filled by the API layer; the CUDA path
 * and the window path add where the buffers live. */
#ifndef COLL_BASE_CALL_H
#define COLL_BASE_CALL_H

#include <stdatomic.h>
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
  coll_op_t op;
  int root;
  coll_algo_t algo;     /* never AUTO */
  size_t segment_bytes; /* the agreed COLL_CHUNK_SIZE; 0: the algorithm's default */
  /* P2P: the transfers, posted together in one step (a group), or just `one`. */
  const coll_p2p_t *p2p;
  size_t np2p;
  coll_p2p_t one;
  /* Device buffers (cuda/): set by cuda_classify, never by the caller. */
  bool on_device; /* sendbuf and recvbuf are CUDA memory on `device` */
  int device;
  void *stream;     /* stream calls: the caller's cudaStream_t */
  atomic_int *gate; /* stream calls: > 0 once the stream has reached the call */
  /* Zero-copy window all-reduce (onehost/window.h): the windows sendbuf and recvbuf lie
   * in, set when both do; valid while the call runs (freeing them is the caller's
   * error). */
  const struct window *win_send, *win_recv;
} coll_call_t;

#endif
