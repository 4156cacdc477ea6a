/* Helpers of the 'coll' suite: start a communicator in a forked rank, fill inputs with
 * values every rank can recompute, check results against a float64 (or exact integer)
 * reference, and agree that every rank's result is bit-identical. */
#ifndef TESTS_COLL_TEST_UTIL_H
#define TESTS_COLL_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

typedef struct {
  uint16_t port;         /* store port; rank 0 hosts the store unless store_elsewhere */
  const char *transport; /* COLL_TRANSPORT value, NULL: automatic */
  int timeout_ms;        /* 0: 30 s */
  const char *chunk;     /* COLL_CHUNK_SIZE value (bytes per pipelined segment), NULL: default */
  bool store_elsewhere;  /* the test (as a launcher would) hosts the store, not rank 0 */
  bool caller_store;     /* reach that store as the caller's (caller_store.h: leases, no
                          * owned keys), not as libcoll's own; needs store_elsewhere */
} ct_job_t;

/* In a Check test: call returns COLL_ERR_INVALID_ARGUMENT and its message holds needle
 * (needs <check.h> and <string.h>). */
#define EXPECT_INVALID(call, needle)                                                      \
  do {                                                                                    \
    ck_assert_int_eq((call), COLL_ERR_INVALID_ARGUMENT);                                  \
    ck_assert_msg(strstr(coll_last_error(), (needle)) != NULL, "message '%s' lacks '%s'", \
                  coll_last_error(), (needle));                                           \
  } while (0)

/* Clear launcher/COLL_* variables inherited from the test's environment, set the job's,
 * and create the communicator. Prints the error and returns non-zero on failure. */
int ct_init(const ct_job_t *job, int rank, int nranks, coll_comm_t **comm);
/* The body of a rank on the communicator ct_run made for it from the job: 0, or 1 after
 * printing what failed. The communicator is the body's to destroy (or abort) as its
 * checks need. */
typedef int (*ct_body_fn)(coll_comm_t *comm, int rank, int nranks);
typedef int (*ct_body_arg_fn)(coll_comm_t *comm, int rank, int nranks, void *arg);

/* mp_run of n ranks, each starting with ct_init(job) (NULL: a job of its own with the
 * defaults and a fresh port) and running body on the communicator; returns mp_run's count
 * of failed ranks (a rank whose init failed is one). */
int ct_run(int n, int timeout_ms, const ct_job_t *job, ct_body_fn body);
/* The same with arg passed to the body. */
int ct_run_arg(int n, int timeout_ms, const ct_job_t *job, ct_body_arg_fn body, void *arg);
/* The same with each rank's communicator made by init(arg, ...) (a suite's own set-up:
 * its variables, then ct_init) instead of ct_init; init prints why it failed. */
typedef int (*ct_init_fn)(const void *arg, int rank, int nranks, coll_comm_t **comm);
int ct_run_init(int n, int timeout_ms, ct_init_fn init, ct_body_arg_fn body, void *arg);

/* Unset every launcher variable and COLL_* job setting the library reads
 * (launcher_env_clear). */
void ct_clean_env(void);

/* Whether op takes dtype (the bitwise ops: integer types only); loops over every
 * (dtype, op) skip the others. */
bool ct_op_applies(coll_dtype_t dtype, coll_op_t op);
/* Fill buf with rank's input for (dtype, op); salt varies the data between calls
 * (bitwise ops: random bits over the whole element). */
void ct_fill(void *buf, size_t count, coll_dtype_t dtype, coll_op_t op, int rank, uint32_t salt);
/* Number of elements of out that differ from the all-reduce of every rank's ct_fill
 * input (integers exact, bitwise ops too; floats within the tolerance documented in the
 * .c). Prints the first bad element with `what`. */
size_t ct_check_all_reduce(const void *out, size_t count, coll_dtype_t dtype, coll_op_t op,
                           int nranks, uint32_t salt, const char *what);
/* Number of elements of buf that differ from root's ct_fill(..., COLL_SUM, root, salt). */
size_t ct_check_broadcast(const void *buf, size_t count, coll_dtype_t dtype, int root,
                          uint32_t salt, const char *what);
/* One all-reduce of count elements of ct_fill input (in place or not), checked against
 * the reference and agreed bit for bit by every rank: 0, or 1 after printing what failed
 * (tag names the case). */
int ct_all_reduce(coll_comm_t *comm, int rank, int nranks, size_t count, coll_dtype_t dt,
                  coll_op_t op, int in_place, uint32_t salt, const char *tag);
/* Bytes every rank can recompute: message `seed` (point-to-point tests). */
void ct_fill_bytes(unsigned char *b, size_t n, unsigned seed);
/* 0 when b holds ct_fill_bytes(n, seed); else prints the first bad byte and returns 1. */
int ct_check_bytes(const unsigned char *b, size_t n, unsigned seed, int rank, const char *what);
/* 0 on COLL_OK; else prints the status and coll_last_error() and returns 1. */
int ct_ok(int rank, const char *what, coll_status_t st);
/* COLL_TRACE for this rank's next communicator: /tmp/<stem>-<parent's pid>.json (the
 * library writes one file per rank, .rank<N>.json). */
void ct_trace_to(const char *stem);
/* After the communicator is destroyed: COLL_TRACE unset, and rank's trace file read
 * (malloc'ed text; NULL when there is none) and removed. */
char *ct_trace_take(const char *stem, int rank);
/* Sleep ms milliseconds (the rest of it too, when a signal cuts it short). */
void ct_sleep_ms(int ms);
/* 0 when every rank holds the same bytes (hash agreed with MIN and MAX all-reduces). */
int ct_agree(coll_comm_t *comm, const void *buf, size_t bytes, const char *what);

#endif
