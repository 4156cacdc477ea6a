/* A rank program for the collrun tests that meets the other ranks in the store collrun
 * hosts: connect to MASTER_ADDR:MASTER_PORT with COLL_JOB_TOKEN, check that a wrong token
 * is refused, publish "rank/<RANK>", wait for every rank's key, and print the result.
 * Ranks of other nodes than 0 then pause and use the store once more: node 0's ranks have
 * exited by then, and node 0's collrun must keep the store up for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "common/env.h"

enum { TIMEOUT_MS = 10000 };

int main(void) {
  const char *addr = coll_env_str("MASTER_ADDR");
  const char *token = coll_env_str("COLL_JOB_TOKEN");
  int64_t rank, world, port;
  if (addr == NULL || coll_env_int("RANK", 0, 1 << 20, -1, &rank) != COLL_OK ||
      coll_env_int("WORLD_SIZE", 1, 1 << 20, -1, &world) != COLL_OK ||
      coll_env_int("MASTER_PORT", 1, 65535, -1, &port) != COLL_OK || rank < 0 || world < 1) {
    fprintf(stderr, "bad environment: %s\n", coll_last_error());
    return 1;
  }
  printf("RANK=%lld WORLD_SIZE=%s LOCAL_RANK=%s GROUP_RANK=%s\n", (long long)rank,
         getenv("WORLD_SIZE"), getenv("LOCAL_RANK"), getenv("GROUP_RANK"));
  store_client_t *client = NULL;
  if (token != NULL) {
    char wrong[256];
    snprintf(wrong, sizeof wrong, "not-%s", token);
    coll_status_t st = store_client_connect(addr, (uint16_t)port, wrong, TIMEOUT_MS, &client);
    store_client_close(client);
    client = NULL;
    if (st != COLL_ERR_REFUSED) {
      fprintf(stderr, "a wrong token got %s, not COLL_ERR_REFUSED\n", coll_status_name(st));
      return 1;
    }
    printf("WRONG_TOKEN_REFUSED\n");
  }
  if (store_client_connect(addr, (uint16_t)port, token, TIMEOUT_MS, &client) != COLL_OK) {
    fprintf(stderr, "connect: %s\n", coll_last_error());
    return 1;
  }
  int rc = 1;
  char key[64];
  snprintf(key, sizeof key, "rank/%lld", (long long)rank);
  int64_t arrived = 0;
  const char **keys = calloc((size_t)world, sizeof *keys);
  char(*names)[64] = calloc((size_t)world, sizeof *names);
  if (keys == NULL || names == NULL) goto cleanup;
  for (int64_t r = 0; r < world; r++) {
    snprintf(names[r], sizeof names[r], "rank/%lld", (long long)r);
    keys[r] = names[r];
  }
  if (store_add(client, "arrived", 1, &arrived, TIMEOUT_MS) != COLL_OK ||
      store_set(client, key, "x", 1, TIMEOUT_MS) != COLL_OK ||
      store_wait(client, keys, (size_t)world, TIMEOUT_MS) != COLL_OK) {
    fprintf(stderr, "store: %s\n", coll_last_error());
    goto cleanup;
  }
  printf("STORE_OK RANK=%lld\n", (long long)rank);
  int64_t group_rank;
  if (coll_env_int("GROUP_RANK", 0, 1 << 20, 0, &group_rank) != COLL_OK) goto cleanup;
  if (group_rank > 0) {
    usleep(300 * 1000);
    if (store_add(client, "late", 1, &arrived, TIMEOUT_MS) != COLL_OK) {
      fprintf(stderr, "store (late use): %s\n", coll_last_error());
      goto cleanup;
    }
    printf("LATE_OK RANK=%lld\n", (long long)rank);
  }
  rc = 0;
cleanup:
  free(keys);
  free(names);
  store_client_close(client);
  return rc;
}
