/* The transport registry: picks the transport of every pair of ranks (the first in the
 * ordered table whose probe accepts, or the one COLL_TRANSPORT forces), connects each
 * transport's group of peers and waits on all of them at once.
 *
 * Environment (each transport file documents its own in detail):
 *   COLL_TRANSPORT=auto|shm|ib|tcp|cuda_ipc  force one transport for every pair (default:
 *                                auto); cuda_ipc applies to device buffers only.
 *                                Forcing shm for ranks on different hosts is an error;
 *                                so is forcing ib where a rank has no usable RDMA port.
 *   shm (shm/shm_setup.c): COLL_SHM_SLOT_BYTES (256 KiB), COLL_SHM_NSLOTS (16): FIFO
 *     staging per peer = slots x bytes = 4 MiB by default (at most 16 MiB unless raised by hand);
 *     COLL_SHM_DIRECT (0), COLL_SHM_DIRECT_MIN (256 KiB), COLL_SHM_DIRECT_CHUNK (128 KiB),
 *     COLL_SHM_SPIN_US (0), COLL_SHM_INBOX_BYTES (64 MiB: all FIFOs of a rank).
 *   tcp (tcp/tcp_setup.c, tcp/tcp.c): COLL_NSOCKS (4), COLL_SOCKET_IFNAME (the store's route),
 *     COLL_TCP_PIECE_BYTES (512 KiB), COLL_TCP_STAGING_BYTES (256 KiB per stream),
 *     COLL_TCP_BUF_BYTES (0: kernel autotuning).
 *   ib (ib/ib_setup.c, ib/ib_device.c; built when meson finds libibverbs):
 *     COLL_IB_DEVICE, COLL_IB_GID_INDEX, COLL_IB_SLOT_BYTES (128 KiB), COLL_IB_NSLOTS (16),
 *     COLL_IB_TIMEOUT (16).
 *   cuda_ipc (cuda_ipc/cuda_ipc_setup.c; built with CUDA): COLL_CUDA_IPC_SLOT_BYTES (4 MiB),
 *     COLL_CUDA_IPC_NSLOTS (8). */
#include "transport/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_config.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/transport_kind.h"

/* Order matters: the first transport whose probe accepts a pair serves it (shm on one
 * host, then ib where both ranks have an active RDMA port, then tcp). cuda_ipc is
 * device-only: it serves the device transport set, which asks for it by name. */
enum {
  KIND_SHM,
#if COLL_HAVE_IBVERBS
  KIND_IB,
#endif
  KIND_TCP,
#if COLL_HAVE_CUDA
  KIND_CUDA_IPC,
#endif
  KIND_COUNT
};
#if !COLL_HAVE_IBVERBS
enum { KIND_IB = -2 };
#endif

static const transport_kind_t *const registry[KIND_COUNT] = {
    [KIND_SHM] = &transport_shm_kind,
#if COLL_HAVE_IBVERBS
    [KIND_IB] = &transport_ib_kind,
#endif
    [KIND_TCP] = &transport_tcp_kind,
#if COLL_HAVE_CUDA
    [KIND_CUDA_IPC] = &transport_cuda_ipc_kind,
#endif
};

struct transport_set {
  int rank;
  int nranks;
  transport_conn_t **conns; /* by peer rank; NULL for self */
  transport_group_t *groups[KIND_COUNT];
};

static int kind_by_name(const char *name) {
  for (int k = 0; k < KIND_COUNT; k++)
    if (strcmp(registry[k]->name, name) == 0) return k;
  return -1;
}

static coll_status_t check_setup(const transport_setup_t *setup) {
  if (setup == NULL || setup->store == NULL || setup->key_prefix == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "transport setup: missing store or key prefix");
  if (setup->nranks < 1 || setup->rank < 0 || setup->rank >= setup->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "transport setup: rank %d of %d is invalid",
                      setup->rank, setup->nranks);
  if (setup->host_ids != NULL)
    for (int r = 0; r < setup->nranks; r++)
      if (setup->host_ids[r] == NULL)
        return coll_error(COLL_ERR_INVALID_ARGUMENT, "transport setup: host id of rank %d missing",
                          r);
  return COLL_OK;
}

