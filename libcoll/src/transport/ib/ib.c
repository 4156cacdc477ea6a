/* ib transport, data path: messages cut into slot-sized chunks, each copied into a
 * registered outbox slot and RDMA-written with immediate into the same slot of the peer's
 * inbox; the immediate carries the chunk's length and a last-chunk flag, and its receive
 * completion tells the peer the bytes are there. The receiver copies (or reduces) each
 * chunk into the posted destination, in order, and returns the slots in credit messages.
 *
 * Flow control: chunk k uses slot k % nslots on both sides. A sender posts chunk k only
 * while k - (slots returned) < nslots (the peer's slot is free) and k - (local write
 * completions) < nslots (our outbox slot is free), so it never overruns the receiver.
 * The receiver returns credits once half the ring is consumed: if the sender ever runs
 * out, every slot it used has arrived, and a receiver that waits for more data has
 * consumed them all, so the credit message is always sent (no deadlock). A receive work
 * request is reposted for every completion, so the receive queue never runs dry: at most
 * nslots data chunks plus nslots credit messages can be outstanding.
 *
 * A send is complete once its last chunk is copied into the outbox: the user buffer may
 * be reused then, even before the RDMA write is acknowledged. Messages of at least
 * COLL_IB_ZCOPY_BYTES skip the rings where the receive is a plain copy (ib_zcopy.c); they
 * complete when their write is acknowledged, and completions stay in posting order. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/ib/ib.h"

coll_status_t ib_fail(ib_conn_t *c, coll_status_t st, const char *fmt, ...) {
  if (c->failed == COLL_OK) {
    const ib_group_t *g = c->group;
    int n = snprintf(c->failure, sizeof c->failure,
                     "ib device %s port %d, peer rank %d (host %s): ", g->pick.device, g->pick.port,
                     c->base.peer, c->peer_host);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof c->failure)
      vsnprintf(c->failure + n, sizeof c->failure - (size_t)n, fmt, ap);
    va_end(ap);
    c->failed = st;
  }
  return coll_error(c->failed, "%s", c->failure);
}

bool ib_conn_has_work(const ib_conn_t *c) {
  return c->sends_done < c->sends_posted || c->recvs_done < c->recvs_posted;
}

static coll_status_t ib_post_send(transport_conn_t *conn, const void *buf, size_t len) {
  ib_conn_t *c = (ib_conn_t *)conn;
  if (c->failed != COLL_OK) return coll_error(c->failed, "%s", c->failure);
  if (c->sends_posted - c->sends_done == c->send_cap &&
      !transport_queue_grow((void **)&c->sends, &c->send_cap, c->sends_done, c->sends_posted,
                            sizeof *c->sends))
    return coll_error(COLL_ERR_NO_MEMORY, "ib send to rank %d: out of memory", c->base.peer);
  c->sends[c->sends_posted & (c->send_cap - 1)] =
      (ib_send_t){.buf = buf, .len = len, .done = false};
  c->sends_posted++;
  return COLL_OK;
}

static coll_status_t ib_post_recv(transport_conn_t *conn, const transport_recv_t *recv) {
  ib_conn_t *c = (ib_conn_t *)conn;
  if (c->failed != COLL_OK) return coll_error(c->failed, "%s", c->failure);
  if (c->recvs_posted - c->recvs_done == c->recv_cap &&
      !transport_queue_grow((void **)&c->recvs, &c->recv_cap, c->recvs_done, c->recvs_posted,
                            sizeof *c->recvs))
    return coll_error(COLL_ERR_NO_MEMORY, "ib receive from rank %d: out of memory", c->base.peer);
  c->recvs[c->recvs_posted & (c->recv_cap - 1)] = *recv;
  c->recvs_posted++;
  return COLL_OK;
}

coll_status_t ib_post_recv_wr(ib_conn_t *c) {
  /* No scatter list: data lands through RDMA writes, credits carry only the immediate. */
  struct ibv_recv_wr wr = {.wr_id = IB_WR_ID(c->base.peer, IB_WR_RECV)};
  struct ibv_recv_wr *bad = NULL;
  int rc = ibv_post_recv(c->qp, &wr, &bad);
  if (rc != 0) return ib_fail(c, COLL_ERR_SYSTEM, "ibv_post_recv: %s", strerror(rc));
  return COLL_OK;
}

