/* Running a real collrun process from a test: start it with its stdout and stderr on
 * pipes, read them (with deadlines) while it runs, signal it, and collect its exit. */
#ifndef TESTS_COLLRUN_HARNESS_H
#define TESTS_COLLRUN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
  pid_t pid;
  int out_fd; /* -1 at EOF */
  int err_fd;
  char *out; /* everything read so far, NUL-terminated */
  size_t out_len;
  char *err;
  size_t err_len;
  int status;       /* wait status once finished */
  double elapsed_s; /* from start to exit */
  double start_s;
} run_t;

/* Start `collrun ARGS...` (NULL-terminated) with the path of the built collrun. */
void run_start(run_t *run, const char *collrun, const char *const *args);
/* Read until stdout holds `count` occurrences of `needle`; false at EOF or timeout. */
bool run_wait_for(run_t *run, const char *needle, int count, int timeout_ms);
/* Read to EOF and reap; a collrun still running after timeout_ms is killed and the test
 * fails. */
void run_finish(run_t *run, int timeout_ms);
void run_free(run_t *run);

/* Occurrences of needle in text. */
int count_of(const char *text, const char *needle);
/* The integer after "NAME=" in line, or -1. */
long field_long(const char *line, const char *name);
/* Whether a process with this pid exists and is not a zombie. */
bool process_alive(pid_t pid);
/* Wait (bounded) for a pid to disappear. */
bool process_gone_within(pid_t pid, int timeout_ms);

#endif
