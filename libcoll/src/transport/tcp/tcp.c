/* tcp transport, data path: messages striped over several non-blocking sockets per peer,
 * a small frame header per message and stream, copies received straight into the
 * destination and reductions through a small per-stream staging buffer.
 *
 * Striping: message number m of length L is cut into pieces of `piece` bytes (one piece
 * when L <= piece, also for L == 0). Piece p travels on stream (m + p) % nsocks, so both
 * sides know from the message number alone which stream carries which bytes. Each stream
 * sends, per message it has a piece of, one tcp_frame_t then its pieces in order; the
 * receiver checks the frame's length against the posted receive (COLL_ERR_PROTOCOL on a
 * mismatch). Messages of at most TCP_SMALL_BYTES go whole on stream 0 instead: a call's
 * few small messages to a peer then leave in one write (send_small_batch) and arrive in
 * one read (the read-ahead, stream_readv).
 *
 * Environment (read at connect, see tcp_setup.c for the rest):
 *   COLL_TCP_PIECE_BYTES    striping unit, power of two in [4 KiB, 64 MiB] (512 KiB)
 *   COLL_TCP_STAGING_BYTES  reduction staging per stream, [4 KiB, 8 MiB] (256 KiB) */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/env.h"
#include "common/error.h"
#include "transport/tcp/tcp.h"

#define NOT_STARTED SIZE_MAX
#define BURST (256u << 10)

static coll_status_t fail(tcp_conn_t *c, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static coll_status_t fail(tcp_conn_t *c, coll_status_t st, const char *fmt, ...) {
  if (c->failed == COLL_OK) {
    int n = snprintf(c->failure, sizeof c->failure, "peer rank %d (host %s): ", c->base.peer,
                     c->peer_host);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof c->failure)
      vsnprintf(c->failure + n, sizeof c->failure - (size_t)n, fmt, ap);
    va_end(ap);
    c->failed = st;
  }
  return coll_error(c->failed, "%s", c->failure);
}

static coll_status_t io_error(tcp_conn_t *c, tcp_stream_t *s, int err, const char *what) {
  if (err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ETIMEDOUT ||
      err == EHOSTUNREACH || err == ENETUNREACH)
    return fail(c, COLL_ERR_REMOTE, "%s on stream %d: %s (peer failed or closed)", what, s->index,
                strerror(err));
  return fail(c, COLL_ERR_SYSTEM, "%s on stream %d: %s", what, s->index, strerror(err));
}

static size_t npieces(const tcp_conn_t *c, size_t len) {
  return len == 0 ? 1 : (len + c->piece - 1) / c->piece;
}

/* First piece of message m (len bytes) that stream s carries (>= npieces: none). Small
 * messages all travel on stream 0, so a call's few small messages to one peer (the
 * fingerprint, then the data) leave in one write (send_small_batch). */
static size_t first_piece(const tcp_conn_t *c, const tcp_stream_t *s, uint64_t m, size_t len) {
  if (len <= TCP_SMALL_BYTES) return s->index == 0 ? 0 : SIZE_MAX;
  uint64_t n = (uint64_t)c->nsocks;
  return (size_t)(((uint64_t)s->index + n - m % n) % n);
}

/* Whether message m + 1 is queued, small, and also on stream s: then both go out in one
 * write (send_small_batch). */
static bool small_follows(const tcp_conn_t *c, const tcp_stream_t *s, uint64_t m) {
  if (s->index != 0 || m + 1 >= c->sends_posted) return false;
  return c->sends[(m + 1) & (c->send_cap - 1)].len <= TCP_SMALL_BYTES;
}

static int streams_with_pieces(const tcp_conn_t *c, size_t len) {
  size_t p = npieces(c, len);
  return p < (size_t)c->nsocks ? (int)p : c->nsocks;
}

static coll_status_t tcp_post_send(transport_conn_t *conn, const void *buf, size_t len) {
  tcp_conn_t *c = (tcp_conn_t *)conn;
  if (c->failed != COLL_OK) return coll_error(c->failed, "%s", c->failure);
  if (c->sends_posted - c->sends_done == c->send_cap &&
      !transport_queue_grow((void **)&c->sends, &c->send_cap, c->sends_done, c->sends_posted,
                            sizeof *c->sends))
    return coll_error(COLL_ERR_NO_MEMORY, "tcp send to rank %d: out of memory", c->base.peer);
  tcp_send_t *m = &c->sends[c->sends_posted & (c->send_cap - 1)];
  *m = (tcp_send_t){.buf = buf, .len = len, .streams_left = streams_with_pieces(c, len)};
  c->sends_posted++;
  return COLL_OK;
}

