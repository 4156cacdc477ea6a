/* Private to the tcp transport: the structures shared by tcp.c (data path, striping,
 * framing) and tcp_setup.c (listening, connecting, handshake). */
#ifndef COLL_TRANSPORT_TCP_H
#define COLL_TRANSPORT_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"
#include "transport/transport_kind.h"

#define TCP_MAX_SOCKS 16
#define TCP_FRAME_MAGIC 0x434f4c4cu /* "COLL" */
/* Messages of at most this many bytes travel whole on stream 0 (tcp.c first_piece). */
#define TCP_SMALL_BYTES ((size_t)16384)
/* Read-ahead room of stream 0 (tcp.c stream_readv). */
#define TCP_AHEAD_BYTES ((size_t)16384)

/* Sent before a message's first piece on every stream that carries a piece of it. */
typedef struct {
  uint32_t magic;
  uint32_t seq; /* low 32 bits of the message sequence number */
  uint64_t len; /* the whole message's length */
} tcp_frame_t;

typedef struct {
  const void *buf;
  size_t len;
  int streams_left; /* streams still sending a piece of it */
} tcp_send_t;

typedef struct {
  transport_recv_t r;
  int streams_left;
} tcp_recv_t;

struct tcp_conn;

/* One socket of a connection and where it stands in the send and receive queues. */
typedef struct {
  struct tcp_conn *conn;
  int fd;
  int index;
  uint32_t events; /* epoll interest currently registered */
  bool in_epoll;   /* false after the socket reported a hang-up or error */
  /* send side: message send_msg, piece send_piece, send_off bytes of it written */
  uint64_t send_msg;
  size_t send_piece;
  size_t send_off;
  size_t hdr_sent; /* bytes of the frame header written (sizeof: all) */
  tcp_frame_t hdr_out;
  /* receive side, same shape; reductions go through staging */
  uint64_t recv_msg;
  size_t recv_piece;
  size_t recv_off;    /* bytes of the piece read (into dst or staging) */
  size_t reduced_off; /* bytes of the piece reduced into dst */
  size_t hdr_got;
  tcp_frame_t hdr_in;
  unsigned char *staging;
  /* Bytes a small message's read took beyond it (the next messages' frames), handed out
   * before the socket is read again (tcp.c stream_readv); stream 0 only. */
  unsigned char *ahead;
  size_t ahead_off, ahead_len;
  /* Cursor value at which the bytes waiting on the socket, with no receive posted there
   * yet, were found to start with a frame of that message or a later one (tcp.c
   * check_waiting_frame): readability is not watched again until the cursor moves. */
  uint64_t peeked_for;
} tcp_stream_t;

typedef struct tcp_conn {
  transport_conn_t base;
  char peer_host[128];
  int nsocks;
  size_t piece;       /* striping unit (power of two) */
  size_t staging_cap; /* per stream, for reductions */
  tcp_stream_t streams[TCP_MAX_SOCKS];
  /* queues, indexed by message number modulo the capacity (a power of two) */
  tcp_send_t *sends;
  uint64_t send_cap, sends_posted, sends_done;
  tcp_recv_t *recvs;
  uint64_t recv_cap, recvs_posted, recvs_done;
  coll_status_t failed; /* sticky error */
  char failure[256];
  int epfd;
} tcp_conn_t;

struct transport_group {
  int rank;
  int nranks;
  int epfd;
  int nsocks;
  tcp_conn_t **conns; /* by peer; NULL when not a tcp peer */
};

/* Data path (tcp.c). */
/* Whether the stream holds read-ahead bytes a posted receive can take now (tcp_wait
 * must not sleep then: the socket is drained and epoll would not wake). */
bool tcp_stream_has_ahead(const tcp_stream_t *s);
/* tcp_wait saw the stream readable: with no receive posted there, check that the
 * waiting bytes are not a message the receiver skipped (a length mismatch, which then
 * fails the connection for its next progress to report). */
void tcp_stream_readable(tcp_stream_t *s);
extern const transport_ops_t tcp_ops;
/* Initialise a connection's queues and streams once its sockets are open. */
coll_status_t tcp_conn_init(tcp_conn_t *c, int peer, const char *peer_host, int nsocks, int epfd);
void tcp_conn_free(tcp_conn_t *c);

#endif
