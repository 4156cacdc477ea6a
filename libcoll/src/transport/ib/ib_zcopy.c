/* ib transport, zero-copy rendezvous for large messages: the receiver registers its
 * destination and tells the sender where it is; the sender registers its buffer and
 * RDMA-writes straight from it into the destination, so neither side copies through the
 * staging rings.
 *
 * Both sides see that message k is large (len >= zc_min, agreed at setup) and:
 *  1. the receiver, once receive k is at the head of its queue, answers either
 *     RTR_ZC (a plain copy: it wrote {address, rkey, length} into the sender's mailbox
 *     with an RDMA write, the immediate saying so) or RTR_STAGE (a receive with a
 *     reduction, which needs the bytes in staging anyway, or a failed registration);
 *  2. the sender, at message k in its queue, waits for that answer; on RTR_ZC it writes
 *     the whole message (pieces of at most 1 GiB), the last piece with immediate FIN;
 *     on RTR_STAGE it sends chunks as for a small message.
 * Only one answer is outstanding per direction (the next comes after FIN), so one
 * mailbox suffices; the QP's ordering puts FIN after the bytes and before any later
 * chunk. Registrations live for one message (no cache): a cached registration of freed
 * and re-mapped memory would silently send stale pages. A send is complete when its last
 * write is acknowledged. A length mismatch is a protocol error at the sender (the
 * receiver then times out). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "transport/ib/ib.h"

#define ZC_PIECE ((size_t)1 << 30)

typedef struct {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
  uint64_t len;
} mailbox_t;

static coll_status_t reg_error(ib_conn_t *c, int err, const char *what, size_t len) {
  return ib_fail(c, COLL_ERR_SYSTEM, "ibv_reg_mr of the %s (%zu bytes): %s%s", what, len,
                 strerror(err), err == ENOMEM ? " (locked-memory limit? see ulimit -l)" : "");
}

coll_status_t ib_zc_send(ib_conn_t *c, ib_send_t *m, bool *wait, bool *pushed) {
  const ib_group_t *g = c->group;
  *wait = false;
  *pushed = false;
  if (c->send_staged) return COLL_OK;
  if (c->rtr == RTR_NONE || c->zc_send_mr != NULL) {
    *wait = true; /* no answer yet, or the previous zero-copy write is still in flight */
    return COLL_OK;
  }
  if (c->rtr == RTR_GOT_STAGE) {
    c->rtr = RTR_NONE;
    c->send_staged = true;
    return COLL_OK;
  }
  size_t pieces = (m->len + ZC_PIECE - 1) / ZC_PIECE;
  if (c->sq_used + (int)pieces > g->sq_depth) {
    *wait = true;
    return COLL_OK;
  }
  mailbox_t mb;
  memcpy(&mb, c->scratch + IB_MAILBOX_IN, sizeof mb);
  if (mb.len != m->len)
    return ib_fail(c, COLL_ERR_PROTOCOL,
                   "message %llu is %zu bytes but the posted receive expects %llu",
                   (unsigned long long)c->sends_pushed, m->len, (unsigned long long)mb.len);
  /* The source is only read: no access flags needed. */
  struct ibv_mr *mr = ibv_reg_mr(g->pd, (void *)(uintptr_t)m->buf, m->len, 0);
  if (mr == NULL) return reg_error(c, errno, "send buffer", m->len);
  c->rtr = RTR_NONE;
  c->zc_send_mr = mr;
  c->zc_send_msg = c->sends_pushed;
  c->zc_writes_left = 0;
  for (size_t off = 0; off < m->len; off += ZC_PIECE) {
    size_t len = m->len - off < ZC_PIECE ? m->len - off : ZC_PIECE;
    bool last = off + len == m->len;
    struct ibv_sge sge = {
        .addr = (uintptr_t)m->buf + off, .length = (uint32_t)len, .lkey = mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = IB_WR_ID(c->base.peer, IB_WR_ZC),
        .opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
        .sg_list = &sge,
        .num_sge = 1,
        .imm_data = last ? htonl(IB_IMM_CTRL | IB_CTRL_FIN) : 0,
        .wr.rdma = {.remote_addr = mb.addr + off, .rkey = mb.rkey},
    };
    coll_status_t st = ib_post_send_wr(c, &wr);
    if (st != COLL_OK) return st;
    c->zc_writes_left++;
  }
  coll_log(COLL_LOG_TRACE, "ib: zero-copy write of message %llu (%zu bytes) to rank %d",
           (unsigned long long)c->sends_pushed, m->len, c->base.peer);
  *pushed = true;
  return COLL_OK;
}

