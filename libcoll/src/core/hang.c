/* The hang report: when an operation's deadline passes, each rank publishes through the
 * store where it is (collective, sequence number, step, the peer it waits on); rank 0
 * waits briefly for the others, names the ranks that are behind or silent, logs the
 * report at WARN, appends it to its error message, publishes it for the others (which
 * wait for it, briefly, so that no rank exits and makes a launcher stop the job before
 * the report exists) and, when COLL_HANG_REPORT names a file (collrun sets it), writes it
 * there for the launcher's exit message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "core/comm.h"

enum { KEY_MAX = 128, LINE_MAX_ = 200, REPORT_MAX = 2048, POLL_MS = 20 };

/* "all_reduce(float32, 1000) #5, step 3 of 8, waiting for rank 1 (receive)" */
static void describe(const coll_comm_t *comm, char *out, size_t cap) {
  const exec_state_t *s = &comm->exec.state;
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

/* Rank 0: gather what the others published within a short grace period. */
/* How long rank 0 waits for the others' states. */
static int grace_ms(const coll_comm_t *comm) {
  int grace = comm->timeout_ms / 2 < 2000 ? comm->timeout_ms / 2 : 2000;
  return grace < 200 ? 200 : grace;
}

static void collect(coll_comm_t *comm, const char *saved, const char *mine) {
  int n = comm->nranks;
  int64_t deadline = coll_deadline_ns(grace_ms(comm));
  char *report = malloc(REPORT_MAX);
  unsigned long long *seqs = calloc((size_t)n, sizeof *seqs);
  char *present = calloc((size_t)n, 1);
  char (*lines)[LINE_MAX_] = calloc((size_t)n, LINE_MAX_);
  if (report == NULL || seqs == NULL || present == NULL || lines == NULL) goto out;
  present[0] = 1;
  seqs[0] = comm->exec.state.seq;
  snprintf(lines[0], LINE_MAX_, "%s", mine);
  int missing = n - 1;
  while (missing > 0) {
    for (int r = 1; r < n; r++) {
      if (present[r]) continue;
      char key[KEY_MAX];
      snprintf(key, sizeof key, "%shang/%d", comm->key_prefix, r);
      const char *keys[1] = {key};
      bool exists = false;
      if (store_check(comm->store, keys, 1, &exists, 500) != COLL_OK || !exists) continue;
      void *val = NULL;
      size_t len = 0;
      if (store_get(comm->store, key, &val, &len, 500) != COLL_OK) continue;
      char text[LINE_MAX_ + 32];
      snprintf(text, sizeof text, "%.*s", (int)len, (const char *)val);
      free(val);
      char *bar = strchr(text, '|');
      seqs[r] = strtoull(text, NULL, 10);
      snprintf(lines[r], LINE_MAX_, "%.*s", LINE_MAX_ - 1, bar ? bar + 1 : text);
      present[r] = 1;
      missing--;
    }
    if (missing == 0 || coll_now_ns() > deadline) break;
    usleep(POLL_MS * 1000);
  }
  unsigned long long newest = 0;
  for (int r = 0; r < n; r++)
    if (present[r] && seqs[r] > newest) newest = seqs[r];
  int len = snprintf(report, REPORT_MAX, "hang report (%d ranks):", n);
  for (int r = 0; r < n && len > 0 && len < REPORT_MAX; r++) {
    if (!present[r])
      len += snprintf(report + len, REPORT_MAX - (size_t)len,
                      "\n  rank %d: NO REPORT (stopped, dead, or blocked outside libcoll)", r);
    else
      len += snprintf(report + len, REPORT_MAX - (size_t)len, "\n  rank %d: %s%s", r, lines[r],
                      seqs[r] < newest ? " [BEHIND]" : "");
  }
  if (len > 0 && len < REPORT_MAX) {
    int behind = 0;
    for (int r = 0; r < n; r++) behind += !present[r] || seqs[r] < newest;
    snprintf(report + len, REPORT_MAX - (size_t)len, "\n  %d rank(s) behind or silent", behind);
  }
  coll_log(COLL_LOG_WARN, "%s", report);
  write_file(report);
  char key[KEY_MAX];
  snprintf(key, sizeof key, "%shang/report", comm->key_prefix);
  store_set(comm->store, key, report, strlen(report), 500);
  coll_error(COLL_ERR_TIMEOUT, "%s; %s", saved, report);
  free(report);
  report = NULL;
out:
  if (report != NULL) coll_error(COLL_ERR_TIMEOUT, "%s", saved);
  free(report);
  free(seqs);
  free(present);
  free(lines);
}

void hang_report(coll_comm_t *comm) {
  if (comm->store == NULL || comm->nranks < 2) return;
  char saved[COMM_MESSAGE_MAX];
  snprintf(saved, sizeof saved, "%s", coll_last_error());
  char mine[LINE_MAX_], value[LINE_MAX_ + 32], key[KEY_MAX];
  describe(comm, mine, sizeof mine);
  snprintf(value, sizeof value, "%llu|%s", (unsigned long long)comm->exec.state.seq, mine);
  snprintf(key, sizeof key, "%shang/%d", comm->key_prefix, comm->rank);
  int quick = comm->timeout_ms < 1000 ? comm->timeout_ms : 1000;
  if (store_set(comm->store, key, value, strlen(value), quick) != COLL_OK) {
    coll_error(COLL_ERR_TIMEOUT, "%s (no hang report: the store is unreachable)", saved);
    return;
  }
  if (comm->rank == 0) {
    collect(comm, saved, mine);
    return;
  }
  /* Wait for rank 0's report (it may be the one that is stuck: then give up). */
  snprintf(key, sizeof key, "%shang/report", comm->key_prefix);
  void *report = NULL;
  size_t len = 0;
  if (store_get(comm->store, key, &report, &len, grace_ms(comm) + 1000) == COLL_OK)
    coll_error(COLL_ERR_TIMEOUT, "%s; rank 0's %.*s", saved, (int)len, (const char *)report);
  else
    coll_error(COLL_ERR_TIMEOUT, "%s", saved);
  free(report);
}
