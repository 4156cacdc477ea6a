/* cuda_ipc transport: device buffers between ranks of one host. Per directed pair the
 * receiver owns a ring of staging slots in device memory, exported to the sender with a
 * cudaIpc memory handle, and a small host shared-memory control block (like shm's FIFO
 * counters). The sender copies a chunk into a free slot on its stream, waits for the
 * copy's event on the host, then publishes the chunk (posted++); the receiver sees it,
 * reduces or copies it into the destination on its stream, waits for that event, then
 * frees the slot (consumed++). Only the progress threads poll: no kernel ever waits for
 * a kernel of another process, so ranks time-sliced on one GPU (no MPS) cannot deadlock. */
#ifndef COLL_TRANSPORT_CUDA_IPC_H
#define COLL_TRANSPORT_CUDA_IPC_H

#include <stdatomic.h>
#include <stdint.h>

#include "mem/mem_cuda.h"
#include "transport/transport_kind.h"

#define CUDA_IPC_MAX_SLOTS 64

/* Host shared memory of one directed pair, created and initialised by the receiver. */
typedef struct {
  _Atomic uint64_t posted;   /* chunks the sender has written; slot = index % nslots */
  _Atomic uint64_t consumed; /* chunks the receiver is done with (their slots are free) */
  uint64_t len[CUDA_IPC_MAX_SLOTS]; /* bytes of each slot's chunk, written before posted */
} cuda_ipc_ctrl_t;

/* A queued message: sends and receives complete in posting order. */
typedef struct {
  transport_recv_t r;  /* sends use r.dst as the source and r.len */
  size_t off;          /* bytes handed to the GPU so far */
  uint64_t last_chunk; /* one past its last chunk's index, once all are issued */
  bool issued;         /* every chunk issued */
  coll_dtype_t dtype;  /* receive-reduce: the kernel's type and op, found from r.reduce */
  coll_op_t op;
} cuda_ipc_msg_t;

typedef struct {
  cuda_ipc_msg_t *items;
  size_t cap, head, count;
} cuda_ipc_queue_t;

/* One side (send or receive) of a connection. */
typedef struct {
  uint32_t nslots;       /* ring geometry, chosen by the receiver */
  size_t slot_bytes;
  char *ring;            /* nslots x slot_bytes of device memory (receive: ours; send: mapped) */
  cuda_ipc_ctrl_t *ctrl; /* the pair's control block (mapped) */
  char shm_name[64];     /* receive side: the control block's name until unlinked */
  void *stream;
  void *events[CUDA_IPC_MAX_SLOTS];
  uint64_t chunk_len[CUDA_IPC_MAX_SLOTS]; /* send side: what each issued slot holds */
  uint64_t issued;       /* chunks handed to the GPU */
  uint64_t finished;     /* chunks whose GPU work completed and was published / released */
  uint64_t done;         /* messages completed (the transport's counter) */
  cuda_ipc_queue_t queue;
} cuda_ipc_side_t;

typedef struct {
  transport_conn_t base;
  int rank;
  char peer_host[128];
  cuda_ipc_side_t tx;
  cuda_ipc_side_t rx;
} cuda_ipc_conn_t;

struct transport_group {
  int rank;
  int nranks;
  cuda_ipc_conn_t **conns; /* by peer rank */
};

extern const transport_ops_t cuda_ipc_ops;
/* Whether the connection has something the progress function could move now (a
 * published chunk to take, a free slot for a queued send, finished GPU work). */
bool cuda_ipc_ready(cuda_ipc_conn_t *c);

#endif
