/* Fingerprints and how the ranks agree on them: every collective call is summed up in an
 * exec_fp_t, and before a rank may return from the call it must know that every rank's
 * fingerprint equals its own. fp_agree.c holds the agreement's logic (a dissemination
 * over ceil(log2 n) rounds); the executor (exec.c) moves its messages. Pure logic: no
 * I/O, no communicator. */
#ifndef COLL_CORE_FP_AGREE_H
#define COLL_CORE_FP_AGREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* One collective call as every rank must see it (mismatch detection). */
typedef struct {
  uint64_t seq; /* collectives this communicator ran, this one included */
  uint64_t count;
  uint32_t kind, dtype, op;
  int32_t root;
  /* 1 + the ids of the call's windows and the buffers' offsets in them; 0: none */
  uint64_t win_send, win_send_off, win_recv, win_recv_off;
  /* all_to_allv's count check (exec/exec_alltoallv.c): 1 + this rank when a sender's
   * count for it differs from what it expects (0: none), the lowest such sender, and
   * both counts. A rank that finds one thereby differs from every other. */
  uint32_t counts_bad_to;
  int32_t counts_bad_from;
  uint64_t counts_sent, counts_expected;
} exec_fp_t;

/* exec_fp_t.op of a premul_sum call: what every rank must agree on is that the call is
 * one, not the handle its rank got for it (those differ) nor the scalar. */
#define EXEC_FP_OP_PREMUL_SUM 0xFFFFu

/* "all_reduce(float32, 1048576, sum)": a fingerprint for a mismatch message. */
void exec_fp_describe(const exec_fp_t *fp, char *out, size_t cap);

/* The message of one round: the sender's own fingerprint and what it knows of the ring
 * pairs (rank b-1, rank b) so far: the lowest b whose ring predecessor called something
 * else, with both fingerprints (bad_rank -1: none known). */
typedef struct {
  exec_fp_t fp;
  int32_t bad_rank;
  uint32_t unused;
  exec_fp_t bad_prev, bad_mine;
} fpa_msg_t;

/* Up to FPA_DIRECT_MAX ranks, every rank sends its fingerprint to every other at once
 * ("round" k: to rank + k + 1, from rank - k - 1) and reads them all: one hop. Above, a
 * dissemination: round k sends to rank + 2^k and receives from rank - 2^k (mod n), each
 * round's message passing on what the sender knows, so after ceil(log2 n) rounds every
 * rank knows the lowest mismatching ring pair (2^rounds >= n). Round 0 is the ring
 * exchange in both: rank b compares its predecessor's fingerprint with its own. */
#define FPA_DIRECT_MAX 8
typedef struct {
  int rank, nranks, rounds;
  bool direct;
  fpa_msg_t *out, *in;           /* per round; a send's buffer stays valid until the next call */
  uint64_t *send_seq, *recv_seq; /* per round, the executor's transport bookkeeping */
  int checked;                   /* rounds whose message was received and taken in */
  int sent;                      /* rounds whose message is posted */
  exec_fp_t mine;
  fpa_msg_t know; /* what this rank knows now (know.fp is its own) */
} fpa_t;

/* rounds: nranks - 1 up to FPA_DIRECT_MAX ranks, else ceil(log2 nranks). */
coll_status_t fpa_init(fpa_t *a, int rank, int nranks);
void fpa_free(fpa_t *a);
/* Start a call's agreement: forget the last call's, fill round 0's message. */
void fpa_begin(fpa_t *a, const exec_fp_t *mine);
int fpa_send_peer(const fpa_t *a, int round);
int fpa_recv_peer(const fpa_t *a, int round);
/* Whether the next round's message (round a->sent) may be sent now (direct: at once;
 * dissemination: once that many rounds were taken in); the message of a round. */
bool fpa_send_due(const fpa_t *a);
const fpa_msg_t *fpa_message(fpa_t *a, int round);
/* Bytes of a round's message on the wire: direct rounds carry only the fingerprint (the
 * message's head), dissemination rounds the whole fpa_msg_t. */
size_t fpa_message_bytes(const fpa_t *a);
const fpa_msg_t *fpa_message(fpa_t *a, int round);
/* Take in round a->checked's message (it arrived in a->in[a->checked]). */
void fpa_take(fpa_t *a);
/* Whether data sends to peer may start: no round's message to peer is still to be
 * posted (it must be the first message of the call on that channel). */
bool fpa_may_send_to(const fpa_t *a, int peer);
bool fpa_mismatch(const fpa_t *a);
bool fpa_all_taken(const fpa_t *a);
/* COLL_ERR_MISMATCH naming the lowest mismatching pair; the same text on every rank. */
coll_status_t fpa_error(const fpa_t *a);

#endif
