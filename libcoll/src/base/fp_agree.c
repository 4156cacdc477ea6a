/* Agreement on a call's fingerprint: a dissemination (Hensgen, Finkel and Manber's
 * barrier) carrying what each rank knows of the ring pairs.
 *
 *   round 0: rank r sends its fingerprint to r+1 and compares r-1's with its own;
 *   round k: rank r sends to r+2^k what it knows (the lowest b whose pair (b-1, b)
 *            differs, with both fingerprints) and takes in what r-2^k knows.
 *
 * After round k, rank r knows the round-0 results of ranks r-2^(k+1)+1 .. r, so after
 * ceil(log2 n) rounds it knows all of them: every rank ends with the same answer, the
 * lowest mismatching pair or none. The ring pairs cover every rank, so "no pair differs"
 * means every fingerprint is equal. This is what keeps a rank from returning success
 * from a call another rank saw mismatch: with 3 ranks and a broadcast whose root differs
 * on rank 2, rank 1 may get its data from rank 0 and be done with the schedule, but it
 * learns of rank 2's mismatch in round 1 before it returns.
 *
 * Up to FPA_DIRECT_MAX ranks the rounds are replaced by one: every rank sends its
 * fingerprint to every other and compares all of them, so the answer takes one hop, not
 * ceil(log2 n) in sequence (on 2 cores with 4 ranks every hop is a wake-up).
 *
 * Cost: with 2 ranks the one exchange there always was; up to 8 ranks n - 1 small
 * messages each way per rank and call, sent together; above, ceil(log2 n) each way,
 * round k's send one hop after round k-1's receive. All overlap the schedule. */
#include "base/fp_agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/schedule.h"
#include "common/error.h"

void exec_fp_describe(const exec_fp_t *fp, char *out, size_t cap) {
  coll_kind_t kind = (coll_kind_t)fp->kind;
  const char *dt = coll_dtype_name((coll_dtype_t)fp->dtype);
  int n = kind == COLL_KIND_ALL_TO_ALLV /* count is nranks: the counts are per peer */
              ? snprintf(out, cap, "%s(%s, per-peer counts", sched_kind_name(kind), dt ? dt : "?")
              : snprintf(out, cap, "%s(%s, %llu", sched_kind_name(kind), dt ? dt : "?",
                         (unsigned long long)fp->count);
  if (n < 0 || (size_t)n >= cap) return;
  if (coll_kind_reduces(kind)) {
    const char *op =
        fp->op == EXEC_FP_OP_PREMUL_SUM ? "premul_sum" : coll_op_name((coll_op_t)fp->op);
    n += snprintf(out + n, cap - (size_t)n, ", %s", op ? op : "?");
  }
  if ((size_t)n < cap && coll_kind_rooted(kind))
    n += snprintf(out + n, cap - (size_t)n, ", root %d", (int)fp->root);
  if ((size_t)n < cap && fp->counts_bad_to != 0)
    n += snprintf(out + n, cap - (size_t)n, "; rank %d sends %llu to rank %u, which expects %llu",
                  (int)fp->counts_bad_from, (unsigned long long)fp->counts_sent,
                  fp->counts_bad_to - 1, (unsigned long long)fp->counts_expected);
  if ((fp->win_send != 0 || fp->win_recv != 0) && (size_t)n < cap)
    n += snprintf(out + n, cap - (size_t)n, ", window %llu+%llu -> %llu+%llu",
                  (unsigned long long)fp->win_send - 1, (unsigned long long)fp->win_send_off,
                  (unsigned long long)fp->win_recv - 1, (unsigned long long)fp->win_recv_off);
  if ((size_t)n < cap) snprintf(out + n, cap - (size_t)n, ")");
}

coll_status_t fpa_init(fpa_t *a, int rank, int nranks) {
  memset(a, 0, sizeof *a);
  a->rank = rank;
  a->nranks = nranks;
  a->direct = nranks <= FPA_DIRECT_MAX;
  if (a->direct)
    a->rounds = nranks - 1;
  else
    while ((1 << a->rounds) < nranks) a->rounds++;
  size_t k = a->rounds > 0 ? (size_t)a->rounds : 1;
  a->out = calloc(k, sizeof *a->out);
  a->in = calloc(k, sizeof *a->in);
  a->send_seq = calloc(k, sizeof *a->send_seq);
  a->recv_seq = calloc(k, sizeof *a->recv_seq);
  if (a->out == NULL || a->in == NULL || a->send_seq == NULL || a->recv_seq == NULL) {
    fpa_free(a);
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for the fingerprint rounds");
  }
  return COLL_OK;
}

