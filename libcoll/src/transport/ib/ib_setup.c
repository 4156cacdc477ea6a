/* ib transport, setup: publish whether this rank has a usable RDMA port (probe), open the
 * device, create one reliable-connected queue pair per peer (both directions share it:
 * half the QPs of one per direction, and credits travel back on the data's own QP),
 * exchange QP number, LID, GID, PSN, inbox address and rkey through the store, bring each
 * QP to ready-to-send, and wait on the completion channel and the async event fd with
 * epoll. Every store read has the setup's deadline.
 *
 * Store keys (under the setup's prefix):
 *   ib/avail/<rank>         "ok <link layer> <device> <port>" or "none <reason>"
 *   ib/qp/<rank>/<peer>     the QP of <rank> towards <peer>
 *   ib/up/<rank>            every QP of <rank> is ready to receive
 *
 * Environment:
 *   COLL_IB_DEVICE      device name, or name:port (default: first device, first active port)
 *   COLL_IB_GID_INDEX   GID table index (default: RoCE v2 IPv4-mapped first; ib_device.c)
 *   COLL_IB_SLOT_BYTES  chunk and slot size, power of two in [4 KiB, 16 MiB] (128 KiB)
 *   COLL_IB_NSLOTS      slots per ring, 2..256 (16): registered staging per peer is
 *                       2 x slots x bytes (an inbox and an outbox) = 4 MiB by default
 *   COLL_IB_ZCOPY_BYTES messages this large or larger go zero-copy where the receive is a
 *                       plain copy (ib_zcopy.c); 0 turns it off (256 KiB)
 *   COLL_IB_TIMEOUT     QP ack timeout exponent: 4.096 us x 2^n per retry, 7 retries, so a
 *                       dead peer is reported after about 8 x that (16: ~2 s) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/ib/ib.h"

#define MAX_SLOT_BYTES (16u << 20)

/* What one rank tells a peer about its QP towards it. */
typedef struct {
  uint32_t qpn;
  uint32_t psn;
  unsigned lid;
  union ibv_gid gid;
  int mtu;
  unsigned long long addr;
  uint32_t rkey;
  int nslots;
  unsigned long long slot_bytes;
  unsigned long long zc_min;
} qp_info_t;

static const char *host_name(const transport_setup_t *setup, int rank) {
  return setup->host_ids != NULL ? setup->host_ids[rank] : "?";
}

/* ---- probe ---- */

static coll_status_t store_text(const transport_setup_t *setup, const char *key, char *text,
                                size_t len, int timeout_ms) {
  void *value = NULL;
  size_t vlen = 0;
  coll_status_t st = store_get(setup->store, key, &value, &vlen, timeout_ms);
  if (st != COLL_OK) return st;
  size_t n = vlen < len - 1 ? vlen : len - 1;
  memcpy(text, value, n);
  text[n] = '\0';
  free(value);
  return COLL_OK;
}

/* Both ranks of the pair publish their own answer, then read the peer's: every rank
 * publishes before it reads, so the reads cannot wait on each other. On refusal the
 * thread's error says why (the registry shows it when COLL_TRANSPORT=ib is forced). */
