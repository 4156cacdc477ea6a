/* A communicator's membership state (membership.h): its lineage, its counters of
 * agreements, shrinks and grows, and the store connection the membership calls share;
 * and the plan of a new communicator, which owns its watch. */
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "membership/membership.h"

void membership_init(membership_t *m, const char *lineage_root) {
  snprintf(m->lineage_root, sizeof m->lineage_root, "%s", lineage_root);
  m->agree_epoch = m->shrinks = m->grows = 0;
  m->store = NULL;
}

void membership_close(membership_t *m) {
  store_client_close(m->store);
  m->store = NULL;
}

coll_status_t member_store(const coll_base_t *base, membership_t *m, store_client_t **client) {
  if (m->store == NULL) {
    coll_status_t st = store_place_open(&base->store_place, base->timeout_ms, &m->store);
    if (st != COLL_OK)
      return coll_error_prefix(st, "the store (needed to agree, shrink or grow): ");
  }
  *client = m->store;
  return COLL_OK;
}

void member_plan_free(member_plan_t *plan) {
  free(plan->watch.parent_rank);
  plan->watch.parent_rank = NULL;
}
