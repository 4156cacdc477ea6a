/* Running one algorithm case in the simulator and checking it: integers exactly (wrapping
 * sum and product are order-independent), floats within a stated tolerance of a float64
 * reference, every rank bit-identical, broadcast equal to the root's data. */
#include "algo_check.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elements.h"
#include "mem/memops.h"
#include "mix.h"

size_t test_dtype_size(coll_dtype_t t) {
  static const size_t sizes[COLL_DTYPE_COUNT] = {
      [COLL_INT8] = 1,    [COLL_UINT8] = 1,   [COLL_INT32] = 4,   [COLL_UINT32] = 4,
      [COLL_INT64] = 8,   [COLL_UINT64] = 8,  [COLL_FLOAT16] = 2, [COLL_BFLOAT16] = 2,
      [COLL_FLOAT32] = 4, [COLL_FLOAT64] = 8,
  };
  return sizes[t];
}

static const char *const algo_names[] = {"auto", "ring", "tree", "hd", "master"};
static const char *const dtype_names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                          "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

const char *case_name(const run_case_t *c) {
  static _Thread_local char buf[320];
  const char *algo = (size_t)c->algo < sizeof algo_names / sizeof algo_names[0]
                         ? algo_names[c->algo]
                         : coll_algo_name(c->algo);
  const char *op =
      (size_t)c->op < sizeof op_names / sizeof op_names[0] ? op_names[c->op] : coll_op_name(c->op);
  int len = snprintf(buf, sizeof buf, "%s %s n=%d count=%zu %s %s %s seg=%zu root=%d", algo,
                     c->collective == COLL_KIND_BROADCAST ? "broadcast" : "allreduce", c->nranks,
                     c->count, dtype_names[c->dtype], op, c->in_place ? "in-place" : "out-of-place",
                     c->segment_bytes, c->root);
  /* the node of each rank, for the node-aware algorithms */
  for (int r = 0; c->topo != NULL && r < c->nranks && len > 0 && (size_t)len < sizeof buf; r++)
    len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%d",
                    r ? "," : " nodes=", c->topo->node_of[r]);
  return buf;
}

static int is_float(coll_dtype_t t) { return t >= COLL_FLOAT16; }
static int is_signed(coll_dtype_t t) {
  return t == COLL_INT8 || t == COLL_INT32 || t == COLL_INT64;
}

/* Value of rank r's element i as a double: in [-1, 1) for sums and min/max, in
 * [0.75, 1.25) for products so that they neither overflow nor vanish. */
static double float_value(int r, size_t i, coll_op_t op) {
  double u = (double)(mix64((uint64_t)r * 1000003u + i) >> 11) / 9007199254740992.0;
  return op == COLL_PROD ? 0.75 + u * 0.5 : u * 2.0 - 1.0;
}

static void store(void *buf, size_t i, coll_dtype_t t, double v, uint64_t bits) {
  if (t >= COLL_FLOAT16)
    elem_put(buf, i, t, v);
  else
    memcpy((char *)buf + i * test_dtype_size(t), &bits, test_dtype_size(t));
}

static void fill_rank(void *buf, int r, const run_case_t *c) {
  for (size_t i = 0; i < c->count; i++)
    store(buf, i, c->dtype, float_value(r, i, c->op), mix64((uint64_t)r * 7919u + i * 31u));
}

/* Exact integer reference for element i. */
static uint64_t int_reference(void *const *inputs, size_t i, const run_case_t *c) {
  uint64_t acc = 0, u;
  int64_t sacc = 0, s;
  for (int r = 0; r < c->nranks; r++) {
    elem_get_int(inputs[r], i, c->dtype, &u, &s);
    if (r == 0) {
      acc = u;
      sacc = s;
      continue;
    }
    switch (c->op) {
      case COLL_SUM:
      case COLL_AVG:
        acc += u;
        break;
      case COLL_PROD:
        acc *= u;
        break;
      case COLL_MIN:
        if (is_signed(c->dtype) ? s < sacc : u < acc) acc = u, sacc = s;
        break;
      case COLL_BAND:
        acc &= u;
        break;
      case COLL_BOR:
        acc |= u;
        break;
      case COLL_BXOR:
        acc ^= u;
        break;
      default:
        if (is_signed(c->dtype) ? s > sacc : u > acc) acc = u, sacc = s;
        break;
    }
  }
  return acc;
}

