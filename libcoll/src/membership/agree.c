/* The agreement, the second link of surviving a lost rank (docs/elastic.md).
 *
 * It is decided in the store, which serialises it: the first decision written under
 * key_agree_decision (compare-and-set on an absent key) is the answer, and every member
 * reads that one, so no two members can ever act on different answers. Each member
 * writes its flag under key_agree_in and adds one to key_agree_count; the one that makes
 * the count reach the size decides at once (nobody failed). The others wait for the
 * decision in slices of SLICE_MS; after each slice they look who is in and who is alive
 * (base/liveness.c: a rank whose owned key is missing in two looks a slice apart, or
 * whose lease stood still for COLL_LEASE_DEAD_MS, is dead; on a store of leases, so is a
 * rank another member's connection to which broke: its key_dead). After a timeout, a rank
 * that the ranks which timed out were waiting for (their hang records name it) has
 * already been silent for a whole deadline: it is failed after a short grace (a twentieth
 * of the deadline) instead of a second deadline, so a SIGSTOPped rank costs the survivors
 * one deadline and a little, not two.
 * When every rank is in or dead, or when the agreement's deadline passed, the member that
 * looked writes the decision: the ranks not in are failed. A member that finds itself in
 * the failed set (it was stopped, or came late) gets COLL_ERR_FENCED. A member that has
 * waited a quarter of the deadline revokes the communicator (once): a rank still inside a
 * call on it, waiting for a stopped peer that had already sent the others all they
 * needed, stops and comes, instead of arriving after the deadline and being fenced. The
 * decider also writes key_dead for the failed ranks, so destroy never waits for them.
 * Joiners (lineage.c) are counted under the lineage's root: registered minus served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/store_keys.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "membership/membership.h"

enum { SLICE_MS = 20, DECISION_MAX = 1024, REVOKE_AFTER_PARTS = 4 };

typedef struct {
  uint32_t flag;
  int nfailed;
  int failed[COLL_AGREE_MAX_FAILED];
  int joiners;
} decision_t;

/* How long the decision's get may park: the rest of the deadline, at most a slice. */
static int slice_ms(int64_t deadline_ns) {
  int64_t left = (deadline_ns - coll_now_ns()) / 1000000;
  if (left < 1) left = 1;
  return left < SLICE_MS ? (int)left : SLICE_MS;
}

static bool key_exists(store_client_t *c, const char *key, int ms, coll_status_t *st) {
  bool exists = false;
  const char *keys[1] = {key};
  *st = store_check(c, keys, 1, &exists, ms);
  return *st == COLL_OK && exists;
}

/* A counter's value (absent: 0) without changing it. */
static coll_status_t read_counter(store_client_t *c, const char *key, int ms, int64_t *value) {
  return store_add(c, key, 0, value, ms);
}

coll_status_t member_joiners_waiting(const membership_t *m, store_client_t *c, int ms,
                                     int *waiting) {
  int64_t registered = 0, served = 0;
  store_key_t joiners = key_lineage_joiners(m->lineage_root);
  store_key_t taken = key_lineage_served(m->lineage_root);
  coll_status_t st = read_counter(c, joiners.text, ms, &registered);
  if (st == COLL_OK) st = read_counter(c, taken.text, ms, &served);
  *waiting = st == COLL_OK && registered > served ? (int)(registered - served) : 0;
  return st;
}

static void format_decision(const decision_t *d, char *out, size_t cap) {
  int len = snprintf(out, cap, "%u %d", d->flag, d->nfailed);
  for (int i = 0; i < d->nfailed && len > 0 && (size_t)len < cap; i++)
    len += snprintf(out + len, cap - (size_t)len, " %d", d->failed[i]);
  if (len > 0 && (size_t)len < cap) snprintf(out + len, cap - (size_t)len, " %d", d->joiners);
}

