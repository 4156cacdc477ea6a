/* Rank bodies shared by the transport tests over shm and tcp (test_transport.c) and over
 * ib (tests/rdma/test_rdma_ib.c). Each runs on a rank connected by tp_open, checks with
 * RANK_CHECK and returns 0, or 1 after printing what failed. Sizes and deadlines are the
 * caller's: the ib tests run in a guest whose CPU is emulated. */
#ifndef TESTS_TRANSPORT_TP_CASES_H
#define TESTS_TRANSPORT_TP_CASES_H

#include <stdbool.h>
#include <stddef.h>

#include "tp_util.h"

/* The body of a rank connected by tp_open (t): 0, or 1 after printing what failed. */
typedef int (*tp_body_fn)(tp_rank_t *t, void *arg);

/* tp_run_ranks with every rank connecting (tp_open: a failure is the rank's), running
 * body(t, arg) and closing. */
int tp_run_connected(int n, tp_body_fn body, tp_job_t *job, void *arg, int timeout_ms);

/* A float that differs per rank and element (small integers: sums of a few are exact). */
float tp_float_of(int rank, size_t i);

/* Every size to the next rank and from the previous one, all posted at once: each arrives
 * intact and nothing is written past its end; then 300 small messages (far more than the
 * FIFO slots or credits of any transport: they must come back). */
int tp_ring_copy(tp_rank_t *t, const size_t *sizes, size_t nsizes, int drain_ms);

/* A ring with a float sum: dst = mine + incoming for every count, into a separate buffer,
 * then once more in place (dst == operand) for the last count. */
int tp_ring_reduce(tp_rank_t *t, const size_t *counts, size_t ncounts, int drain_ms);

/* count messages of 4 KiB to the partner (rank ^ 1), sent and progressed `rounds` times
 * before any receive is posted, then received and checked. With wait_ms > 0 each round
 * also waits that long and the sends must be held back (not all complete before their
 * receives: the credits of ib). */
typedef struct {
  int count, rounds, wait_ms, drain_ms;
} tp_sends_first_t;
int tp_sends_first(tp_rank_t *t, const tp_sends_first_t *how);

/* Rank 0 sends send_len bytes where rank 1 expects recv_len: rank 1 gets COLL_ERR_PROTOCOL
 * naming peer rank 0 and the length sent. With lead, one matching message goes first.
 * sender_may_fail: rank 0's send may end as COLL_ERR_REMOTE (more than the socket buffers
 * hold stays unsent until rank 1 gives up). Rank 0 stays connected until rank 1 checked. */
typedef struct tp_mismatch {
  size_t send_len, recv_len;
  bool lead, sender_may_fail;
} tp_mismatch_t;
int tp_length_mismatch(tp_rank_t *t, const tp_mismatch_t *mc, int drain_ms);

/* The victim posts len bytes to the other rank of two, progresses a little and SIGKILLs
 * itself; the survivor, expecting two such messages (so that a fast first transfer cannot
 * hide the death), must get COLL_ERR_REMOTE naming "peer rank <victim>", or
 * COLL_ERR_TIMEOUT, from a drain of drain_ms, within within_ms. */
int tp_killed_peer(tp_rank_t *t, int victim, size_t len, int drain_ms, int within_ms);

#endif