static const char *wr_kind_name(int kind) {
  switch (kind) {
    case IB_WR_DATA:
      return "RDMA write";
    case IB_WR_CREDIT:
      return "credit send";
    case IB_WR_PING:
      return "liveness ping";
    default:
      return "receive";
  }
}

static coll_status_t completion_error(ib_conn_t *c, int kind, const struct ibv_wc *wc) {
  if (wc->status == IBV_WC_WR_FLUSH_ERR && c->failed != COLL_OK) return c->failed;
  bool remote = wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR ||
                wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_OP_ERR ||
                wc->status == IBV_WC_REM_INV_REQ_ERR;
  const char *hint = wc->status == IBV_WC_RETRY_EXC_ERR
                         ? " (the peer stopped answering: it exited or died, or the path or "
                           "GID does not reach it)"
                         : "";
  return ib_fail(c, remote ? COLL_ERR_REMOTE : COLL_ERR_SYSTEM,
                 "%s completed with error: %s (status %d, vendor error 0x%x)%s", wr_kind_name(kind),
                 ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err, hint);
}

static void arrival(ib_conn_t *c, const struct ibv_wc *wc) {
  if (ib_post_recv_wr(c) != COLL_OK) return;
  uint32_t imm = (wc->wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc->imm_data) : 0;
  if ((wc->wc_flags & IBV_WC_WITH_IMM) == 0) {
    ib_fail(c, COLL_ERR_PROTOCOL, "a message without immediate data arrived (opcode %d)",
            (int)wc->opcode);
    return;
  }
  if ((imm & IB_IMM_CTRL) == IB_IMM_CTRL) {
    uint32_t what = imm & IB_IMM_VALUE;
    coll_log(COLL_LOG_TRACE, "ib: control %u from rank %d", what, c->base.peer);
    if (what == IB_CTRL_FIN)
      c->fins++;
    else if (what == IB_CTRL_RTR_ZC || what == IB_CTRL_RTR_STAGE)
      c->rtr = what == IB_CTRL_RTR_ZC ? RTR_GOT_ZC : RTR_GOT_STAGE;
    else
      ib_fail(c, COLL_ERR_PROTOCOL, "unknown control message 0x%08x", imm);
    return;
  }
  if (wc->opcode == IBV_WC_RECV && (imm & IB_IMM_CREDIT) != 0) {
    c->credits_back += imm & IB_IMM_VALUE;
    if (c->chunks_sent < c->credits_back)
      ib_fail(c, COLL_ERR_PROTOCOL, "the peer returned %llu slots for %llu chunks sent",
              (unsigned long long)c->credits_back, (unsigned long long)c->chunks_sent);
    return;
  }
  int nslots = c->group->nslots;
  if (c->chunks_arrived - c->chunks_consumed >= (uint64_t)nslots) {
    ib_fail(c, COLL_ERR_PROTOCOL, "the peer wrote past its credits (%d slots)", nslots);
    return;
  }
  c->arrived[c->chunks_arrived % (uint64_t)nslots] = imm;
  c->chunks_arrived++;
}

coll_status_t ib_poll_cq(ib_group_t *g) {
  struct ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(g->cq, 32, wcs);
    int64_t now = n > 0 ? coll_now_ns() : 0;
    if (n < 0)
      return coll_error(COLL_ERR_SYSTEM, "ib device %s port %d: ibv_poll_cq failed (%d)",
                        g->pick.device, g->pick.port, n);
    for (int i = 0; i < n; i++) {
      const struct ibv_wc *wc = &wcs[i];
      uint64_t peer = wc->wr_id >> 3;
      int kind = (int)(wc->wr_id & 7u);
      ib_conn_t *c = peer < (uint64_t)g->nranks ? g->conns[peer] : NULL;
      if (c == NULL) continue;
      c->dirty = true;
      c->last_heard_ns = now;
      if (kind != IB_WR_RECV) c->sq_used--;
      if (kind == IB_WR_PING) {
        c->ping_inflight = false;
        coll_log(COLL_LOG_TRACE, "ib: ping to rank %d: %s", c->base.peer,
                 ibv_wc_status_str(wc->status));
      }
      if (wc->status != IBV_WC_SUCCESS) {
        completion_error(c, kind, wc);
        continue;
      }
      if (kind == IB_WR_DATA)
        c->chunks_acked++;
      else if (kind == IB_WR_RECV)
        arrival(c, wc);
      else if (kind == IB_WR_ZC)
        ib_zc_write_done(c);
    }
    if (n < 32) return COLL_OK;
  }
}