static coll_status_t tcp_post_recv(transport_conn_t *conn, const transport_recv_t *recv) {
  tcp_conn_t *c = (tcp_conn_t *)conn;
  if (c->failed != COLL_OK) return coll_error(c->failed, "%s", c->failure);
  if (c->recvs_posted - c->recvs_done == c->recv_cap &&
      !transport_queue_grow((void **)&c->recvs, &c->recv_cap, c->recvs_done, c->recvs_posted,
                            sizeof *c->recvs))
    return coll_error(COLL_ERR_NO_MEMORY, "tcp receive from rank %d: out of memory", c->base.peer);
  tcp_recv_t *m = &c->recvs[c->recvs_posted & (c->recv_cap - 1)];
  *m = (tcp_recv_t){.r = *recv, .streams_left = streams_with_pieces(c, recv->len)};
  c->recvs_posted++;
  return COLL_OK;
}

/* How many small messages one sendmsg takes at most, frames and data together. */
#define SMALL_BATCH 8

/* Count w bytes written from stream s's small messages, starting with the one at its
 * cursor: each message whose frame and data are all out is done. */
static void account_small(tcp_conn_t *c, tcp_stream_t *s, size_t w) {
  while (s->send_msg < c->sends_posted) {
    tcp_send_t *m = &c->sends[s->send_msg & (c->send_cap - 1)];
    if (s->send_piece == NOT_STARTED) {
      if (w == 0) return;
      s->send_piece = 0;
      s->hdr_out =
          (tcp_frame_t){.magic = TCP_FRAME_MAGIC, .seq = (uint32_t)s->send_msg, .len = m->len};
      s->hdr_sent = 0;
      s->send_off = 0;
    }
    size_t h = sizeof s->hdr_out - s->hdr_sent, take = w < h ? w : h;
    s->hdr_sent += take;
    w -= take;
    size_t d = m->len - s->send_off;
    take = w < d ? w : d;
    s->send_off += take;
    w -= take;
    if (s->hdr_sent < sizeof s->hdr_out || s->send_off < m->len) return;
    m->streams_left--;
    s->send_piece = NOT_STARTED;
    s->send_msg++;
  }
}

/* Stream 0 with a small message at its cursor: the unsent rest of it and up to
 * SMALL_BATCH - 1 small messages queued behind it go in one sendmsg, frames and data (a
 * call's fingerprint and data message then cost one system call, not one each). Held
 * back (MSG_MORE) only when yet another small message follows and the caller's loop is
 * sure to write again (its budget not spent by this write). */
static coll_status_t send_small_batch(tcp_conn_t *c, tcp_stream_t *s, size_t budget, size_t *moved,
                                      bool *blocked) {
  tcp_frame_t frames[SMALL_BATCH];
  struct iovec iov[2 * SMALL_BATCH];
  int n = 0, count = 0;
  uint64_t k = s->send_msg;
  for (; k < c->sends_posted && count < SMALL_BATCH; k++, count++) {
    const tcp_send_t *m = &c->sends[k & (c->send_cap - 1)];
    if (m->len > TCP_SMALL_BYTES) break;
    bool started = k == s->send_msg && s->send_piece != NOT_STARTED;
    size_t hdr_sent = started ? s->hdr_sent : 0, off = started ? s->send_off : 0;
    frames[count] = (tcp_frame_t){.magic = TCP_FRAME_MAGIC, .seq = (uint32_t)k, .len = m->len};
    if (hdr_sent < sizeof frames[count])
      iov[n++] = (struct iovec){(char *)&frames[count] + hdr_sent, sizeof frames[count] - hdr_sent};
    if (off < m->len) iov[n++] = (struct iovec){(char *)m->buf + off, m->len - off};
  }
  size_t total = 0;
  for (int i = 0; i < n; i++) total += iov[i].iov_len;
  int more = *moved + total < budget && small_follows(c, s, k - 1) ? MSG_MORE : 0;
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  ssize_t w;
  do {
    w = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT | more);
  } while (w < 0 && errno == EINTR);
  if (w < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *blocked = true;
      return COLL_OK;
    }
    return io_error(c, s, errno, "send");
  }
  *moved += (size_t)w;
  account_small(c, s, (size_t)w);
  return COLL_OK;
}

