/* shm transport, setup: each rank creates its inbox segment (POSIX shm, a name unique per
 * communicator and process), publishes the name in the store, maps every peer's inbox,
 * probes once per pair whether process_vm_readv may read the peer, and unlinks its own
 * segment as soon as every peer has mapped it (nothing is left in /dev/shm after setup).
 * The owner holds a POSIX record lock on its segment for its whole life: peers test the
 * lock to learn whether the owner still exists (a killed process rings no doorbell).
 *
 * Environment:
 *   COLL_SHM_SLOT_BYTES  bytes per FIFO slot, multiple of 4096 in [4 KiB, 16 MiB] (256 KiB)
 *   COLL_SHM_NSLOTS      slots per FIFO, 2..1024 (16); one FIFO per peer: the default
 *                        staging is 4 MiB per peer connection
 *   COLL_SHM_INBOX_BYTES with defaults for the two above, the most all of a rank's FIFOs
 *                        may take together (64 MiB): with many ranks on a host the FIFOs
 *                        shrink (fewer slots, down to 4, then smaller slots, down to
 *                        16 KiB) so that /dev/shm holds ranks x inbox, not ranks^2 x 4 MiB
 *   COLL_SHM_DIRECT      1: single-copy (process_vm_readv) for large messages where the
 *                        kernel allows it; 0: always copy through the FIFO (0: measured
 *                        slower here, also with more ranks than cores: see shm.c)
 *   COLL_SHM_DIRECT_MIN  smallest message sent single-copy, bytes (256 KiB)
 *   COLL_SHM_DIRECT_CHUNK staging for single-copy reductions, [4 KiB, 8 MiB] (128 KiB)
 *   COLL_SHM_SPIN_US     how long transport_set_wait spins before it sleeps, 0..1000 (0) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "common/segment_name.h"
#include "common/test_hook.h"
#include "common/util.h"
#include "transport/shm/shm.h"

#define MAX_SLOT_BYTES (16u << 20)

static const char *host_name(const transport_setup_t *setup, int rank) {
  return setup->host_ids != NULL ? setup->host_ids[rank] : "localhost";
}

static coll_status_t read_config(transport_group_t *g, uint32_t nfifos, size_t *slot_bytes,
                                 uint32_t *nslots) {
  int64_t sb, ns, direct, dmin, dchunk, spin, inbox;
  coll_status_t st = coll_env_int("COLL_SHM_SLOT_BYTES", 4096, MAX_SLOT_BYTES, 256 << 10, &sb);
  if (st == COLL_OK) st = coll_env_int("COLL_SHM_NSLOTS", 2, 1024, 16, &ns);
  if (st == COLL_OK) st = coll_env_int("COLL_SHM_DIRECT", 0, 1, 0, &direct);
  if (st == COLL_OK) st = coll_env_int("COLL_SHM_DIRECT_MIN", 0, INT64_MAX, 256 << 10, &dmin);
  if (st == COLL_OK) st = coll_env_int("COLL_SHM_DIRECT_CHUNK", 4096, 8 << 20, 128 << 10, &dchunk);
  if (st == COLL_OK) st = coll_env_int("COLL_SHM_SPIN_US", 0, 1000, 0, &spin);
  if (st == COLL_OK)
    st = coll_env_int("COLL_SHM_INBOX_BYTES", 1 << 20, INT64_MAX, 64 << 20, &inbox);
  if (st != COLL_OK) return st;
  bool geometry_set =
      coll_env_str("COLL_SHM_SLOT_BYTES") != NULL || coll_env_str("COLL_SHM_NSLOTS") != NULL;
  while (!geometry_set && nfifos > 0 && sb * ns > inbox / (int64_t)nfifos) {
    if (ns > 4)
      ns /= 2;
    else if (sb > 16 << 10)
      sb /= 2;
    else
      break;
  }
  if (sb % SHM_PAGE != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "COLL_SHM_SLOT_BYTES=%lld is not a multiple of %u",
                      (long long)sb, SHM_PAGE);
  *slot_bytes = (size_t)sb;
  *nslots = (uint32_t)ns;
  g->direct_enabled = direct != 0;
  g->direct_min = (size_t)dmin;
  g->direct_chunk = (size_t)dchunk / 64 * 64;
  g->spin_ns = spin * 1000;
  return COLL_OK;
}

static shm_fifo_t fifo_at(shm_inbox_t *inbox, uint32_t index) {
  unsigned char *base = (unsigned char *)inbox + SHM_PAGE + (size_t)index * inbox->fifo_stride;
  return (shm_fifo_t){.ctrl = (shm_fifo_ctrl_t *)base,
                      .hdrs = (shm_slot_hdr_t *)(base + inbox->hdrs_offset),
                      .data = base + inbox->data_offset,
                      .nslots = inbox->nslots,
                      .slot_bytes = inbox->slot_bytes};
}

/* Create, size (allocating now: a full /dev/shm is an error here, not a SIGBUS later),
 * map and lock this rank's inbox with one FIFO per shm peer. */
