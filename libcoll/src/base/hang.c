/* The hang report: when an operation's deadline passes, the rank whose deadline it was
 * publishes where it is through the store (collective, sequence number, step, the peer
 * it waits on) and records the failure, which stops every other rank within a store
 * round trip (failure_watch.c); those publish where they were too. The first rank
 * gathers the states for a short grace, names the ranks that are behind (silent, or at
 * an older collective) and the chain of waits that leads to them, and publishes the
 * report; the first report published is the one every rank appends to its error and the
 * one written to COLL_HANG_REPORT (collrun sets it and prints it on exit). Any rank can
 * write it, so a stopped rank 0 is reported like any other. Every store call here is
 * short (base_failure_store_ms), so the error comes within the deadline plus about
 * GRACE_MAX_MS and a few of those. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/store_keys.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

enum {
  LINE_MAX_ = 200,
  REPORT_MAX = 2048,
  POLL_MS = 5,
  GRACE_MIN_MS = 50,
  GRACE_MAX_MS = 200,
};

/* How long the reporting rank waits for the others' states. */
static int grace_ms(const coll_base_t *base) {
  int g = base->timeout_ms / 10;
  return g < GRACE_MIN_MS ? GRACE_MIN_MS : g > GRACE_MAX_MS ? GRACE_MAX_MS : g;
}

/* "all_reduce(float32, 1000) #5 on host, step 3 of 8, waiting for rank 1 (receive)" */
static void describe(const coll_base_t *base, char *out, size_t cap) {
  const base_where_t *s = &base->where;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  int n = snprintf(out, cap, "%s(%s, %zu) #%llu on %s, step %zu of %zu", sched_kind_name(s->kind),
                   coll_dtype_name(s->dtype) ? coll_dtype_name(s->dtype) : "?", s->count,
                   (unsigned long long)s->seq, host, s->step, s->nsteps);
  if (n > 0 && (size_t)n < cap && s->waiting_peer >= 0)
    snprintf(out + n, cap - (size_t)n, ", waiting for rank %d (%s)", s->waiting_peer,
             s->waiting_what ? s->waiting_what : "?");
}

static void write_file(const char *report) {
  const char *path = coll_env_str("COLL_HANG_REPORT");
  if (path == NULL || path[0] == '\0') return;
  FILE *f = fopen(path, "w");
  if (f == NULL) return;
  fputs(report, f);
  fclose(f);
}

/* The hang key of rank r. */
static store_key_t rank_key(const coll_base_t *base, int r) {
  char who[16];
  snprintf(who, sizeof who, "%d", r);
  return key_hang(base->key_prefix, who);
}

bool hang_publish(coll_base_t *base) {
  if (base->store == NULL || base->nranks < 2) return false;
  char mine[LINE_MAX_], value[LINE_MAX_ + 48];
  describe(base, mine, sizeof mine);
  /* "seq|waiting peer|description" */
  snprintf(value, sizeof value, "%llu|%d|%s", (unsigned long long)base->where.seq,
           base->where.waiting_peer, mine);
  store_key_t key = rank_key(base, base->rank);
  char saved[BASE_MESSAGE_MAX];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  bool ok = store_set(base->store, key.text, value, strlen(value), base_failure_store_ms(base)) ==
            COLL_OK;
  coll_error(COLL_ERR_TIMEOUT, "%s", saved);
  return ok;
}

/* What the gathering rank knows of every rank. */
typedef struct {
  bool present;
  unsigned long long seq;
  int waits_for;
  char line[LINE_MAX_];
} rank_state_t;

static bool read_state(coll_base_t *base, int r, rank_state_t *out) {
  store_key_t key = rank_key(base, r);
  const char *keys[1] = {key.text};
  bool exists = false;
  if (store_check(base->store, keys, 1, &exists, base_failure_store_ms(base)) != COLL_OK || !exists)
    return false;
  void *val = NULL;
  size_t len = 0;
  if (store_get(base->store, key.text, &val, &len, base_failure_store_ms(base)) != COLL_OK)
    return false;
  char text[LINE_MAX_ + 48];
  snprintf(text, sizeof text, "%.*s", (int)len, (const char *)val);
  free(val);
  char *bar1 = strchr(text, '|');
  char *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
  if (bar2 == NULL) return false;
  out->present = true;
  out->seq = strtoull(text, NULL, 10);
  out->waits_for = atoi(bar1 + 1);
  snprintf(out->line, sizeof out->line, "%s", bar2 + 1);
  return true;
}

/* The report: every rank's line, the ranks behind, and from this rank the chain of waits
 * that ends at one of them ("rank 2 waits for rank 1, which waits for rank 0"). */
