/* cuda_ipc data path: queue sends and receives, move chunks through the peer's device
 * staging ring with stream-ordered copies and reduction kernels, publish and free slots
 * through the host control block. The protocol is described in cuda_ipc.h. */
#include "transport/cuda_ipc/cuda_ipc.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"

static coll_status_t queue_push(cuda_ipc_queue_t *q, const cuda_ipc_msg_t *m) {
  if (q->count == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 16;
    cuda_ipc_msg_t *items = malloc(cap * sizeof *items);
    if (items == NULL) return coll_error(COLL_ERR_NO_MEMORY, "cuda_ipc: out of memory");
    for (size_t i = 0; i < q->count; i++) items[i] = q->items[(q->head + i) % q->cap];
    free(q->items);
    q->items = items;
    q->cap = cap;
    q->head = 0;
  }
  q->items[(q->head + q->count) % q->cap] = *m;
  q->count++;
  return COLL_OK;
}

static cuda_ipc_msg_t *queue_at(cuda_ipc_queue_t *q, size_t i) {
  return &q->items[(q->head + i) % q->cap];
}

static size_t chunk_of(const cuda_ipc_side_t *s, const cuda_ipc_msg_t *m) {
  size_t left = m->r.len - m->off;
  return left < s->slot_bytes ? left : s->slot_bytes;
}

static coll_status_t post_send(transport_conn_t *conn, const void *buf, size_t len) {
  cuda_ipc_conn_t *c = (cuda_ipc_conn_t *)conn;
  cuda_ipc_msg_t m = {.r = {.dst = (void *)(uintptr_t)buf, .len = len}};
  return queue_push(&c->tx.queue, &m);
}

/* The executor hands over the host reduction of (dtype, op); the device runs the kernel
 * of the same pair (AVG shares SUM's function and sums too). */
static bool kernel_of(mem_reduce_fn reduce, coll_dtype_t *dtype, coll_op_t *op) {
  for (int d = 0; d < COLL_DTYPE_COUNT; d++)
    for (int o = 0; o < COLL_OP_COUNT; o++)
      if (mem_host_reduce_fn((coll_dtype_t)d, (coll_op_t)o) == reduce) {
        *dtype = (coll_dtype_t)d;
        *op = (coll_op_t)o;
        return true;
      }
  return false;
}

static coll_status_t post_recv(transport_conn_t *conn, const transport_recv_t *recv) {
  cuda_ipc_conn_t *c = (cuda_ipc_conn_t *)conn;
  if (recv->operand != NULL && (recv->elem_size == 0 || c->rx.slot_bytes % recv->elem_size != 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "cuda_ipc: element size %zu does not divide the slot size %zu",
                      recv->elem_size, c->rx.slot_bytes);
  cuda_ipc_msg_t m = {.r = *recv};
  if (recv->operand != NULL && !kernel_of(recv->reduce, &m.dtype, &m.op))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "cuda_ipc: a reduction with no device kernel");
  return queue_push(&c->rx.queue, &m);
}

/* Sender: copy chunks of queued sends into free slots of the peer's ring. A message of
 * 0 bytes still takes one (empty) chunk so that both sides count it. */
static coll_status_t send_issue(cuda_ipc_conn_t *c) {
  cuda_ipc_side_t *s = &c->tx;
  uint64_t consumed = atomic_load_explicit(&s->ctrl->consumed, memory_order_acquire);
  for (size_t i = 0; i < s->queue.count; i++) {
    cuda_ipc_msg_t *m = queue_at(&s->queue, i);
    while (!m->issued) {
      if (s->issued - consumed >= s->nslots) return COLL_OK;
      uint32_t slot = (uint32_t)(s->issued % s->nslots);
      size_t n = chunk_of(s, m);
      coll_status_t st = mem_cuda_copy_async(s->ring + (size_t)slot * s->slot_bytes,
                                             (const char *)m->r.dst + m->off, n, s->stream);
      if (st == COLL_OK) st = mem_cuda_event_record(s->events[slot], s->stream);
      if (st != COLL_OK) return st;
      s->chunk_len[slot] = n;
      s->issued++;
      m->off += n;
      if (m->off == m->r.len) {
        m->issued = true;
        m->last_chunk = s->issued;
      }
    }
  }
  return COLL_OK;
}

/* Sender: publish chunks whose copy has finished, in order. */
static coll_status_t send_publish(cuda_ipc_conn_t *c) {
  cuda_ipc_side_t *s = &c->tx;
  while (s->finished < s->issued) {
    uint32_t slot = (uint32_t)(s->finished % s->nslots);
    coll_status_t st = mem_cuda_event_query(s->events[slot]);
    if (st == COLL_IN_PROGRESS) break;
    if (st != COLL_OK) return st;
    s->ctrl->len[slot] = s->chunk_len[slot];
    s->finished++;
    atomic_store_explicit(&s->ctrl->posted, s->finished, memory_order_release);
  }
  return COLL_OK;
}

