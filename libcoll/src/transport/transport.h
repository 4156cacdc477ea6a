/* Transports: move bytes between this rank and one peer. Here: connections (post,
 * progress) with their argument checks, the ring of pending operations the transports
 * share, and the set of connections the registry (transport.c) builds at rendezvous.
 *
 * The transports, a folder each: shm/ (ranks of one host), ib/ (RDMA verbs, built with
 * libibverbs), tcp/, and cuda_ipc/ (device buffers of one host, built with CUDA). Each
 * gives a transport_ops_t per connection and a transport_kind_t to the registry
 * (transport_kind.h, private to transport/). A connection knows nothing about collectives.
 *
 * Contract:
 *  1. Messages between two ranks are matched in order: the k-th post_send on a's
 *     connection to b meets the k-th post_recv on b's connection to a; both give the same
 *     length (a mismatch is COLL_ERR_PROTOCOL, not undefined behaviour).
 *  2. post_* never block. They queue the operation; progress() moves bytes and reports
 *     how many sends and receives have completed so far (monotonic counters, in posting
 *     order). A send is complete when its buffer may be reused; a receive when its
 *     destination holds the final bytes (or the reduction result).
 *  3. A receive may carry a reduction: dst = operand OP incoming, computed by the
 *     transport as data arrives (so the bytes are touched once, while in cache).
 *  4. The connection set blocks in transport_set_wait() until some connection may have
 *     progressed or the timeout passes: epoll for sockets, futex for shared memory. Never
 *     spin unboundedly: 4 ranks on 2 cores must stay fast.
 *  5. Errors carry a message naming the peer rank, its host and the failing call.
 *  6. A connection is never closed on its own: transport_set_close closes each
 *     transport's group, and the group frees its connections. */
#ifndef COLL_TRANSPORT_TRANSPORT_H
#define COLL_TRANSPORT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/store.h"
#include "coll.h"
#include "mem/memops.h"

typedef struct transport_conn transport_conn_t;
typedef struct transport_set transport_set_t;

typedef struct {
  void *dst;            /* where the bytes or the reduction result go */
  const void *operand;  /* NULL: plain copy; else dst = operand OP incoming */
  mem_reduce_fn reduce; /* with operand */
  size_t elem_size;     /* the transport hands reduce() whole elements */
  size_t len;           /* bytes */
} transport_recv_t;

typedef struct transport_ops {
  const char *name;
  coll_status_t (*post_send)(transport_conn_t *conn, const void *buf, size_t len);
  coll_status_t (*post_recv)(transport_conn_t *conn, const transport_recv_t *recv);
  /* Move what can move now; report completed counts. */
  coll_status_t (*progress)(transport_conn_t *conn, uint64_t *sends_done, uint64_t *recvs_done);
} transport_ops_t;

/* Common head of every connection: the transport file embeds it first. */
struct transport_conn {
  const transport_ops_t *ops;
  int peer;
};

/* Argument errors of a post, reported once for every transport (post_checks.c); the post
 * functions of the transports may assume valid arguments. */
coll_status_t transport_bad_send(const transport_conn_t *c, const void *buf, size_t len);
coll_status_t transport_bad_recv(const transport_conn_t *c, const transport_recv_t *r);

/* A reduction needs a function and a power-of-two element size (at most 64 bytes) that
 * divides the length, so a transport can hand reduce() whole elements. */
static inline bool transport_recv_valid(const transport_recv_t *r) {
  if (r == NULL || (r->dst == NULL && r->len > 0)) return false;
  if (r->operand == NULL) return true;
  size_t es = r->elem_size;
  return r->reduce != NULL && es != 0 && es <= 64 && (es & (es - 1)) == 0 && r->len % es == 0;
}

static inline coll_status_t transport_post_send(transport_conn_t *c, const void *buf,
                                                size_t len) {
  if (buf == NULL && len > 0) return transport_bad_send(c, buf, len);
  return c->ops->post_send(c, buf, len);
}
static inline coll_status_t transport_post_recv(transport_conn_t *c, const transport_recv_t *r) {
  if (!transport_recv_valid(r)) return transport_bad_recv(c, r);
  return c->ops->post_recv(c, r);
}
static inline coll_status_t transport_progress(transport_conn_t *c, uint64_t *sends_done,
                                               uint64_t *recvs_done) {
  return c->ops->progress(c, sends_done, recvs_done);
}

/* Pending sends or receives of a connection live in a ring indexed by message number mod
 * capacity (a power of two; pending_ring.c). Double the ring's capacity, keeping entries
 * done..posted-1 at their new slots; false when out of memory (the old ring is kept). */
bool transport_queue_grow(void **queue, uint64_t *cap, uint64_t done, uint64_t posted,
                          size_t entry_size);

/* What rendezvous knows when connecting. */
typedef struct {
  store_client_t *store;
  const char *key_prefix; /* unique per communicator, e.g. "comm/0/" */
  int rank;
  int nranks;
  const char *const *host_ids; /* host id of every rank (same host: same string) */
  const char *forced;          /* COLL_TRANSPORT value or NULL (then the registry reads
                                  COLL_TRANSPORT itself); "auto" or "": not forced */
  int timeout_ms;
  bool device; /* connecting the device-buffer set (cuda/cuda_path.c): device-only transports
                  may be forced; for the host set a forced device-only one means auto */
  bool quiet;  /* no INFO line per peer: a second set over the same pairs (tagged/tagged.c) */
} transport_setup_t;

/* Connect this rank to every other rank (collective: all ranks call it). Picks each
 * pair's transport from the registry (first whose probe accepts the pair), or the forced
 * one (an error if it cannot serve a pair). */
coll_status_t transport_set_connect(const transport_setup_t *setup, transport_set_t **set);
/* The connection to `peer` (NULL for self). */
transport_conn_t *transport_set_conn(transport_set_t *set, int peer);
/* Block until a connection may progress, at most timeout_ms. Early (spurious) returns
 * are allowed, missed wake-ups are not; timeout_ms <= 0 only checks. Call progress() on
 * the connections with pending work before waiting again. */
coll_status_t transport_set_wait(transport_set_t *set, int timeout_ms);
/* The same, for a caller that knows which peer it waits for most (-1: none): where the
 * set mixes transports it blocks on that peer's (shm: its futex, tcp: its sockets), so a
 * message from a peer on this host is not left until the socket wait's slice ends. */
coll_status_t transport_set_wait_for(transport_set_t *set, int peer, int timeout_ms);
/* Bytes of staging memory this rank holds for its connections: shm FIFOs it receives
 * through (each FIFO is counted by its receiver) and reduction staging chunks. */
size_t transport_set_staging_bytes(const transport_set_t *set);
/* Of that, the device-only transports' (cuda_ipc: GPU memory). */
size_t transport_set_device_staging_bytes(const transport_set_t *set);
void transport_set_close(transport_set_t *set);

#endif
