/* Shared helpers of the 'coll' suite (see coll_test_util.h).
 *
 * Tolerance for floating-point results: |got - want| <= 4 * nranks * u * scale, where u is
 * the unit roundoff of the type (2^-11 float16, 2^-8 bfloat16, 2^-24 float32, 2^-53
 * float64) and scale is the sum of |inputs| (sum, avg) or 1 + |want| (prod): every partial
 * result is rounded once per reduction step, at most nranks steps, plus AVG's division.
 * min and max must be exact. Integers are exact (sum and prod wrap). */
#include "coll_test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "caller_store.h"
#include "elements.h"
#include "launcher_env.h"
#include "mem/memops.h"
#include "mix.h"
#include "multiproc.h"

int ct_init(const ct_job_t *job, int rank, int nranks, coll_comm_t **comm) {
  ct_clean_env();
  if (job->transport != NULL) setenv("COLL_TRANSPORT", job->transport, 1);
  if (job->chunk != NULL) setenv("COLL_CHUNK_SIZE", job->chunk, 1);
  coll_config_t cfg = {0};
  cfg.rank = rank;
  cfg.size = nranks;
  cfg.local_rank = rank;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = job->port;
  cfg.host_store = job->store_elsewhere ? 0 : -1;
  cfg.timeout_ms = job->timeout_ms > 0 ? job->timeout_ms : 30000;
  void *store = NULL;
  if (job->caller_store) {
    store = caller_store_open(job->port, cfg.timeout_ms);
    if (store == NULL) return 1;
    cfg.store_ops = &caller_store_ops;
    cfg.store = store;
  }
  coll_status_t st = coll_comm_init_config(&cfg, comm);
  /* The rank process keeps its handle (the library cloned it) until it exits: it must
   * outlive the communicator and those made from it. */
  if (st != COLL_OK) {
    fprintf(stderr, "rank %d: init failed: %s: %s\n", rank, coll_status_name(st),
            coll_last_error());
    return 1;
  }
  return 0;
}

typedef struct {
  const ct_job_t *job;
  ct_init_fn init; /* NULL: ct_init(job) */
  ct_body_fn body;
  ct_body_arg_fn body_arg;
  void *arg;
} run_t;

static int run_rank(int rank, int nranks, void *p) {
  const run_t *r = p;
  coll_comm_t *comm;
  int failed =
      r->init != NULL ? r->init(r->arg, rank, nranks, &comm) : ct_init(r->job, rank, nranks, &comm);
  if (failed != 0) return 1;
  return r->body != NULL ? r->body(comm, rank, nranks) : r->body_arg(comm, rank, nranks, r->arg);
}

static int run_job(int n, int timeout_ms, const ct_job_t *job, run_t *r) {
  ct_job_t fresh = {.port = job == NULL ? mp_free_port() : 0};
  r->job = job != NULL ? job : &fresh;
  return mp_run(n, timeout_ms, run_rank, r);
}

int ct_run(int n, int timeout_ms, const ct_job_t *job, ct_body_fn body) {
  run_t r = {.body = body};
  return run_job(n, timeout_ms, job, &r);
}

int ct_run_arg(int n, int timeout_ms, const ct_job_t *job, ct_body_arg_fn body, void *arg) {
  run_t r = {.body_arg = body, .arg = arg};
  return run_job(n, timeout_ms, job, &r);
}

int ct_run_init(int n, int timeout_ms, ct_init_fn init, ct_body_arg_fn body, void *arg) {
  run_t r = {.init = init, .body_arg = body, .arg = arg};
  return mp_run(n, timeout_ms, run_rank, &r);
}

void ct_clean_env(void) { launcher_env_clear(); }

static bool is_fp8(coll_dtype_t dt) { return dt == COLL_FLOAT8E4M3 || dt == COLL_FLOAT8E5M2; }
static bool is_float(coll_dtype_t dt) {
  return dt == COLL_FLOAT16 || dt == COLL_BFLOAT16 || dt == COLL_FLOAT32 || dt == COLL_FLOAT64 ||
         is_fp8(dt);
}
static bool is_signed(coll_dtype_t dt) {
  return dt == COLL_INT8 || dt == COLL_INT32 || dt == COLL_INT64;
}

