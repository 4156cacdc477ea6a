/* reduce, all_gather, reduce_scatter, all_to_all, barrier, send/recv and groups, and
 * split over real forked ranks, the real store and real transports (shm, tcp), 1 to 8
 * ranks: every type, each with one reducing op per call (rotating), small-integer data
 * so that every rank can compute the exact expected result; blocking and asynchronous
 * forms, in-place forms, every forced algorithm. Bad arguments to each new call. The
 * reductions on host buffers at odd byte offsets (any alignment), arena and windows too. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "elements.h"
#include "mem/half_inline.h"
#include "mem/memops.h"
#include "multiproc.h"
#include "suite_run.h"

typedef struct {
  ct_job_t job;
  int variant;
} case_t;

static bool is_unsigned(coll_dtype_t dt) {
  return dt == COLL_UINT8 || dt == COLL_UINT32 || dt == COLL_UINT64;
}
static bool is_float(coll_dtype_t dt) { return dt >= COLL_FLOAT16; }
static bool is_fp8(coll_dtype_t dt) { return dt == COLL_FLOAT8E4M3 || dt == COLL_FLOAT8E5M2; }

/* Rank r's input element i: a small integer, exact in every type. fp8: -1, 0 or 1, so
 * that a sum over 8 ranks, in any order, stays exact (e5m2 holds the integers to 8). */
static double value(coll_dtype_t dt, int rank, size_t i, int salt) {
  int v = (int)((rank * 7 + i * 3 + (size_t)salt) % 7);
  if (is_fp8(dt)) return v % 3 - 1;
  return is_unsigned(dt) ? v : v - 3;
}

/* The op used with dt: products only where 7^8 fits exactly, averages only for floats. */
static coll_op_t op_for(coll_dtype_t dt, int turn) {
  static const coll_op_t ops[] = {COLL_SUM, COLL_MAX, COLL_MIN, COLL_PROD, COLL_AVG};
  coll_op_t op = ops[turn % 5];
  if (op == COLL_PROD && !(dt == COLL_INT32 || dt == COLL_INT64 || dt == COLL_FLOAT64))
    op = COLL_SUM;
  if (op == COLL_AVG && !is_float(dt)) op = COLL_MAX;
  return op;
}

static double reduce_ref(coll_dtype_t dt, coll_op_t op, int n, size_t i, int salt) {
  double acc = value(dt, 0, i, salt);
  for (int r = 1; r < n; r++) {
    double v = value(dt, r, i, salt);
    acc = op == COLL_PROD  ? acc * v
          : op == COLL_MIN ? fmin(acc, v)
          : op == COLL_MAX ? fmax(acc, v)
                           : acc + v;
  }
  return op == COLL_AVG ? acc / n : acc;
}

static bool close_to(coll_dtype_t dt, double got, double want) {
  if (!is_float(dt)) return got == want;
  /* fp8 sums are exact (see value); an average is the exact mean rounded once */
  if (is_fp8(dt)) return got == mem_fp8_to_float(mem_double_to_fp8(want, dt), dt);
  double tol = dt == COLL_FLOAT16 || dt == COLL_BFLOAT16 ? 2e-2 : 1e-6;
  return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

static int check(const char *what, int rank, const void *buf, coll_dtype_t dt, size_t i,
                 double want) {
  double got = elem_get(buf, i, dt);
  if (close_to(dt, got, want)) return 0;
  fprintf(stderr, "rank %d: %s %s: element %zu is %g, want %g\n", rank, what, coll_dtype_name(dt),
          i, got, want);
  return 1;
}

static int status_ok(const char *what, int rank, coll_status_t st) {
  if (st == COLL_OK) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_status_name(st), coll_last_error());
  return 1;
}