static bool ib_probe(const transport_setup_t *setup, int peer) {
  ib_port_pick_t pick;
  char mine[400], theirs[400], key[512];
  coll_status_t st = ib_device_pick(&pick, NULL);
  if (st == COLL_OK)
    snprintf(mine, sizeof mine, "ok %u %s %d", (unsigned)pick.link_layer, pick.device, pick.port);
  else
    snprintf(mine, sizeof mine, "none %s", coll_last_error());
  int timeout = setup->timeout_ms > 0 ? setup->timeout_ms : 30000;
  snprintf(key, sizeof key, "%sib/avail/%d", setup->key_prefix, setup->rank);
  if (store_set(setup->store, key, mine, strlen(mine), timeout) != COLL_OK) return false;
  /* Without a port of our own the answer is no whatever the peer has: say why at once
   * (the peer may be the store's host and gone by the time we would read its answer). */
  if (st != COLL_OK) {
    coll_error(st, "rank %d (host %s): %s", setup->rank, host_name(setup, setup->rank), mine + 5);
    return false;
  }
  snprintf(key, sizeof key, "%sib/avail/%d", setup->key_prefix, peer);
  if (store_text(setup, key, theirs, sizeof theirs, timeout) != COLL_OK) return false;
  unsigned ll = 0;
  if (strncmp(theirs, "none ", 5) == 0 || sscanf(theirs, "ok %u", &ll) != 1) {
    coll_error(COLL_ERR_UNSUPPORTED, "rank %d (host %s): %s", peer, host_name(setup, peer),
               strncmp(theirs, "none ", 5) == 0 ? theirs + 5 : theirs);
    return false;
  }
  if (ll != pick.link_layer) {
    coll_error(COLL_ERR_UNSUPPORTED,
               "rank %d uses an %s port and rank %d an %s one: they cannot reach each other",
               setup->rank, pick.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
               peer, ll == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
    return false;
  }
  return true;
}

/* ---- open ---- */

static void conn_free(ib_conn_t *c) {
  if (c == NULL) return;
  if (c->qp != NULL) ibv_destroy_qp(c->qp);
  ib_zc_release(c);
  if (c->mr != NULL) ibv_dereg_mr(c->mr);
  free(c->inbox); /* the outbox is the second half of the same block */
  free(c->arrived);
  free(c->sends);
  free(c->recvs);
  free(c);
}

static void ib_group_close(ib_group_t *g) {
  if (g == NULL) return;
  if (g->conns != NULL)
    for (int r = 0; r < g->nranks; r++) conn_free(g->conns[r]);
  free(g->conns);
  if (g->cq != NULL) ibv_destroy_cq(g->cq);
  if (g->channel != NULL) ibv_destroy_comp_channel(g->channel);
  if (g->pd != NULL) ibv_dealloc_pd(g->pd);
  if (g->ctx != NULL) ibv_close_device(g->ctx);
  if (g->epfd >= 0) close(g->epfd);
  free(g);
}

static coll_status_t group_fail(const ib_group_t *g, coll_status_t st, int err, const char *what) {
  return coll_error(st, "ib device %s port %d: %s: %s%s", g->pick.device, g->pick.port, what,
                    strerror(err),
                    err == ENOMEM ? " (locked-memory limit too low? see ulimit -l)" : "");
}

static coll_status_t set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return COLL_ERR_SYSTEM;
  return COLL_OK;
}

static coll_status_t open_device(const transport_setup_t *setup, const bool *peers, ib_group_t *g) {
  coll_status_t st = ib_device_pick(&g->pick, &g->ctx);
  if (st != COLL_OK) return st;
  int npeers = 0;
  for (int r = 0; r < setup->nranks; r++) npeers += peers[r];
  g->pd = ibv_alloc_pd(g->ctx);
  if (g->pd == NULL) return group_fail(g, COLL_ERR_SYSTEM, errno, "ibv_alloc_pd");
  g->channel = ibv_create_comp_channel(g->ctx);
  if (g->channel == NULL) return group_fail(g, COLL_ERR_SYSTEM, errno, "ibv_create_comp_channel");
  int cqe = npeers * (g->sq_depth + g->rq_depth) + 1;
  g->cq = ibv_create_cq(g->ctx, cqe, NULL, g->channel, 0);
  if (g->cq == NULL) return group_fail(g, COLL_ERR_SYSTEM, errno, "ibv_create_cq");
  g->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (g->epfd < 0) return group_fail(g, COLL_ERR_SYSTEM, errno, "epoll_create1");
  int fds[2] = {g->channel->fd, g->ctx->async_fd};
  for (int i = 0; i < 2; i++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (set_nonblocking(fds[i]) != COLL_OK || epoll_ctl(g->epfd, EPOLL_CTL_ADD, fds[i], &ev) != 0)
      return group_fail(g, COLL_ERR_SYSTEM, errno, "watching the completion channel");
  }
  return COLL_OK;
}

static coll_status_t create_conn(const transport_setup_t *setup, ib_group_t *g, int peer,
                                 ib_conn_t **out) {
  ib_conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) return coll_error(COLL_ERR_NO_MEMORY, "ib: out of memory");
  *out = c;
  c->base = (transport_conn_t){.ops = &ib_ops, .peer = peer};
  c->group = g;
  snprintf(c->peer_host, sizeof c->peer_host, "%s", host_name(setup, peer));
  size_t ring = (size_t)g->nslots * g->slot_bytes;
  void *block = NULL;
  size_t bytes = 2 * ring + IB_SCRATCH_BYTES;
  if (posix_memalign(&block, 4096, bytes) != 0 ||
      (c->arrived = calloc((size_t)g->nslots, sizeof *c->arrived)) == NULL) {
    free(block);
    return coll_error(COLL_ERR_NO_MEMORY, "ib: no memory for %zu bytes of staging for rank %d",
                      bytes, peer);
  }
  c->inbox = block;
  c->outbox = c->inbox + ring;
  c->scratch = c->outbox + ring;
  c->last_heard_ns = coll_now_ns();
  c->mr = ibv_reg_mr(g->pd, block, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (c->mr == NULL)
    return group_fail(g, COLL_ERR_SYSTEM, errno, "ibv_reg_mr of the staging rings");
  struct ibv_qp_init_attr qa = {
      .send_cq = g->cq,
      .recv_cq = g->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = (uint32_t)g->sq_depth,
              .max_recv_wr = (uint32_t)g->rq_depth,
              .max_send_sge = 1,
              .max_recv_sge = 1},
  };
  c->qp = ibv_create_qp(g->pd, &qa);
  if (c->qp == NULL) return group_fail(g, COLL_ERR_SYSTEM, errno, "ibv_create_qp");
  struct ibv_qp_attr init = {
      .qp_state = IBV_QPS_INIT,
      .pkey_index = 0,
      .port_num = (uint8_t)g->pick.port,
      .qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
  };
  int rc = ibv_modify_qp(c->qp, &init,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) return group_fail(g, COLL_ERR_SYSTEM, rc, "ibv_modify_qp to INIT");
  for (int i = 0; i < g->rq_depth; i++) {
    coll_status_t st = ib_post_recv_wr(c);
    if (st != COLL_OK) return st;
  }
  return COLL_OK;
}