/* Write what the socket takes. *blocked: stopped on a full socket buffer. */
static coll_status_t stream_send(tcp_conn_t *c, tcp_stream_t *s, size_t budget, size_t *moved,
                                 bool *blocked) {
  *blocked = false;
  *moved = 0;
  while (s->send_msg < c->sends_posted && *moved < budget) {
    tcp_send_t *m = &c->sends[s->send_msg & (c->send_cap - 1)];
    if (m->len <= TCP_SMALL_BYTES && s->index == 0) { /* small messages: stream 0 only */
      coll_status_t st = send_small_batch(c, s, budget, moved, blocked);
      if (st != COLL_OK || *blocked) return st;
      continue;
    }
    size_t np = npieces(c, m->len);
    if (s->send_piece == NOT_STARTED) {
      s->send_piece = first_piece(c, s, s->send_msg, m->len);
      if (s->send_piece >= np) { /* no piece of this message on this stream */
        s->send_piece = NOT_STARTED;
        s->send_msg++;
        continue;
      }
      s->hdr_out =
          (tcp_frame_t){.magic = TCP_FRAME_MAGIC, .seq = (uint32_t)s->send_msg, .len = m->len};
      s->hdr_sent = 0;
      s->send_off = 0;
    }
    size_t start = s->send_piece * c->piece;
    size_t plen = m->len - start < c->piece ? m->len - start : c->piece;
    struct iovec iov[2];
    int n = 0;
    if (s->hdr_sent < sizeof s->hdr_out)
      iov[n++] = (struct iovec){(char *)&s->hdr_out + s->hdr_sent, sizeof s->hdr_out - s->hdr_sent};
    if (s->send_off < plen)
      iov[n++] = (struct iovec){(char *)m->buf + start + s->send_off, plen - s->send_off};
    if (n > 0) {
      struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
      ssize_t w = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          *blocked = true;
          return COLL_OK;
        }
        return io_error(c, s, errno, "send");
      }
      size_t got = (size_t)w;
      *moved += got;
      size_t h = sizeof s->hdr_out - s->hdr_sent;
      if (got >= h) {
        s->hdr_sent = sizeof s->hdr_out;
        s->send_off += got - h;
      } else {
        s->hdr_sent += got;
      }
      if (s->send_off < plen || s->hdr_sent < sizeof s->hdr_out) continue;
    }
    s->send_piece += (size_t)c->nsocks;
    s->send_off = 0;
    if (s->send_piece >= np) {
      m->streams_left--;
      s->send_piece = NOT_STARTED;
      s->send_msg++;
    }
  }
  return COLL_OK;
}

/* A frame naming a message behind the stream's cursor: one the receiver decided has no
 * piece on this stream, from the length of its posted receive. The sender cut it from
 * another length, so the two sides disagree on it (COLL_ERR_PROTOCOL). */
static coll_status_t check_not_skipped(tcp_conn_t *c, const tcp_stream_t *s, const tcp_frame_t *f) {
  uint32_t behind = (uint32_t)s->recv_msg - f->seq;
  if (f->magic != TCP_FRAME_MAGIC || behind == 0 || behind > UINT32_MAX / 2) return COLL_OK;
  uint64_t m = s->recv_msg - behind;
  if (m < c->recvs_done)
    return fail(c, COLL_ERR_PROTOCOL,
                "message %llu is %llu bytes but arrived on stream %d after it was received whole",
                (unsigned long long)m, (unsigned long long)f->len, s->index);
  return fail(c, COLL_ERR_PROTOCOL,
              "message %llu is %llu bytes but the posted receive expects %zu (it came on stream "
              "%d, which carries none of a message of the expected length)",
              (unsigned long long)m, (unsigned long long)f->len,
              c->recvs[m & (c->recv_cap - 1)].r.len, s->index);
}

static coll_status_t check_frame(tcp_conn_t *c, tcp_stream_t *s, const tcp_recv_t *m) {
  coll_status_t st = check_not_skipped(c, s, &s->hdr_in);
  if (st != COLL_OK) return st;
  if (s->hdr_in.magic != TCP_FRAME_MAGIC || s->hdr_in.seq != (uint32_t)s->recv_msg)
    return fail(c, COLL_ERR_PROTOCOL,
                "bad frame on stream %d (magic 0x%08x, message %u; expected message %u)", s->index,
                s->hdr_in.magic, s->hdr_in.seq, (uint32_t)s->recv_msg);
  if (s->hdr_in.len != m->r.len)
    return fail(c, COLL_ERR_PROTOCOL,
                "message %llu is %llu bytes but the posted receive expects %zu",
                (unsigned long long)s->recv_msg, (unsigned long long)s->hdr_in.len, m->r.len);
  return COLL_OK;
}