static bool parse_decision(const char *text, int nranks, decision_t *d) {
  char *end = NULL;
  const char *p = text;
  unsigned long flag = strtoul(p, &end, 10);
  if (end == p) return false;
  p = end;
  long nf = strtol(p, &end, 10);
  if (end == p || nf < 0 || nf > COLL_AGREE_MAX_FAILED) return false;
  d->flag = (uint32_t)flag;
  d->nfailed = (int)nf;
  for (int i = 0; i < d->nfailed; i++) {
    p = end;
    long r = strtol(p, &end, 10);
    if (end == p || r < 0 || r >= nranks) return false;
    d->failed[i] = (int)r;
  }
  p = end;
  long j = strtol(p, &end, 10);
  if (end == p || j < 0) return false;
  d->joiners = (int)j;
  return true;
}

/* Write the decision (the ranks not in are failed), or read the one written first. */
static coll_status_t decide(const coll_base_t *b, const membership_t *m, store_client_t *c,
                            uint64_t epoch, const bool *in, decision_t *out) {
  decision_t d = {.flag = ~0u};
  char text[DECISION_MAX];
  int ms = b->timeout_ms; /* a store op; the deadline bounds the waiting for ranks */
  coll_status_t st = COLL_OK;
  for (int r = 0; r < b->nranks && st == COLL_OK; r++) {
    if (!in[r]) {
      if (d.nfailed == COLL_AGREE_MAX_FAILED)
        return coll_error(COLL_ERR_UNSUPPORTED,
                          "rank %d: coll_comm_agree: more than %d ranks failed at once", b->rank,
                          COLL_AGREE_MAX_FAILED);
      d.failed[d.nfailed++] = r;
      continue;
    }
    store_key_t key = key_agree_in(b->key_prefix, epoch, r);
    void *value = NULL;
    size_t len = 0;
    st = store_get(c, key.text, &value, &len, ms);
    if (st == COLL_OK) {
      snprintf(text, sizeof text, "%.*s", (int)(len < 32 ? len : 31), (const char *)value);
      d.flag &= (uint32_t)strtoul(text, NULL, 10);
    }
    free(value);
  }
  if (st == COLL_OK && d.nfailed == 0) st = member_joiners_waiting(m, c, ms, &d.joiners);
  if (st != COLL_OK) return st;
  format_decision(&d, text, sizeof text);
  store_key_t key = key_agree_decision(b->key_prefix, epoch);
  void *current = NULL;
  size_t len = 0;
  st = store_compare_set(c, key.text, NULL, 0, text, strlen(text), &current, &len, ms);
  if (st != COLL_OK) return st;
  snprintf(text, sizeof text, "%.*s", (int)(len < DECISION_MAX ? len : DECISION_MAX - 1),
           current != NULL ? (const char *)current : "");
  free(current);
  if (!parse_decision(text, b->nranks, out))
    return coll_error(COLL_ERR_PROTOCOL, "rank %d: coll_comm_agree: malformed decision '%s'",
                      b->rank, text);
  /* The failed ranks' connections and keys are gone for good: say so to destroy. */
  for (int i = 0; i < out->nfailed && st == COLL_OK; i++) {
    store_key_t dead = key_dead(b->key_prefix, out->failed[i]);
    st = store_set(c, dead.text, "1", 1, ms);
  }
  return st;
}

/* What a member remembers between its looks at who is in. */
typedef struct {
  bool *in;                     /* rank r took part */
  liveness_tracker_t *trackers; /* rank r's liveness, look by look */
  bool *hang_read;              /* rank r's hang record was read (it no longer changes) */
  bool *waited;                 /* a rank that timed out was waiting for rank r */
  int64_t grace_at;             /* when a rank waited for through a deadline is failed */
} survey_t;

/* After a timeout: which ranks the ranks that are in were waiting for when they stopped
 * (their hang records, "seq|waiting peer|...", base/hang.c). Such a rank has already been
 * silent for a whole deadline: it gets a short grace, not another deadline. */
