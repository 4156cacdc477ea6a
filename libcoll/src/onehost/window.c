/* Registered windows (coll_mem_alloc / coll_mem_free; api/api_mem.c checks the
 * arguments and quiets the request queue first). On a communicator with an arena
 * (one host, shm) and COLL_WINDOW=1 (rank 0's value, kept in the arena header), each rank
 * creates a shared segment of its own, publishes its name in the store, maps every
 * peer's, and once all say they mapped every segment each unlinks its own name (nothing
 * is left in /dev/shm; the memory lives while some rank maps it). If any rank could not
 * create or map, the window is plain memory on every rank (zero-copy is lost, not the
 * call). Elsewhere (several hosts, tcp/ib forced, one rank) it is page-aligned heap
 * memory. Either way the window is recorded, so free knows it and unknown pointers are
 * refused. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/segment_name.h"
#include "common/util.h"
#include "onehost/window.h"

enum { PAGE = 4096, KEY_MAX = 192, VALUE_MAX = 256 };

/* Our own segment: created, sized and reserved now (a full /dev/shm is an error here,
 * not a SIGBUS in a collective), mapped. false (with a warning) when that fails. */
static bool create_own(coll_base_t *base, window_t *w, char *name, size_t cap) {
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)coll_now_ns();
  char what[48];
  snprintf(what, sizeof what, "win-r%d-%llu", base->rank, (unsigned long long)w->id);
  coll_segment_name(name, cap, what, rnd);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    coll_error_errno(COLL_ERR_SYSTEM, errno, "window: shm_open(%s)", name);
    goto fail;
  }
  int err =
      ftruncate(fd, (off_t)w->map_len) == 0 ? posix_fallocate(fd, 0, (off_t)w->map_len) : errno;
  void *map =
      err == 0 ? mmap(NULL, w->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (err == 0 && map == MAP_FAILED) err = errno;
  close(fd);
  if (err != 0) {
    shm_unlink(name);
    coll_error_errno(COLL_ERR_SYSTEM, err,
                     "window: %zu bytes of shared memory for %s (is /dev/shm large enough?)",
                     w->map_len, name);
    goto fail;
  }
  w->base = map;
  return true;
fail:
  coll_log(COLL_LOG_WARN, "rank %d: %s; this window is plain memory (no zero-copy)", base->rank,
           coll_last_error());
  snprintf(name, cap, "-");
  return false;
}

/* Map rank k's segment `name` (already checked to be as large as ours). */
static bool map_peer(coll_base_t *base, window_t *w, int k, const char *name) {
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  struct stat sb;
  void *map = MAP_FAILED;
  if (fd >= 0 && fstat(fd, &sb) == 0 && (size_t)sb.st_size >= w->map_len)
    map = mmap(NULL, w->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  if (fd >= 0) close(fd);
  if (map == MAP_FAILED) {
    coll_log(COLL_LOG_WARN, "rank %d: window %llu: cannot map rank %d's segment %s (%s)",
             base->rank, (unsigned long long)w->id, k, name, strerror(err));
    return false;
  }
  w->peer[k] = map;
  return true;
}

static void unmap_peers(const coll_base_t *base, window_t *w) {
  if (w->peer == NULL) return;
  for (int k = 0; k < base->nranks; k++)
    if (k != base->rank && w->peer[k] != NULL) munmap(w->peer[k], w->map_len);
  free(w->peer);
  w->peer = NULL;
}

/* The exchange: names (with the sizes, checked equal), mappings, agreement. On return
 * w->peer is set only if every rank mapped every segment; w->base stays ours. */
static coll_status_t share(coll_base_t *base, window_t *w, const char *own_name) {
  int n = base->nranks, r = base->rank;
  char key[KEY_MAX], value[VALUE_MAX + 32], name[VALUE_MAX];
  unsigned long long id = (unsigned long long)w->id;
  snprintf(key, sizeof key, "%swin/%llu/%d", base->key_prefix, id, r);
  snprintf(value, sizeof value, "%zu %s", w->bytes, own_name);
  coll_status_t st = store_set(base->store, key, value, strlen(value), base->timeout_ms);
  bool all_named = strcmp(own_name, "-") != 0;
  w->peer = calloc((size_t)n, sizeof *w->peer);
  if (w->peer == NULL) all_named = false; /* we then say "not mapped" below */
  for (int k = 0; k < n && st == COLL_OK; k++) {
    if (k == r) continue;
    snprintf(key, sizeof key, "%swin/%llu/%d", base->key_prefix, id, k);
    st = base_store_get_text(base, key, value, sizeof value);
    if (st != COLL_OK) break;
    size_t theirs = 0;
    if (sscanf(value, "%zu %255s", &theirs, name) != 2) {
      st = coll_error(COLL_ERR_PROTOCOL, "window %llu: rank %d published '%s'", id, k, value);
      break;
    }
    if (theirs != w->bytes) {
      st = coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_mem_alloc #%llu: rank %d asked for %zu bytes, rank %d for %zu (it is "
                      "collective: every rank must pass the same size in the same order)",
                      id, k, theirs, r, w->bytes);
      break;
    }
    if (strcmp(name, "-") == 0) all_named = false;
    if (all_named && !map_peer(base, w, k, name)) all_named = false;
  }
  bool all = all_named;
  if (st == COLL_OK) {
    snprintf(key, sizeof key, "%swin/%llu/ok/%d", base->key_prefix, id, r);
    st = store_set(base->store, key, all_named ? "1" : "0", 1, base->timeout_ms);
  }
  for (int k = 0; k < n && st == COLL_OK; k++) {
    snprintf(key, sizeof key, "%swin/%llu/ok/%d", base->key_prefix, id, k);
    st = base_store_get_text(base, key, value, sizeof value);
    if (st == COLL_OK && strcmp(value, "1") != 0) all = false;
  }
  if (strcmp(own_name, "-") != 0) shm_unlink(own_name); /* all mapped it or gave up */
  if (st != COLL_OK || !all) unmap_peers(base, w);
  if (w->peer != NULL) w->peer[r] = w->base;
  return st;
}

