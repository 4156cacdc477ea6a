/* Private to the ib transport: the structures shared by ib.c (data path, completions,
 * credits) and ib_setup.c (device, queue pairs, exchange through the store, waiting). */
#ifndef COLL_TRANSPORT_IB_H
#define COLL_TRANSPORT_IB_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/ib/ib_device.h"
#include "transport/transport.h"
#include "transport/transport_kind.h"

/* Immediate data (32 bits, network order on the wire) of every message on a QP:
 *   data chunk:  LAST? | length        (RDMA write with immediate into the next slot,
 *                                       or a send with immediate when length is 0)
 *   credits:     CREDIT | slots freed  (a send with immediate, no payload)
 *   control:     LAST | CREDIT | what  (zero-copy rendezvous, ib_zcopy.c) */
#define IB_IMM_LAST (1u << 31)
#define IB_IMM_CREDIT (1u << 30)
#define IB_IMM_CTRL (IB_IMM_LAST | IB_IMM_CREDIT)
#define IB_IMM_VALUE ((1u << 30) - 1u)
enum { IB_CTRL_RTR_ZC = 1, IB_CTRL_RTR_STAGE = 2, IB_CTRL_FIN = 3 };

/* Work request ids: peer rank << 3 | kind, so a completion finds its connection. */
enum {
  IB_WR_DATA = 0,
  IB_WR_CREDIT = 1,
  IB_WR_RECV = 2,
  IB_WR_PING = 3,
  IB_WR_ZC = 4,   /* a piece of a zero-copy write into the peer's destination */
  IB_WR_CTRL = 5, /* a rendezvous reply (ready to receive) */
};
/* A connection that waits for its peer and heard nothing for IB_PING_MS writes one byte
 * into the peer's scratch area: the peer's adapter acknowledges it without the peer's
 * CPU, and a dead peer (its QP gone with its process) turns it into a retry-exceeded
 * completion error instead of a silent wait until the collective's timeout. */
#define IB_PING_MS 1000
#define IB_WR_ID(peer, kind) (((uint64_t)(peer) << 3) | (uint64_t)(kind))
/* The scratch area after the outbox: ping target, and the zero-copy mailboxes. */
#define IB_SCRATCH_BYTES 128
#define IB_MAILBOX_IN 64  /* the peer writes its destination here (ib_zcopy.c) */
#define IB_MAILBOX_OUT 96 /* ours, staged for that write */

typedef struct {
  const void *buf;
  size_t len;
  bool done; /* the buffer may be reused (completion is reported in posting order) */
} ib_send_t;

/* Zero-copy rendezvous state of a connection's current large message (ib_zcopy.c). */
enum { ZC_NONE = 0, ZC_WAIT_FIN, ZC_STAGING };
enum { RTR_NONE = 0, RTR_GOT_ZC, RTR_GOT_STAGE };

/* All ib connections of one rank (the registry's group). */
typedef struct transport_group ib_group_t;

/* One reliable-connected QP per peer, carrying both directions. Each side owns a ring of
 * nslots receive slots the peer RDMA-writes into (its "inbox") and a ring of nslots send
 * slots of its own (source of those writes); chunk number k of the connection uses slot
 * k % nslots on both sides. A sender holds a credit per free slot of the peer's inbox and
 * gets them back in credit messages once the receiver has consumed the slots. */
