/* Checks for the body of a rank (a forked process or a thread, with `rank` in scope) in
 * the programs written only against nccl.h: tests/nccl and tests/gpu/nccl_premul_device,
 * built against our nccl.h and NVIDIA's. On failure each prints one line naming the rank,
 * the place and what failed, and returns 1 from the body. */
#ifndef TESTS_COMMON_NCCL_CHECK_H
#define TESTS_COMMON_NCCL_CHECK_H

#include <stdio.h>
#include <string.h>

#include "nccl.h"

/* The call returns ncclSuccess. */
#define CHECK_NCCL(call)                                                                \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      fprintf(stderr, "rank %d: %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__, #call, \
              ncclGetErrorString(r_), ncclGetLastError(NULL));                          \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

/* cond holds; the rest is a printf message saying what was seen. */
#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "rank %d: %s:%d: %s: ", rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                             \
      fputc('\n', stderr);                                                      \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

/* The call returns `want` and the last error of comm contains `text`. */
#define CHECK_REFUSED(call, want, comm, text)                                                  \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    const char *m_ = ncclGetLastError(comm);                                                   \
    CHECK(r_ == (want) && strstr(m_, text) != NULL, "%s returned %d (%s), want %d and \"%s\"", \
          #call, (int)r_, m_, (int)(want), text);                                              \
  } while (0)

#endif
