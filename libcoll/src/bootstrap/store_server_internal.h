/* Private to the store server's two files (store_server.c: I/O and lifetime,
 * store_requests.c: what each request means): its connections, the server itself and the
 * calls between the two. Touched by the server thread only, except the atomics. */
#ifndef COLL_BOOTSTRAP_STORE_SERVER_INTERNAL_H
#define COLL_BOOTSTRAP_STORE_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bootstrap/store.h"
#include "bootstrap/store_proto.h"
#include "bootstrap/store_table.h"
#include "common/log.h"

typedef struct conn conn_t;
struct conn {
  int fd;
  bool dead;       /* closed; freed at the end of the current batch of events */
  bool greeted;    /* a valid hello was received */
  uint32_t events; /* current epoll interest */
  char peer[64];
  /* The frame being received. */
  uint8_t head[STORE_HEADER_SIZE];
  size_t head_have;
  bool have_header;
  store_header_t header;
  uint8_t *body;
  size_t body_have, body_cap;
  store_scan_t scan;
  int64_t last_byte_ns; /* progress of an unfinished frame; 0: between frames */
  store_arg_t *args;    /* the complete request */
  /* A parked get/wait. */
  bool parked;
  int64_t park_deadline_ns;
  uint32_t wait_cursor; /* first key of the parked request not known to exist */
  conn_t *park_prev, *park_next;
  /* Reply bytes not yet written. */
  uint8_t *out;
  size_t out_len, out_off;
  int64_t last_write_ns; /* progress of a pending reply */
  /* Keys set with STORE_FLAG_OWNED: deleted from the table when this connection closes. */
  char **owned;
  size_t owned_n, owned_cap;
  conn_t *prev, *next;   /* every live connection; graveyard link once dead */
};

struct store_server {
  int listen_fd;
  int epoll_fd;
  int wake_fd;
  uint16_t port;
  char *token; /* NULL: none required */
  size_t token_len;
  store_limits_t limits;
  int max_clients;
  int frame_timeout_ms;
  pthread_t thread;
  bool thread_started;
  atomic_bool stop;
  atomic_int client_count;
  /* Owned by the server thread once it runs. */
  store_table_t table;
  conn_t *conns;
  conn_t *parked;
  conn_t *graveyard;
  bool listen_paused;
  int64_t listen_resume_ns;
};

/* ---- store_server.c ---- */

/* Update the epoll interest: read only when idle, write while a reply is pending. */
void store_conn_set_interest(store_server_t *s, conn_t *c);
void store_conn_unpark(store_server_t *s, conn_t *c);
/* Forget the frame being received or served (frees its body and arguments). */
void store_conn_reset_frame(conn_t *c);
/* Close and forget a connection with a logged reason; freed at the end of the batch. */
void store_conn_drop(store_server_t *s, conn_t *c, coll_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Queue one reply frame and start writing it; false when the connection was dropped. */
bool store_conn_reply(store_server_t *s, conn_t *c, store_reply_t code, uint8_t flags,
                      const store_arg_t *args, uint32_t nargs);
bool store_conn_reply_message(store_server_t *s, conn_t *c, store_reply_t code, const char *fmt,
                              ...) __attribute__((format(printf, 4, 5)));

/* ---- store_requests.c ---- */

/* The connection is closing: delete the keys it owns (STORE_FLAG_OWNED) and free the list. */
void store_conn_forget_owned(store_server_t *s, conn_t *c);

/* Serve the complete request in c->args: answer it, or park it (get/wait). */
void store_serve(store_server_t *s, conn_t *c);
/* Answer a parked request whose deadline passed. */
void store_serve_timeout(store_server_t *s, conn_t *c);

#endif