static coll_status_t create_inbox(const transport_setup_t *setup, transport_group_t *g,
                                  uint32_t nfifos, size_t slot_bytes, uint32_t nslots) {
  size_t hdrs_offset = coll_round_up(sizeof(shm_fifo_ctrl_t), 64);
  size_t data_offset =
      coll_round_up(hdrs_offset + (size_t)nslots * sizeof(shm_slot_hdr_t), SHM_PAGE);
  size_t stride = data_offset + (size_t)nslots * slot_bytes;
  g->inbox_len = SHM_PAGE + (size_t)nfifos * stride;
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)coll_now_ns();
  uint32_t key_hash = 2166136261u;
  for (const char *p = setup->key_prefix; *p != '\0'; p++)
    key_hash = (key_hash ^ (unsigned char)*p) * 16777619u;
  char what[32];
  snprintf(what, sizeof what, "%08x-r%d", key_hash, setup->rank);
  coll_segment_name(g->inbox_name, sizeof g->inbox_name, what, rnd);
  g->inbox_fd = shm_open(g->inbox_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (g->inbox_fd < 0)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "shm_open(%s)", g->inbox_name);
  int err = ftruncate(g->inbox_fd, (off_t)g->inbox_len) == 0
                ? posix_fallocate(g->inbox_fd, 0, (off_t)g->inbox_len)
                : errno;
  if (err != 0)
    return coll_error_errno(COLL_ERR_SYSTEM, err,
                            "reserving %zu bytes of shared memory for %s (is /dev/shm large "
                            "enough? lower COLL_SHM_SLOT_BYTES or COLL_SHM_NSLOTS)",
                            g->inbox_len, g->inbox_name);
  void *map = mmap(NULL, g->inbox_len, PROT_READ | PROT_WRITE, MAP_SHARED, g->inbox_fd, 0);
  if (map == MAP_FAILED)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "mmap of %zu bytes of %s", g->inbox_len,
                            g->inbox_name);
  g->inbox = map;
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fcntl(g->inbox_fd, F_SETLK, &lock) != 0)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "locking %s", g->inbox_name);
  shm_inbox_t *in = g->inbox;
  in->owner_rank = setup->rank;
  in->pid = (int32_t)getpid();
  in->cookie = rnd ^ 0x5bd1e9955bd1e995ull;
  g->cookie = in->cookie;
  in->cookie_addr = (uint64_t)(uintptr_t)&g->cookie;
  in->nfifos = nfifos;
  in->nslots = nslots;
  in->slot_bytes = slot_bytes;
  in->fifo_stride = stride;
  in->hdrs_offset = hdrs_offset;
  in->data_offset = data_offset;
  atomic_store(&in->bell, 0);
  atomic_store(&in->sleeping, 0);
  atomic_thread_fence(memory_order_release);
  in->magic = SHM_MAGIC;
  return COLL_OK;
}

/* The sender's index among an inbox owner's FIFOs, from the owner's published list. */
static int fifo_index_of(const char *list, int rank) {
  int index = 0;
  const char *p = list;
  while (*p != '\0') {
    char *end;
    long r = strtol(p, &end, 10);
    if (end == p) break;
    if (r == rank) return index;
    index++;
    p = end;
  }
  return -1;
}

static coll_status_t store_text(const transport_setup_t *setup, const char *key, int64_t deadline,
                                char **text) {
  void *value = NULL;
  size_t len = 0;
  coll_status_t st = store_get(setup->store, key, &value, &len, coll_ms_left(deadline));
  if (st != COLL_OK) return st;
  char *s = malloc(len + 1);
  if (s == NULL) {
    free(value);
    return coll_error(COLL_ERR_NO_MEMORY, "shm setup: out of memory");
  }
  memcpy(s, value, len);
  s[len] = '\0';
  free(value);
  *text = s;
  return COLL_OK;
}

/* May this process read the peer's memory? Read the peer's cookie from its address. */
static bool probe_direct(const shm_conn_t *c) {
  uint64_t value = 0;
  struct iovec local = {&value, sizeof value};
  struct iovec remote = {(void *)(uintptr_t)c->peer_inbox->cookie_addr, sizeof value};
  ssize_t got = process_vm_readv(c->peer_pid, &local, 1, &remote, 1, 0);
  return got == (ssize_t)sizeof value && value == c->peer_inbox->cookie;
}