/* With no receive posted at the stream's cursor, look (without taking them) at the
 * bytes waiting on it: the read-ahead's, and with peek_socket the socket's (tcp_wait
 * asks when epoll reports them; progress does not, to stay free of system calls). They
 * start with a frame; one for a message behind the cursor means a length mismatch that
 * no later receive on this stream would see, while the stream that expects the message
 * waits for data that never comes. A frame for the cursor's message or a later one is
 * the sender running ahead: fine, and not looked at again (nor watched for) until the
 * cursor moves. A closed or failed socket is left to the next receive posted on it. */
static coll_status_t check_waiting_frame(tcp_conn_t *c, tcp_stream_t *s, bool peek_socket) {
  if (s->recv_msg < c->recvs_posted || s->peeked_for == s->recv_msg) return COLL_OK;
  tcp_frame_t f;
  size_t have = s->ahead_len < sizeof f ? s->ahead_len : sizeof f;
  if (have > 0) memcpy(&f, s->ahead + s->ahead_off, have);
  if (have < sizeof f) {
    if (!peek_socket) return COLL_OK;
    ssize_t r = recv(s->fd, (char *)&f + have, sizeof f - have, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return COLL_OK;
    if (r <= 0) {
      s->peeked_for = s->recv_msg;
      return COLL_OK;
    }
    have += (size_t)r;
    if (have < sizeof f) return COLL_OK; /* the rest of the frame is on its way */
  }
  coll_status_t st = check_not_skipped(c, s, &f);
  /* Read-ahead bytes alone do not make the socket readable: stay watching it then. */
  if (st == COLL_OK && peek_socket) s->peeked_for = s->recv_msg;
  return st;
}

bool tcp_stream_has_ahead(const tcp_stream_t *s) {
  return s->ahead_len > 0 && s->recv_msg < s->conn->recvs_posted;
}

/* recvmsg into iov[0..n), through the stream's read-ahead: bytes read ahead earlier are
 * handed out first; else, for a small message, the read also takes up to
 * TCP_AHEAD_BYTES of what follows it, so the call's next small messages (the data
 * behind the fingerprint) cost no second system call. Returns what recvmsg would. */
static ssize_t stream_readv(tcp_stream_t *s, const struct iovec *iov, int n, bool small) {
  if (s->ahead_len > 0) {
    size_t given = 0;
    for (int i = 0; i < n && s->ahead_len > 0; i++) {
      size_t k = iov[i].iov_len < s->ahead_len ? iov[i].iov_len : s->ahead_len;
      memcpy(iov[i].iov_base, s->ahead + s->ahead_off, k);
      s->ahead_off += k;
      s->ahead_len -= k;
      given += k;
    }
    return (ssize_t)given;
  }
  struct iovec v[3];
  size_t want = 0;
  for (int i = 0; i < n; i++) v[i] = iov[i], want += iov[i].iov_len;
  int k = n;
  if (small && s->ahead == NULL) s->ahead = malloc(TCP_AHEAD_BYTES); /* stream 0's */
  if (small && s->ahead != NULL) v[k++] = (struct iovec){s->ahead, TCP_AHEAD_BYTES};
  struct msghdr msg = {.msg_iov = v, .msg_iovlen = (size_t)k};
  ssize_t r = recvmsg(s->fd, &msg, MSG_DONTWAIT);
  if (r <= 0 || (size_t)r <= want) return r;
  s->ahead_off = 0;
  s->ahead_len = (size_t)r - want;
  return (ssize_t)want;
}

/* Reduce the whole elements waiting in staging into dst. */
static void reduce_staged(tcp_stream_t *s, const tcp_recv_t *m, size_t start) {
  size_t es = m->r.elem_size;
  size_t avail = s->recv_off - s->reduced_off;
  size_t whole = avail / es * es;
  if (whole == 0) return;
  size_t at = start + s->reduced_off;
  m->r.reduce((char *)m->r.dst + at, (const char *)m->r.operand + at, s->staging, whole / es);
  if (avail > whole) memmove(s->staging, s->staging + whole, avail - whole);
  s->reduced_off += whole;
}

/* Read what has arrived for posted receives. */
static coll_status_t stream_recv(tcp_conn_t *c, tcp_stream_t *s, size_t budget, size_t *moved) {
  *moved = 0;
  while (s->recv_msg < c->recvs_posted && *moved < budget) {
    tcp_recv_t *m = &c->recvs[s->recv_msg & (c->recv_cap - 1)];
    size_t len = m->r.len;
    size_t np = npieces(c, len);
    bool reducing = m->r.operand != NULL;
    if (s->recv_piece == NOT_STARTED) {
      s->recv_piece = first_piece(c, s, s->recv_msg, len);
      if (s->recv_piece >= np) {
        s->recv_piece = NOT_STARTED;
        s->recv_msg++;
        continue;
      }
      s->hdr_got = 0;
      s->recv_off = 0;
      s->reduced_off = 0;
      if (reducing && s->staging == NULL) {
        s->staging = malloc(c->staging_cap);
        if (s->staging == NULL)
          return fail(c, COLL_ERR_NO_MEMORY, "no memory for %zu staging bytes", c->staging_cap);
      }
    }
    size_t start = s->recv_piece * c->piece;
    size_t plen = len - start < c->piece ? len - start : c->piece;
    struct iovec iov[2];
    int n = 0;
    if (s->hdr_got < sizeof s->hdr_in)
      iov[n++] = (struct iovec){(char *)&s->hdr_in + s->hdr_got, sizeof s->hdr_in - s->hdr_got};
    if (s->recv_off < plen) {
      if (!reducing) {
        iov[n++] = (struct iovec){(char *)m->r.dst + start + s->recv_off, plen - s->recv_off};
      } else {
        size_t held = s->recv_off - s->reduced_off;
        size_t room = c->staging_cap - held;
        if (room > plen - s->recv_off) room = plen - s->recv_off;
        iov[n++] = (struct iovec){s->staging + held, room};
      }
    }
    if (n > 0) {
      ssize_t r = stream_readv(s, iov, n, len <= TCP_SMALL_BYTES);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return COLL_OK;
        return io_error(c, s, errno, "recv");
      }
      if (r == 0)
        return fail(c, COLL_ERR_REMOTE, "connection closed by the peer (stream %d, message %llu)",
                    s->index, (unsigned long long)s->recv_msg);
      size_t got = (size_t)r;
      *moved += got;
      size_t h = sizeof s->hdr_in - s->hdr_got;
      if (h > 0 && got >= h) {
        s->hdr_got = sizeof s->hdr_in;
        got -= h;
        coll_status_t st = check_frame(c, s, m);
        if (st != COLL_OK) return st;
      } else if (h > 0) {
        s->hdr_got += got;
        got = 0;
      }
      s->recv_off += got;
      if (reducing) reduce_staged(s, m, start);
      if (s->recv_off < plen || s->hdr_got < sizeof s->hdr_in) continue;
    }
    s->recv_piece += (size_t)c->nsocks;
    s->recv_off = 0;
    s->reduced_off = 0;
    if (s->recv_piece >= np) {
      m->streams_left--;
      s->recv_piece = NOT_STARTED;
      s->recv_msg++;
    }
  }
  return *moved < budget ? check_waiting_frame(c, s, false) : COLL_OK;
}

