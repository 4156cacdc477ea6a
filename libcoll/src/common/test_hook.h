/* COLL_TEST_KILL_AT: a test hook that stops or kills this process at a chosen point of
 * libcoll (the n-th agreement, shrink, all-reduce...), so that kill tests hit a phase of
 * recovery precisely (tests/elastic). Unset, as outside tests, it costs a load and a branch. */
#ifndef COLL_COMMON_TEST_HOOK_H
#define COLL_COMMON_TEST_HOOK_H

/* Called on entry to the operation named `point` ("all_reduce", "all_gather",
 * "reduce_scatter", "broadcast", "agree", "shrink", "grow", "join", "joined"), or at a
 * point inside one ("shm_inbox": the shm transport created this process's inbox segment,
 * before its peers mapped it; once per communicator that uses shm, the first in
 * coll_comm_join for a replacement). When an entry of COLL_TEST_KILL_AT names this point,
 * this is its n-th call in this process and the entry's rank selector matches, the process
 * writes one line to stderr and raises the
 * entry's signal. Syntax (comma-separated entries):
 *   POINT:N[:KILL|STOP|TERM][@R | @jR]
 * @R: only the process started as rank R (RANK=R, COLL_ELASTIC_JOIN unset); @jR: only a
 * replacement started for rank R (COLL_ELASTIC_JOIN=1); no selector: every process. */
void coll_test_hook(const char *point);

#endif