/* The forced transport (-1: none) from the setup or COLL_TRANSPORT. */
static coll_status_t forced_kind(const transport_setup_t *setup, int *kind) {
  const char *forced = setup->forced != NULL ? setup->forced : coll_env_str("COLL_TRANSPORT");
  *kind = -1;
  if (forced == NULL || forced[0] == '\0' || strcmp(forced, "auto") == 0) return COLL_OK;
  *kind = kind_by_name(forced);
  /* COLL_TRANSPORT=cuda_ipc asks for it on device buffers; host buffers choose as usual. */
  if (*kind >= 0 && registry[*kind]->device_only && !setup->device) *kind = -1;
  else if (*kind < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_TRANSPORT='%s' is not a transport of this build (auto, shm, %stcp%s)",
                      forced, KIND_IB >= 0 ? "ib, " : "", COLL_HAVE_CUDA ? ", cuda_ipc" : "");
  return COLL_OK;
}

static const char *host_of(const transport_setup_t *setup, int rank) {
  return setup->host_ids != NULL ? setup->host_ids[rank] : "?";
}

/* choice[peer] = registry index serving the pair (or -1 for self). */
static coll_status_t choose(const transport_setup_t *setup, int *choice) {
  int forced;
  coll_status_t st = forced_kind(setup, &forced);
  if (st != COLL_OK) return st;
  for (int peer = 0; peer < setup->nranks; peer++) {
    choice[peer] = -1;
    if (peer == setup->rank) continue;
    if (forced >= 0) {
      coll_error_clear();
      if (!registry[forced]->probe(setup, peer)) {
        /* A probe may leave its reason as the thread's error (ib: no device, port down). */
        char why[400] = ": they are on different hosts";
        if (forced != KIND_SHM) snprintf(why, sizeof why, ": %s", coll_last_error());
        return coll_error(forced == KIND_IB ? COLL_ERR_UNSUPPORTED : COLL_ERR_INVALID_ARGUMENT,
                          "COLL_TRANSPORT=%s cannot connect rank %d (host %s) with rank %d "
                          "(host %s)%s",
                          registry[forced]->name, setup->rank, host_of(setup, setup->rank), peer,
                          host_of(setup, peer), why);
      }
      choice[peer] = forced;
      continue;
    }
    for (int k = 0; k < KIND_COUNT && choice[peer] < 0; k++)
      if (!registry[k]->device_only && registry[k]->probe(setup, peer)) choice[peer] = k;
    if (choice[peer] < 0)
      return coll_error(COLL_ERR_UNSUPPORTED, "no transport can connect rank %d with rank %d",
                        setup->rank, peer);
  }
  return COLL_OK;
}

coll_status_t transport_set_connect(const transport_setup_t *setup, transport_set_t **out) {
  if (out == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "transport_set_connect: out is NULL");
  *out = NULL;
  coll_status_t st = check_setup(setup);
  if (st != COLL_OK) return st;
  int n = setup->nranks;
  transport_set_t *set = calloc(1, sizeof *set);
  int *choice = calloc((size_t)n, sizeof *choice);
  bool *peers = calloc((size_t)n, sizeof *peers);
  if (set != NULL) set->conns = calloc((size_t)n, sizeof *set->conns);
  if (set == NULL || choice == NULL || peers == NULL || set->conns == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "transport_set_connect: out of memory");
    goto fail;
  }
  set->rank = setup->rank;
  set->nranks = n;
  st = choose(setup, choice);
  if (st != COLL_OK) goto fail;
  for (int k = 0; k < KIND_COUNT; k++) {
    bool any = false;
    for (int peer = 0; peer < n; peer++) {
      peers[peer] = choice[peer] == k;
      any = any || peers[peer];
    }
    if (!any) continue;
    st = registry[k]->open(setup, peers, &set->groups[k]);
    if (st != COLL_OK) {
      st = coll_error_prefix(st, "rank %d: connecting with %s: ", setup->rank, registry[k]->name);
      goto fail;
    }
    for (int peer = 0; peer < n; peer++)
      if (peers[peer]) set->conns[peer] = registry[k]->conn(set->groups[k], peer);
  }
  if (COLL_LOG_ENABLED(COLL_LOG_INFO) && !setup->quiet) {
    for (int peer = 0; peer < n; peer++)
      if (set->conns[peer] != NULL)
        coll_log(COLL_LOG_INFO, "peer %d (host %s): %s", peer, host_of(setup, peer),
                 set->conns[peer]->ops->name);
  }
  free(choice);
  free(peers);
  *out = set;
  return COLL_OK;
