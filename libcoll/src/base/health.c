/* Whether a communicator still works: abort and the first failure (this rank's, or
 * another's through the failure watcher), checked by every path before and during a
 * call; and the fingerprint each collective call starts with. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "common/error.h"

void base_init(coll_base_t *base) {
  memset(base, 0, sizeof *base);
  pthread_mutex_init(&base->failed_mu, NULL);
  base->where.waiting_peer = -1;
}

void base_destroy(coll_base_t *base) {
  algo_topo_free(&base->topo);
  pthread_mutex_destroy(&base->failed_mu);
}

coll_status_t base_check_usable(coll_base_t *base, const char *what) {
  if (base_aborted(base))
    return coll_error(COLL_ERR_ABORTED, "rank %d: %s: the communicator was aborted", base->rank,
                      what);
  int failed = base_failed(base);
  if (failed != 0)
    return coll_error((coll_status_t)failed,
                      "rank %d: %s: the communicator failed earlier and cannot be used: %s",
                      base->rank, what, base->failed_message);
  return COLL_OK;
}

static void mark_failed(coll_base_t *base, coll_status_t status, const char *prefix,
                        const char *message) {
  if (status == COLL_ERR_ABORTED || status == COLL_OK) return;
  /* The message is written before `failed` is published (release), read after (acquire). */
  pthread_mutex_lock(&base->failed_mu);
  if (atomic_load(&base->failed) == 0) {
    snprintf(base->failed_message, sizeof base->failed_message, "%s%s", prefix, message);
    atomic_store_explicit(&base->failed, (int)status, memory_order_release);
  }
  pthread_mutex_unlock(&base->failed_mu);
}

void base_mark_failed(coll_base_t *base, coll_status_t status) {
  mark_failed(base, status, "", coll_last_error());
}

void base_mark_failed_by_peer(coll_base_t *base, coll_status_t status, const char *message) {
  mark_failed(base, status, "first failure in the communicator: ", message);
}

exec_fp_t *base_begin_call(coll_base_t *base, coll_kind_t kind, size_t count, coll_dtype_t dtype,
                           coll_op_t op, int root) {
  base->seq++;
  base->fp_out = (exec_fp_t){.seq = base->seq,
                             .count = count,
                             .kind = (uint32_t)kind,
                             .dtype = (uint32_t)dtype,
                             .op = (uint32_t)op,
                             .root = root};
  return &base->fp_out;
}