bool window_shares(const coll_base_t *base, const arena_t *arena) {
  return base->nranks > 1 && arena != NULL && arena->hdr->window_ok;
}

coll_status_t window_alloc(window_set_t **set, coll_base_t *base, const arena_t *arena,
                           size_t bytes, void **ptr) {
  coll_status_t st = COLL_OK;
  if (*set == NULL) {
    *set = calloc(1, sizeof **set);
    if (*set == NULL) return coll_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory");
  }
  window_t *w = calloc(1, sizeof *w);
  if (w == NULL) return coll_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory");
  w->id = (*set)->next_id++;
  w->bytes = bytes;
  w->map_len = coll_round_up(bytes, PAGE);
  if (window_shares(base, arena)) {
    char name[VALUE_MAX];
    create_own(base, w, name, sizeof name);
    st = share(base, w, name);
    if (st != COLL_OK) {
      if (w->base != NULL) munmap(w->base, w->map_len);
      free(w);
      return coll_error_prefix(st, "rank %d: coll_mem_alloc(%zu): ", base->rank, bytes);
    }
  }
  if (w->base == NULL) {
    w->base = aligned_alloc(PAGE, w->map_len);
    if (w->base == NULL) {
      free(w);
      return coll_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory for %zu bytes", bytes);
    }
    memset(w->base, 0, w->map_len);
    w->heap = true;
  }
  w->next = (*set)->head;
  (*set)->head = w;
  coll_log(COLL_LOG_INFO, "coll_mem_alloc #%llu: %zu bytes, %s", (unsigned long long)w->id, bytes,
           w->peer != NULL ? "shared with every rank (zero-copy all-reduce)" : "plain memory");
  *ptr = w->base;
  coll_error_clear();
  return COLL_OK;
}

static void free_window(const coll_base_t *base, window_t *w) {
  unmap_peers(base, w);
  if (w->heap)
    free(w->base);
  else
    munmap(w->base, w->map_len);
  free(w);
}

coll_status_t window_free(window_set_t *set, coll_base_t *base, void *ptr) {
  window_t **link = set != NULL ? &set->head : NULL;
  while (link != NULL && *link != NULL && (*link)->base != ptr) link = &(*link)->next;
  if (link == NULL || *link == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_mem_free: %p was not returned by coll_mem_alloc on this "
                      "communicator (or is freed already)",
                      base->rank, ptr);
  window_t *w = *link;
  *link = w->next;
  /* Peers are done with it: every window all-reduce waits, before returning, until all
   * ranks finished reading each other's windows. */
  free_window(base, w);
  return COLL_OK;
}

void window_close_all(window_set_t **set, const coll_base_t *base) {
  if (*set == NULL) return;
  while ((*set)->head != NULL) {
    window_t *w = (*set)->head;
    (*set)->head = w->next;
    free_window(base, w);
  }
  free(*set);
  *set = NULL;
}

size_t window_bytes(const window_set_t *set) {
  size_t total = 0;
  for (const window_t *w = set != NULL ? set->head : NULL; w != NULL; w = w->next)
    if (w->peer != NULL) total += w->map_len;
  return total;
}

/* The shared window holding [p, p + bytes); NULL when none. */
static const window_t *find_shared(const window_set_t *set, const void *p, size_t bytes) {
  uintptr_t a = (uintptr_t)p;
  for (const window_t *w = set->head; w != NULL; w = w->next) {
    uintptr_t b = (uintptr_t)w->base;
    if (w->peer != NULL && a >= b && a - b <= w->bytes && bytes <= w->bytes - (a - b)) return w;
  }
  return NULL;
}

bool window_prepare_call(const window_set_t *set, const arena_t *arena, coll_call_t *call,
                         window_pair_t *pair) {
  *pair = (window_pair_t){0};
  if (call->kind != COLL_KIND_ALL_REDUCE || call->count == 0 || arena == NULL ||
      !arena->hdr->window_ok || set == NULL)
    return false;
  size_t bytes = call->count * coll_dtype_size(call->dtype);
  const window_t *ws = find_shared(set, call->sendbuf, bytes);
  const window_t *wr = ws != NULL ? find_shared(set, call->recvbuf, bytes) : NULL;
  if (wr == NULL) return false;
  call->algo = COLL_ALGO_ARENA;
  *pair = (window_pair_t){.send = ws, .recv = wr};
  return true;
}

void window_note_fp(const window_pair_t *pair, const coll_call_t *call, exec_fp_t *fp) {
  if (pair->send == NULL) return;
  fp->win_send = pair->send->id + 1;
  fp->win_send_off = (uint64_t)((const unsigned char *)call->sendbuf - pair->send->base);
  fp->win_recv = pair->recv->id + 1;
  fp->win_recv_off = (uint64_t)((const unsigned char *)call->recvbuf - pair->recv->base);
}