void fpa_free(fpa_t *a) {
  free(a->out);
  free(a->in);
  free(a->send_seq);
  free(a->recv_seq);
  memset(a, 0, sizeof *a);
}

void fpa_begin(fpa_t *a, const exec_fp_t *mine) {
  a->checked = 0;
  a->sent = 0;
  a->mine = *mine;
  memset(&a->know, 0, sizeof a->know);
  a->know.fp = *mine;
  a->know.bad_rank = -1;
  for (int k = 0; k < a->rounds; k++) memset(&a->in[k], 0, sizeof a->in[k]);
}

static int distance(const fpa_t *a, int round) { return a->direct ? round + 1 : 1 << round; }

int fpa_send_peer(const fpa_t *a, int round) { return (a->rank + distance(a, round)) % a->nranks; }

int fpa_recv_peer(const fpa_t *a, int round) {
  return (a->rank + a->nranks - distance(a, round)) % a->nranks;
}

bool fpa_send_due(const fpa_t *a) {
  return a->sent < a->rounds && (a->direct || a->sent <= a->checked);
}

size_t fpa_message_bytes(const fpa_t *a) {
  return a->direct ? sizeof(exec_fp_t) : sizeof(fpa_msg_t);
}

const fpa_msg_t *fpa_message(fpa_t *a, int round) {
  a->out[round] = a->know;
  return &a->out[round];
}

/* Direct: rank q's fingerprint, once every message arrived. */
static const exec_fp_t *fp_of(const fpa_t *a, int q) {
  if (q == a->rank) return &a->mine;
  return &a->in[(a->rank - q + a->nranks) % a->nranks - 1].fp;
}

/* Direct, all fingerprints in: the lowest mismatching ring pair, as every rank finds it. */
static void settle_direct(fpa_t *a) {
  for (int b = 0; b < a->nranks; b++) {
    const exec_fp_t *prev = fp_of(a, (b + a->nranks - 1) % a->nranks), *mine = fp_of(a, b);
    if (memcmp(prev, mine, sizeof *mine) != 0) {
      a->know.bad_rank = b;
      a->know.bad_prev = *prev;
      a->know.bad_mine = *mine;
      return;
    }
  }
}

void fpa_take(fpa_t *a) {
  const fpa_msg_t *m = &a->in[a->checked];
  if (a->checked == 0) {
    if (memcmp(&m->fp, &a->mine, sizeof a->mine) != 0 &&
        (a->know.bad_rank < 0 || a->rank < a->know.bad_rank)) {
      a->know.bad_rank = a->rank;
      a->know.bad_prev = m->fp;
      a->know.bad_mine = a->mine;
    }
  } else if (a->direct) {
    /* Nothing to pass on: each message is its sender's fingerprint. */
  } else if (m->bad_rank >= 0 && m->bad_rank < a->nranks &&
             (a->know.bad_rank < 0 || m->bad_rank < a->know.bad_rank)) {
    a->know.bad_rank = m->bad_rank;
    a->know.bad_prev = m->bad_prev;
    a->know.bad_mine = m->bad_mine;
  }
  a->checked++;
  if (a->direct && a->checked == a->rounds) settle_direct(a);
}

bool fpa_may_send_to(const fpa_t *a, int peer) {
  for (int k = a->sent; k < a->rounds; k++)
    if (fpa_send_peer(a, k) == peer) return false;
  return true;
}

bool fpa_mismatch(const fpa_t *a) { return a->know.bad_rank >= 0; }

bool fpa_all_taken(const fpa_t *a) { return a->checked >= a->rounds; }

coll_status_t fpa_error(const fpa_t *a) {
  char theirs[160], mine[160];
  exec_fp_describe(&a->know.bad_prev, theirs, sizeof theirs);
  exec_fp_describe(&a->know.bad_mine, mine, sizeof mine);
  int b = a->know.bad_rank, prev = (b + a->nranks - 1) % a->nranks;
  return coll_error(COLL_ERR_MISMATCH, "rank %d called %s #%llu, rank %d called %s #%llu", prev,
                    theirs, (unsigned long long)a->know.bad_prev.seq, b, mine,
                    (unsigned long long)a->know.bad_mine.seq);
}