static coll_status_t note_waited(const coll_base_t *b, store_client_t *c, survey_t *s, int ms) {
  for (int q = 0; q < b->nranks; q++) {
    if (!s->in[q] || s->hang_read[q]) continue;
    char who[16];
    snprintf(who, sizeof who, "%d", q);
    store_key_t key = key_hang(b->key_prefix, who);
    coll_status_t st = COLL_OK;
    if (!key_exists(c, key.text, ms, &st)) {
      if (st != COLL_OK) return st;
      continue;
    }
    void *value = NULL;
    size_t len = 0;
    st = store_get(c, key.text, &value, &len, ms);
    if (st != COLL_OK) return st;
    char text[64];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1),
             (const char *)value);
    free(value);
    unsigned long long seq = 0;
    int peer = -1;
    if (sscanf(text, "%llu|%d|", &seq, &peer) == 2 && peer >= 0 && peer < b->nranks)
      s->waited[peer] = true;
    s->hang_read[q] = true;
  }
  return COLL_OK;
}

/* Who is in, and whether every rank is in, dead, or waited for through a whole deadline
 * (and its grace passed). */
static coll_status_t survey(const coll_base_t *b, store_client_t *c, uint64_t epoch, survey_t *s,
                            bool *settled) {
  int ms = b->timeout_ms; /* a store op; the deadline bounds the waiting for ranks */
  coll_status_t st = COLL_OK;
  bool *in = s->in;
  *settled = true;
  for (int r = 0; r < b->nranks; r++) {
    store_key_t key = key_agree_in(b->key_prefix, epoch, r);
    in[r] = key_exists(c, key.text, ms, &st);
    if (st != COLL_OK) return st;
  }
  if (base_failed(b) == COLL_ERR_TIMEOUT) {
    st = note_waited(b, c, s, ms);
    if (st != COLL_OK) return st;
  }
  bool graced = coll_now_ns() >= s->grace_at;
  for (int r = 0; r < b->nranks; r++) {
    if (in[r] || (s->waited[r] && graced)) continue;
    /* On a store of leases a dead rank's lease needs COLL_LEASE_DEAD_MS to stand still;
     * a peer whose connection to it broke has already said so (base/failure.c). */
    bool dead = false;
    if (!store_client_owns_keys(c)) {
      store_key_t gone = key_dead(b->key_prefix, r);
      dead = key_exists(c, gone.text, ms, &st);
      if (st != COLL_OK) return st;
    }
    if (!dead) st = liveness_observe(c, b->key_prefix, r, ms, &s->trackers[r], &dead);
    if (st != COLL_OK) return st;
    if (!dead) *settled = false;
  }
  return COLL_OK;
}

static void survey_free(survey_t *s) {
  free(s->in);
  free(s->trackers);
  free(s->hang_read);
  free(s->waited);
}

/* The grace of a rank the others timed out waiting for: a twentieth of the agreement's
 * deadline, two slices at least. The ranks that are merely stopped by the failure come
 * within milliseconds (their watchers stop them), so this only bounds how late a healthy
 * rank still computing its step may come. */
static int64_t waited_grace_ms(int64_t bound) {
  int64_t grace = bound / 20;
  return grace > 2 * SLICE_MS ? grace : 2 * SLICE_MS;
}

static coll_status_t agree_ms(const coll_base_t *b, int64_t *ms) {
  return coll_env_int("COLL_AGREE_MS", 1, INT32_MAX / 2, b->timeout_ms, ms);
}