fail:
  free(choice);
  free(peers);
  transport_set_close(set);
  return st;
}

transport_conn_t *transport_set_conn(transport_set_t *set, int peer) {
  if (set == NULL || peer < 0 || peer >= set->nranks) return NULL;
  return set->conns[peer];
}

coll_status_t transport_set_wait(transport_set_t *set, int timeout_ms) {
  return transport_set_wait_for(set, -1, timeout_ms);
}

coll_status_t transport_set_wait_for(transport_set_t *set, int peer, int timeout_ms) {
  if (set == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "transport_set_wait: set is NULL");
  int active[KIND_COUNT];
  int nactive = 0;
  for (int k = 0; k < KIND_COUNT; k++)
    if (set->groups[k] != NULL) active[nactive++] = k;
  bool woke = false;
  if (nactive == 0) return COLL_OK;
  if (nactive == 1) return registry[active[0]]->wait(set->groups[active[0]], timeout_ms, &woke);
  /* Mixed set: a futex and an epoll set cannot be waited on together, so take turns in
   * short slices: check every group without blocking, then block on the awaited peer's
   * (else the last one, the socket set, which wakes on its own) for at most a
   * millisecond. Blocking on the sockets while a peer on this host writes its FIFO cost
   * each such message up to the whole slice (a node-ordered ring on 2 made-up hosts of
   * 2 ranks: about 1 ms per step). */
  int block = nactive - 1;
  transport_conn_t *awaited = peer >= 0 && peer < set->nranks ? set->conns[peer] : NULL;
  for (int i = 0; awaited != NULL && i < nactive; i++)
    if (strcmp(registry[active[i]]->name, awaited->ops->name) == 0) block = i;
  int64_t deadline = coll_deadline_ns(timeout_ms);
  for (;;) {
    for (int i = 0; i < nactive; i++) {
      coll_status_t st = registry[active[i]]->wait(set->groups[active[i]], 0, &woke);
      if (st != COLL_OK || woke) return st;
    }
    int left = coll_ms_left(deadline);
    if (left == 0) return COLL_OK;
    int slice = left < 0 || left > 1 ? 1 : left;
    coll_status_t st = registry[active[block]]->wait(set->groups[active[block]], slice, &woke);
    if (st != COLL_OK || woke) return st;
  }
}

size_t transport_set_staging_bytes(const transport_set_t *set) {
  size_t total = 0;
  if (set == NULL) return 0;
  for (int k = 0; k < KIND_COUNT; k++)
    if (set->groups[k] != NULL) total += registry[k]->staging_bytes(set->groups[k]);
  return total;
}

size_t transport_set_device_staging_bytes(const transport_set_t *set) {
  size_t total = 0;
  if (set == NULL) return 0;
  for (int k = 0; k < KIND_COUNT; k++)
    if (set->groups[k] != NULL && registry[k]->device_only)
      total += registry[k]->staging_bytes(set->groups[k]);
  return total;
}

void transport_set_close(transport_set_t *set) {
  if (set == NULL) return;
  for (int k = 0; k < KIND_COUNT; k++)
    if (set->groups[k] != NULL) registry[k]->close(set->groups[k]);
  free(set->conns);
  free(set);
}