/* Ask epoll for readability unless the bytes waiting on the stream are known to belong
 * to a receive not posted yet (check_waiting_frame), and for writability while a send
 * is stuck on a full buffer. An idle socket has nothing to read, so it never wakes us;
 * keeping readability watched across messages spares the epoll_ctl calls that turned
 * it on and off (8-byte all-reduces, 2 ranks, 20000 iterations: 49 instead of 3677). */
static coll_status_t update_interest(tcp_conn_t *c, tcp_stream_t *s, bool send_blocked) {
  if (!s->in_epoll) return COLL_OK;
  bool watch_in = s->recv_msg < c->recvs_posted || s->peeked_for != s->recv_msg;
  uint32_t want = (watch_in ? EPOLLIN : 0u) | (send_blocked ? EPOLLOUT : 0u);
  if (want == s->events) return COLL_OK;
  struct epoll_event ev = {.events = want, .data.ptr = s};
  if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, s->fd, &ev) != 0)
    return fail(c, COLL_ERR_SYSTEM, "epoll_ctl: %s", strerror(errno));
  s->events = want;
  return COLL_OK;
}

static coll_status_t tcp_progress(transport_conn_t *conn, uint64_t *sends_done,
                                  uint64_t *recvs_done) {
  tcp_conn_t *c = (tcp_conn_t *)conn;
  coll_status_t st = c->failed;
  if (st != COLL_OK) {
    st = coll_error(st, "%s", c->failure);
    goto out;
  }
  /* Rounds of at most BURST bytes each way per stream: both directions of an exchange
   * keep streaming, instead of filling a 4 MiB socket buffer while the peer's data
   * waits unread (and the peer, its buffer full, waits for us). */
  bool want_out[TCP_MAX_SOCKS] = {false};
  bool moving = true;
  while (moving && st == COLL_OK) {
    moving = false;
    for (int i = 0; i < c->nsocks && st == COLL_OK; i++) {
      tcp_stream_t *s = &c->streams[i];
      size_t sent = 0, got = 0;
      bool blocked = false;
      st = stream_send(c, s, BURST, &sent, &blocked);
      if (st == COLL_OK) st = stream_recv(c, s, BURST, &got);
      /* Stopped on the budget: the socket is still writable, so asking epoll for
       * writability wakes the next wait at once instead of sleeping on work in hand. */
      want_out[i] = blocked || s->send_msg < c->sends_posted;
      moving = moving || sent > 0 || got > 0;
    }
  }
  for (int i = 0; i < c->nsocks && st == COLL_OK; i++)
    st = update_interest(c, &c->streams[i], want_out[i]);
  while (c->sends_done < c->sends_posted &&
         c->sends[c->sends_done & (c->send_cap - 1)].streams_left == 0)
    c->sends_done++;
  while (c->recvs_done < c->recvs_posted &&
         c->recvs[c->recvs_done & (c->recv_cap - 1)].streams_left == 0)
    c->recvs_done++;
out:
  if (sends_done != NULL) *sends_done = c->sends_done;
  if (recvs_done != NULL) *recvs_done = c->recvs_done;
  return st;
}