/* One call of each collective on dt with `count` elements per rank; 0 on success. */
static int one_round(coll_comm_t *comm, int rank, int n, coll_dtype_t dt, size_t count, int turn,
                     bool async) {
  size_t esz = coll_dtype_size(dt), big = (size_t)n * count;
  char *in = malloc(big * esz + 8), *out = malloc(big * esz + 8);
  int bad = 0, salt = turn;
  coll_op_t op = op_for(dt, turn);
  coll_request_t *req = NULL;
  coll_status_t st;
  /* reduce to a rotating root, in-place on odd turns */
  int root = turn % n;
  for (size_t i = 0; i < count; i++) elem_put(in, i, dt, value(dt, rank, i, salt));
  bool inplace = turn % 2 == 1;
  if (async) {
    st = coll_reduce_async(in, inplace ? in : out, count, dt, op, root, comm, &req);
    if (st == COLL_OK) st = coll_request_wait(&req);
  } else {
    st = coll_reduce(in, inplace ? in : out, count, dt, op, root, comm);
  }
  bad += status_ok("reduce", rank, st);
  for (size_t i = 0; i < count && !bad && rank == root; i++)
    bad += check("reduce", rank, inplace ? in : out, dt, i, reduce_ref(dt, op, n, i, salt));
  /* all_gather, NCCL-style in-place on odd turns */
  for (size_t i = 0; i < count; i++) elem_put(in, i, dt, value(dt, rank, i, salt));
  const void *src = in;
  if (inplace) {
    memcpy(out + (size_t)rank * count * esz, in, count * esz);
    src = out + (size_t)rank * count * esz;
  }
  if (!bad) {
    if (async) {
      st = coll_all_gather_async(src, out, count, dt, comm, &req);
      if (st == COLL_OK) st = coll_request_wait(&req);
    } else {
      st = coll_all_gather(src, out, count, dt, comm);
    }
    bad += status_ok("all_gather", rank, st);
  }
  for (size_t i = 0; i < big && !bad; i++)
    bad += check("all_gather", rank, out, dt, i, value(dt, (int)(i / count), i % count, salt));
  /* reduce_scatter */
  for (size_t i = 0; i < big; i++) elem_put(in, i, dt, value(dt, rank, i, salt));
  void *dst = inplace ? in + (size_t)rank * count * esz : out;
  if (!bad) {
    st = async ? coll_reduce_scatter_async(in, dst, count, dt, op, comm, &req)
               : coll_reduce_scatter(in, dst, count, dt, op, comm);
    if (async && st == COLL_OK) st = coll_request_wait(&req);
    bad += status_ok("reduce_scatter", rank, st);
  }
  for (size_t i = 0; i < count && !bad; i++)
    bad += check("reduce_scatter", rank, dst, dt, i,
                 reduce_ref(dt, op, n, (size_t)rank * count + i, salt));
  /* all_to_all: element j of block p sent by rank r is value(r, p * count + j) */
  for (size_t i = 0; i < big; i++) elem_put(in, i, dt, value(dt, rank, i, salt));
  if (!bad) {
    st = async ? coll_all_to_all_async(in, out, count, dt, comm, &req)
               : coll_all_to_all(in, out, count, dt, comm);
    if (async && st == COLL_OK) st = coll_request_wait(&req);
    bad += status_ok("all_to_all", rank, st);
  }
  for (size_t i = 0; i < big && !bad; i++)
    bad += check("all_to_all", rank, out, dt, i,
                 value(dt, (int)(i / count), (size_t)rank * count + i % count, salt));
  free(in);
  free(out);
  return bad;
}

/* Ring exchange in a group: send to r+1 and receive from r-1 (and the reverse), with
 * messages larger than any staging buffer, so blocking sends would deadlock. */
static int group_exchange(coll_comm_t *comm, int rank, int n, size_t count) {
  if (n == 1) return 0;
  int32_t *a = malloc(count * 4), *b = malloc(count * 4), *ra = malloc(count * 4),
          *rb = malloc(count * 4);
  for (size_t i = 0; i < count; i++) a[i] = rank * 100000 + (int32_t)i, b[i] = -a[i];
  int next = (rank + 1) % n, prev = (rank + n - 1) % n, bad = 0;
  /* Nested groups; a collective recorded between the sends and the receives runs in
   * its place, after the sends' batch. */
  int32_t one = 1, total = 0;
  bad += status_ok("group_start", rank, coll_group_start(comm));
  bad += status_ok("send", rank, coll_send(a, count, COLL_INT32, next, comm));
  bad += status_ok("group_start", rank, coll_group_start(comm));
  bad += status_ok("recv", rank, coll_recv(ra, count, COLL_INT32, prev, comm));
  bad += status_ok("group_end", rank, coll_group_end(comm));
  bad += status_ok("all_reduce in a group", rank,
                   coll_all_reduce(&one, &total, 1, COLL_INT32, COLL_SUM, comm));
  if (total != 0) bad++; /* recorded, not run yet */
  bad += status_ok("send", rank, coll_send(b, count, COLL_INT32, prev, comm));
  bad += status_ok("recv", rank, coll_recv(rb, count, COLL_INT32, next, comm));
  bad += status_ok("group_end", rank, coll_group_end(comm));
  if (total != n) {
    fprintf(stderr, "rank %d: the all-reduce in the group gave %d\n", rank, total);
    bad++;
  }
  for (size_t i = 0; i < count && !bad; i++)
    if (ra[i] != prev * 100000 + (int32_t)i || rb[i] != -(next * 100000 + (int32_t)i)) {
      fprintf(stderr, "rank %d: group exchange element %zu: %d %d\n", rank, i, ra[i], rb[i]);
      bad = 1;
    }
  /* Asynchronous send and receive outside a group, and a barrier. */
  coll_request_t *s = NULL, *r = NULL;
  if (!bad) {
    /* Requests run one at a time in issue order: the small send goes first. */
    bad += status_ok("send_async", rank, coll_send_async(a, 5, COLL_INT32, next, comm, &s));
    bad += status_ok("recv_async", rank, coll_recv_async(ra, 5, COLL_INT32, prev, comm, &r));
    if (!bad) bad += status_ok("wait", rank, coll_request_wait(&s));
    if (!bad) bad += status_ok("wait", rank, coll_request_wait(&r));
    if (!bad && ra[4] != prev * 100000 + 4) bad = 1;
  }
  if (!bad) bad += status_ok("barrier", rank, coll_barrier(comm));
  free(a);
  free(b);
  free(ra);
  free(rb);
  return bad;
}