coll_status_t ib_post_send_wr(ib_conn_t *c, struct ibv_send_wr *wr) {
  struct ibv_send_wr *bad = NULL;
  int rc = ibv_post_send(c->qp, wr, &bad);
  if (rc != 0) return ib_fail(c, COLL_ERR_SYSTEM, "ibv_post_send: %s", strerror(rc));
  c->sq_used++;
  return COLL_OK;
}

/* Move queued messages into chunks while credits, outbox slots and send queue allow;
 * large ones go through the zero-copy rendezvous first (ib_zcopy.c). */
static coll_status_t push_chunks(ib_conn_t *c) {
  const ib_group_t *g = c->group;
  uint64_t nslots = (uint64_t)g->nslots;
  size_t sb = g->slot_bytes;
  coll_status_t st = COLL_OK;
  while (c->sends_pushed < c->sends_posted && st == COLL_OK) {
    ib_send_t *m = &c->sends[c->sends_pushed & (c->send_cap - 1)];
    if (g->zc_min > 0 && m->len >= g->zc_min && c->send_off == 0) {
      bool wait, pushed;
      st = ib_zc_send(c, m, &wait, &pushed);
      if (st != COLL_OK || wait) break;
      if (pushed) {
        c->sends_pushed++;
        continue;
      }
    }
    if (c->chunks_sent - c->credits_back >= nslots || c->chunks_sent - c->chunks_acked >= nslots ||
        c->sq_used >= g->sq_depth)
      break;
    size_t len = m->len - c->send_off < sb ? m->len - c->send_off : sb;
    bool last = c->send_off + len == m->len;
    size_t slot = (size_t)(c->chunks_sent % nslots);
    struct ibv_sge sge = {
        .addr = (uintptr_t)(c->outbox + slot * sb), .length = (uint32_t)len, .lkey = c->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = IB_WR_ID(c->base.peer, IB_WR_DATA),
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl((uint32_t)len | (last ? IB_IMM_LAST : 0u)),
    };
    if (len > 0) {
      memcpy(c->outbox + slot * sb, (const char *)m->buf + c->send_off, len);
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = c->remote_addr + slot * sb;
      wr.wr.rdma.rkey = c->remote_rkey;
    } else {
      wr.opcode = IBV_WR_SEND_WITH_IMM; /* empty message: no bytes to write */
    }
    st = ib_post_send_wr(c, &wr);
    if (st != COLL_OK) break;
    c->chunks_sent++;
    c->send_off += len;
    if (last) {
      m->done = true; /* copied out: the caller's buffer is free */
      c->sends_pushed++;
      c->send_off = 0;
      c->send_staged = false;
    }
  }
  while (c->sends_done < c->sends_pushed && c->sends[c->sends_done & (c->send_cap - 1)].done)
    c->sends_done++;
  return st;
}

static coll_status_t return_credits(ib_conn_t *c) {
  uint64_t pending = c->chunks_consumed - c->credits_sent;
  uint64_t threshold = (uint64_t)c->group->nslots / 2;
  if (pending == 0 || pending < threshold || c->sq_used >= c->group->sq_depth) return COLL_OK;
  struct ibv_send_wr wr = {
      .wr_id = IB_WR_ID(c->base.peer, IB_WR_CREDIT),
      .opcode = IBV_WR_SEND_WITH_IMM,
      .send_flags = IBV_SEND_SIGNALED,
      .imm_data = htonl(IB_IMM_CREDIT | (uint32_t)pending),
  };
  coll_status_t st = ib_post_send_wr(c, &wr);
  if (st == COLL_OK) c->credits_sent += pending;
  return st;
}