static void gid_hex(const union ibv_gid *gid, char *hex) {
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", gid->raw[i]);
}

static bool parse_gid(const char *hex, union ibv_gid *gid) {
  if (strlen(hex) != 32) return false;
  for (int i = 0; i < 16; i++) {
    unsigned byte;
    if (sscanf(hex + 2 * i, "%2x", &byte) != 1) return false;
    gid->raw[i] = (uint8_t)byte;
  }
  return true;
}

static coll_status_t publish_conn(const transport_setup_t *setup, ib_group_t *g, ib_conn_t *c,
                                  uint32_t psn, int timeout_ms) {
  char key[512], value[512], hex[33];
  gid_hex(&g->pick.gid, hex);
  snprintf(key, sizeof key, "%sib/qp/%d/%d", setup->key_prefix, setup->rank, c->base.peer);
  int n = snprintf(value, sizeof value, "%u %u %u %s %d %llu %u %d %zu %zu", c->qp->qp_num, psn,
                   (unsigned)g->pick.lid, hex, (int)g->pick.mtu,
                   (unsigned long long)(uintptr_t)c->inbox, c->mr->rkey, g->nslots, g->slot_bytes,
                   g->zc_min);
  return store_set(setup->store, key, value, (size_t)n, timeout_ms);
}

static coll_status_t read_peer(const transport_setup_t *setup, ib_group_t *g, int peer,
                               qp_info_t *info, int timeout_ms) {
  char key[512], text[512], hex[64];
  snprintf(key, sizeof key, "%sib/qp/%d/%d", setup->key_prefix, peer, setup->rank);
  coll_status_t st = store_text(setup, key, text, sizeof text, timeout_ms);
  if (st != COLL_OK)
    return coll_error_prefix(st, "reading the queue pair of rank %d (host %s): ", peer,
                             host_name(setup, peer));
  if (sscanf(text, "%u %u %u %63s %d %llu %u %d %llu %llu", &info->qpn, &info->psn, &info->lid, hex,
             &info->mtu, &info->addr, &info->rkey, &info->nslots, &info->slot_bytes,
             &info->zc_min) != 10 ||
      !parse_gid(hex, &info->gid))
    return coll_error(COLL_ERR_PROTOCOL, "rank %d published a bad ib queue pair '%s'", peer, text);
  if (info->nslots != g->nslots || info->slot_bytes != g->slot_bytes)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_IB_NSLOTS or COLL_IB_SLOT_BYTES differ: rank %d uses %d x %llu, "
                      "rank %d uses %d x %zu",
                      peer, info->nslots, info->slot_bytes, g->rank, g->nslots, g->slot_bytes);
  if (info->zc_min != g->zc_min)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_IB_ZCOPY_BYTES differs: rank %d uses %llu, rank %d uses %zu", peer,
                      info->zc_min, g->rank, g->zc_min);
  return COLL_OK;
}

