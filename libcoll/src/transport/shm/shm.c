/* shm transport, data path: messages go through a shared-memory FIFO of fixed-size slots
 * per directed pair (the sender copies in, the receiver copies or reduces straight out of
 * the slot: dst = operand OP slot), or, for large messages when the kernel allows it,
 * single-copy: the sender publishes its buffer's address in one slot and the receiver
 * reads it with process_vm_readv (reductions through a cache-sized staging chunk). A
 * single-copy send completes when the receiver releases that slot.
 *
 * Measured (2-rank all-reduce, 64 MiB float32, 2-core Zen 2, machine shared with other
 * jobs): FIFO copy 2.5-3.4 GB/s busbw, single-copy 1.9-2.7 GB/s. The kernel's per-page
 * pinning (follow_page_pte, ~7% of samples) and its slower copy loop cost more than the
 * second copy saves, and with the FIFO both cores copy in parallel. So the FIFO is the
 * default and single-copy is opt-in (COLL_SHM_DIRECT=1). With more ranks than cores
 * (4 on 2) single-copy spends ~4% less CPU per 16 MiB all-reduce but its sends complete
 * only when the receiver has run, and busbw was no better: equal in one set of 8
 * interleaved pairs, 25% lower in another of 6 (bench/algorithms/calibrate.md), so it stays opt-in
 * there too.
 *
 * Waiting: each rank has one doorbell word in its inbox; peers bump it after moving a
 * FIFO's head or tail and FUTEX_WAKE only when the owner says it sleeps. The owner may
 * spin briefly on the word (COLL_SHM_SPIN_US; off by default because the executor already
 * spins on progress() before it waits), then FUTEX_WAITs with a bounded timeout. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/util.h"
#include "transport/shm/shm.h"

/* Bytes read per process_vm_readv for a copy, and in total per progress call, so one
 * large message does not starve the other connections of the executor. */
#define DIRECT_COPY_PIECE (1u << 20)
#define DIRECT_BUDGET (4u << 20)
/* Messages at least this long read the receiver's tail before every slot they fill, so
 * that the slots it just freed are reused (see take_data_slot). */
#define WARM_SLOTS_MIN (64u << 10)
/* Without movement for this long, check that the peer process still exists. */
#define ALIVE_CHECK_NS (100 * 1000 * 1000LL)
/* Upper bound of one futex sleep, so a dead peer is noticed by the next progress. */
#define MAX_SLEEP_MS 100