/* fp8 inputs are chosen so that every partial result of any reduction order is exact in
 * both formats (e5m2 holds the integers up to 8, e4m3 up to 16): the result is then one
 * value whatever the algorithm, computed here in double. Sums: ranks 0-3 give -2..2
 * times 2^k (the same k for every rank at index i, -3 <= k <= 2), the others 0, so every
 * partial sum is a multiple of 2^k of magnitude at most 8 * 2^k. Products: ranks 0-3 give
 * +-2^j (j in -1..1), the others +-1. Min and max: nonzero values (+-1..7) * 2^k (no
 * zeros, whose sign would depend on the order). AVG rounds the exact mean once, to
 * float16 and then to fp8, as the library does (those roundings are checked against
 * NVIDIA's code by tests/mem/test_fp8_ref.cpp). */
static double fp8_value(coll_op_t op, int rank, size_t i, uint32_t raw) {
  int k = (int)(mix32((uint32_t)i ^ 0x51ed270bU) % 6) - 3;
  int sign = (raw >> 8) & 1 ? -1 : 1;
  switch (op) {
    case COLL_PROD:
      return sign * (rank < 4 ? ldexp(1.0, (int)(raw % 3) - 1) : 1.0);
    case COLL_MIN:
    case COLL_MAX:
      return sign * (double)(1 + raw % 7) * ldexp(1.0, k);
    default:
      return rank < 4 ? ((int)(raw % 5) - 2) * ldexp(1.0, k) : 0.0;
  }
}

/* The value rank contributes at index i, as the type holds it (floats already rounded
 * to the type, integers as int64). */
static double float_value(coll_dtype_t dt, coll_op_t op, int rank, size_t i, uint32_t salt) {
  uint32_t raw = mix32((uint32_t)i * 2654435761U ^ (uint32_t)(rank + 1) * 40503U ^ salt);
  if (is_fp8(dt)) return fp8_value(op, rank, i, raw);
  double v = op == COLL_PROD ? 1.0 + ((int)(raw % 201) - 100) / 1000.0
                             : ((int)(raw % 2001) - 1000) / 255.0;
  switch (dt) {
    case COLL_FLOAT16:
      return mem_half_to_float(mem_float_to_half((float)v));
    case COLL_BFLOAT16:
      return mem_bf16_to_float(mem_float_to_bf16((float)v));
    case COLL_FLOAT32:
      return (float)v;
    default:
      return v;
  }
}

bool ct_op_applies(coll_dtype_t dt, coll_op_t op) {
  return !is_float(dt) || !(op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR);
}

static int64_t int_value(coll_dtype_t dt, coll_op_t op, int rank, size_t i, uint32_t salt) {
  uint32_t raw = mix32((uint32_t)i * 2654435761U ^ (uint32_t)(rank + 1) * 40503U ^ salt);
  bool s = is_signed(dt);
  switch (op) {
    case COLL_BAND:
    case COLL_BOR:
    case COLL_BXOR:
      /* Every bit of the widest type random (the store keeps the low bytes): and-ing or
       * or-ing a few ranks leaves a mix of ones and zeros in every byte. */
      return (int64_t)((uint64_t)mix32(raw ^ 0x9e3779b9U) << 32 | raw);
    case COLL_PROD:
      return s ? (int64_t)(raw % 4) - 2 + (raw % 4 >= 2) : (int64_t)(raw % 3) + 1;
    case COLL_MIN:
    case COLL_MAX:
      return s ? (int64_t)(raw % 201) - 100 : (int64_t)(raw % 200);
    default:
      return s ? (int64_t)(raw % 21) - 10 : (int64_t)(raw % 21);
  }
}

/* Integers are stored and compared as their low esz bytes (two's complement). */
static void store_int(void *buf, size_t i, size_t esz, uint64_t v) {
  memcpy((char *)buf + i * esz, &v, esz); /* little-endian: the low bytes */
}

static uint64_t load_int(const void *buf, size_t i, size_t esz) {
  uint64_t v = 0;
  memcpy(&v, (const char *)buf + i * esz, esz);
  return v;
}

void ct_fill(void *buf, size_t count, coll_dtype_t dt, coll_op_t op, int rank, uint32_t salt) {
  size_t esz = coll_dtype_size(dt);
  for (size_t i = 0; i < count; i++) {
    if (is_float(dt))
      elem_put(buf, i, dt, float_value(dt, op, rank, i, salt));
    else
      store_int(buf, i, esz, (uint64_t)int_value(dt, op, rank, i, salt));
  }
}

