/* cuda_ipc connection setup: per directed pair the receiver allocates the device ring,
 * creates the host control block and publishes both (IPC handle, shm name) in the store;
 * the sender maps them. Also the group's wait (poll with short sleeps: GPU completions
 * raise no file descriptor or futex) and teardown.
 *
 * Environment: COLL_CUDA_IPC_SLOT_BYTES (4 MiB), COLL_CUDA_IPC_NSLOTS (8): device staging
 * per directed pair = slots x bytes, held by the receiver. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "common/segment_name.h"
#include "transport/cuda_ipc/cuda_ipc.h"

enum { SETUP_TIMEOUT_MS = 30000, WAIT_SPIN_NS = 50000, WAIT_SLEEP_NS = 5000 };

/* What a receiver publishes for its sender. */
typedef struct {
  unsigned char handle[MEM_CUDA_IPC_HANDLE_BYTES];
  char shm_name[64];
  char pci_id[32];
  uint64_t slot_bytes;
  uint32_t nslots;
} ring_record_t;

static const char *host_name(const transport_setup_t *setup, int rank) {
  return setup->host_ids != NULL ? setup->host_ids[rank] : "?";
}

static coll_status_t read_config(size_t *slot_bytes, uint32_t *nslots) {
  int64_t sb, ns;
  coll_status_t st = coll_env_int("COLL_CUDA_IPC_SLOT_BYTES", 4096, 1LL << 30, 4 << 20, &sb);
  if (st == COLL_OK) st = coll_env_int("COLL_CUDA_IPC_NSLOTS", 2, CUDA_IPC_MAX_SLOTS, 8, &ns);
  if (st != COLL_OK) return st;
  if (sb % 64 != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_CUDA_IPC_SLOT_BYTES=%lld is not a multiple of 64", (long long)sb);
  *slot_bytes = (size_t)sb;
  *nslots = (uint32_t)ns;
  return COLL_OK;
}

static coll_status_t side_init(cuda_ipc_side_t *s) {
  coll_status_t st = mem_cuda_stream_create(&s->stream);
  for (uint32_t i = 0; i < s->nslots && st == COLL_OK; i++) st = mem_cuda_event_create(&s->events[i]);
  return st;
}

/* Receive side of the pair peer -> us: ring, control block, record to publish. */
static coll_status_t create_rx(const transport_setup_t *setup, cuda_ipc_conn_t *c,
                               ring_record_t *rec) {
  cuda_ipc_side_t *s = &c->rx;
  coll_status_t st = mem_cuda_alloc((void **)&s->ring, (size_t)s->nslots * s->slot_bytes);
  if (st == COLL_OK) st = mem_cuda_ipc_export(s->ring, rec->handle);
  if (st != COLL_OK) return st;
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)coll_now_ns();
  char what[32];
  snprintf(what, sizeof what, "ipc-%d-%d", c->base.peer, setup->rank);
  coll_segment_name(s->shm_name, sizeof s->shm_name, what, rnd);
  int fd = shm_open(s->shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    s->shm_name[0] = '\0';
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "cuda_ipc: shm_open of a control block");
  }
  void *map = MAP_FAILED;
  if (ftruncate(fd, sizeof(cuda_ipc_ctrl_t)) == 0)
    map = mmap(NULL, sizeof(cuda_ipc_ctrl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (map == MAP_FAILED)
    return coll_error_errno(COLL_ERR_SYSTEM, err, "cuda_ipc: mapping control block %s",
                            s->shm_name);
  s->ctrl = map;
  atomic_init(&s->ctrl->posted, 0);
  atomic_init(&s->ctrl->consumed, 0);
  snprintf(rec->shm_name, sizeof rec->shm_name, "%s", s->shm_name);
  rec->slot_bytes = s->slot_bytes;
  rec->nslots = s->nslots;
  return COLL_OK;
}

/* Send side of the pair us -> peer: map what the peer published for us. */
static coll_status_t attach_tx(const transport_setup_t *setup, cuda_ipc_conn_t *c,
                               const char *my_pci, int64_t deadline) {
  char key[512];
  snprintf(key, sizeof key, "%scuda_ipc/%d-%d", setup->key_prefix, setup->rank, c->base.peer);
  void *value = NULL;
  size_t len = 0;
  coll_status_t st = store_get(setup->store, key, &value, &len, coll_ms_left(deadline));
  if (st != COLL_OK) return st;
  ring_record_t rec;
  if (len != sizeof rec) {
    free(value);
    return coll_error(COLL_ERR_PROTOCOL, "cuda_ipc: record of rank %d has %zu bytes", c->base.peer,
                      len);
  }
  memcpy(&rec, value, sizeof rec);
  free(value);
  rec.shm_name[sizeof rec.shm_name - 1] = '\0';
  rec.pci_id[sizeof rec.pci_id - 1] = '\0';
  if (rec.nslots < 2 || rec.nslots > CUDA_IPC_MAX_SLOTS || rec.slot_bytes == 0 ||
      rec.slot_bytes % 64 != 0)
    return coll_error(COLL_ERR_PROTOCOL, "cuda_ipc: rank %d published a bad ring geometry",
                      c->base.peer);
  cuda_ipc_side_t *s = &c->tx;
  s->nslots = rec.nslots;
  s->slot_bytes = (size_t)rec.slot_bytes;
  st = mem_cuda_ipc_open(rec.handle, (void **)&s->ring);
  if (st != COLL_OK) return st;
  int fd = shm_open(rec.shm_name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "cuda_ipc: shm_open(%s) of rank %d",
                            rec.shm_name, c->base.peer);
  void *map = mmap(NULL, sizeof(cuda_ipc_ctrl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (map == MAP_FAILED)
    return coll_error_errno(COLL_ERR_SYSTEM, err, "cuda_ipc: mapping %s", rec.shm_name);
  s->ctrl = map;
  st = side_init(s);
  if (st != COLL_OK) return st;
  if (my_pci[0] != '\0' && strcmp(my_pci, rec.pci_id) == 0)
    coll_log(COLL_LOG_INFO,
             "cuda_ipc: rank %d and rank %d share GPU %s (NCCL refuses this; libcoll allows "
             "it: their work is time-sliced on the GPU and synchronised from the host)",
             setup->rank, c->base.peer, my_pci);
  snprintf(key, sizeof key, "%scuda_ipc/%d-%d/mapped", setup->key_prefix, setup->rank,
           c->base.peer);
  return store_set(setup->store, key, "1", 1, coll_ms_left(deadline));
}

static void side_free(cuda_ipc_side_t *s, bool owner) {
  for (uint32_t i = 0; i < CUDA_IPC_MAX_SLOTS; i++) mem_cuda_event_destroy(s->events[i]);
  mem_cuda_stream_destroy(s->stream);
  if (owner) mem_cuda_free(s->ring);
  else mem_cuda_ipc_close(s->ring);
  if (s->ctrl != NULL) munmap(s->ctrl, sizeof(cuda_ipc_ctrl_t));
  if (s->shm_name[0] != '\0') shm_unlink(s->shm_name);
  free(s->queue.items);
}

static void cuda_ipc_close_group(transport_group_t *g) {
  if (g == NULL) return;
  for (int r = 0; g->conns != NULL && r < g->nranks; r++) {
    cuda_ipc_conn_t *c = g->conns[r];
    if (c == NULL) continue;
    /* Our streams may still run copies into a peer's ring: let them finish first. */
    if (c->tx.stream != NULL) mem_cuda_stream_wait(c->tx.stream, 1000);
    if (c->rx.stream != NULL) mem_cuda_stream_wait(c->rx.stream, 1000);
    side_free(&c->tx, false);
    side_free(&c->rx, true);
    free(c);
  }
  free(g->conns);
  free(g);
}

static coll_status_t cuda_ipc_open(const transport_setup_t *setup, const bool *peers,
                                   transport_group_t **out) {
  size_t slot_bytes = 0;
  uint32_t nslots = 0;
  coll_status_t st = read_config(&slot_bytes, &nslots);
  if (st != COLL_OK) return st;
  transport_group_t *g = calloc(1, sizeof *g);
  if (g != NULL) g->conns = calloc((size_t)setup->nranks, sizeof *g->conns);
  if (g == NULL || g->conns == NULL) {
    free(g);
    return coll_error(COLL_ERR_NO_MEMORY, "cuda_ipc: out of memory");
  }
  g->rank = setup->rank;
  g->nranks = setup->nranks;
  int64_t deadline = coll_deadline_ns(setup->timeout_ms > 0 ? setup->timeout_ms : SETUP_TIMEOUT_MS);
  char my_pci[32] = "";
  int dev = -1;
  if (mem_cuda_get_device(&dev) == COLL_OK) mem_cuda_device_pci_id(dev, my_pci, sizeof my_pci);
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    cuda_ipc_conn_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "cuda_ipc: out of memory");
      break;
    }
    g->conns[r] = c;
    c->base = (transport_conn_t){.ops = &cuda_ipc_ops, .peer = r};
    c->rank = setup->rank;
    snprintf(c->peer_host, sizeof c->peer_host, "%s", host_name(setup, r));
    c->rx.nslots = nslots;
    c->rx.slot_bytes = slot_bytes;
    ring_record_t rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.pci_id, sizeof rec.pci_id, "%s", my_pci);
    st = side_init(&c->rx);
    if (st == COLL_OK) st = create_rx(setup, c, &rec);
    if (st == COLL_OK) {
      char key[512];
      snprintf(key, sizeof key, "%scuda_ipc/%d-%d", setup->key_prefix, r, setup->rank);
      st = store_set(setup->store, key, &rec, sizeof rec, coll_ms_left(deadline));
    }
  }
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++)
    if (peers[r]) st = attach_tx(setup, g->conns[r], my_pci, deadline);
  /* Once the sender has mapped a control block its name is no longer needed. */
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    char key[512];
    snprintf(key, sizeof key, "%scuda_ipc/%d-%d/mapped", setup->key_prefix, r, setup->rank);
    void *value = NULL;
    size_t len = 0;
    st = store_get(setup->store, key, &value, &len, coll_ms_left(deadline));
    free(value);
    if (st == COLL_OK) {
      shm_unlink(g->conns[r]->rx.shm_name);
      g->conns[r]->rx.shm_name[0] = '\0';
    }
  }
  if (st != COLL_OK) {
    cuda_ipc_close_group(g);
    return st;
  }
  *out = g;
  return COLL_OK;
}

