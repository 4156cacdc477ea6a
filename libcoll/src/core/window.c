/* coll_mem_alloc / coll_mem_free: registered windows. On a communicator with an arena
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
#include "common/util.h"
#include "common/log.h"
#include "core/arena.h"
#include "core/window.h"

enum { PAGE = 4096, KEY_MAX = 192, VALUE_MAX = 256 };


/* Our own segment: created, sized and reserved now (a full /dev/shm is an error here,
 * not a SIGBUS in a collective), mapped. false (with a warning) when that fails. */
static bool create_own(coll_comm_t *comm, window_t *w, char *name, size_t cap) {
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)coll_now_ns();
  snprintf(name, cap, "/coll-win-p%d-r%d-%llu-%016llx", (int)getpid(), comm->rank,
           (unsigned long long)w->id, (unsigned long long)rnd);
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
  coll_log(COLL_LOG_WARN, "rank %d: %s; this window is plain memory (no zero-copy)", comm->rank,
           coll_last_error());
  snprintf(name, cap, "-");
  return false;
}

/* Map rank k's segment `name` (already checked to be as large as ours). */
static bool map_peer(coll_comm_t *comm, window_t *w, int k, const char *name) {
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  struct stat sb;
  void *map = MAP_FAILED;
  if (fd >= 0 && fstat(fd, &sb) == 0 && (size_t)sb.st_size >= w->map_len)
    map = mmap(NULL, w->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  if (fd >= 0) close(fd);
  if (map == MAP_FAILED) {
    coll_log(COLL_LOG_WARN, "rank %d: window %llu: cannot map rank %d's segment %s (%s)",
             comm->rank, (unsigned long long)w->id, k, name, strerror(err));
    return false;
  }
  w->peer[k] = map;
  return true;
}

static void unmap_peers(const coll_comm_t *comm, window_t *w) {
  if (w->peer == NULL) return;
  for (int k = 0; k < comm->nranks; k++)
    if (k != comm->rank && w->peer[k] != NULL) munmap(w->peer[k], w->map_len);
  free(w->peer);
  w->peer = NULL;
}

/* The exchange: names (with the sizes, checked equal), mappings, agreement. On return
 * w->peer is set only if every rank mapped every segment; w->base stays ours. */
static coll_status_t share(coll_comm_t *comm, window_t *w, const char *own_name) {
  int n = comm->nranks, r = comm->rank;
  char key[KEY_MAX], value[VALUE_MAX + 32], name[VALUE_MAX];
  unsigned long long id = (unsigned long long)w->id;
  snprintf(key, sizeof key, "%swin/%llu/%d", comm->key_prefix, id, r);
  snprintf(value, sizeof value, "%zu %s", w->bytes, own_name);
  coll_status_t st = store_set(comm->store, key, value, strlen(value), comm->timeout_ms);
  bool all_named = strcmp(own_name, "-") != 0;
  w->peer = calloc((size_t)n, sizeof *w->peer);
  if (w->peer == NULL) all_named = false; /* we then say "not mapped" below */
  for (int k = 0; k < n && st == COLL_OK; k++) {
    if (k == r) continue;
    snprintf(key, sizeof key, "%swin/%llu/%d", comm->key_prefix, id, k);
    st = comm_store_get_text(comm, key, value, sizeof value);
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
    if (all_named && !map_peer(comm, w, k, name)) all_named = false;
  }
  bool all = all_named;
  if (st == COLL_OK) {
    snprintf(key, sizeof key, "%swin/%llu/ok/%d", comm->key_prefix, id, r);
    st = store_set(comm->store, key, all_named ? "1" : "0", 1, comm->timeout_ms);
  }
  for (int k = 0; k < n && st == COLL_OK; k++) {
    snprintf(key, sizeof key, "%swin/%llu/ok/%d", comm->key_prefix, id, k);
    st = comm_store_get_text(comm, key, value, sizeof value);
    if (st == COLL_OK && strcmp(value, "1") != 0) all = false;
  }
  if (strcmp(own_name, "-") != 0) shm_unlink(own_name); /* all mapped it or gave up */
  if (st != COLL_OK || !all) unmap_peers(comm, w);
  if (w->peer != NULL) w->peer[r] = w->base;
  return st;
}

/* The store client is used by one thread at a time, and the executor uses it on its
 * failure paths: let queued asynchronous calls finish before we talk to the store. */
static coll_status_t quiesce(coll_comm_t *comm) {
  int64_t limit = coll_now_ns() + (int64_t)comm->timeout_ms * 1000000LL;
  bool idle;
  pthread_mutex_lock(&comm->mu);
  while (!(idle = comm->head == NULL && !comm->busy) && coll_now_ns() < limit &&
         !atomic_load(&comm->aborted)) {
    struct timespec ts = coll_timespec_in_ms(20);
    pthread_cond_timedwait(&comm->done_cv, &comm->mu, &ts);
  }
  pthread_mutex_unlock(&comm->mu);
  if (idle) return COLL_OK;
  return atomic_load(&comm->aborted)
             ? coll_error(COLL_ERR_ABORTED, "rank %d: coll_mem_alloc: the communicator was aborted",
                          comm->rank)
             : coll_error(COLL_ERR_TIMEOUT,
                          "rank %d: coll_mem_alloc: asynchronous calls still running after %d ms",
                          comm->rank, comm->timeout_ms);
}

coll_status_t coll_mem_alloc(coll_comm_t *comm, size_t bytes, void **ptr) {
  if (ptr != NULL) *ptr = NULL;
  coll_status_t st = comm_check(comm, "coll_mem_alloc");
  if (st == COLL_OK) st = comm_check_usable(comm, "coll_mem_alloc");
  if (st != COLL_OK) return st;
  if (ptr == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_mem_alloc: ptr is NULL",
                      comm->rank);
  if (bytes == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_mem_alloc: bytes is 0", comm->rank);
  if (bytes > SIZE_MAX / 2)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_mem_alloc: %zu bytes is too large",
                      comm->rank, bytes);
  if (comm->windows == NULL) {
    comm->windows = calloc(1, sizeof *comm->windows);
    if (comm->windows == NULL)
      return coll_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory");
  }
  window_t *w = calloc(1, sizeof *w);
  if (w == NULL) return coll_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory");
  w->id = comm->windows->next_id++;
  w->bytes = bytes;
  w->map_len = coll_round_up(bytes, PAGE);
  bool shared = comm->nranks > 1 && comm->arena != NULL && comm->arena->hdr->window_ok;
  if (shared) {
    char name[VALUE_MAX];
    st = quiesce(comm);
    if (st != COLL_OK) {
      free(w);
      return st;
    }
    create_own(comm, w, name, sizeof name);
    st = share(comm, w, name);
    if (st != COLL_OK) {
      if (w->base != NULL) munmap(w->base, w->map_len);
      free(w);
      return coll_error_prefix(st, "rank %d: coll_mem_alloc(%zu): ", comm->rank, bytes);
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
  w->next = comm->windows->head;
  comm->windows->head = w;
  coll_log(COLL_LOG_INFO, "coll_mem_alloc #%llu: %zu bytes, %s", (unsigned long long)w->id, bytes,
           w->peer != NULL ? "shared with every rank (zero-copy all-reduce)" : "plain memory");
  *ptr = w->base;
  coll_error_clear();
  return COLL_OK;
}

static void free_window(coll_comm_t *comm, window_t *w) {
  unmap_peers(comm, w);
  if (w->heap)
    free(w->base);
  else
    munmap(w->base, w->map_len);
  free(w);
}

coll_status_t coll_mem_free(coll_comm_t *comm, void *ptr) {
  coll_status_t st = comm_check(comm, "coll_mem_free");
  if (st != COLL_OK) return st;
  /* Rule 6 of coll.h: refused after an abort (destroy releases the windows); a failed
   * communicator still frees, which needs no peer. */
  if (atomic_load(&comm->aborted)) return comm_check_usable(comm, "coll_mem_free");
  if (ptr == NULL) { /* like free(NULL): nothing to do, so nothing to agree on */
    coll_error_clear();
    return COLL_OK;
  }
  window_t **link = comm->windows != NULL ? &comm->windows->head : NULL;
  while (link != NULL && *link != NULL && (*link)->base != ptr) link = &(*link)->next;
  if (link == NULL || *link == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_mem_free: %p was not returned by coll_mem_alloc on this "
                      "communicator (or is freed already)",
                      comm->rank, ptr);
  window_t *w = *link;
  *link = w->next;
  /* Peers are done with it: every window all-reduce waits, before returning, until all
   * ranks finished reading each other's windows. */
  free_window(comm, w);
  coll_error_clear();
  return COLL_OK;
}

void window_close_all(coll_comm_t *comm) {
  if (comm->windows == NULL) return;
  while (comm->windows->head != NULL) {
    window_t *w = comm->windows->head;
    comm->windows->head = w->next;
    free_window(comm, w);
  }
  free(comm->windows);
  comm->windows = NULL;
}

size_t window_bytes(const coll_comm_t *comm) {
  size_t total = 0;
  for (const window_t *w = comm->windows != NULL ? comm->windows->head : NULL; w != NULL;
       w = w->next)
    if (w->peer != NULL) total += w->map_len;
  return total;
}

/* The shared window holding [p, p + bytes); NULL when none. */
static const window_t *find_shared(const coll_comm_t *comm, const void *p, size_t bytes) {
  uintptr_t a = (uintptr_t)p;
  for (const window_t *w = comm->windows->head; w != NULL; w = w->next) {
    uintptr_t b = (uintptr_t)w->base;
    if (w->peer != NULL && a >= b && a - b <= w->bytes && bytes <= w->bytes - (a - b)) return w;
  }
  return NULL;
}

bool window_prepare_call(const coll_comm_t *comm, exec_call_t *call) {
  if (call->kind != COLL_KIND_ALL_REDUCE || call->on_device || call->count == 0 ||
      comm->arena == NULL || !comm->arena->hdr->window_ok || comm->windows == NULL)
    return false;
  size_t bytes = call->count * coll_dtype_size(call->dtype);
  const window_t *ws = find_shared(comm, call->sendbuf, bytes);
  const window_t *wr = ws != NULL ? find_shared(comm, call->recvbuf, bytes) : NULL;
  if (wr == NULL) return false;
  call->algo = COLL_ALGO_ARENA;
  call->win_send = ws;
  call->win_recv = wr;
  return true;
}

void window_note_fp(const exec_call_t *call, exec_fp_t *fp) {
  if (call->win_send == NULL) return;
  fp->win_send = call->win_send->id + 1;
  fp->win_send_off = (uint64_t)((const unsigned char *)call->sendbuf - call->win_send->base);
  fp->win_recv = call->win_recv->id + 1;
  fp->win_recv_off = (uint64_t)((const unsigned char *)call->recvbuf - call->win_recv->base);
}