void shm_ring(shm_inbox_t *inbox) {
  atomic_fetch_add(&inbox->bell, 1);
  if (atomic_load(&inbox->sleeping) != 0)
    syscall(SYS_futex, (uint32_t *)&inbox->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static coll_status_t fail(shm_conn_t *c, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static coll_status_t fail(shm_conn_t *c, coll_status_t st, const char *fmt, ...) {
  if (c->failed == COLL_OK) {
    int n =
        snprintf(c->failure, sizeof c->failure, "peer rank %d (host %s, pid %d): ", c->base.peer,
                 c->peer_host, (int)c->peer_pid);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof c->failure)
      vsnprintf(c->failure + n, sizeof c->failure - (size_t)n, fmt, ap);
    va_end(ap);
    c->failed = st;
  }
  return coll_error(c->failed, "%s", c->failure);
}

static coll_status_t shm_post_send(transport_conn_t *conn, const void *buf, size_t len) {
  shm_conn_t *c = (shm_conn_t *)conn;
  if (c->failed != COLL_OK) return coll_error(c->failed, "%s", c->failure);
  if (c->sends_posted - c->sends_done == c->send_cap &&
      !transport_queue_grow((void **)&c->sends, &c->send_cap, c->sends_done, c->sends_posted,
                            sizeof *c->sends))
    return coll_error(COLL_ERR_NO_MEMORY, "shm send to rank %d: out of memory", c->base.peer);
  c->sends[c->sends_posted & (c->send_cap - 1)] = (shm_send_t){.buf = buf, .len = len};
  c->sends_posted++;
  return COLL_OK;
}

static coll_status_t shm_post_recv(transport_conn_t *conn, const transport_recv_t *recv) {
  shm_conn_t *c = (shm_conn_t *)conn;
  if (c->failed != COLL_OK) return coll_error(c->failed, "%s", c->failure);
  if (c->recvs_posted - c->recvs_done == c->recv_cap &&
      !transport_queue_grow((void **)&c->recvs, &c->recv_cap, c->recvs_done, c->recvs_posted,
                            sizeof *c->recvs))
    return coll_error(COLL_ERR_NO_MEMORY, "shm receive from rank %d: out of memory", c->base.peer);
  c->recvs[c->recvs_posted & (c->recv_cap - 1)] = (shm_recv_t){.r = *recv};
  c->recvs_posted++;
  return COLL_OK;
}

/* Read the receiver's tail again: the data slots of the positions it consumed since the
 * last read are free. (A tail past our head, which only a broken peer writes, frees no
 * more than we produced.) */
static void refresh_tail(shm_conn_t *c) {
  uint64_t tail = atomic_load_explicit(&c->out.ctrl->tail, memory_order_acquire);
  for (uint64_t p = c->out_tail_seen; p < tail && p < c->out_head; p++)
    c->out_slot_busy[c->out_slot_of[p % c->out.nslots]] = false;
  c->out_tail_seen = tail;
}

/* The data slot for position out_head: the lowest-numbered free one. A FIFO walked in
 * order touches all its slots (16 of 256 KiB, 4 MiB per pair) before reusing one, more
 * than this machine's L3 together with the buffers; reusing the slots the receiver just
 * freed keeps a run of large messages in the caches. Measured, 2-rank all-reduce of
 * 1 MiB on a quiet machine: bench/results/README.md, "FIFO slots". A free slot exists: fewer than
 * nslots positions are in [tail_seen, head), and each holds one slot. */
static uint32_t take_data_slot(shm_conn_t *c) {
  uint32_t slot = 0;
  while (c->out_slot_busy[slot]) slot++;
  c->out_slot_busy[slot] = true;
  c->out_slot_of[c->out_head % c->out.nslots] = slot;
  return slot;
}

/* Fill free slots of the outgoing FIFO. Returns whether anything moved. */
static bool send_some(shm_conn_t *c) {
  transport_group_t *g = c->group;
  bool moved = false;
  while (c->sends_written < c->sends_posted) {
    shm_send_t *m = &c->sends[c->sends_written & (c->send_cap - 1)];
    if (c->out_head - c->out_tail_seen >= c->out.nslots || m->len >= WARM_SLOTS_MIN) {
      refresh_tail(c);
      if (c->out_head - c->out_tail_seen >= c->out.nslots) break;
    }
    if (!m->started) {
      m->started = true;
      m->direct = g->direct_enabled && m->len >= g->direct_min &&
                  atomic_load_explicit(&c->out.ctrl->direct_ok, memory_order_relaxed) != 0;
    }
    shm_slot_hdr_t *h = &c->out.hdrs[c->out_head % c->out.nslots];
    uint32_t slot = take_data_slot(c);
    h->msg_len = m->len;
    h->seq = c->sends_written;
    if (m->direct) {
      h->addr = (uint64_t)(uintptr_t)m->buf;
      h->chunk_len = 0;
      h->kind = SHM_SLOT_DIRECT;
      m->ack_slot = c->out_head;
      m->off = m->len;
    } else {
      size_t n = m->len - m->off < c->out.slot_bytes ? m->len - m->off : c->out.slot_bytes;
      if (n > 0)
        memcpy(c->out.data + (size_t)slot * c->out.slot_bytes, (const char *)m->buf + m->off, n);
      h->addr = 0;
      h->chunk_len = (uint32_t)n;
      h->kind = SHM_SLOT_COPY;
      h->data_slot = slot;
      m->off += n;
    }
    c->out_head++;
    atomic_store_explicit(&c->out.ctrl->head, c->out_head, memory_order_release);
    shm_ring(c->peer_inbox);
    moved = true;
    if (m->off == m->len) c->sends_written++;
  }
  /* Completion in posting order: copies when written, single-copy when released. */
  while (c->sends_done < c->sends_written) {
    shm_send_t *m = &c->sends[c->sends_done & (c->send_cap - 1)];
    if (m->direct) {
      if (c->out_tail_seen <= m->ack_slot) refresh_tail(c);
      if (c->out_tail_seen <= m->ack_slot) break;
    }
    c->sends_done++;
    moved = true;
  }
  return moved;
}

static void consume_chunk(const shm_recv_t *m, const unsigned char *src, size_t n) {
  char *dst = (char *)m->r.dst + m->off;
  if (m->r.operand == NULL) {
    memcpy(dst, src, n);
  } else {
    m->r.reduce(dst, (const char *)m->r.operand + m->off, src, n / m->r.elem_size);
  }
}

/* Read part of a single-copy message from the sender's memory. Returns bytes read. */
static coll_status_t read_direct(shm_conn_t *c, shm_recv_t *m, uint64_t addr, size_t budget,
                                 size_t *moved) {
  transport_group_t *g = c->group;
  bool reducing = m->r.operand != NULL;
  *moved = 0;
  while (m->off < m->r.len && *moved < budget) {
    size_t want = m->r.len - m->off;
    size_t cap = reducing ? g->direct_chunk : DIRECT_COPY_PIECE;
    if (want > cap) want = cap;
    if (reducing && c->staging == NULL) {
      c->staging = aligned_alloc(64, g->direct_chunk);
      if (c->staging == NULL)
        return fail(c, COLL_ERR_NO_MEMORY, "no memory for %zu staging bytes", g->direct_chunk);
    }
    struct iovec local = {reducing ? (void *)c->staging : (char *)m->r.dst + m->off, want};
    struct iovec remote = {(void *)(uintptr_t)(addr + m->off), want};
    ssize_t got = process_vm_readv(c->peer_pid, &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == ESRCH || !shm_peer_alive(c))
        return fail(c, COLL_ERR_REMOTE, "process is gone (process_vm_readv: %s)", strerror(errno));
      return fail(c, COLL_ERR_SYSTEM, "process_vm_readv of %zu bytes: %s", want, strerror(errno));
    }
    size_t n = (size_t)got;
    if (reducing) n = n / m->r.elem_size * m->r.elem_size;
    if (n == 0) return fail(c, COLL_ERR_SYSTEM, "process_vm_readv made no progress");
    if (reducing) consume_chunk(m, c->staging, n);
    m->off += n;
    *moved += n;
  }
  return COLL_OK;
}

/* Drain the incoming FIFO into posted receives. */
static coll_status_t recv_some(shm_conn_t *c, bool *moved) {
  while (c->recvs_done < c->recvs_posted) {
    shm_recv_t *m = &c->recvs[c->recvs_done & (c->recv_cap - 1)];
    if (c->in_tail == c->in_head_seen) {
      c->in_head_seen = atomic_load_explicit(&c->in.ctrl->head, memory_order_acquire);
      if (c->in_tail == c->in_head_seen) break;
    }
    const shm_slot_hdr_t *h = &c->in.hdrs[c->in_tail % c->in.nslots];
    uint64_t msg_len = h->msg_len, seq = h->seq;
    uint32_t kind = h->kind, chunk = h->chunk_len, slot = h->data_slot;
    if (seq != c->recvs_done)
      return fail(c, COLL_ERR_PROTOCOL, "slot carries message %llu, expected message %llu",
                  (unsigned long long)seq, (unsigned long long)c->recvs_done);
    if (msg_len != m->r.len)
      return fail(c, COLL_ERR_PROTOCOL,
                  "message %llu is %llu bytes but the posted receive expects %zu",
                  (unsigned long long)seq, (unsigned long long)msg_len, m->r.len);
    if (kind == SHM_SLOT_COPY) {
      bool bad = chunk > c->in.slot_bytes || chunk > m->r.len - m->off ||
                 (chunk == 0 && m->r.len > 0) || slot >= c->in.nslots ||
                 (m->r.operand != NULL && chunk % m->r.elem_size != 0);
      if (bad)
        return fail(c, COLL_ERR_PROTOCOL, "bad slot: data slot %u of %u, %u bytes", slot,
                    c->in.nslots, chunk);
      if (chunk > 0) consume_chunk(m, c->in.data + (size_t)slot * c->in.slot_bytes, chunk);
      m->off += chunk;
    } else if (kind == SHM_SLOT_DIRECT) {
      size_t got = 0;
      coll_status_t st = read_direct(c, m, h->addr, DIRECT_BUDGET, &got);
      if (st != COLL_OK) return st;
      *moved = *moved || got > 0;
      if (m->off < m->r.len) {
        /* Budget spent: let other connections move. No counter changed, so ring our own
         * bell: the caller's next wait must return at once, not sleep on work in hand. */
        shm_ring(c->group->inbox);
        return COLL_OK;
      }
    } else {
      return fail(c, COLL_ERR_PROTOCOL, "unknown slot kind %u", kind);
    }
    c->in_tail++;
    atomic_store_explicit(&c->in.ctrl->tail, c->in_tail, memory_order_release);
    shm_ring(c->peer_inbox);
    *moved = true;
    if (m->off == m->r.len) c->recvs_done++;
  }
  return COLL_OK;
}

static coll_status_t shm_progress(transport_conn_t *conn, uint64_t *sends_done,
                                  uint64_t *recvs_done) {
  shm_conn_t *c = (shm_conn_t *)conn;
  coll_status_t st = c->failed;
  if (st != COLL_OK) {
    st = coll_error(st, "%s", c->failure);
    goto out;
  }
  bool moved = send_some(c);
  st = recv_some(c, &moved);
  if (st != COLL_OK) goto out;
  bool pending = c->sends_done < c->sends_posted || c->recvs_done < c->recvs_posted;
  if (moved || !pending) {
    c->idle_since_ns = 0;
  } else {
    /* Stuck: a killed peer rings no bell, so look at it now and then. */
    int64_t now = coll_now_ns();
    if (c->idle_since_ns == 0) c->idle_since_ns = now;
    if (now - c->idle_since_ns > ALIVE_CHECK_NS && now - c->last_alive_check_ns > ALIVE_CHECK_NS) {
      c->last_alive_check_ns = now;
      if (!shm_peer_alive(c))
        st = fail(c, COLL_ERR_REMOTE,
                  "the peer process exited or was killed with %llu sends and "
                  "%llu receives pending",
                  (unsigned long long)(c->sends_posted - c->sends_done),
                  (unsigned long long)(c->recvs_posted - c->recvs_done));
    }
  }
out:
  if (sends_done != NULL) *sends_done = c->sends_done;
  if (recvs_done != NULL) *recvs_done = c->recvs_done;
  return st;
}

const transport_ops_t shm_ops = {
    .name = "shm",
    .post_send = shm_post_send,
    .post_recv = shm_post_recv,
    .progress = shm_progress,
};

coll_status_t shm_group_wait(transport_group_t *g, int timeout_ms, bool *woke) {
  shm_inbox_t *in = g->inbox;
  uint32_t seen = g->seen_bell;
  uint32_t now = atomic_load(&in->bell);
  *woke = now != seen;
  if (!*woke && g->spin_ns > 0 && timeout_ms > 0) {
    int64_t until = coll_now_ns() + g->spin_ns;
    do {
      for (int i = 0; i < 64; i++) coll_cpu_relax();
      now = atomic_load(&in->bell);
    } while (now == seen && coll_now_ns() < until);
    *woke = now != seen;
  }
  if (!*woke && timeout_ms > 0) {
    int ms = timeout_ms < MAX_SLEEP_MS ? timeout_ms : MAX_SLEEP_MS;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    atomic_store(&in->sleeping, 1);
    /* A peer that bumped the bell before it saw `sleeping` changed the word, so the
     * futex returns at once (EAGAIN) instead of missing the wake-up. */
    if (atomic_load(&in->bell) == seen)
      syscall(SYS_futex, (uint32_t *)&in->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_store(&in->sleeping, 0);
    now = atomic_load(&in->bell);
    *woke = now != seen;
  }
  g->seen_bell = now;
  return COLL_OK;
}

void shm_conn_free(shm_conn_t *c) {
  if (c == NULL) return;
  free(c->sends);
  free(c->recvs);
  free(c->out_slot_of);
  free(c->out_slot_busy);
  free(c->staging);
  free(c);
}
