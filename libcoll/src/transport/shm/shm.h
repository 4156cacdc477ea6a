/* Private to the shm transport: the shared-memory layout (one "inbox" segment per rank
 * holding its doorbell and one FIFO per sending peer) and the structures shared by
 * shm.c (data path, waiting) and shm_setup.c (segments, mapping, probing).
 *
 * Inbox of rank b:  [header: magic, pid, probe cookie, geometry, doorbell][FIFO a0 -> b]
 * [FIFO a1 -> b]...; each FIFO: [ctrl: head | tail | direct_ok][slot headers][slot data].
 * The sender a owns head, the receiver b owns tail; both ring the other's doorbell.
 * Position p of the FIFO uses header p % nslots; the header names the data slot, which
 * the sender chooses (the lowest-numbered free one, shm.c). */
#ifndef COLL_TRANSPORT_SHM_H
#define COLL_TRANSPORT_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport/transport.h"
#include "transport/transport_kind.h"

#define SHM_MAGIC 0x32764d4853434f43ull /* "COCSHMv2" */
#define SHM_PAGE 4096u

enum { SHM_SLOT_COPY = 1, SHM_SLOT_DIRECT = 2 };

typedef struct {
  uint64_t msg_len;   /* the whole message */
  uint64_t seq;       /* message number on this directed pair */
  uint64_t addr;      /* DIRECT: the message's address in the sender */
  uint32_t chunk_len; /* COPY: bytes in this slot */
  uint32_t kind;
  uint32_t data_slot; /* COPY: the slot of the FIFO's data that holds the bytes */
  uint32_t reserved32;
  uint64_t reserved[3]; /* one cache line per header */
} shm_slot_hdr_t;

typedef struct {
  _Alignas(64) _Atomic uint64_t head;      /* slots produced, written by the sender */
  _Alignas(64) _Atomic uint64_t tail;      /* slots consumed, written by the receiver */
  _Alignas(64) _Atomic uint32_t direct_ok; /* the receiver can read the sender's memory */
} shm_fifo_ctrl_t;

typedef struct {
  uint64_t magic;
  int32_t owner_rank;
  int32_t pid;
  uint64_t cookie;      /* a value in the owner's private memory ... */
  uint64_t cookie_addr; /* ... at this address: the process_vm_readv probe */
  uint32_t nfifos;
  uint32_t nslots;
  uint64_t slot_bytes;
  uint64_t fifo_stride;                   /* bytes from one FIFO to the next */
  uint64_t hdrs_offset;                   /* from a FIFO's start to its slot headers */
  uint64_t data_offset;                   /* from a FIFO's start to its slot data */
  _Alignas(64) _Atomic uint32_t bell;     /* bumped by peers after they change a FIFO */
  _Alignas(64) _Atomic uint32_t sleeping; /* the owner sleeps (or is about to) on bell */
} shm_inbox_t;

typedef struct {
  const void *buf;
  size_t len;
  size_t off; /* bytes copied into slots */
  bool started;
  bool direct;
  uint64_t ack_slot; /* DIRECT: complete when the FIFO's tail passes this slot */
} shm_send_t;

typedef struct {
  transport_recv_t r;
  size_t off;
} shm_recv_t;

/* One side of a directed FIFO as mapped in this process. */
typedef struct {
  shm_fifo_ctrl_t *ctrl;
  shm_slot_hdr_t *hdrs;
  unsigned char *data;
  uint32_t nslots;
  size_t slot_bytes;
} shm_fifo_t;

typedef struct shm_conn {
  transport_conn_t base;
  char peer_host[128];
  struct transport_group *group;
  shm_fifo_t in;           /* peer -> me, in my inbox */
  shm_fifo_t out;          /* me -> peer, in the peer's inbox */
  shm_inbox_t *peer_inbox; /* whose doorbell we ring */
  size_t peer_map_len;
  int peer_fd; /* kept open: its lock tells whether the peer lives */
  pid_t peer_pid;
  /* sender state */
  shm_send_t *sends;
  uint64_t send_cap, sends_posted, sends_written, sends_done;
  uint64_t out_head;      /* my copy of out.ctrl->head */
  uint64_t out_tail_seen; /* last tail read (when the FIFO looks full, and per chunk of a large
                             message) */
  uint32_t *out_slot_of;  /* data slot of position p, at p % nslots, for [tail_seen, head) */
  bool *out_slot_busy;    /* by data slot: used by a position in [tail_seen, head) */
  /* receiver state */
  shm_recv_t *recvs;
  uint64_t recv_cap, recvs_posted, recvs_done;
  uint64_t in_tail; /* my copy of in.ctrl->tail */
  uint64_t in_head_seen;
  unsigned char *staging; /* DIRECT reductions: a cache-sized chunk */
  int64_t idle_since_ns;  /* pending work but no movement since; for the liveness check */
  int64_t last_alive_check_ns;
  coll_status_t failed;
  char failure[256];
} shm_conn_t;

struct transport_group {
  int rank;
  int nranks;
  shm_inbox_t *inbox;
  size_t inbox_len;
  int inbox_fd;
  char inbox_name[96];
  bool unlinked;
  shm_conn_t **conns; /* by peer */
  uint32_t seen_bell;
  uint64_t cookie;
  int64_t spin_ns;
  size_t direct_min;   /* messages at least this long go single-copy (when allowed) */
  size_t direct_chunk; /* staging for single-copy reductions */
  bool direct_enabled;
};

/* Data path (shm.c). */
extern const transport_ops_t shm_ops;
/* Ring the doorbell of an inbox: wake its owner if it sleeps. */
void shm_ring(shm_inbox_t *inbox);
coll_status_t shm_group_wait(transport_group_t *g, int timeout_ms, bool *woke);
void shm_conn_free(shm_conn_t *c);
/* Liveness (shm_setup.c): false when the peer's process is gone. */
bool shm_peer_alive(const shm_conn_t *c);

#endif