void tcp_stream_readable(tcp_stream_t *s) {
  tcp_conn_t *c = s->conn;
  /* Stop watching a stream found to hold a later message's bytes (or a closed socket)
   * right away: its connection may have nothing posted, so no progress would, and its
   * level-triggered readability would wake every wait at once until it is received.
   * update_interest changes nothing (no system call) in the other cases. */
  if (check_waiting_frame(c, s, true) == COLL_OK)
    (void)update_interest(c, s, (s->events & EPOLLOUT) != 0);
}

const transport_ops_t tcp_ops = {
    .name = "tcp",
    .post_send = tcp_post_send,
    .post_recv = tcp_post_recv,
    .progress = tcp_progress,
};

coll_status_t tcp_conn_init(tcp_conn_t *c, int peer, const char *peer_host, int nsocks, int epfd) {
  int64_t piece, staging;
  coll_status_t st = coll_env_int("COLL_TCP_PIECE_BYTES", 4096, 64 << 20, 512 << 10, &piece);
  if (st == COLL_OK)
    st = coll_env_int("COLL_TCP_STAGING_BYTES", 4096, 8 << 20, 256 << 10, &staging);
  if (st != COLL_OK) return st;
  if ((piece & (piece - 1)) != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "COLL_TCP_PIECE_BYTES=%lld is not a power of two",
                      (long long)piece);
  c->base = (transport_conn_t){.ops = &tcp_ops, .peer = peer};
  snprintf(c->peer_host, sizeof c->peer_host, "%s", peer_host);
  c->nsocks = nsocks;
  c->piece = (size_t)piece;
  c->staging_cap = (size_t)staging / 64 * 64;
  c->epfd = epfd;
  for (int i = 0; i < TCP_MAX_SOCKS; i++) c->streams[i].fd = -1;
  for (int i = 0; i < nsocks; i++) {
    tcp_stream_t *s = &c->streams[i];
    s->conn = c;
    s->index = i;
    s->send_piece = NOT_STARTED;
    s->recv_piece = NOT_STARTED;
    s->peeked_for = UINT64_MAX;
  }
  return COLL_OK;
}

void tcp_conn_free(tcp_conn_t *c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nsocks; i++) {
    if (c->streams[i].fd >= 0) close(c->streams[i].fd);
    free(c->streams[i].staging);
    free(c->streams[i].ahead);
  }
  free(c->sends);
  free(c->recvs);
  free(c);
}