/* Map the peer's inbox and find our FIFO in it and its FIFO in ours. */
static coll_status_t attach_peer(const transport_setup_t *setup, transport_group_t *g, int peer,
                                 uint32_t my_index_for_peer, int64_t deadline) {
  char key[512];
  snprintf(key, sizeof key, "%sshm/%d", setup->key_prefix, peer);
  char *text = NULL;
  coll_status_t st = store_text(setup, key, deadline, &text);
  if (st != COLL_OK)
    return coll_error_prefix(st,
                             "reading the shm segment of rank %d (does it use shm too?): ", peer);
  char name[96];
  int consumed = 0;
  if (sscanf(text, "%95s%n", name, &consumed) != 1) {
    free(text);
    return coll_error(COLL_ERR_PROTOCOL, "rank %d published a bad shm record", peer);
  }
  int index = fifo_index_of(text + consumed, setup->rank);
  free(text);
  if (index < 0)
    return coll_error(COLL_ERR_MISMATCH,
                      "rank %d (host %s) does not use shm with rank %d: is COLL_TRANSPORT the "
                      "same on every rank?",
                      peer, host_name(setup, peer), setup->rank);
  shm_conn_t *c = g->conns[peer];
  c->peer_fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (c->peer_fd < 0)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "shm_open(%s) of rank %d", name, peer);
  struct stat sb;
  if (fstat(c->peer_fd, &sb) != 0 || (size_t)sb.st_size < SHM_PAGE)
    return coll_error(COLL_ERR_PROTOCOL, "shm segment %s of rank %d is too small", name, peer);
  void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->peer_fd, 0);
  if (map == MAP_FAILED)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "mmap of %s (rank %d)", name, peer);
  c->peer_inbox = map;
  c->peer_map_len = (size_t)sb.st_size;
  shm_inbox_t *pin = c->peer_inbox;
  if (pin->magic != SHM_MAGIC || pin->owner_rank != peer || (uint32_t)index >= pin->nfifos ||
      pin->nslots == 0 || SHM_PAGE + (size_t)pin->nfifos * pin->fifo_stride > c->peer_map_len)
    return coll_error(COLL_ERR_PROTOCOL, "shm segment %s of rank %d has a bad header", name, peer);
  c->peer_pid = pin->pid;
  c->out = fifo_at(pin, (uint32_t)index);
  c->out_slot_of = calloc(c->out.nslots, sizeof *c->out_slot_of);
  c->out_slot_busy = calloc(c->out.nslots, sizeof *c->out_slot_busy);
  if (c->out_slot_of == NULL || c->out_slot_busy == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory for the FIFO to rank %d", peer);
  c->in = fifo_at(g->inbox, my_index_for_peer);
  /* Tell the sender (the peer) whether we can read its buffers directly. */
  if (g->direct_enabled && probe_direct(c)) atomic_store(&c->in.ctrl->direct_ok, 1);
  coll_log(COLL_LOG_INFO, "shm: rank %d pid %d, single-copy reads from it %s", peer,
           (int)c->peer_pid, atomic_load(&c->in.ctrl->direct_ok) ? "allowed" : "not allowed");
  snprintf(key, sizeof key, "%sshm/%d/mapped/%d", setup->key_prefix, peer, setup->rank);
  return store_set(setup->store, key, "1", 1, coll_ms_left(deadline));
}

/* Wait until every peer mapped our inbox, then remove its name. */
static coll_status_t unlink_when_mapped(const transport_setup_t *setup, transport_group_t *g,
                                        const bool *peers, int64_t deadline) {
  int n = 0;
  char **keys = calloc((size_t)setup->nranks, sizeof *keys);
  coll_status_t st = keys != NULL ? COLL_OK : coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory");
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    keys[n] = malloc(strlen(setup->key_prefix) + 48);
    if (keys[n] == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory");
      break;
    }
    sprintf(keys[n++], "%sshm/%d/mapped/%d", setup->key_prefix, setup->rank, r);
  }
  if (st == COLL_OK)
    st = store_wait(setup->store, (const char *const *)keys, (size_t)n, coll_ms_left(deadline));
  if (st != COLL_OK) st = coll_error_prefix(st, "waiting for the shm peers to map our segment: ");
  for (int i = 0; i < n; i++) free(keys[i]);
  free(keys);
  if (shm_unlink(g->inbox_name) == 0) g->unlinked = true;
  return st;
}