static coll_status_t connect_qp(ib_group_t *g, ib_conn_t *c, const qp_info_t *info, uint32_t psn,
                                int timeout_exp) {
  c->remote_addr = info->addr;
  c->remote_rkey = info->rkey;
  enum ibv_mtu mtu = (int)g->pick.mtu < info->mtu ? g->pick.mtu : (enum ibv_mtu)info->mtu;
  struct ibv_qp_attr rtr = {
      .qp_state = IBV_QPS_RTR,
      .path_mtu = mtu,
      .dest_qp_num = info->qpn,
      .rq_psn = info->psn,
      .max_dest_rd_atomic = 1,
      .min_rnr_timer = 12,
      .ah_attr = {.dlid = (uint16_t)info->lid, .sl = 0, .port_num = (uint8_t)g->pick.port},
  };
  if (g->pick.gid_index >= 0) {
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = info->gid;
    rtr.ah_attr.grh.sgid_index = (uint8_t)g->pick.gid_index;
    rtr.ah_attr.grh.hop_limit = 64;
  }
  int rc = ibv_modify_qp(c->qp, &rtr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    char text[48];
    ib_gid_to_text(&info->gid, text, sizeof text);
    return ib_fail(c, COLL_ERR_SYSTEM,
                   "ibv_modify_qp to RTR (GID index %d towards %s, LID %u): %s (wrong "
                   "COLL_IB_GID_INDEX or no route?)",
                   g->pick.gid_index, text, info->lid, strerror(rc));
  }
  struct ibv_qp_attr rts = {
      .qp_state = IBV_QPS_RTS,
      .timeout = (uint8_t)timeout_exp,
      .retry_cnt = 7,
      .rnr_retry = 7, /* 7: retry without limit while the receiver reposts (never for long) */
      .sq_psn = psn,
      .max_rd_atomic = 1,
  };
  rc = ibv_modify_qp(c->qp, &rts,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return ib_fail(c, COLL_ERR_SYSTEM, "ibv_modify_qp to RTS: %s", strerror(rc));
  return COLL_OK;
}

static coll_status_t read_env(ib_group_t *g, int64_t *timeout_exp) {
  int64_t slot, nslots, zc_min;
  coll_status_t st = coll_env_int("COLL_IB_SLOT_BYTES", 4096, MAX_SLOT_BYTES, 128 << 10, &slot);
  if (st == COLL_OK)
    st = coll_env_int("COLL_IB_ZCOPY_BYTES", 0, (int64_t)1 << 40, 256 << 10, &zc_min);
  if (st == COLL_OK) st = coll_env_int("COLL_IB_NSLOTS", 2, 256, 16, &nslots);
  if (st == COLL_OK) st = coll_env_int("COLL_IB_TIMEOUT", 8, 24, 16, timeout_exp);
  if (st != COLL_OK) return st;
  if ((slot & (slot - 1)) != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "COLL_IB_SLOT_BYTES=%lld is not a power of two",
                      (long long)slot);
  g->slot_bytes = (size_t)slot;
  g->nslots = (int)nslots;
  g->zc_min = (size_t)zc_min;
  g->sq_depth = 2 * g->nslots + 8; /* chunks, credits, a ping, rendezvous replies, writes */
  g->rq_depth = 2 * g->nslots + 4;
  return COLL_OK;
}

static coll_status_t wait_up(const transport_setup_t *setup, const bool *peers, int64_t deadline) {
  char key[512], text[16];
  snprintf(key, sizeof key, "%sib/up/%d", setup->key_prefix, setup->rank);
  coll_status_t st = store_set(setup->store, key, "1", 1, coll_ms_left(deadline));
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    snprintf(key, sizeof key, "%sib/up/%d", setup->key_prefix, r);
    st = store_text(setup, key, text, sizeof text, coll_ms_left(deadline));
    if (st != COLL_OK)
      st = coll_error_prefix(st, "waiting for rank %d (host %s) to bring its queue pairs up: ", r,
                             host_name(setup, r));
  }
  return st;
}

