/* The store keys of failure detection and membership, spelled in this one place. Ranks
 * that never share memory agree through these names alone, so a key written in one file
 * and read in another must come from the same function here.
 *
 * Each rank counts the communicators it makes on a store ("coll/comms/<r>"); the k-th
 * gets the prefix "coll/c<k>/" (ranks make them in the same order, so they agree without
 * talking).
 *
 * A communicator's keys lie under its prefix P ("coll/c3/", or "coll/c1/G2/" for the
 * second communicator made from the lineage "coll/c1/"):
 *
 *   P failure              the first failure, "rank|status|message" (compare-and-set:
 *                          the first writer wins); a revoke writes it too
 *   P dead/<r>             a connection to rank r broke, or an agreement declared r failed
 *   P alive/<r>            owned by rank r's failure-watcher connection: the store deletes
 *                          it when that connection closes (r's process died)
 *   P done/<r>, left/<r>   destroy's barrier: r arrived; r finished with the store
 *   P hang/<r>, hang/report  the hang report: where r is; the report itself
 *   P agree/<e>/in/<r>     rank r's flag in agreement e (1, 2, ...)
 *   P agree/<e>/n          how many ranks took part in agreement e so far
 *   P agree/<e>/decision   agreement e's answer (compare-and-set: exactly one)
 *   P shrink/<k>, grow/<k> the k-th shrink's or grow's new generation (and a shrink's
 *                          excluded set)
 *
 * A lineage's keys lie under the prefix R of its first communicator:
 *
 *   R gen                  generations handed out (a counter)
 *   R joiners, R served    processes registered to join, and taken in by grows (counters)
 *   R ticket/<t>           joiner t's place: "<gen> <rank> <size>"
 *   R G<gen>/              the prefix of that generation's communicator */
#ifndef COLL_BASE_STORE_KEYS_H
#define COLL_BASE_STORE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A prefix is at most BASE_KEY_PREFIX_MAX - 1 bytes (base.h); the longest suffix is
 * "agree/<20 digits>/decision". */
enum { STORE_KEY_TEXT_MAX = 192 };

typedef struct {
  char text[STORE_KEY_TEXT_MAX];
} store_key_t;

/* ---- the communicators of a store ---- */
store_key_t key_comm_counter(int rank);
/* "coll/c<k>/" in out (cap bytes, at least 32). */
void key_comm_prefix(int64_t k, char *out, size_t cap);
/* The lineage a joiner without an id joins: the first communicator made on the
 * launcher's store, key_comm_prefix(1). */
#define KEY_FIRST_COMM_PREFIX "coll/c1/"

/* ---- a communicator's keys (prefix: its key prefix) ---- */
store_key_t key_failure(const char *prefix);
store_key_t key_dead(const char *prefix, int rank);
store_key_t key_alive(const char *prefix, int rank);
store_key_t key_done(const char *prefix, int rank);
store_key_t key_left(const char *prefix, int rank);
/* what: a rank's number, or "report" */
store_key_t key_hang(const char *prefix, const char *what);
store_key_t key_agree_in(const char *prefix, uint64_t epoch, int rank);
store_key_t key_agree_count(const char *prefix, uint64_t epoch);
store_key_t key_agree_decision(const char *prefix, uint64_t epoch);
store_key_t key_shrink_record(const char *prefix, uint64_t k);
store_key_t key_grow_record(const char *prefix, uint64_t k);

/* ---- a lineage's keys (root: the key prefix of its first communicator) ---- */
store_key_t key_lineage_gen(const char *root);
store_key_t key_lineage_joiners(const char *root);
store_key_t key_lineage_served(const char *root);
store_key_t key_lineage_ticket(const char *root, int64_t ticket);
/* The prefix of generation gen's communicator, "<root>G<gen>/", in out (cap bytes); false
 * when it does not fit. */
bool key_generation_prefix(const char *root, int64_t gen, char *out, size_t cap);

#endif