typedef struct ib_conn {
  transport_conn_t base;
  ib_group_t *group;
  char peer_host[128];
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  unsigned char *inbox;   /* nslots x slot bytes, registered, peer writes here */
  unsigned char *outbox;  /* nslots x slot bytes, registered, source of our writes */
  unsigned char *scratch; /* IB_SCRATCH_BYTES after the outbox */
  uint64_t remote_addr;   /* the peer's inbox */
  uint32_t remote_rkey;
  /* send side; queue indexed by message number modulo the capacity (a power of two) */
  ib_send_t *sends;
  uint64_t send_cap, sends_posted, sends_done;
  uint64_t sends_pushed;     /* messages wholly handed to the adapter (chunks or zero-copy) */
  size_t send_off;           /* bytes of message sends_pushed already in chunks */
  bool send_staged;          /* message sends_pushed is large but goes through staging */
  int rtr;                   /* RTR_*: the peer's answer for our next large message */
  struct ibv_mr *zc_send_mr; /* the user buffer of the zero-copy write in flight */
  uint64_t zc_send_msg;
  int zc_writes_left;
  uint64_t chunks_sent;  /* data chunks posted */
  uint64_t chunks_acked; /* their local completions (outbox slots free again) */
  uint64_t credits_back; /* inbox slots the peer has returned in total */
  int sq_used;           /* send work requests not yet completed */
  /* receive side */
  transport_recv_t *recvs;
  uint64_t recv_cap, recvs_posted, recvs_done;
  size_t recv_off;           /* bytes of message recvs_done already delivered */
  int zc_recv;               /* ZC_*: how message recvs_done arrives when large */
  struct ibv_mr *zc_recv_mr; /* its registered destination */
  uint64_t fins, fins_used;  /* zero-copy writes the peer finished / we delivered */
  uint32_t *arrived;         /* immediate of each arrived, unconsumed chunk, by slot */
  uint64_t chunks_arrived;   /* data chunks the peer wrote into our inbox */
  uint64_t chunks_consumed;  /* and that we copied or reduced out */
  uint64_t credits_sent;     /* inbox slots returned to the peer in total */
  bool dirty;                /* a completion arrived since this connection's progress */
  bool ping_inflight;        /* a liveness ping is posted */
  int64_t last_heard_ns;     /* last completion of any kind on this QP */
  coll_status_t failed;      /* sticky */
  char failure[400];
} ib_conn_t;

struct transport_group {
  int rank;
  int nranks;
  ib_port_pick_t pick;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *channel;
  struct ibv_cq *cq; /* shared by every QP of the group */
  bool armed;        /* ibv_req_notify_cq done since the last event */
  int epfd;          /* the channel's fd and the device's async event fd */
  size_t slot_bytes;
  int nslots;
  size_t zc_min; /* messages of at least this many bytes may go zero-copy; 0: never */
  int sq_depth;
  int rq_depth;
  int timeout_ms;    /* for messages */
  ib_conn_t **conns; /* by peer; NULL when not an ib peer */
};

/* The data path (ib.c). */
extern const transport_ops_t ib_ops;
/* Drain the completion queue, updating every connection it concerns. */
coll_status_t ib_poll_cq(ib_group_t *g);
/* Post one receive work request (each incoming message takes one). */
coll_status_t ib_post_recv_wr(ib_conn_t *c);
/* Record a connection failure (first one sticks) and return it as the thread's error. */
coll_status_t ib_fail(ib_conn_t *c, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool ib_conn_has_work(const ib_conn_t *c);
coll_status_t ib_post_send_wr(ib_conn_t *c, struct ibv_send_wr *wr);

/* Zero-copy rendezvous (ib_zcopy.c). Sender: for large message m, say whether to
 * (*wait) stop until the receiver answers, or whether the message went zero-copy
 * (*pushed) or must go through staging chunks (neither). */
coll_status_t ib_zc_send(ib_conn_t *c, ib_send_t *m, bool *wait, bool *pushed);
/* Receiver: for large head receive r, *wait says it cannot use chunks yet, *done that
 * the zero-copy write finished (the receive is complete). */
coll_status_t ib_zc_recv(ib_conn_t *c, const transport_recv_t *r, bool *wait, bool *done);
/* A zero-copy write piece completed locally. */
void ib_zc_write_done(ib_conn_t *c);
/* Drop registrations of a closing or failed connection. */
void ib_zc_release(ib_conn_t *c);

#endif
