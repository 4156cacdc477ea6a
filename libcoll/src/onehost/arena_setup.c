/* The arena's segment: made by rank 0 at init when every rank is on one host and the
 * pairs use shm, mapped by all, unlinked as soon as all have mapped it (nothing stays in
 * /dev/shm), and closed at destroy. Each rank holds a write lock on byte `rank` of the
 * segment for its whole life: the others test it to learn whether it still exists.
 *
 * Environment (rank 0's values count; the others read the geometry from the header):
 *   COLL_ARENA             0: no arena, the algorithm is then unavailable (1)
 *   COLL_ARENA_SLOT_BYTES  bytes per slot, multiple of 4096 in [4 KiB, 64 MiB] (1 MiB);
 *                          the segment holds 4 sets of one slot per rank, so a rank's
 *                          share is 4 slots (4 MiB), counted in its staging memory
 *   COLL_WINDOW            0: coll_mem_alloc returns plain memory, no zero-copy
 *                          all-reduce (1; kept in the header, window.c reads it)
 *   COLL_SMALL_BYTES       all-reduces up to this many bytes take the small-message path
 *                          (small.c); 0: none; at most 1 MiB (the cost model's threshold,
 *                          algo_small_max_bytes). Its lines, 2 buffers of 64 bytes per 56
 *                          data bytes per rank, sit between the rank records and the slots */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "algo/schedule.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "common/segment_name.h"
#include "common/util.h"
#include "onehost/arena.h"
#include "onehost/small.h"

enum { PAGE = 4096, KEY_MAX = 160, NAME_MAX_LEN = 96, TILE_ALIGN = 64 };

static size_t ranks_offset(void) { return coll_round_up(sizeof(arena_hdr_t), 64); }

static size_t small_offset(int nranks) {
  return coll_round_up(ranks_offset() + (size_t)nranks * sizeof(arena_rank_t), 64);
}

static size_t data_offset(int nranks, uint32_t small_lines) {
  return coll_round_up(small_offset(nranks) + small_region_bytes(nranks, small_lines), PAGE);
}

/* Rank 0: create, size (allocated now: a full /dev/shm is an error here, not a SIGBUS
 * in the middle of a collective) and initialise the segment. */
static coll_status_t create_segment(coll_base_t *base, size_t slot_bytes, bool window_ok,
                                    uint32_t small_bytes, char *name, size_t cap, int *fd_out,
                                    size_t *len_out) {
  int n = base->nranks;
  uint32_t small_lines = small_lines_for(small_bytes);
  size_t len = data_offset(n, small_lines) + (size_t)ARENA_NSETS * (size_t)n * slot_bytes;
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)coll_now_ns();
  uint32_t key_hash = 2166136261u;
  for (const char *p = base->key_prefix; *p != '\0'; p++)
    key_hash = (key_hash ^ (unsigned char)*p) * 16777619u;
  char what[32];
  snprintf(what, sizeof what, "arena-%08x", key_hash);
  coll_segment_name(name, cap, what, rnd);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return coll_error_errno(COLL_ERR_SYSTEM, errno, "arena: shm_open(%s)", name);
  int err = ftruncate(fd, (off_t)len) == 0 ? posix_fallocate(fd, 0, (off_t)len) : errno;
  if (err != 0) {
    close(fd);
    shm_unlink(name);
    return coll_error_errno(COLL_ERR_SYSTEM, err,
                            "arena: reserving %zu bytes of shared memory for %s (is /dev/shm "
                            "large enough? lower COLL_ARENA_SLOT_BYTES or set COLL_ARENA=0)",
                            len, name);
  }
  arena_hdr_t *hdr = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (hdr == MAP_FAILED) {
    err = errno;
    close(fd);
    shm_unlink(name);
    return coll_error_errno(COLL_ERR_SYSTEM, err, "arena: mmap of %s", name);
  }
  hdr->nranks = (uint32_t)n;
  hdr->nsets = ARENA_NSETS;
  hdr->slot_bytes = slot_bytes;
  hdr->data_offset = data_offset(n, small_lines);
  hdr->window_ok = window_ok;
  hdr->small_lines = small_lines;
  hdr->small_bytes = small_bytes;
  hdr->small_offset = small_offset(n);
  atomic_thread_fence(memory_order_release);
  hdr->magic = ARENA_MAGIC;
  munmap(hdr, PAGE);
  *fd_out = fd;
  *len_out = len;
  return COLL_OK;
}