static void check_allreduce_element(void *const *inputs, const void *out, size_t i,
                                    const run_case_t *c) {
  size_t sz = test_dtype_size(c->dtype);
  if (!is_float(c->dtype)) {
    uint64_t want = int_reference(inputs, i, c);
    /* AVG: the sum, truncated to the width, then divided in that type. */
    char wbuf[8];
    memcpy(wbuf, &want, sz);
    if (c->op == COLL_AVG) mem_host_finish_avg(wbuf, 1, c->dtype, c->nranks);
    if (memcmp((const char *)out + i * sz, wbuf, sz) != 0)
      ck_abort_msg("%s: element %zu differs from the exact integer result", case_name(c), i);
    return;
  }
  double ref = 0, mag = 0;
  for (int r = 0; r < c->nranks; r++) {
    double v = elem_get(inputs[r], i, c->dtype);
    if (r == 0) {
      ref = v;
      mag = fabs(v);
      continue;
    }
    switch (c->op) {
      case COLL_SUM:
      case COLL_AVG:
        ref += v, mag += fabs(v);
        break;
      case COLL_PROD:
        ref *= v, mag *= fabs(v);
        break;
      case COLL_MIN:
        ref = v < ref ? v : ref;
        break;
      default:
        ref = v > ref ? v : ref;
        break;
    }
  }
  if (c->op == COLL_AVG) ref /= c->nranks, mag /= c->nranks;
  /* Tolerance: one rounding of the storage type per combining step (n of them), on the
   * magnitude of the terms: eps * (n + 1) * sum|x|. min and max are exact. */
  double eps = c->dtype == COLL_FLOAT16    ? 0x1p-11
               : c->dtype == COLL_BFLOAT16 ? 0x1p-8
               : c->dtype == COLL_FLOAT32  ? 0x1p-24
                                           : 0x1p-53;
  double tol = (c->op == COLL_MIN || c->op == COLL_MAX) ? 0 : eps * (c->nranks + 1) * mag;
  double got = elem_get(out, i, c->dtype);
  if (!(fabs(got - ref) <= tol))
    ck_abort_msg("%s: element %zu is %.17g, reference %.17g (tolerance %.3g)", case_name(c), i, got,
                 ref, tol);
}

void check_case(const run_case_t *c, sim_result_t *res_out) {
  int n = c->nranks;
  size_t bytes = c->count * test_dtype_size(c->dtype);
  void **inputs = calloc((size_t)n, sizeof *inputs);
  void **outputs = calloc((size_t)n, sizeof *outputs);
  void **orig = calloc((size_t)n, sizeof *orig);
  ck_assert(inputs && outputs && orig);
  for (int r = 0; r < n; r++) {
    inputs[r] = malloc(bytes + 1);
    orig[r] = malloc(bytes + 1);
    ck_assert(inputs[r] && orig[r]);
    fill_rank(orig[r], r, c);
    memcpy(inputs[r], orig[r], bytes);
    if (c->in_place) {
      outputs[r] = inputs[r];
    } else {
      outputs[r] = malloc(bytes + 1);
      ck_assert(outputs[r]);
      memset(outputs[r], 0xA5, bytes); /* garbage the schedule must overwrite */
    }
  }
  sched_params_t p = {.collective = c->collective,
                      .count = c->count,
                      .dtype = c->dtype,
                      .nranks = n,
                      .root = c->root,
                      .segment_bytes = c->segment_bytes,
                      .topo = c->topo};
  sim_config_t cfg = {.dtype = c->dtype,
                      .op = c->op,
                      .inputs = inputs,
                      .outputs = outputs,
                      .record_events = res_out != NULL};
  sim_result_t res;
  coll_status_t st = sim_run_algo(c->algo, &p, &cfg, &res);
  if (st != COLL_OK) ck_abort_msg("%s: simulation failed: %s", case_name(c), coll_last_error());
  if (!c->in_place)
    for (int r = 0; r < n; r++)
      if (memcmp(inputs[r], orig[r], bytes) != 0)
        ck_abort_msg("%s: rank %d's INPUT was modified", case_name(c), r);
  if (c->collective == COLL_KIND_BROADCAST) {
    for (int r = 0; r < n; r++)
      if (r != c->root && memcmp(outputs[r], orig[c->root], bytes) != 0)
        ck_abort_msg("%s: rank %d did not receive the root's data", case_name(c), r);
  } else {
    for (size_t i = 0; i < c->count; i++) check_allreduce_element(orig, outputs[0], i, c);
    for (int r = 1; r < n; r++)
      if (memcmp(outputs[r], outputs[0], bytes) != 0)
        ck_abort_msg("%s: rank %d's result is not bit-identical to rank 0's", case_name(c), r);
  }
  for (int r = 0; r < n; r++) {
    if (!c->in_place) free(outputs[r]);
    free(inputs[r]);
    free(orig[r]);
  }
  free(inputs);
  free(outputs);
  free(orig);
  if (res_out != NULL)
    *res_out = res;
  else
    sim_result_free(&res);
}