static int rank_all(coll_comm_t *comm, int rank, int n) {
  int bad = 0, turn = 0; /* every rank takes the same turns */
  static const size_t counts[] = {0, 1, 37};
  for (int dt = 0; dt < COLL_DTYPE_COUNT && !bad; dt++)
    for (size_t k = 0; k < 3 && !bad; k++, turn++)
      bad += one_round(comm, rank, n, (coll_dtype_t)dt, counts[k], turn, (turn & 3) == 3);
  /* Every forced algorithm, large enough for several segments. */
  static const coll_algo_t algos[] = {COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_HD,
                                      COLL_ALGO_MASTER, COLL_ALGO_AUTO};
  for (size_t a = 0; a < 5 && !bad; a++) {
    bad += status_ok("set_algo", rank, coll_comm_set_algo(comm, algos[a]));
    bad += one_round(comm, rank, n, COLL_FLOAT32, 70001, turn++, a == 2);
  }
  if (!bad) bad += group_exchange(comm, rank, n, 300000);
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

static const int shm_sizes[] = {1, 2, 3, 4, 5, 8};
static const int tcp_sizes[] = {2, 3, 5};

START_TEST(every_collective_over_shm_matches_the_reference) {
  case_t c = {
      .job = {.port = mp_free_port(), .transport = "shm", .chunk = "65536", .timeout_ms = 10000}};
  ck_assert_int_eq(ct_run(shm_sizes[_i], 60000, &c.job, rank_all), 0);
}
END_TEST

START_TEST(every_collective_over_tcp_matches_the_reference) {
  case_t c = {
      .job = {.port = mp_free_port(), .transport = "tcp", .chunk = "65536", .timeout_ms = 10000}};
  ck_assert_int_eq(ct_run(tcp_sizes[_i], 60000, &c.job, rank_all), 0);
}
END_TEST

/* Split 5 ranks by parity (key reverses the order), rank 4 opts out; all-reduce within
 * each child, then the parent still works. */
static int rank_split(int rank, int n, void *arg) {
  const case_t *c = arg;
  coll_comm_t *comm, *child = NULL;
  if (ct_init(&c->job, rank, n, &comm) != 0) return 1;
  int color = rank == 4 ? COLL_SPLIT_NOCOLOR : rank % 2, bad = 0;
  bad += status_ok("split", rank, coll_comm_split(comm, color, -rank, &child));
  if (rank == 4 && child != NULL) bad = 1;
  if (rank != 4 && !bad) {
    int crank = -1, csize = -1;
    coll_comm_rank(child, &crank);
    coll_comm_size(child, &csize);
    int want_size = color == 0 ? 2 : 2; /* evens {0, 2}, odds {1, 3} */
    int want_rank = rank >= 2 ? 0 : 1;  /* key -rank: the higher rank first */
    if (csize != want_size || crank != want_rank) {
      fprintf(stderr, "rank %d: child rank %d size %d\n", rank, crank, csize);
      bad = 1;
    }
    int32_t x = rank, sum = 0;
    bad += status_ok("child all_reduce", rank,
                     coll_all_reduce(&x, &sum, 1, COLL_INT32, COLL_SUM, child));
    if (!bad && sum != (color == 0 ? 0 + 2 : 1 + 3)) bad = 1;
    int32_t g[2] = {0, 0};
    bad += status_ok("child all_gather", rank, coll_all_gather(&x, g, 1, COLL_INT32, child));
    if (!bad && g[want_rank] != rank) bad = 1;
    bad += status_ok("child destroy", rank, coll_comm_destroy(child));
  }
  int32_t y = 1, total = 0;
  bad += status_ok("parent all_reduce", rank,
                   coll_all_reduce(&y, &total, 1, COLL_INT32, COLL_SUM, comm));
  if (total != n) bad = 1;
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

START_TEST(split_by_parity_gives_working_children_and_nocolor_gives_null) {
  case_t c = {.job = {.port = mp_free_port(), .transport = _i ? "tcp" : "shm"}};
  ck_assert_int_eq(mp_run(5, 60000, rank_split, &c), 0);
}
END_TEST

/* Host buffers at a byte offset from malloc's alignment (a user's buffer inside a packed
 * record or a byte stream): every reduction reads and writes them as they are. The data
 * travel as bytes: ct_fill and the checks work on aligned copies. variant: 0 the cost
 * model's algorithms, 1 the arena forced, 2 the arena with the buffers in windows. */
static const coll_dtype_t odd_dtypes[] = {COLL_FLOAT64, COLL_INT64, COLL_FLOAT16};
static const size_t odd_offsets[] = {4, 1, 2};
static const size_t odd_counts[] = {3, 10007}; /* 10007: several segments, arena tiles */
enum { ODD_MAX_COUNT = 10007, ODD_MAX_RANKS = 3 };

static int odd_round(coll_comm_t *comm, int rank, int n, coll_dtype_t dt, size_t count, size_t off,
                     int turn, unsigned char *sbase, unsigned char *rbase) {
  static const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_AVG};
  coll_op_t op = ops[turn % 5];
  size_t esz = coll_dtype_size(dt), bytes = count * esz;
  uint32_t salt = 1000u + (uint32_t)turn;
  unsigned char *send = sbase + off, *recv = rbase + off;
  unsigned char *tmp = malloc((size_t)n * bytes + 1);
  char what[96];
  int bad = 0;
  if (tmp == NULL) return 1;
  snprintf(what, sizeof what, "rank %d: %s %s, %zu at offset %zu", rank, coll_dtype_name(dt),
           coll_op_name(op), count, off);
  /* all_reduce out of place, then in place in recv */
  ct_fill(tmp, count, dt, op, rank, salt);
  memcpy(send, tmp, bytes);
  bad += status_ok("all_reduce", rank, coll_all_reduce(send, recv, count, dt, op, comm));
  memcpy(tmp, recv, bytes);
  if (!bad) bad += ct_check_all_reduce(tmp, count, dt, op, n, salt, what) != 0;
  if (!bad) bad += ct_agree(comm, tmp, bytes, what);
  ct_fill(tmp, count, dt, op, rank, salt + 1);
  memcpy(recv, tmp, bytes);
  if (!bad)
    bad += status_ok("all_reduce in place", rank, coll_all_reduce(recv, recv, count, dt, op, comm));
  memcpy(tmp, recv, bytes);
  if (!bad) bad += ct_check_all_reduce(tmp, count, dt, op, n, salt + 1, what) != 0;
  /* reduce_scatter: block p of every rank's input is ct_fill's with salt + p, so rank r's
   * result is the all-reduce of those with salt + r */
  for (int p = 0; p < n; p++)
    ct_fill(tmp + (size_t)p * bytes, count, dt, op, rank, salt + 2 + (uint32_t)p);
  memcpy(send, tmp, (size_t)n * bytes);
  if (!bad)
    bad += status_ok("reduce_scatter", rank, coll_reduce_scatter(send, recv, count, dt, op, comm));
  memcpy(tmp, recv, bytes);
  if (!bad) bad += ct_check_all_reduce(tmp, count, dt, op, n, salt + 2 + (uint32_t)rank, what) != 0;
  /* reduce to a rotating root */
  int root = turn % n;
  ct_fill(tmp, count, dt, op, rank, salt + 9);
  memcpy(send, tmp, bytes);
  if (!bad) bad += status_ok("reduce", rank, coll_reduce(send, recv, count, dt, op, root, comm));
  memcpy(tmp, recv, bytes);
  if (!bad && rank == root) bad += ct_check_all_reduce(tmp, count, dt, op, n, salt + 9, what) != 0;
  free(tmp);
  return bad;
}

static int rank_odd_offsets(int rank, int n, void *arg) {
  const case_t *c = arg;
  coll_comm_t *comm;
  if (ct_init(&c->job, rank, n, &comm) != 0) return 1;
  int bad = 0, turn = 0;
  size_t cap = (size_t)ODD_MAX_RANKS * ODD_MAX_COUNT * 8 + 8;
  unsigned char *sbase = NULL, *rbase = NULL;
  if (c->variant > 0) {
    if (comm->arena == NULL) {
      fprintf(stderr, "rank %d: no arena on one host over shm\n", rank);
      bad = 1;
    }
    bad += status_ok("set_algo", rank, coll_comm_set_algo(comm, COLL_ALGO_ARENA));
  }
  if (c->variant == 2) {
    bad += status_ok("mem_alloc", rank, coll_mem_alloc(comm, cap, (void **)&sbase));
    bad += status_ok("mem_alloc", rank, coll_mem_alloc(comm, cap, (void **)&rbase));
  } else {
    sbase = malloc(cap);
    rbase = malloc(cap);
    if (sbase == NULL || rbase == NULL) bad = 1;
  }
  for (size_t d = 0; d < sizeof odd_dtypes / sizeof odd_dtypes[0] && !bad; d++)
    for (size_t o = 0; o < sizeof odd_offsets / sizeof odd_offsets[0] && !bad; o++)
      for (size_t k = 0; k < sizeof odd_counts / sizeof odd_counts[0] && !bad; k++, turn++)
        bad += odd_round(comm, rank, n, odd_dtypes[d], odd_counts[k], odd_offsets[o], turn, sbase,
                         rbase);
  if (c->variant == 2) {
    if (sbase != NULL) bad += status_ok("mem_free", rank, coll_mem_free(comm, sbase));
    if (rbase != NULL) bad += status_ok("mem_free", rank, coll_mem_free(comm, rbase));
  } else {
    free(sbase);
    free(rbase);
  }
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

/* transport, ranks, variant (as in rank_odd_offsets) */
static const struct {
  const char *transport;
  int nranks, variant;
} odd_cases[] = {{"shm", 2, 0}, {"shm", 3, 0}, {"tcp", 2, 0},
                 {"tcp", 3, 0}, {"shm", 2, 1}, {"shm", 2, 2}};

START_TEST(reductions_on_host_buffers_at_odd_byte_offsets_match_the_reference) {
  case_t c = {.job = {.port = mp_free_port(),
                      .transport = odd_cases[_i].transport,
                      .chunk = "65536",
                      .timeout_ms = 10000},
              .variant = odd_cases[_i].variant};
  ck_assert_int_eq(mp_run(odd_cases[_i].nranks, 60000, rank_odd_offsets, &c), 0);
}
END_TEST

static int expect_invalid(const char *what, coll_status_t st) {
  if (st == COLL_ERR_INVALID_ARGUMENT && coll_last_error()[0] != '\0') return 0;
  fprintf(stderr, "%s: expected COLL_ERR_INVALID_ARGUMENT with a message, got %s: '%s'\n", what,
          coll_status_name(st), coll_last_error());
  return 1;
}

static int rank_bad_args(coll_comm_t *comm, int rank, int n) {
  int bad = 0;
  float x[64] = {0};
  coll_request_t *req = (coll_request_t *)&x; /* must be reset to NULL on failure */
  bad += expect_invalid("reduce NULL comm", coll_reduce(x, x, 1, COLL_FLOAT32, COLL_SUM, 0, NULL));
  bad += expect_invalid("reduce root", coll_reduce(x, x, 1, COLL_FLOAT32, COLL_SUM, n, comm));
  bad += expect_invalid("reduce op", coll_reduce(x, x, 1, COLL_FLOAT32, (coll_op_t)77, 0, comm));
  bad += expect_invalid("reduce dtype", coll_reduce(x, x, 1, (coll_dtype_t)-1, COLL_SUM, 0, comm));
  bad += expect_invalid("reduce NULL", coll_reduce(NULL, x, 1, COLL_FLOAT32, COLL_SUM, 0, comm));
  bad += expect_invalid("reduce_async NULL request",
                        coll_reduce_async(x, x, 1, COLL_FLOAT32, COLL_SUM, 0, comm, NULL));
  bad += expect_invalid("all_gather overlap", coll_all_gather(x + 1, x, 4, COLL_FLOAT32, comm));
  bad += expect_invalid("all_gather NULL", coll_all_gather(x, NULL, 4, COLL_FLOAT32, comm));
  bad += expect_invalid("all_gather huge",
                        coll_all_gather(x, x + 32, SIZE_MAX / 2, COLL_FLOAT32, comm));
  bad += expect_invalid("reduce_scatter overlap",
                        coll_reduce_scatter(x, x + 1, 2, COLL_FLOAT32, COLL_SUM, comm));
  bad += expect_invalid("reduce_scatter op",
                        coll_reduce_scatter(x, x + 32, 2, COLL_FLOAT32, COLL_OP_COUNT, comm));
  bad += expect_invalid("all_to_all in-place", coll_all_to_all(x, x, 2, COLL_FLOAT32, comm));
  bad += expect_invalid("all_to_all_async",
                        coll_all_to_all_async(x, x + 32, 2, COLL_FLOAT32, comm, NULL));
  bad += expect_invalid("barrier NULL", coll_barrier(NULL));
  bad += expect_invalid("barrier_async", coll_barrier_async(comm, NULL));
  bad += expect_invalid("send peer", coll_send(x, 1, COLL_FLOAT32, n, comm));
  bad += expect_invalid("send self", coll_send(x, 1, COLL_FLOAT32, rank, comm));
  bad += expect_invalid("recv negative", coll_recv(x, 1, COLL_FLOAT32, -1, comm));
  bad += expect_invalid("recv NULL", coll_recv(NULL, 1, COLL_FLOAT32, (rank + 1) % n, comm));
  bad += expect_invalid("send dtype", coll_send(x, 1, COLL_DTYPE_COUNT, (rank + 1) % n, comm));
  bad += expect_invalid("recv_async", coll_recv_async(x, 1, COLL_FLOAT32, n + 3, comm, &req));
  if (req != NULL) bad++;
  bad += expect_invalid("group_end unopened", coll_group_end(comm));
  bad += expect_invalid("group_start NULL", coll_group_start(NULL));
  coll_group_start(comm);
  bad += expect_invalid("async inside a group",
                        coll_all_gather_async(x, x + 32, 1, COLL_FLOAT32, comm, &req));
  bad += status_ok("empty group", rank, coll_group_end(comm));
  coll_comm_t *child = (coll_comm_t *)&x;
  bad += expect_invalid("split NULL", coll_comm_split(NULL, 0, 0, &child));
  bad += expect_invalid("split newcomm", coll_comm_split(comm, 0, 0, NULL));
  bad += expect_invalid("set_timeout 0", coll_comm_set_timeout(comm, 0));
  bad += expect_invalid("set_timeout NULL", coll_comm_set_timeout(NULL, 10));
  coll_status_t async_err = COLL_ERR_INTERNAL;
  bad += expect_invalid("async_error NULL", coll_comm_get_async_error(comm, NULL));
  bad += status_ok("async_error", rank, coll_comm_get_async_error(comm, &async_err));
  if (async_err != COLL_OK) bad++;
  /* The communicator still works. */
  bad += status_ok("barrier", rank, coll_barrier(comm));
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  return bad ? 1 : 0;
}

START_TEST(bad_arguments_to_the_new_calls_are_refused_with_a_message) {
  case_t c = {.job = {.port = mp_free_port(), .transport = "shm"}};
  ck_assert_int_eq(ct_run(2, 30000, &c.job, rank_bad_args), 0);
}
END_TEST

SUITE_MAIN("coll more",
           suite_loop_tests("collectives", 120, 0, (int)(sizeof shm_sizes / sizeof shm_sizes[0]),
                            every_collective_over_shm_matches_the_reference),
           suite_loop_tests("collectives", 120, 0, (int)(sizeof tcp_sizes / sizeof tcp_sizes[0]),
                            every_collective_over_tcp_matches_the_reference),
           suite_loop_tests("collectives", 120, 0, 2,
                            split_by_parity_gives_working_children_and_nocolor_gives_null),
           suite_tests("collectives", 120,
                       bad_arguments_to_the_new_calls_are_refused_with_a_message),
           suite_loop_tests("collectives", 120, 0, (int)(sizeof odd_cases / sizeof odd_cases[0]),
                            reductions_on_host_buffers_at_odd_byte_offsets_match_the_reference))