/* Map the segment behind fd, check its header, lock this rank's byte. */
static coll_status_t attach(coll_base_t *base, arena_t *a, const char *name) {
  struct stat sb;
  if (fstat(a->fd, &sb) != 0 || (size_t)sb.st_size < PAGE)
    return coll_error(COLL_ERR_PROTOCOL, "arena: segment %s is too small", name);
  a->map_len = (size_t)sb.st_size;
  void *map = mmap(NULL, a->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
  if (map == MAP_FAILED) {
    a->map_len = 0;
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "arena: mmap of %zu bytes of %s",
                            (size_t)sb.st_size, name);
  }
  a->hdr = map;
  arena_hdr_t *h = a->hdr;
  if (h->magic != ARENA_MAGIC || h->nranks != (uint32_t)base->nranks || h->nsets != ARENA_NSETS ||
      h->small_offset != small_offset(base->nranks) ||
      h->small_bytes > (uint64_t)h->small_lines * SMALL_LINE_DATA ||
      h->data_offset != data_offset(base->nranks, h->small_lines) || h->slot_bytes == 0 ||
      h->slot_bytes % PAGE != 0 ||
      h->data_offset + (size_t)ARENA_NSETS * base->nranks * h->slot_bytes > a->map_len)
    return coll_error(COLL_ERR_PROTOCOL, "arena: segment %s has a bad header", name);
  a->ranks = (arena_rank_t *)((unsigned char *)map + ranks_offset());
  a->data = (unsigned char *)map + h->data_offset;
  a->slot_bytes = h->slot_bytes;
  a->small_lines = h->small_lines;
  a->small_bytes = h->small_bytes;
  a->small_base = (unsigned char *)map + h->small_offset;
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = base->rank, .l_len = 1};
  if (fcntl(a->fd, F_SETLK, &lock) != 0)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "arena: locking byte %d of %s", base->rank,
                            name);
  a->ranks[base->rank].pid = (int32_t)getpid();
  return COLL_OK;
}

static void free_arena(arena_t *a) {
  if (a == NULL) return;
  if (a->hdr != NULL) munmap(a->hdr, a->map_len);
  if (a->fd >= 0) close(a->fd); /* drops this rank's lock: peers see it gone */
  free(a->tile);
  free(a);
}

/* Every rank says whether it mapped the segment; the arena is used only if all did, so
 * a local failure costs the algorithm, not the communicator. */
static coll_status_t agree_all_mapped(coll_base_t *base, bool mine, bool *all) {
  char key[KEY_MAX], v[8];
  snprintf(key, sizeof key, "%sarena/ok/%d", base->key_prefix, base->rank);
  coll_status_t st = store_set(base->store, key, mine ? "1" : "0", 1, base->timeout_ms);
  *all = true;
  for (int r = 0; r < base->nranks && st == COLL_OK; r++) {
    snprintf(key, sizeof key, "%sarena/ok/%d", base->key_prefix, r);
    st = base_store_get_text(base, key, v, sizeof v);
    if (st == COLL_OK && strcmp(v, "1") != 0) *all = false;
  }
  return st;
}

/* Rank 0, hosting the store, after publishing an error: wait (bounded) until every other
 * rank has read it. */
static void wait_seen(coll_base_t *base) {
  int n = base->nranks;
  char **keys = calloc((size_t)n, sizeof *keys);
  char *storage = calloc((size_t)n, KEY_MAX);
  if (keys != NULL && storage != NULL) {
    for (int r = 1; r < n; r++) {
      keys[r - 1] = storage + (size_t)r * KEY_MAX;
      snprintf(keys[r - 1], KEY_MAX, "%sarena/seen/%d", base->key_prefix, r);
    }
    store_wait(base->store, (const char *const *)keys, (size_t)n - 1, base->timeout_ms);
  }
  free(keys);
  free(storage);
}

