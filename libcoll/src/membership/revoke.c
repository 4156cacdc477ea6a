/* Revoke, the first link of surviving a lost rank (docs/elastic.md): the communicator
 * fails here with COLL_ERR_REVOKED, and the revoke is published as its first failure
 * (base/failure.c's record, key_failure), so every member's failure watcher wakes on it
 * and fails what is pending there within a store round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/store_keys.h"
#include "common/error.h"
#include "membership/membership.h"

coll_status_t member_revoke(coll_base_t *base) {
  if (base_aborted(base))
    return coll_error(COLL_ERR_ABORTED, "rank %d: coll_comm_revoke: the communicator was aborted",
                      base->rank);
  if (base_failed(base) != 0) { /* revoked already, or failed: the same to everyone */
    coll_error_clear();
    return COLL_OK;
  }
  char message[BASE_MESSAGE_MAX];
  snprintf(message, sizeof message, "rank %d revoked the communicator", base->rank);
  coll_error(COLL_ERR_REVOKED, "%s", message);
  base_mark_failed(base, COLL_ERR_REVOKED);
  coll_status_t st = COLL_OK;
  if (base->nranks > 1) {
    /* A connection of its own: revoke may come from another thread than the caller's. */
    store_client_t *client = NULL;
    int bound = base->timeout_ms;
    st = store_place_open(&base->store_place, bound, &client);
    if (st == COLL_OK) {
      char record[BASE_MESSAGE_MAX + 32];
      store_key_t key = key_failure(base->key_prefix);
      snprintf(record, sizeof record, "%d|%d|%s", base->rank, (int)COLL_ERR_REVOKED, message);
      void *current = NULL;
      size_t len = 0;
      st = store_compare_set(client, key.text, NULL, 0, record, strlen(record), &current, &len,
                             bound);
      free(current);
      store_client_close(client);
    }
    if (st != COLL_OK)
      return coll_error_prefix(st,
                               "rank %d: coll_comm_revoke: revoked here, but the others could not "
                               "be told through the store: ",
                               base->rank);
  }
  coll_error_clear();
  return COLL_OK;
}