/* Receiver: hand published chunks to the GPU (copy or reduce into the destination). */
static coll_status_t recv_issue(cuda_ipc_conn_t *c) {
  cuda_ipc_side_t *s = &c->rx;
  uint64_t posted = atomic_load_explicit(&s->ctrl->posted, memory_order_acquire);
  for (size_t i = 0; i < s->queue.count; i++) {
    cuda_ipc_msg_t *m = queue_at(&s->queue, i);
    while (!m->issued) {
      if (s->issued >= posted) return COLL_OK;
      uint32_t slot = (uint32_t)(s->issued % s->nslots);
      size_t n = chunk_of(s, m);
      if (s->ctrl->len[slot] != n)
        return coll_error(COLL_ERR_PROTOCOL,
                          "cuda_ipc: rank %d sent a chunk of %llu bytes where a receive of %zu "
                          "bytes expected %zu (the ranks called different collectives?)",
                          c->base.peer, (unsigned long long)s->ctrl->len[slot], m->r.len, n);
      const char *src = s->ring + (size_t)slot * s->slot_bytes;
      char *dst = (char *)m->r.dst + m->off;
      coll_status_t st;
      if (m->r.operand == NULL)
        st = mem_cuda_copy_async(dst, src, n, s->stream);
      else
        st = mem_cuda_reduce_async(dst, (const char *)m->r.operand + m->off, src,
                                   n / m->r.elem_size, m->dtype, m->op, s->stream);
      if (st == COLL_OK) st = mem_cuda_event_record(s->events[slot], s->stream);
      if (st != COLL_OK) return st;
      s->issued++;
      m->off += n;
      if (m->off == m->r.len) {
        m->issued = true;
        m->last_chunk = s->issued;
      }
    }
  }
  return COLL_OK;
}

/* Receiver: free slots whose kernel has finished, in order. */
static coll_status_t recv_release(cuda_ipc_conn_t *c) {
  cuda_ipc_side_t *s = &c->rx;
  uint64_t before = s->finished;
  while (s->finished < s->issued) {
    coll_status_t st = mem_cuda_event_query(s->events[s->finished % s->nslots]);
    if (st == COLL_IN_PROGRESS) break;
    if (st != COLL_OK) return st;
    s->finished++;
  }
  if (s->finished != before)
    atomic_store_explicit(&s->ctrl->consumed, s->finished, memory_order_release);
  return COLL_OK;
}

/* Pop the completed messages at the head of a queue. */
static void retire(cuda_ipc_side_t *s) {
  while (s->queue.count > 0) {
    cuda_ipc_msg_t *m = queue_at(&s->queue, 0);
    if (!m->issued || s->finished < m->last_chunk) break;
    s->queue.head = (s->queue.head + 1) % s->queue.cap;
    s->queue.count--;
    s->done++;
  }
}

static coll_status_t progress(transport_conn_t *conn, uint64_t *sends_done, uint64_t *recvs_done) {
  cuda_ipc_conn_t *c = (cuda_ipc_conn_t *)conn;
  coll_status_t st = send_publish(c);
  if (st == COLL_OK) st = send_issue(c);
  if (st == COLL_OK) st = recv_release(c);
  if (st == COLL_OK) st = recv_issue(c);
  if (st != COLL_OK)
    return coll_error_prefix(st, "cuda_ipc with rank %d (host %s): ", c->base.peer, c->peer_host);
  retire(&c->tx);
  retire(&c->rx);
  *sends_done = c->tx.done;
  *recvs_done = c->rx.done;
  return COLL_OK;
}

bool cuda_ipc_ready(cuda_ipc_conn_t *c) {
  cuda_ipc_side_t *tx = &c->tx, *rx = &c->rx;
  if (tx->finished < tx->issued &&
      mem_cuda_event_query(tx->events[tx->finished % tx->nslots]) != COLL_IN_PROGRESS)
    return true;
  if (rx->finished < rx->issued &&
      mem_cuda_event_query(rx->events[rx->finished % rx->nslots]) != COLL_IN_PROGRESS)
    return true;
  if (rx->queue.count > 0 && atomic_load_explicit(&rx->ctrl->posted, memory_order_acquire) >
                                 rx->issued)
    return true;
  if (tx->queue.count > 0 && tx->issued - atomic_load_explicit(&tx->ctrl->consumed,
                                                               memory_order_acquire) < tx->nslots) {
    for (size_t i = 0; i < tx->queue.count; i++)
      if (!queue_at(&tx->queue, i)->issued) return true;
  }
  return false;
}

const transport_ops_t cuda_ipc_ops = {
    .name = "cuda_ipc",
    .post_send = post_send,
    .post_recv = post_recv,
    .progress = progress,
};
