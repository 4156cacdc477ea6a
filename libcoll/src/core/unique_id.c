/* coll_get_unique_id / coll_comm_init_rank: the id is text, "collid1|<addr>|<port>|<token>",
 * naming a store this process hosts on the store server's own thread. Stores not yet
 * taken over by a communicator are kept in a small list (the only process-wide state of
 * the core), so that the first communicator made from an id in the process that made it
 * becomes its host (comm.c stops it at destroy, rendezvous.c waits for the others first). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/env.h"
#include "common/error.h"
#include "core/comm.h"
#include "launch/host_addr.h"

#define ID_MAGIC "collid1"
enum { TOKEN_HEX = 32, ADDR_MAX = INET_ADDRSTRLEN };

typedef struct hosted_store {
  struct hosted_store *next;
  char token[TOKEN_HEX + 1];
  store_server_t *server;
} hosted_store_t;

static pthread_mutex_t hosted_mu = PTHREAD_MUTEX_INITIALIZER;
static hosted_store_t *hosted_head;

static void list_add(hosted_store_t *h) {
  pthread_mutex_lock(&hosted_mu);
  h->next = hosted_head;
  hosted_head = h;
  pthread_mutex_unlock(&hosted_mu);
}

/* This host's IPv4 address as peers should reach it (see coll.h). */
static coll_status_t host_address(char *out, size_t cap) {
  const char *ifname = coll_env_str("COLL_SOCKET_IFNAME");
  bool found = false;
  coll_status_t st = host_ipv4(ifname, out, cap, &found);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_get_unique_id: ");
  if (found) return COLL_OK;
  if (ifname != NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_get_unique_id: COLL_SOCKET_IFNAME=%s: no interface of that name with "
                      "an IPv4 address",
                      ifname);
  snprintf(out, cap, "127.0.0.1");
  return COLL_OK;
}

coll_status_t coll_get_unique_id(coll_unique_id_t *id) {
  if (id == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_get_unique_id: id is NULL");
  memset(id, 0, sizeof *id);
  char addr[ADDR_MAX];
  coll_status_t st = host_address(addr, sizeof addr);
  if (st != COLL_OK) return st;
  unsigned char rnd[TOKEN_HEX / 2];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    return coll_error_errno(COLL_ERR_SYSTEM, errno, "coll_get_unique_id: getrandom");
  hosted_store_t *h = calloc(1, sizeof *h);
  if (h == NULL) return coll_error(COLL_ERR_NO_MEMORY, "coll_get_unique_id: out of memory");
  for (size_t k = 0; k < sizeof rnd; k++) snprintf(h->token + 2 * k, 3, "%02x", rnd[k]);
  store_server_options_t opts = {.bind_addr = NULL, .port = 0, .token = h->token};
  st = store_server_start(&opts, &h->server);
  if (st != COLL_OK) {
    free(h);
    return coll_error_prefix(st, "coll_get_unique_id: hosting the store: ");
  }
  snprintf(id->internal, sizeof id->internal, "%s|%s|%u|%s", ID_MAGIC, addr,
           (unsigned)store_server_port(h->server), h->token);
  list_add(h);
  coll_error_clear();
  return COLL_OK;
}

/* The hosted store of `token`, unlinked from the list (the caller's communicator hosts it
 * from now on, or the caller puts it back); NULL when another process made the id. */
static hosted_store_t *take_hosted(const char *token) {
  hosted_store_t *found = NULL;
  pthread_mutex_lock(&hosted_mu);
  for (hosted_store_t **link = &hosted_head; *link != NULL; link = &(*link)->next)
    if (strcmp((*link)->token, token) == 0) {
      found = *link;
      *link = found->next;
      break;
    }
  pthread_mutex_unlock(&hosted_mu);
  return found;
}

coll_status_t coll_comm_init_rank(coll_comm_t **comm, int nranks, coll_unique_id_t id, int rank,
                                  int timeout_ms) {
  if (comm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_init_rank: comm is NULL");
  *comm = NULL;
  char text[COLL_UNIQUE_ID_BYTES + 1];
  memcpy(text, id.internal, COLL_UNIQUE_ID_BYTES);
  text[COLL_UNIQUE_ID_BYTES] = '\0';
  char addr[ADDR_MAX + 1] = "", token[TOKEN_HEX + 1] = "";
  unsigned port = 0;
  int used = 0;
  if (sscanf(text, ID_MAGIC "|%16[0-9.]|%5u|%32[0-9a-f]%n", addr, &port, token, &used) != 3 ||
      text[used] != '\0' || port == 0 || port > 65535 || strlen(token) != TOKEN_HEX)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_rank: the id was not made by coll_get_unique_id (or was "
                      "damaged on its way)");
  coll_config_t cfg = {.rank = rank,
                       .size = nranks,
                       .local_rank = -1,
                       .master_addr = addr,
                       .master_port = (int)port,
                       .token = token,
                       .host_store = 0,
                       .timeout_ms = timeout_ms};
  /* validate_config (comm.c) names a bad rank or size as coll_comm_init_config's. */
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_init_rank: rank %d of %d is outside [0, nranks) or nranks < 1",
                      rank, nranks);
  hosted_store_t *h = take_hosted(token);
  coll_status_t st = comm_create_hosted(&cfg, h != NULL ? h->server : NULL, comm);
  if (h != NULL && st != COLL_OK)
    list_add(h); /* still ours: a later try may take it */
  else
    free(h);
  return st;
}