static coll_status_t agree(coll_base_t *b, membership_t *m, decision_t *d, uint32_t flag) {
  uint64_t epoch = ++m->agree_epoch;
  int64_t start = coll_now_ns();
  int64_t bound = 0;
  coll_status_t st = agree_ms(b, &bound);
  if (st != COLL_OK) return st;
  int64_t deadline = coll_deadline_ns((int)bound);
  /* Ranks missing this long may be stuck in a call on comm (waiting for a stopped rank
   * that had sent them nothing more): revoke it, so that they stop and come. */
  int64_t revoke_at = coll_deadline_ns((int)(bound / REVOKE_AFTER_PARTS));
  bool revoked = false;
  store_client_t *c = NULL;
  st = member_store(b, m, &c);
  if (st != COLL_OK) return st;
  char text[32];
  store_key_t mine = key_agree_in(b->key_prefix, epoch, b->rank);
  snprintf(text, sizeof text, "%u", flag);
  st = store_set(c, mine.text, text, strlen(text), b->timeout_ms);
  int64_t arrived = 0;
  store_key_t count = key_agree_count(b->key_prefix, epoch);
  if (st == COLL_OK) st = store_add(c, count.text, 1, &arrived, b->timeout_ms);
  if (st != COLL_OK) return st;
  survey_t s = {.in = calloc((size_t)b->nranks, sizeof *s.in),
                .trackers = calloc((size_t)b->nranks, sizeof *s.trackers),
                .hang_read = calloc((size_t)b->nranks, sizeof *s.hang_read),
                .waited = calloc((size_t)b->nranks, sizeof *s.waited),
                .grace_at = start + waited_grace_ms(bound) * 1000000};
  if (s.in == NULL || s.trackers == NULL || s.hang_read == NULL || s.waited == NULL) {
    survey_free(&s);
    return coll_error(COLL_ERR_NO_MEMORY, "coll_comm_agree: out of memory");
  }
  if (arrived >= b->nranks) {
    for (int r = 0; r < b->nranks; r++) s.in[r] = true;
    st = decide(b, m, c, epoch, s.in, d);
    survey_free(&s);
    return st;
  }
  store_key_t decision = key_agree_decision(b->key_prefix, epoch);
  for (;;) {
    void *value = NULL;
    size_t len = 0;
    st = store_get(c, decision.text, &value, &len, slice_ms(deadline));
    if (st == COLL_OK) {
      char dtext[DECISION_MAX];
      snprintf(dtext, sizeof dtext, "%.*s", (int)(len < DECISION_MAX ? len : DECISION_MAX - 1),
               (const char *)value);
      free(value);
      if (!parse_decision(dtext, b->nranks, d))
        st = coll_error(COLL_ERR_PROTOCOL, "rank %d: coll_comm_agree: malformed decision '%s'",
                        b->rank, dtext);
      break;
    }
    free(value);
    if (st != COLL_ERR_TIMEOUT) break;
    bool settled = false;
    st = survey(b, c, epoch, &s, &settled);
    if (st != COLL_OK) break;
    if (settled || coll_now_ns() >= deadline) {
      st = decide(b, m, c, epoch, s.in, d);
      break;
    }
    if (!revoked && coll_now_ns() >= revoke_at) {
      revoked = true;
      st = member_revoke(b);
      if (st != COLL_OK) break;
    }
  }
  survey_free(&s);
  return st;
}

coll_status_t member_agree(coll_base_t *b, membership_t *m, coll_agreement_t *agreement) {
  decision_t d = {.flag = agreement->flag};
  coll_status_t st = COLL_OK;
  if (b->nranks > 1) {
    st = agree(b, m, &d, agreement->flag);
    if (st != COLL_OK)
      return coll_error_prefix(st, "rank %d: coll_comm_agree #%llu: ", b->rank,
                               (unsigned long long)m->agree_epoch);
    for (int i = 0; i < d.nfailed; i++)
      if (d.failed[i] == b->rank)
        return coll_error(COLL_ERR_FENCED,
                          "rank %d: coll_comm_agree #%llu: the other ranks declared this rank "
                          "failed (it did not take part in time); it must stop using this "
                          "communicator and those made from it",
                          b->rank, (unsigned long long)m->agree_epoch);
  } else if (store_place_known(&b->store_place) && m->lineage_root[0] != '\0') {
    /* Alone, nobody to agree with; but replacements may wait for this rank to grow. */
    store_client_t *c = NULL;
    st = member_store(b, m, &c);
    if (st == COLL_OK) st = member_joiners_waiting(m, c, b->timeout_ms, &d.joiners);
    if (st != COLL_OK) return coll_error_prefix(st, "rank 0: coll_comm_agree (alone): ");
  }
  agreement->flag = d.flag;
  agreement->nfailed = d.nfailed;
  memcpy(agreement->failed, d.failed, (size_t)d.nfailed * sizeof d.failed[0]);
  agreement->joiners = d.joiners;
  coll_error_clear();
  return COLL_OK;
}