static transport_conn_t *cuda_ipc_conn(transport_group_t *g, int peer) {
  return g->conns[peer] != NULL ? &g->conns[peer]->base : NULL;
}

/* GPU completions and the peer's host counters signal nothing we could block on: poll,
 * spinning (with yields) for a short while, then sleeping a few microseconds at a time. */
static coll_status_t cuda_ipc_wait(transport_group_t *g, int timeout_ms, bool *woke) {
  int64_t start = coll_now_ns();
  int64_t limit = timeout_ms > 0 ? (int64_t)timeout_ms * 1000000LL : 0;
  for (;;) {
    for (int r = 0; r < g->nranks; r++) {
      if (g->conns[r] != NULL && cuda_ipc_ready(g->conns[r])) {
        *woke = true;
        return COLL_OK;
      }
    }
    int64_t waited = coll_now_ns() - start;
    if (waited >= limit) {
      *woke = false;
      return COLL_OK;
    }
    if (waited < WAIT_SPIN_NS) {
      sched_yield();
    } else {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = WAIT_SLEEP_NS};
      nanosleep(&ts, NULL);
    }
  }
}

static size_t cuda_ipc_staging_bytes(const transport_group_t *g) {
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++)
    if (g->conns[r] != NULL) total += (size_t)g->conns[r]->rx.nslots * g->conns[r]->rx.slot_bytes;
  return total;
}

/* Same host and a usable GPU here. The device path agrees on the GPUs of all ranks
 * before it asks for this transport (cuda/cuda_path.c), so both sides answer alike. */
static bool cuda_ipc_probe(const transport_setup_t *setup, int peer) {
  if (setup->host_ids == NULL || strcmp(setup->host_ids[setup->rank], setup->host_ids[peer]) != 0) {
    coll_error(COLL_ERR_UNSUPPORTED, "they are on different hosts");
    return false;
  }
  if (mem_cuda_device_count() == 0) {
    coll_error(COLL_ERR_UNSUPPORTED, "no CUDA device on rank %d", setup->rank);
    return false;
  }
  return true;
}

const transport_kind_t transport_cuda_ipc_kind = {
    .name = "cuda_ipc",
    .device_only = true,
    .probe = cuda_ipc_probe,
    .open = cuda_ipc_open,
    .conn = cuda_ipc_conn,
    .wait = cuda_ipc_wait,
    .staging_bytes = cuda_ipc_staging_bytes,
    .close = cuda_ipc_close_group,
};