void ib_zc_write_done(ib_conn_t *c) {
  if (--c->zc_writes_left > 0 || c->zc_send_mr == NULL) return;
  ibv_dereg_mr(c->zc_send_mr);
  c->zc_send_mr = NULL;
  c->sends[c->zc_send_msg & (c->send_cap - 1)].done = true;
}

/* Answer RTR_STAGE: a send with immediate, no payload. */
static coll_status_t answer_stage(ib_conn_t *c) {
  struct ibv_send_wr wr = {
      .wr_id = IB_WR_ID(c->base.peer, IB_WR_CTRL),
      .opcode = IBV_WR_SEND_WITH_IMM,
      .send_flags = IBV_SEND_SIGNALED,
      .imm_data = htonl(IB_IMM_CTRL | IB_CTRL_RTR_STAGE),
  };
  coll_status_t st = ib_post_send_wr(c, &wr);
  if (st == COLL_OK) c->zc_recv = ZC_STAGING;
  return st;
}

coll_status_t ib_zc_recv(ib_conn_t *c, const transport_recv_t *r, bool *wait, bool *done) {
  const ib_group_t *g = c->group;
  *wait = false;
  *done = false;
  if (c->zc_recv == ZC_STAGING) return COLL_OK;
  if (c->zc_recv == ZC_WAIT_FIN) {
    if (c->fins == c->fins_used) {
      *wait = true;
      return COLL_OK;
    }
    c->fins_used++;
    ibv_dereg_mr(c->zc_recv_mr);
    c->zc_recv_mr = NULL;
    c->zc_recv = ZC_NONE;
    *done = true;
    return COLL_OK;
  }
  *wait = true;
  if (c->sq_used >= g->sq_depth) return COLL_OK;
  if (r->operand != NULL) return answer_stage(c);
  struct ibv_mr *mr =
      ibv_reg_mr(g->pd, r->dst, r->len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == NULL) {
    coll_log(COLL_LOG_WARN, "ib: cannot register %zu bytes for rank %d (%s): staging instead",
             r->len, c->base.peer, strerror(errno));
    return answer_stage(c);
  }
  mailbox_t mb = {.addr = (uintptr_t)r->dst, .rkey = mr->rkey, .len = r->len};
  memcpy(c->scratch + IB_MAILBOX_OUT, &mb, sizeof mb);
  struct ibv_sge sge = {
      .addr = (uintptr_t)(c->scratch + IB_MAILBOX_OUT), .length = sizeof mb, .lkey = c->mr->lkey};
  uint64_t ring = (uint64_t)g->nslots * g->slot_bytes;
  struct ibv_send_wr wr = {
      .wr_id = IB_WR_ID(c->base.peer, IB_WR_CTRL),
      .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
      .send_flags = IBV_SEND_SIGNALED,
      .sg_list = &sge,
      .num_sge = 1,
      .imm_data = htonl(IB_IMM_CTRL | IB_CTRL_RTR_ZC),
      .wr.rdma = {.remote_addr = c->remote_addr + 2 * ring + IB_MAILBOX_IN, .rkey = c->remote_rkey},
  };
  coll_status_t st = ib_post_send_wr(c, &wr);
  if (st != COLL_OK) {
    ibv_dereg_mr(mr);
    return st;
  }
  c->zc_recv_mr = mr;
  c->zc_recv = ZC_WAIT_FIN;
  coll_log(COLL_LOG_TRACE, "ib: ready for zero-copy message %llu (%zu bytes) from rank %d",
           (unsigned long long)c->recvs_done, r->len, c->base.peer);
  return COLL_OK;
}

void ib_zc_release(ib_conn_t *c) {
  if (c->zc_send_mr != NULL) ibv_dereg_mr(c->zc_send_mr);
  if (c->zc_recv_mr != NULL) ibv_dereg_mr(c->zc_recv_mr);
  c->zc_send_mr = NULL;
  c->zc_recv_mr = NULL;
}
