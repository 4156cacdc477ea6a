/* The end of a communicator of the NCCL API: ncclCommFinalize, ncclCommDestroy (local,
 * as NCCL's: libcoll's collective destroy runs on a closer thread) and ncclCommAbort. */
#include <stdlib.h>
#include <unistd.h>

#include "nccl_internal.h"

/* ncclCommDestroy is local in NCCL, but libcoll's destroy waits for every rank to reach
 * it (so that no rank closes what a peer still reads). A program that destroys the
 * ranks of a clique one after the other from one thread would wait forever in the
 * first, so the libcoll destroy runs on a thread of its own (a closer); the process
 * waits for the closers at exit, each bounded by its communicator's timeout. A split's
 * children meet through their parent's store, so a parent's closer first waits until
 * every child of it is closed, whatever order the program destroyed them in. */
typedef struct closer {
  pthread_t thread;
  coll_comm_t *coll;
  coll_comm_t *parent; /* the communicator it was split from, or NULL */
  bool started;        /* a thread runs the destroy */
  atomic_bool closed;  /* libcoll's destroy returned (or the child is still open: false) */
  struct closer *next;
} closer_t;
static closer_t *closers;
static pthread_mutex_t closers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t closers_once = PTHREAD_ONCE_INIT;

static void join_closers(void) {
  pthread_mutex_lock(&closers_lock);
  closer_t *list = closers;
  closers = NULL;
  pthread_mutex_unlock(&closers_lock);
  while (list != NULL) {
    closer_t *next = list->next;
    if (list->started) pthread_join(list->thread, NULL);
    free(list);
    list = next;
  }
}

static void register_atexit(void) { atexit(join_closers); }

/* The open closer entry of coll (a closed one's communicator is freed and its address
 * may be reused); create: made if there is none (at split for children, at destroy
 * otherwise). */
static closer_t *closer_of(coll_comm_t *coll, coll_comm_t *parent, bool create) {
  pthread_once(&closers_once, register_atexit);
  pthread_mutex_lock(&closers_lock);
  closer_t *c = closers;
  while (c != NULL && (c->coll != coll || atomic_load(&c->closed))) c = c->next;
  if (c == NULL && create && (c = calloc(1, sizeof *c)) != NULL) {
    c->coll = coll;
    c->parent = parent;
    atomic_init(&c->closed, false);
    c->next = closers;
    closers = c;
  }
  pthread_mutex_unlock(&closers_lock);
  return c;
}

static bool open_children(coll_comm_t *parent) {
  bool open = false;
  pthread_mutex_lock(&closers_lock);
  for (closer_t *c = closers; c != NULL && !open; c = c->next)
    open = c->parent == parent && !atomic_load(&c->closed);
  pthread_mutex_unlock(&closers_lock);
  return open;
}

static void close_now(closer_t *c) {
  /* Children first (each of their destroys is bounded by its own timeout). */
  while (open_children(c->coll)) usleep(1000);
  coll_comm_destroy(c->coll);
  atomic_store(&c->closed, true);
}

static void *closer_main(void *arg) {
  close_now(arg);
  return NULL;
}

bool nccl_closer_add_child(coll_comm_t *child, coll_comm_t *parent) {
  return closer_of(child, parent, true) != NULL;
}

static void destroy_in_background(coll_comm_t *coll) {
  closer_t *c = closer_of(coll, NULL, true);
  if (c == NULL) {
    coll_comm_destroy(coll);
    return;
  }
  c->started = pthread_create(&c->thread, NULL, closer_main, c) == 0;
  if (!c->started) close_now(c);
}

static ncclResult_t destroy(ncclComm_t comm, bool abort, const char *what) {
  if (comm == NULL) return ncclSuccess;
  if (comm->magic != NCCL_COMM_MAGIC)
    return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is not a communicator of this library",
                     what);
  nccl_join_init(comm);
  coll_status_t st = COLL_OK;
  if (comm->coll != NULL) {
    if (abort) {
      /* After an abort libcoll's destroy skips the barrier: it returns at once. */
      closer_t *c = closer_of(comm->coll, NULL, false);
      coll_comm_abort(comm->coll);
      st = coll_comm_destroy(comm->coll);
      if (c != NULL) atomic_store(&c->closed, true);
    } else {
      destroy_in_background(comm->coll);
    }
  }
  nccl_comm_free(comm);
  return st == COLL_OK ? ncclSuccess : nccl_fail_coll(NULL, st);
}

NCCL_EXPORT(ncclResult_t, ncclCommDestroy, (ncclComm_t comm)) {
  return destroy(comm, false, "ncclCommDestroy");
}

NCCL_EXPORT(ncclResult_t, ncclCommAbort, (ncclComm_t comm)) {
  return destroy(comm, true, "ncclCommAbort");
}

NCCL_EXPORT(ncclResult_t, ncclCommFinalize, (ncclComm_t comm)) {
  ncclResult_t r = nccl_check_usable(comm, "ncclCommFinalize");
  if (r != ncclSuccess) return r;
  /* Blocking and host-stream calls have finished when they return, and libcoll's
   * destroy waits for its queued ones: nothing is left to flush here. */
  return ncclSuccess;
}
