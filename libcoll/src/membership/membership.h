/* Membership: where a communicator's set of ranks changes. Revoke, the agreement on who
 * failed, and the plans of the new communicators a shrink, a grow or a join makes, with
 * the store as the referee that outlives every rank (docs/elastic.md; design:
 * docs/architecture.md, "Membership"). Below core/: it works on the base (identity,
 * health, the store's address) and on its own small state, never on the communicator;
 * core/ creates the communicators it plans, and api/ holds coll.h's entry points.
 * Liveness (who is still there) is base/'s, and every key is spelled in base/store_keys.c. */
#ifndef COLL_MEMBERSHIP_MEMBERSHIP_H
#define COLL_MEMBERSHIP_MEMBERSHIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "bootstrap/store.h"
#include "coll.h"

/* A communicator's part in its lineage: the communicators shrunk or grown from one first
 * communicator share its key prefix as their root, under which joiners register. */
typedef struct {
  char lineage_root[BASE_KEY_PREFIX_MAX];
  uint64_t agree_epoch;  /* agreements so far */
  uint64_t shrinks;      /* shrinks so far */
  uint64_t grows;        /* grows so far */
  store_client_t *store; /* the membership calls' own connection, made on first use (the
                          * progress thread uses the base's) */
} membership_t;

/* Start a communicator's membership: the first of a lineage passes its own key prefix,
 * a shrunk or grown one its parent's root. */
void membership_init(membership_t *m, const char *lineage_root);
/* Close its store connection (at destroy). */
void membership_close(membership_t *m);

/* What a new communicator's rendezvous watches: while it waits for new rank r, it looks
 * at the liveness of r's process in the communicator it came from, so a member that died
 * fails the rendezvous at once instead of at the deadline. */
typedef struct {
  char parent_prefix[BASE_KEY_PREFIX_MAX];
  int *parent_rank; /* parent rank of each new rank; -1 a joiner (nothing to watch) */
  int size;
} member_watch_t;

/* A new communicator of a lineage as a shrink, grow or join decided it; core/ creates it
 * (comm_create_member). */
typedef struct {
  char prefix[BASE_KEY_PREFIX_MAX]; /* "<root>G<gen>/" */
  char root[BASE_KEY_PREFIX_MAX];   /* the lineage's */
  int rank, size;
  store_place_t store_place; /* the lineage's store */
  int timeout_ms;
  member_watch_t watch; /* parent_rank NULL: nothing to watch (a joiner's own view) */
  char context[1280];   /* what made it, to begin the message of an error creating it */
} member_plan_t;

void member_plan_free(member_plan_t *plan);

/* ---- revoke.c ---- */
/* Fail this communicator with COLL_ERR_REVOKED and publish that as its first failure, so
 * every member's failure watcher stops what is pending there. A failed one: nothing to
 * do. */
coll_status_t member_revoke(coll_base_t *base);

/* ---- agree.c ---- */
/* The agreement (ULFM's agree with the failed set): every live member's flag ANDed, the
 * ranks that did not take part before they died or the deadline passed, and the joiners
 * waiting; COLL_ERR_FENCED for a member the others declared failed. */
coll_status_t member_agree(coll_base_t *base, membership_t *m, coll_agreement_t *agreement);
/* Processes registered to join m's lineage and not yet taken in by a grow. */
coll_status_t member_joiners_waiting(const membership_t *m, store_client_t *c, int ms,
                                     int *waiting);
/* m's store connection, made on first use with the base's address. */
coll_status_t member_store(const coll_base_t *base, membership_t *m, store_client_t **client);

/* ---- lineage.c ---- */
/* Shrink: the survivors' new communicator, without the ranks in exclude (the parent is
 * revoked first when any is left out). */
coll_status_t member_plan_shrink(coll_base_t *base, membership_t *m, const int *exclude,
                                 int nexclude, member_plan_t *plan);
/* Grow: the members' new communicator with `joiners` joiners after them. */
coll_status_t member_plan_grow(coll_base_t *base, membership_t *m, int joiners,
                               member_plan_t *plan);
/* The id a joiner passes to coll_comm_join: the store and the lineage. */
coll_status_t member_grow_id(const coll_base_t *base, const membership_t *m, coll_unique_id_t *id);
/* Where a joiner meets the members. */
typedef struct {
  char addr[256];
  int port;
  char token[128];
  char root[BASE_KEY_PREFIX_MAX];
} member_join_point_t;
coll_status_t member_join_point_from_id(const coll_unique_id_t *id, member_join_point_t *jp);
/* No id: the launcher's store (its environment), and the lineage of the first
 * communicator made on it. */
coll_status_t member_join_point_from_env(member_join_point_t *jp);
/* Register as a joiner and wait up to timeout_ms for a grow to take this process in. */
coll_status_t member_plan_join(const member_join_point_t *jp, int timeout_ms, member_plan_t *plan);

/* ---- watch.c ---- */
/* Get `key` (new rank r's record) from c like store_get, within timeout_ms; with a
 * watch, in slices, failing with COLL_ERR_REMOTE once r's process is seen dead in the
 * parent (base/liveness.c's rule). */
coll_status_t member_watched_get(store_client_t *c, const member_watch_t *watch, int r,
                                 const char *key, int timeout_ms, void **value, size_t *len);

#endif
