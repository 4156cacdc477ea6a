/* Helpers shared by the transport tests and the pairwise benchmark: connect a rank's
 * transport set through a real store, drive progress until counters are reached, fill /
 * check buffers with a pattern that differs per sender and message, and the check of a
 * rank's body. */
#ifndef TESTS_TRANSPORT_TP_UTIL_H
#define TESTS_TRANSPORT_TP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bootstrap/store.h"
#include "coll.h"
#include "multiproc.h"
#include "transport/transport.h"

typedef struct {
  uint16_t port;            /* store server on 127.0.0.1 */
  const char *prefix;       /* key prefix, unique per test */
  const char *const *hosts; /* host id per rank */
  const char *forced;       /* "shm", "tcp" or NULL */
  int timeout_ms;
} tp_job_t;

typedef struct {
  store_client_t *store;
  transport_set_t *set;
  int rank;
  int nranks;
  uint64_t *sends_posted, *sends_done, *recvs_posted, *recvs_done; /* by peer */
} tp_rank_t;

/* A real store server (store_server_start) in a helper process. Why not a thread of the
 * test process: forking rank processes while a server thread runs can copy a lock the
 * thread holds (seen with ASan's allocator) and hang the child; a single-threaded test
 * process forks safely. */
typedef struct {
  int pid;
  int stop_fd; /* closing it stops the server */
  uint16_t port;
} tp_store_host_t;

/* Start it; false (with a message on stderr) on failure. */
bool tp_store_start(tp_store_host_t *host);
/* The same with a job token every client must present (NULL: none). */
bool tp_store_start_token(tp_store_host_t *host, const char *token);
/* Stop it and wait for the helper to exit. */
void tp_store_stop(tp_store_host_t *host);

/* Run fn on n forked ranks against a fresh store server (job->port is set); returns
 * mp_run's count of failed ranks, or -1 when no store could start. */
int tp_run_ranks(int n, mp_rank_fn fn, tp_job_t *job, void *arg, int timeout_ms);

/* Connect the store client and the transport set; COLL_OK or the connect status. */
coll_status_t tp_open(const tp_job_t *job, int rank, int nranks, tp_rank_t *out);
void tp_close(tp_rank_t *t);

coll_status_t tp_send(tp_rank_t *t, int peer, const void *buf, size_t len);
coll_status_t tp_recv(tp_rank_t *t, int peer, const transport_recv_t *recv);
/* Progress every connection until all posted operations completed, blocking in
 * transport_set_wait when nothing moved for 20 us (as the executor does). COLL_ERR_TIMEOUT after
 * timeout_ms without completion; otherwise the first transport error. */
coll_status_t tp_drain(tp_rank_t *t, int timeout_ms);

/* Deterministic bytes for (sender, message tag). */
void tp_fill(void *buf, size_t len, int sender, int tag);
/* Index of the first byte that differs from tp_fill(sender, tag), or SIZE_MAX. */
size_t tp_check(const void *buf, size_t len, int sender, int tag);

/* In the body of a rank (an mp_rank_fn, `rank` in scope): on failure print the rank, the
 * message, the place and libcoll's last error, and return 1. */
#define RANK_CHECK(cond, ...)                                                               \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "rank %d: ", rank);                                                   \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fprintf(stderr, " (%s:%d; last error: %s)\n", __FILE__, __LINE__, coll_last_error()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

#endif
