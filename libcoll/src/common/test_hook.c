/* COLL_TEST_KILL_AT (test_hook.h): parsed once, then each entry counts its point's calls
 * and raises its signal on the n-th. Used only by tests; a malformed value is reported
 * once on stderr and ignored (the hook must never change what a real job does). */
#include "common/test_hook.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_ENTRIES = 8, POINT_MAX = 16 };

typedef struct {
  char point[POINT_MAX];
  long nth;
  int sig;
  atomic_long calls;
} entry_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_bool armed; /* false until parsed, and forever when unset */
static entry_t entries[MAX_ENTRIES];
static int nentries;

static int parse_signal(const char *name) {
  if (strcmp(name, "KILL") == 0) return SIGKILL;
  if (strcmp(name, "STOP") == 0) return SIGSTOP;
  if (strcmp(name, "TERM") == 0) return SIGTERM;
  return 0;
}

/* Whether "@R" / "@jR" selects this process. */
static bool selects_me(const char *sel) {
  if (sel == NULL) return true;
  const char *join = getenv("COLL_ELASTIC_JOIN");
  bool joiner = join != NULL && strcmp(join, "1") == 0;
  bool want_joiner = sel[0] == 'j';
  if (want_joiner) sel++;
  const char *rank = getenv("RANK");
  return joiner == want_joiner && rank != NULL && strcmp(rank, sel) == 0;
}

static bool parse_entry(char *text, entry_t *e) {
  char *at = strchr(text, '@');
  if (at != NULL) *at++ = '\0';
  char *fields[3] = {text, NULL, NULL};
  for (int i = 1; i < 3 && fields[i - 1] != NULL; i++) {
    char *colon = strchr(fields[i - 1], ':');
    if (colon != NULL) {
      *colon = '\0';
      fields[i] = colon + 1;
    }
  }
  char *end = NULL;
  if (fields[1] == NULL || strlen(fields[0]) >= POINT_MAX) return false;
  long nth = strtol(fields[1], &end, 10);
  if (end == fields[1] || *end != '\0' || nth < 1) return false;
  int sig = fields[2] != NULL ? parse_signal(fields[2]) : SIGKILL;
  if (sig == 0) return false;
  if (!selects_me(at)) {
    e->point[0] = '\0'; /* valid, but not for this process */
    return true;
  }
  snprintf(e->point, sizeof e->point, "%s", fields[0]);
  e->nth = nth;
  e->sig = sig;
  return true;
}

static void parse(void) {
  const char *value = getenv("COLL_TEST_KILL_AT");
  if (value == NULL || value[0] == '\0') return;
  char copy[512];
  snprintf(copy, sizeof copy, "%s", value);
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    entry_t e = {0};
    if (!parse_entry(tok, &e) || nentries == MAX_ENTRIES) {
      fprintf(stderr, "COLL_TEST_KILL_AT: ignoring malformed entry '%s'\n", tok);
      continue;
    }
    if (e.point[0] != '\0') entries[nentries++] = e;
  }
  atomic_store(&armed, nentries > 0);
}

void coll_test_hook(const char *point) {
  pthread_once(&once, parse);
  if (!atomic_load_explicit(&armed, memory_order_relaxed)) return;
  for (int i = 0; i < nentries; i++) {
    entry_t *e = &entries[i];
    if (strcmp(e->point, point) != 0) continue;
    if (atomic_fetch_add(&e->calls, 1) + 1 != e->nth) continue;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const char *rank = getenv("RANK");
    fprintf(stderr, "COLL_TEST_KILL_AT: rank %s pid %d raises SIG%s at %s #%ld t=%.6f\n",
            rank != NULL ? rank : "?", (int)getpid(), sigabbrev_np(e->sig), point, e->nth,
            (double)ts.tv_sec + ts.tv_nsec * 1e-9);
    fflush(stderr);
    raise(e->sig);
  }
}