static coll_status_t ib_open(const transport_setup_t *setup, const bool *peers,
                             transport_group_t **out) {
  ib_group_t *g = calloc(1, sizeof *g);
  if (g == NULL) return coll_error(COLL_ERR_NO_MEMORY, "ib: out of memory");
  g->epfd = -1;
  g->rank = setup->rank;
  g->nranks = setup->nranks;
  g->timeout_ms = setup->timeout_ms > 0 ? setup->timeout_ms : 30000;
  int64_t deadline = coll_deadline_ns(g->timeout_ms);
  int64_t timeout_exp = 16;
  coll_status_t st = read_env(g, &timeout_exp);
  if (st == COLL_OK) st = open_device(setup, peers, g);
  if (st == COLL_OK && (g->conns = calloc((size_t)g->nranks, sizeof *g->conns)) == NULL)
    st = coll_error(COLL_ERR_NO_MEMORY, "ib: out of memory");
  uint32_t *psn = calloc((size_t)g->nranks, sizeof *psn);
  if (st == COLL_OK && psn == NULL) st = coll_error(COLL_ERR_NO_MEMORY, "ib: out of memory");
  for (int r = 0; r < g->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    st = create_conn(setup, g, r, &g->conns[r]);
    if (st != COLL_OK) break;
    if (getrandom(&psn[r], sizeof psn[r], 0) != (ssize_t)sizeof psn[r])
      psn[r] = (uint32_t)coll_now_ns();
    psn[r] &= 0xffffffu;
    st = publish_conn(setup, g, g->conns[r], psn[r], coll_ms_left(deadline));
  }
  for (int r = 0; r < g->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    qp_info_t info;
    st = read_peer(setup, g, r, &info, coll_ms_left(deadline));
    if (st == COLL_OK) st = connect_qp(g, g->conns[r], &info, psn[r], (int)timeout_exp);
  }
  free(psn);
  /* A QP must be ready to receive before its peer writes into it. */
  if (st == COLL_OK) st = wait_up(setup, peers, deadline);
  if (st != COLL_OK) {
    ib_group_close(g);
    return st;
  }
  coll_log(COLL_LOG_INFO,
           "ib: device %s port %d GID index %d (%s %s), %d slots of %zu bytes, zero-copy "
           "from %zu bytes",
           g->pick.device, g->pick.port, g->pick.gid_index, g->pick.gid_type, g->pick.gid_text,
           g->nslots, g->slot_bytes, g->zc_min);
  *out = g;
  return COLL_OK;
}

static transport_conn_t *ib_group_conn(ib_group_t *g, int peer) {
  return g->conns[peer] != NULL ? &g->conns[peer]->base : NULL;
}

/* ---- wait ---- */

static bool something_to_do(const ib_group_t *g) {
  for (int r = 0; r < g->nranks; r++) {
    const ib_conn_t *c = g->conns[r];
    if (c != NULL && ib_conn_has_work(c) && (c->dirty || c->failed != COLL_OK)) return true;
  }
  return false;
}

/* A fatal async event (port down, QP in error) fails the connections it concerns. */
static void async_events(ib_group_t *g) {
  struct ibv_async_event ev;
  while (ibv_get_async_event(g->ctx, &ev) == 0) {
    enum ibv_event_type type = ev.event_type;
    bool port = type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_DEVICE_FATAL;
    bool qp = type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR ||
              type == IBV_EVENT_QP_ACCESS_ERR;
    for (int r = 0; r < g->nranks && (port || qp); r++) {
      ib_conn_t *c = g->conns[r];
      if (c == NULL || (qp && ev.element.qp != c->qp)) continue;
      ib_fail(c, COLL_ERR_SYSTEM, "async event: %s", ibv_event_type_str(type));
      c->dirty = true;
    }
    ibv_ack_async_event(&ev);
  }
}

static coll_status_t ib_wait(ib_group_t *g, int timeout_ms, bool *woke) {
  *woke = something_to_do(g);
  if (*woke) return COLL_OK;
  if (!g->armed) {
    int rc = ibv_req_notify_cq(g->cq, 0);
    if (rc != 0) return group_fail(g, COLL_ERR_SYSTEM, rc, "ibv_req_notify_cq");
    g->armed = true;
  }
  /* Completions that came before the arming raise no event: collect them first. */
  coll_status_t st = ib_poll_cq(g);
  if (st != COLL_OK) return st;
  *woke = something_to_do(g);
  if (*woke) return COLL_OK;
  struct epoll_event evs[2];
  int n = epoll_wait(g->epfd, evs, 2, timeout_ms < 0 ? 0 : timeout_ms);
  if (n < 0) {
    if (errno == EINTR) {
      *woke = true;
      return COLL_OK;
    }
    return group_fail(g, COLL_ERR_SYSTEM, errno, "epoll_wait on the completion channel");
  }
  for (int i = 0; i < n; i++) {
    if (evs[i].data.u32 == 1) {
      async_events(g);
      continue;
    }
    struct ibv_cq *cq;
    void *cq_ctx;
    unsigned events = 0;
    while (ibv_get_cq_event(g->channel, &cq, &cq_ctx) == 0) events++;
    if (events > 0) ibv_ack_cq_events(g->cq, events);
    g->armed = false;
  }
  *woke = n > 0;
  return COLL_OK;
}

static size_t ib_staging_bytes(const ib_group_t *g) {
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++)
    if (g->conns[r] != NULL) total += 2 * (size_t)g->nslots * g->slot_bytes;
  return total;
}

const transport_kind_t transport_ib_kind = {
    .name = "ib",
    .probe = ib_probe,
    .open = ib_open,
    .conn = ib_group_conn,
    .wait = ib_wait,
    .staging_bytes = ib_staging_bytes,
    .close = ib_group_close,
};