coll_status_t arena_open(arena_t **out, coll_base_t *base, bool one_host,
                         const char *forced_transport) {
  *out = NULL;
  bool shm = forced_transport == NULL || forced_transport[0] == '\0' ||
             strcasecmp(forced_transport, "auto") == 0 || strcasecmp(forced_transport, "shm") == 0;
  if (base->nranks < 2 || !one_host || !shm) return COLL_OK; /* same facts on every rank */
  char key[KEY_MAX], name[NAME_MAX_LEN + 160] = "-";
  snprintf(key, sizeof key, "%sarena/name", base->key_prefix);
  int fd = -1;
  size_t len = 0;
  coll_status_t st = COLL_OK;
  if (base->rank == 0) {
    int64_t enabled, slot, window = 1, small = 0;
    st = coll_env_int("COLL_ARENA", 0, 1, 1, &enabled);
    if (st == COLL_OK)
      st = coll_env_int("COLL_SMALL_BYTES", 0, 1 << 20, (int64_t)algo_small_max_bytes(base->nranks),
                        &small);
    if (st == COLL_OK) st = coll_env_int("COLL_WINDOW", 0, 1, 1, &window);
    if (st == COLL_OK)
      st = coll_env_int("COLL_ARENA_SLOT_BYTES", PAGE, (int64_t)64 << 20, 1 << 20, &slot);
    if (st == COLL_OK && slot % PAGE != 0)
      st = coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_ARENA_SLOT_BYTES=%lld is not a multiple of %d", (long long)slot, PAGE);
    if (st != COLL_OK) {
      /* Tell the others, which wait for the name: every rank fails init now. */
      char bad[NAME_MAX_LEN + 160];
      snprintf(bad, sizeof bad, "!%s", coll_last_error());
      if (store_set(base->store, key, bad, strlen(bad), base->timeout_ms) == COLL_OK &&
          base->server != NULL)
        wait_seen(base); /* the store must outlive their reading of it */
      return coll_error(st, "rank 0: %s", bad + 1);
    }
    if (enabled && create_segment(base, (size_t)slot, window != 0, (uint32_t)small, name,
                                  sizeof name, &fd, &len) != COLL_OK) {
      coll_log(COLL_LOG_WARN, "%s; the arena all-reduce is off for this communicator",
               coll_last_error());
      snprintf(name, sizeof name, "-");
    }
    st = store_set(base->store, key, name, strlen(name), base->timeout_ms);
  } else {
    st = base_store_get_text(base, key, name, sizeof name);
  }
  if (st != COLL_OK) {
    if (fd >= 0) {
      close(fd);
      shm_unlink(name);
    }
    return coll_error_prefix(st, "rank %d: arena setup: ", base->rank);
  }
  if (strcmp(name, "-") == 0) return COLL_OK;
  if (name[0] == '!') {
    snprintf(key, sizeof key, "%sarena/seen/%d", base->key_prefix, base->rank);
    store_set(base->store, key, "1", 1, base->timeout_ms);
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: arena setup: rank 0 failed: %s",
                      base->rank, name + 1);
  }

  arena_t *a = calloc(1, sizeof *a);
  bool mapped = false;
  if (a != NULL) {
    a->fd = base->rank == 0 ? fd : shm_open(name, O_RDWR | O_CLOEXEC, 0);
    a->rank = base->rank;
    a->nranks = base->nranks;
    a->tile = aligned_alloc(TILE_ALIGN, ARENA_TILE_BYTES);
    if (a->fd < 0)
      coll_error_errno(COLL_ERR_SYSTEM, errno, "arena: shm_open(%s)", name);
    else if (a->tile == NULL)
      coll_error(COLL_ERR_NO_MEMORY, "arena: out of memory");
    else
      mapped = attach(base, a, name) == COLL_OK;
    if (!mapped)
      coll_log(COLL_LOG_WARN, "rank %d: %s; the arena all-reduce is off for this communicator",
               base->rank, coll_last_error());
  } else if (base->rank == 0) {
    close(fd);
  }
  bool all = false;
  st = agree_all_mapped(base, mapped, &all);
  if (base->rank == 0) shm_unlink(name); /* everyone has mapped it or given up */
  if (st != COLL_OK || !all) {
    free_arena(a);
    return st == COLL_OK ? COLL_OK : coll_error_prefix(st, "rank %d: arena setup: ", base->rank);
  }
  a->base = base;
  *out = a;
  coll_log(COLL_LOG_INFO,
           "arena: %zu bytes shared by %d ranks, %d sets of %zu-byte slots, small-message "
           "lines for %zu bytes",
           a->map_len, base->nranks, ARENA_NSETS, a->slot_bytes, (size_t)a->small_bytes);
  return COLL_OK;
}

void arena_close(arena_t **a) {
  free_arena(*a);
  *a = NULL;
}

size_t arena_staging_bytes(const arena_t *a) {
  return a != NULL ? a->map_len / (size_t)a->nranks : 0;
}

bool arena_rank_alive(const arena_t *a, int rank) {
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = rank, .l_len = 1};
  if (fcntl(a->fd, F_GETLK, &lock) != 0) return true; /* cannot tell */
  return lock.l_type != F_UNLCK;
}