static double unit_roundoff(coll_dtype_t dt) {
  switch (dt) {
    case COLL_FLOAT16:
      return ldexp(1.0, -11);
    case COLL_BFLOAT16:
      return ldexp(1.0, -8);
    case COLL_FLOAT32:
      return ldexp(1.0, -24);
    case COLL_FLOAT8E4M3:
      return ldexp(1.0, -4);
    case COLL_FLOAT8E5M2:
      return ldexp(1.0, -3);
    default:
      return ldexp(1.0, -53);
  }
}

/* Sign-extend the low esz bytes. */
static int64_t sign_extend(uint64_t v, size_t esz) {
  if (esz == 8) return (int64_t)v;
  unsigned shift = (unsigned)(64 - 8 * esz);
  return (int64_t)(v << shift) >> shift;
}

static uint64_t int_expected(coll_dtype_t dt, coll_op_t op, int nranks, size_t i, uint32_t salt) {
  size_t esz = coll_dtype_size(dt);
  bool s = is_signed(dt);
  uint64_t acc = (uint64_t)int_value(dt, op, 0, i, salt);
  for (int r = 1; r < nranks; r++) {
    uint64_t v = (uint64_t)int_value(dt, op, r, i, salt);
    switch (op) {
      case COLL_PROD:
        acc *= v;
        break;
      case COLL_MIN:
        if (s ? (int64_t)v < (int64_t)acc : v < acc) acc = v;
        break;
      case COLL_MAX:
        if (s ? (int64_t)v > (int64_t)acc : v > acc) acc = v;
        break;
      case COLL_BAND:
        acc &= v;
        break;
      case COLL_BOR:
        acc |= v;
        break;
      case COLL_BXOR:
        acc ^= v;
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op == COLL_AVG) {
    /* The sum fits the type for these inputs; C division truncates toward zero. */
    acc = s ? (uint64_t)(sign_extend(acc, esz) / nranks) : acc / (uint64_t)nranks;
  }
  return esz == 8 ? acc : acc & ((1ULL << (8 * esz)) - 1);
}

size_t ct_check_all_reduce(const void *out, size_t count, coll_dtype_t dt, coll_op_t op, int nranks,
                           uint32_t salt, const char *what) {
  size_t esz = coll_dtype_size(dt), bad = 0;
  /* Recomputing every rank's input is the slow part of these tests: above 64 Ki
   * elements check every 7th element (a prime stride meets every segment and chunk
   * boundary pattern) plus the first and last 4 Ki; ct_agree still compares all bytes. */
  size_t stride = count > 65536 ? 7 : 1;
  for (size_t i = 0; i < count; i = (i < 4096 || i + 4096 >= count) ? i + 1 : i + stride) {
    bool ok;
    double got = 0, want = 0, tol = 0;
    if (is_float(dt)) {
      double scale = 0;
      want = float_value(dt, op, 0, i, salt);
      scale = fabs(want);
      for (int r = 1; r < nranks; r++) {
        double v = float_value(dt, op, r, i, salt);
        scale += fabs(v);
        if (op == COLL_PROD)
          want *= v;
        else if (op == COLL_MIN)
          want = v < want ? v : want;
        else if (op == COLL_MAX)
          want = v > want ? v : want;
        else
          want += v;
      }
      if (op == COLL_AVG) want /= nranks;
      if (op == COLL_PROD) scale = 1 + fabs(want);
      got = elem_get(out, i, dt);
      tol = (op == COLL_MIN || op == COLL_MAX) ? 0 : 4.0 * nranks * unit_roundoff(dt) * (scale + 1);
      ok = fabs(got - want) <= tol;
      if (is_fp8(dt)) { /* exact: the bits of the one possible result (see fp8_value) */
        tol = 0;
        want = mem_fp8_to_float(mem_double_to_fp8(want, dt), dt);
        ok = ((const uint8_t *)out)[i] == mem_double_to_fp8(want, dt);
      }
    } else {
      uint64_t w = int_expected(dt, op, nranks, i, salt);
      uint64_t g = load_int(out, i, esz);
      ok = g == w;
      got = (double)sign_extend(g, esz);
      want = (double)sign_extend(w, esz);
    }
    if (!ok && bad++ == 0)
      fprintf(stderr,
              "%s: %s %s over %d ranks, element %zu of %zu: got %.9g, want %.9g (tol %.3g)\n", what,
              coll_dtype_name(dt), coll_op_name(op), nranks, i, count, got, want, tol);
  }
  return bad;
}

size_t ct_check_broadcast(const void *buf, size_t count, coll_dtype_t dt, int root, uint32_t salt,
                          const char *what) {
  size_t esz = coll_dtype_size(dt), bad = 0;
  char *want = malloc(count * esz + 1);
  if (want == NULL) return count ? count : 1;
  ct_fill(want, count, dt, COLL_SUM, root, salt);
  for (size_t i = 0; i < count; i++) {
    if (memcmp((const char *)buf + i * esz, want + i * esz, esz) != 0 && bad++ == 0)
      fprintf(stderr, "%s: broadcast of %zu %s from root %d differs at element %zu\n", what, count,
              coll_dtype_name(dt), root, i);
  }
  free(want);
  return bad;
}

int ct_agree(coll_comm_t *comm, const void *buf, size_t bytes, const char *what) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)buf)[i]) * 1099511628211ULL;
  uint64_t lo = h, hi = h;
  coll_status_t st = coll_all_reduce(&h, &lo, 1, COLL_UINT64, COLL_MIN, comm);
  if (st == COLL_OK) st = coll_all_reduce(&h, &hi, 1, COLL_UINT64, COLL_MAX, comm);
  if (st != COLL_OK) {
    fprintf(stderr, "%s: hash all-reduce failed: %s\n", what, coll_last_error());
    return 1;
  }
  if (lo != hi) {
    fprintf(stderr, "%s: ranks hold different bytes (hash min %llx max %llx)\n", what,
            (unsigned long long)lo, (unsigned long long)hi);
    return 1;
  }
  return 0;
}

