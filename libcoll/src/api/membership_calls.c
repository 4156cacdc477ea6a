/* coll.h's calls for surviving a lost rank: revoke, agree, shrink, grow, the grow id and
 * join. Each checks the communicator and its arguments, lets the membership layer
 * (membership/) do the protocol, and has core/ create the new communicator it planned. */
#include <stdlib.h>

#include "common/env.h"
#include "common/error.h"
#include "common/test_hook.h"
#include "core/comm.h"
#include "membership/membership.h"

enum { DEFAULT_JOIN_TIMEOUT_MS = 300000 };

coll_status_t coll_comm_revoke(coll_comm_t *comm) {
  coll_status_t st = comm_check(comm, "coll_comm_revoke");
  if (st != COLL_OK) return st;
  return member_revoke(&comm->base);
}

coll_status_t coll_comm_agree(coll_comm_t *comm, coll_agreement_t *agreement) {
  coll_test_hook("agree");
  coll_status_t st = comm_check(comm, "coll_comm_agree");
  if (st != COLL_OK) return st;
  const coll_base_t *b = &comm->base;
  if (agreement == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_agree: agreement is NULL",
                      b->rank);
  if (base_aborted(b))
    return coll_error(COLL_ERR_ABORTED, "rank %d: coll_comm_agree: the communicator was aborted",
                      b->rank);
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: coll_comm_agree: not allowed inside a group", b->rank);
  return member_agree(&comm->base, &comm->members, agreement);
}

coll_status_t coll_comm_agree_failed(coll_comm_t *comm, int *failed, int capacity, int *nfailed) {
  if (nfailed == NULL || capacity < 0 || (failed == NULL && capacity > 0))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "coll_comm_agree_failed: nfailed is NULL or failed/capacity disagree");
  coll_agreement_t a = {.flag = ~0u};
  coll_status_t st = coll_comm_agree(comm, &a);
  if (st != COLL_OK) return st;
  *nfailed = a.nfailed;
  for (int i = 0; i < a.nfailed && i < capacity; i++) failed[i] = a.failed[i];
  return COLL_OK;
}

/* What shrink and grow check before anything changes. */
static coll_status_t check_members_call(coll_comm_t *comm, coll_comm_t **newcomm,
                                        const char *what) {
  if (newcomm != NULL) *newcomm = NULL;
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  if (newcomm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: newcomm is NULL", comm->base.rank,
                      what);
  if (base_aborted(&comm->base))
    return coll_error(COLL_ERR_ABORTED, "rank %d: %s: the communicator was aborted",
                      comm->base.rank, what);
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: not allowed inside a group",
                      comm->base.rank, what);
  return COLL_OK;
}

/* The communicator a plan describes, or the error prefixed with what made it. */
static coll_status_t create_planned(member_plan_t *plan, coll_comm_t **newcomm) {
  coll_status_t st = comm_create_member(plan, newcomm);
  if (st != COLL_OK) coll_error_prefix(st, "%s", plan->context);
  member_plan_free(plan);
  return st;
}

coll_status_t coll_comm_shrink(coll_comm_t *comm, const int *exclude, int nexclude,
                               coll_comm_t **newcomm) {
  coll_test_hook("shrink");
  coll_status_t st = check_members_call(comm, newcomm, "coll_comm_shrink");
  if (st != COLL_OK) return st;
  member_plan_t plan;
  st = member_plan_shrink(&comm->base, &comm->members, exclude, nexclude, &plan);
  if (st != COLL_OK) return st;
  return create_planned(&plan, newcomm);
}

coll_status_t coll_comm_grow(coll_comm_t *comm, int joiners, coll_comm_t **newcomm) {
  coll_test_hook("grow");
  coll_status_t st = check_members_call(comm, newcomm, "coll_comm_grow");
  if (st != COLL_OK) return st;
  member_plan_t plan;
  st = member_plan_grow(&comm->base, &comm->members, joiners, &plan);
  if (st != COLL_OK) return st;
  return create_planned(&plan, newcomm);
}

coll_status_t coll_comm_grow_id(coll_comm_t *comm, coll_unique_id_t *id) {
  coll_status_t st = comm_check(comm, "coll_comm_grow_id");
  if (st != COLL_OK) return st;
  if (id == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: coll_comm_grow_id: id is NULL",
                      comm->base.rank);
  return member_grow_id(&comm->base, &comm->members, id);
}

coll_status_t coll_comm_join(const coll_unique_id_t *id, int timeout_ms, coll_comm_t **newcomm) {
  coll_test_hook("join");
  if (newcomm == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_join: newcomm is NULL");
  *newcomm = NULL;
  if (timeout_ms < 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_comm_join: timeout_ms %d", timeout_ms);
  if (timeout_ms == 0) {
    int64_t t = 0;
    coll_status_t st =
        coll_env_int("COLL_TIMEOUT_MS", 1, INT32_MAX / 2, DEFAULT_JOIN_TIMEOUT_MS, &t);
    if (st != COLL_OK) return st;
    timeout_ms = (int)t;
  }
  member_join_point_t jp;
  coll_status_t st = id != NULL ? member_join_point_from_id(id, &jp) : member_join_point_from_env(&jp);
  if (st != COLL_OK) return st;
  member_plan_t plan;
  st = member_plan_join(&jp, timeout_ms, &plan);
  if (st != COLL_OK) return st;
  st = create_planned(&plan, newcomm);
  if (st != COLL_OK) return st;
  coll_test_hook("joined");
  return COLL_OK;
}