static void shm_group_close(transport_group_t *g) {
  if (g == NULL) return;
  if (g->conns != NULL) {
    for (int r = 0; r < g->nranks; r++) {
      shm_conn_t *c = g->conns[r];
      if (c == NULL) continue;
      if (c->peer_inbox != NULL) munmap(c->peer_inbox, c->peer_map_len);
      if (c->peer_fd >= 0) close(c->peer_fd);
      shm_conn_free(c);
    }
  }
  free(g->conns);
  if (!g->unlinked && g->inbox_name[0] != '\0') shm_unlink(g->inbox_name);
  if (g->inbox != NULL) munmap(g->inbox, g->inbox_len);
  if (g->inbox_fd >= 0) close(g->inbox_fd);
  free(g);
}

static coll_status_t shm_open_group(const transport_setup_t *setup, const bool *peers,
                                    transport_group_t **out) {
  transport_group_t *g = calloc(1, sizeof *g);
  if (g == NULL) return coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory");
  g->rank = setup->rank;
  g->nranks = setup->nranks;
  g->inbox_fd = -1;
  g->conns = calloc((size_t)setup->nranks, sizeof *g->conns);
  size_t slot_bytes = 0;
  uint32_t nslots = 0;
  uint32_t nfifos = 0;
  for (int r = 0; r < setup->nranks; r++) nfifos += peers[r] ? 1u : 0u;
  coll_status_t st = g->conns != NULL ? read_config(g, nfifos, &slot_bytes, &nslots)
                                      : coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory");
  if (st != COLL_OK) goto fail;
  /* Yama (ptrace_scope=1) only lets a process read another that names it a tracer; not
   * being able to say so (no Yama) is fine, the probe below decides. */
  if (g->direct_enabled) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  int64_t deadline = coll_deadline_ns(setup->timeout_ms > 0 ? setup->timeout_ms : 30000);
  size_t list_len = 128;
  list_len += (size_t)nfifos * 12;
  char *record = malloc(list_len);
  if (record == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory");
    goto fail;
  }
  st = create_inbox(setup, g, nfifos, slot_bytes, nslots);
  if (st == COLL_OK) coll_test_hook("shm_inbox"); /* its name is in /dev/shm until all mapped it */
  size_t used = (size_t)snprintf(record, list_len, "%s", g->inbox_name);
  uint32_t index = 0;
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    used += (size_t)snprintf(record + used, list_len - used, " %d", r);
    shm_conn_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "shm: out of memory");
      break;
    }
    c->base = (transport_conn_t){.ops = &shm_ops, .peer = r};
    c->group = g;
    c->peer_fd = -1;
    snprintf(c->peer_host, sizeof c->peer_host, "%s", host_name(setup, r));
    g->conns[r] = c;
    c->in = fifo_at(g->inbox, index++); /* peer r writes into our FIFO number `index` */
  }
  if (st == COLL_OK) {
    char key[512];
    snprintf(key, sizeof key, "%sshm/%d", setup->key_prefix, setup->rank);
    st = store_set(setup->store, key, record, used, coll_ms_left(deadline));
  }
  free(record);
  index = 0;
  for (int r = 0; r < setup->nranks && st == COLL_OK; r++) {
    if (!peers[r]) continue;
    st = attach_peer(setup, g, r, index++, deadline);
  }
  if (st == COLL_OK) st = unlink_when_mapped(setup, g, peers, deadline);
  if (st != COLL_OK) goto fail;
  g->seen_bell = atomic_load(&g->inbox->bell);
  *out = g;
  return COLL_OK;
fail:
  shm_group_close(g);
  return st;
}

bool shm_peer_alive(const shm_conn_t *c) {
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (c->peer_fd < 0 || fcntl(c->peer_fd, F_GETLK, &lock) != 0) return true; /* cannot tell */
  return lock.l_type != F_UNLCK;
}

static transport_conn_t *shm_group_conn(transport_group_t *g, int peer) {
  return g->conns[peer] != NULL ? &g->conns[peer]->base : NULL;
}

static size_t shm_staging_bytes(const transport_group_t *g) {
  /* Counted by the receiving side: our inbox FIFOs, plus single-copy reduction chunks. */
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++) {
    const shm_conn_t *c = g->conns[r];
    if (c == NULL) continue;
    total += (size_t)c->in.nslots * c->in.slot_bytes;
    if (c->staging != NULL) total += g->direct_chunk;
  }
  return total;
}

static bool shm_probe(const transport_setup_t *setup, int peer) {
  return setup->host_ids != NULL &&
         strcmp(setup->host_ids[setup->rank], setup->host_ids[peer]) == 0;
}

const transport_kind_t transport_shm_kind = {
    .name = "shm",
    .probe = shm_probe,
    .open = shm_open_group,
    .conn = shm_group_conn,
    .wait = shm_group_wait,
    .staging_bytes = shm_staging_bytes,
    .close = shm_group_close,
};