void ct_fill_bytes(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

int ct_check_bytes(const unsigned char *b, size_t n, unsigned seed, int rank, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != (unsigned char)(seed * 131u + i * 7u + (i >> 9))) {
      fprintf(stderr, "rank %d: %s: byte %zu of %zu is %u\n", rank, what, i, n, b[i]);
      return 1;
    }
  return 0;
}

void ct_sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int ct_ok(int rank, const char *what, coll_status_t st) {
  if (st == COLL_OK) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_status_name(st), coll_last_error());
  return 1;
}

int ct_all_reduce(coll_comm_t *comm, int rank, int nranks, size_t count, coll_dtype_t dt,
                  coll_op_t op, int in_place, uint32_t salt, const char *tag) {
  size_t esz = coll_dtype_size(dt);
  char *in = malloc(count * esz + 8), *out = malloc(count * esz + 8);
  char what[200];
  snprintf(what, sizeof what, "rank %d: %s %s count %zu %s %s", rank, tag,
           in_place ? "in-place" : "out-of-place", count, coll_dtype_name(dt), coll_op_name(op));
  int rc = 1;
  if (in == NULL || out == NULL) goto out;
  ct_fill(in, count, dt, op, rank, salt);
  memset(out, 0xA5, count * esz);
  coll_status_t st = in_place ? coll_all_reduce(in, in, count, dt, op, comm)
                              : coll_all_reduce(in, out, count, dt, op, comm);
  if (st != COLL_OK) {
    fprintf(stderr, "%s: %s: %s\n", what, coll_status_name(st), coll_last_error());
    goto out;
  }
  const char *res = in_place ? in : out;
  if (ct_check_all_reduce(res, count, dt, op, nranks, salt, what) != 0) goto out;
  if (ct_agree(comm, res, count * esz, what) != 0) goto out;
  rc = 0;
out:
  free(in);
  free(out);
  return rc;
}

void ct_trace_to(const char *stem) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/%s-%d.json", stem, (int)getppid());
  setenv("COLL_TRACE", path, 1);
}

char *ct_trace_take(const char *stem, int rank) {
  unsetenv("COLL_TRACE");
  char path[256];
  snprintf(path, sizeof path, "/tmp/%s-%d.rank%d.json", stem, (int)getppid(), rank);
  FILE *f = fopen(path, "r");
  if (f == NULL) return NULL;
  size_t cap = 1 << 20;
  char *text = malloc(cap);
  size_t len = text != NULL ? fread(text, 1, cap - 1, f) : 0;
  if (text != NULL) text[len] = '\0';
  fclose(f);
  unlink(path);
  return text;
}