static void build(const coll_base_t *base, const rank_state_t *st, char *out, size_t cap) {
  int n = base->nranks;
  unsigned long long newest = 0;
  for (int r = 0; r < n; r++)
    if (st[r].present && st[r].seq > newest) newest = st[r].seq;
  char behind[256] = "";
  int nbehind = 0, len = 0;
  for (int r = 0; r < n; r++) {
    if (st[r].present && st[r].seq >= newest) continue;
    len += snprintf(behind + len, sizeof behind - (size_t)len, "%s%d", nbehind ? ", " : "", r);
    nbehind++;
    if ((size_t)len >= sizeof behind) break;
  }
  int w = snprintf(out, cap, "hang report (%d ranks): ", n);
  if (nbehind == 0)
    w += snprintf(out + w, cap - (size_t)w,
                  "no rank is behind (every rank waits inside "
                  "collective #%llu)",
                  newest);
  else
    w += snprintf(out + w, cap - (size_t)w,
                  "%s %s %s behind (silent: stopped, dead or blocked "
                  "outside libcoll; or at an older collective)",
                  nbehind == 1 ? "rank" : "ranks", behind, nbehind == 1 ? "is" : "are");
  /* From this rank, follow who waits for whom until a rank that is behind. */
  int at = base->rank, steps = 0;
  if (nbehind > 0 && (size_t)w < cap) w += snprintf(out + w, cap - (size_t)w, "; rank %d", at);
  while (nbehind > 0 && steps++ < n && (size_t)w < cap) {
    int next = st[at].present ? st[at].waits_for : -1;
    if (next < 0 || next >= n) break;
    bool last = !st[next].present || st[next].seq < newest;
    w += snprintf(out + w, cap - (size_t)w, "%s rank %d",
                  steps == 1 ? " waits for" : ", which waits for", next);
    if (last) break;
    at = next;
  }
  for (int r = 0; r < n && (size_t)w < cap; r++) {
    if (!st[r].present)
      w += snprintf(out + w, cap - (size_t)w,
                    "\n  rank %d: NO REPORT (stopped, dead, or blocked outside libcoll)", r);
    else
      w += snprintf(out + w, cap - (size_t)w, "\n  rank %d: %s%s", r, st[r].line,
                    st[r].seq < newest ? " [BEHIND]" : "");
  }
  if ((size_t)w < cap)
    snprintf(out + w, cap - (size_t)w, "\n  %d rank(s) behind or silent", nbehind);
}

void hang_collect(coll_base_t *base, bool store_ok) {
  if (base->store == NULL || base->nranks < 2) return;
  char saved[BASE_MESSAGE_MAX];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  if (!store_ok) {
    coll_error(COLL_ERR_TIMEOUT, "%s (no hang report: the store is unreachable)", saved);
    return;
  }
  int n = base->nranks;
  rank_state_t *st = calloc((size_t)n, sizeof *st);
  char *report = malloc(REPORT_MAX);
  if (st == NULL || report == NULL) goto out;
  const base_where_t *me = &base->where;
  char mine[LINE_MAX_];
  describe(base, mine, sizeof mine);
  st[base->rank] = (rank_state_t){.present = true, .seq = me->seq, .waits_for = me->waiting_peer};
  snprintf(st[base->rank].line, sizeof st[base->rank].line, "%s", mine);
  int64_t deadline = coll_deadline_ns(grace_ms(base));
  for (;;) {
    int missing = 0;
    for (int r = 0; r < n; r++)
      if (!st[r].present && !read_state(base, r, &st[r])) missing++;
    if (missing == 0 || coll_now_ns() > deadline) break;
    usleep(POLL_MS * 1000);
  }
  build(base, st, report, REPORT_MAX);
  store_key_t key = key_hang(base->key_prefix, "report");
  void *first = NULL;
  size_t first_len = 0;
  coll_status_t s = store_compare_set(base->store, key.text, NULL, 0, report, strlen(report),
                                      &first, &first_len, base_failure_store_ms(base));
  bool ours = s != COLL_OK || first == NULL ||
              (first_len == strlen(report) && memcmp(first, report, first_len) == 0);
  if (ours) {
    coll_log(COLL_LOG_WARN, "%s", report);
    write_file(report);
    coll_error(COLL_ERR_TIMEOUT, "%s; %s", saved, report);
  } else {
    coll_error(COLL_ERR_TIMEOUT, "%s; %.*s", saved, (int)first_len, (const char *)first);
  }
  free(first);
out:
  if (report == NULL || st == NULL) coll_error(COLL_ERR_TIMEOUT, "%s", saved);
  free(report);
  free(st);
}

void hang_join(coll_base_t *base) {
  if (base->store == NULL || base->nranks < 2) return;
  char saved[BASE_MESSAGE_MAX];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  if (!hang_publish(base)) return;
  store_key_t key = key_hang(base->key_prefix, "report");
  void *report = NULL;
  size_t len = 0;
  if (store_get(base->store, key.text, &report, &len,
                grace_ms(base) + 2 * base_failure_store_ms(base)) == COLL_OK)
    coll_error(COLL_ERR_TIMEOUT, "%s; %.*s", saved, (int)len, (const char *)report);
  else
    coll_error(COLL_ERR_TIMEOUT, "%s", saved);
  free(report);
}
