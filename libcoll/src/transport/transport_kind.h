/* The registry's side of each transport (shm/, tcp/, ib/, cuda_ipc/), private to
 * transport/: a transport_kind_t says whether it serves a pair, connects a group of peers,
 * hands out their connections, waits on them, counts their staging memory, closes them. */
#ifndef COLL_TRANSPORT_TRANSPORT_KIND_H
#define COLL_TRANSPORT_TRANSPORT_KIND_H

#include <stdbool.h>
#include <stddef.h>

#include "transport/transport.h"

/* All connections of one rank that use one transport (e.g. every shm peer). */
typedef struct transport_group transport_group_t;

typedef struct transport_kind {
  const char *name;
  /* Carries device buffers only (cuda_ipc): never chosen for the host transport set;
   * the device path asks for it by name (cuda/cuda_path.c). */
  bool device_only;
  /* Can this transport connect setup->rank with `peer`? Must give the same answer on
   * both ranks of the pair (it may only look at what all ranks share). */
  bool (*probe)(const transport_setup_t *setup, int peer);
  /* Connect to every rank r with peers[r] true. Pairwise collective: each listed peer
   * makes the matching call with this rank listed. Uses the store under
   * setup->key_prefix and never waits past setup->timeout_ms. */
  coll_status_t (*open)(const transport_setup_t *setup, const bool *peers,
                        transport_group_t **group);
  /* The connection to `peer` (a rank listed at open). */
  transport_conn_t *(*conn)(transport_group_t *group, int peer);
  /* Block until one of the group's connections may progress or timeout_ms passes
   * (0: only check). *woke tells whether something happened (spurious wake-ups are
   * allowed; missed ones are not). */
  coll_status_t (*wait)(transport_group_t *group, int timeout_ms, bool *woke);
  size_t (*staging_bytes)(const transport_group_t *group);
  void (*close)(transport_group_t *group);
} transport_kind_t;

extern const transport_kind_t transport_shm_kind;
extern const transport_kind_t transport_tcp_kind;
extern const transport_kind_t transport_ib_kind; /* built with libibverbs only */
extern const transport_kind_t transport_cuda_ipc_kind; /* built with CUDA only */

#endif