/* Deliver arrived chunks to the posted receives, in order. */
static coll_status_t consume(ib_conn_t *c) {
  const ib_group_t *g = c->group;
  uint64_t nslots = (uint64_t)g->nslots;
  size_t sb = g->slot_bytes;
  while (c->recvs_done < c->recvs_posted) {
    const transport_recv_t *r = &c->recvs[c->recvs_done & (c->recv_cap - 1)];
    if (g->zc_min > 0 && r->len >= g->zc_min && c->recv_off == 0) {
      bool wait, done;
      coll_status_t st = ib_zc_recv(c, r, &wait, &done);
      if (st != COLL_OK) return st;
      if (done) {
        c->recvs_done++;
        continue;
      }
      if (wait) break;
    }
    if (c->chunks_consumed == c->chunks_arrived) break;
    size_t slot = (size_t)(c->chunks_consumed % nslots);
    uint32_t imm = c->arrived[slot];
    size_t len = imm & IB_IMM_VALUE;
    bool last = (imm & IB_IMM_LAST) != 0;
    size_t end = c->recv_off + len;
    if (len > sb || end > r->len || (end == r->len) != last)
      return ib_fail(c, COLL_ERR_PROTOCOL,
                     "message %llu is %s than the posted receive of %zu bytes (chunk of %zu "
                     "bytes at offset %zu%s)",
                     (unsigned long long)c->recvs_done,
                     end > r->len || !last ? "longer" : "shorter", r->len, len, c->recv_off,
                     last ? ", last" : "");
    if (len > 0) {
      const unsigned char *src = c->inbox + slot * sb;
      char *dst = (char *)r->dst + c->recv_off;
      if (r->operand != NULL)
        r->reduce(dst, (const char *)r->operand + c->recv_off, src, len / r->elem_size);
      else
        memcpy(dst, src, len);
    }
    c->recv_off = end;
    c->chunks_consumed++;
    if (last) {
      c->recvs_done++;
      c->recv_off = 0;
      c->zc_recv = ZC_NONE;
    }
  }
  return return_credits(c);
}

/* See IB_PING_MS in ib.h. */
static coll_status_t ping_if_silent(ib_conn_t *c) {
  if (c->ping_inflight || c->sq_used >= c->group->sq_depth || !ib_conn_has_work(c)) return COLL_OK;
  int64_t now = coll_now_ns();
  if (now - c->last_heard_ns < (int64_t)IB_PING_MS * 1000000) return COLL_OK;
  struct ibv_sge sge = {.addr = (uintptr_t)c->scratch, .length = 1, .lkey = c->mr->lkey};
  struct ibv_send_wr wr = {
      .wr_id = IB_WR_ID(c->base.peer, IB_WR_PING),
      .opcode = IBV_WR_RDMA_WRITE,
      .send_flags = IBV_SEND_SIGNALED,
      .sg_list = &sge,
      .num_sge = 1,
      .wr.rdma = {.remote_addr =
                      c->remote_addr + 2 * (uint64_t)c->group->nslots * c->group->slot_bytes,
                  .rkey = c->remote_rkey},
  };
  coll_status_t st = ib_post_send_wr(c, &wr);
  if (st == COLL_OK) {
    coll_log(COLL_LOG_TRACE, "ib: rank %d silent for %lld ms: liveness ping", c->base.peer,
             (long long)((now - c->last_heard_ns) / 1000000));
    c->ping_inflight = true;
    c->last_heard_ns = now;
  }
  return st;
}

static coll_status_t ib_progress(transport_conn_t *conn, uint64_t *sends_done,
                                 uint64_t *recvs_done) {
  ib_conn_t *c = (ib_conn_t *)conn;
  coll_status_t st = c->failed == COLL_OK ? ib_poll_cq(c->group) : COLL_OK;
  c->dirty = false;
  if (st == COLL_OK && c->failed == COLL_OK) st = consume(c);
  if (st == COLL_OK && c->failed == COLL_OK) st = push_chunks(c);
  if (st == COLL_OK && c->failed == COLL_OK) st = ping_if_silent(c);
  if (st == COLL_OK && c->failed != COLL_OK) st = coll_error(c->failed, "%s", c->failure);
  if (sends_done != NULL) *sends_done = c->sends_done;
  if (recvs_done != NULL) *recvs_done = c->recvs_done;
  return st;
}

const transport_ops_t ib_ops = {
    .name = "ib",
    .post_send = ib_post_send,
    .post_recv = ib_post_recv,
    .progress = ib_progress,
};
