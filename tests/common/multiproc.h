/* Helpers for multi-process tests: fork real rank processes, wait for all of them with a
 * deadline, and report in the parent which rank failed and how. */
#ifndef TESTS_COMMON_MULTIPROC_H
#define TESTS_COMMON_MULTIPROC_H

#include <stdint.h>

/* Body of one rank; return 0 for success, anything else for failure (it becomes the
 * child's exit code). Runs in a forked child. */
typedef int (*mp_rank_fn)(int rank, int nranks, void *arg);

/* Fork nranks children running fn and wait for all. Children still running after
 * timeout_ms are killed (SIGKILL). Returns 0 when every child exited 0; otherwise the
 * number of failed ranks, after printing one line per failed rank to stderr. */
int mp_run(int nranks, int timeout_ms, mp_rank_fn fn, void *arg);

/* A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, close). */
uint16_t mp_free_port(void);

#endif
