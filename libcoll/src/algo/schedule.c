/* Schedules: the step primitives every algorithm calls (growable step and op arrays,
 * sched_send, sched_recv_reduce, ...), finishing, byte counts and the plan helper for
 * lock-step algorithms. Below the algorithm files; algo_build.c dispatches to them. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "common/error.h"

static const size_t elem_sizes[COLL_DTYPE_COUNT] = {
    [COLL_INT8] = 1,    [COLL_UINT8] = 1,   [COLL_INT32] = 4,      [COLL_UINT32] = 4,
    [COLL_INT64] = 8,   [COLL_UINT64] = 8,  [COLL_FLOAT16] = 2,    [COLL_BFLOAT16] = 2,
    [COLL_FLOAT32] = 4, [COLL_FLOAT64] = 8, [COLL_FLOAT8E4M3] = 1, [COLL_FLOAT8E5M2] = 1,
};

size_t algo_elem_size(coll_dtype_t dtype) {
  return (unsigned)dtype < COLL_DTYPE_COUNT ? elem_sizes[dtype] : 0;
}

size_t algo_segment_elems(const sched_params_t *p) {
  size_t bytes = p->segment_bytes ? p->segment_bytes : ALGO_DEFAULT_SEGMENT_BYTES;
  size_t esize = algo_elem_size(p->dtype);
  size_t elems = esize ? bytes / esize : bytes;
  /* Bound the schedule's size whatever the setting: a tiny segment on a huge buffer
   * would otherwise mean millions of ops (memory, and per-op costs that dwarf the data). */
  size_t floor_elems = algo_div_up(p->count, ALGO_MAX_SEGMENTS);
  if (elems < floor_elems) elems = floor_elems;
  return elems ? elems : 1;
}

void sched_init(sched_t *s, const sched_params_t *p, coll_algo_t algo) {
  memset(s, 0, sizeof *s);
  s->collective = p->collective;
  s->algo = algo;
  s->rank = p->rank;
  s->nranks = p->nranks;
  s->count = p->count;
  sched_buffer_counts(p->collective, p->count, p->nranks, &s->in_count, &s->out_count);
  if (p->collective == COLL_KIND_ALL_TO_ALLV && p->vcounts != NULL &&
      !sched_vcounts_extent(p->vcounts, p->nranks, &s->in_count, &s->out_count))
    s->in_count = s->out_count = 0; /* algo_build refused it before */
  s->elem_size = algo_elem_size(p->dtype);
}

static const char *const kind_names[COLL_KIND_COUNT] = {
    [COLL_KIND_ALL_REDUCE] = "all_reduce",
    [COLL_KIND_BROADCAST] = "broadcast",
    [COLL_KIND_REDUCE] = "reduce",
    [COLL_KIND_ALL_GATHER] = "all_gather",
    [COLL_KIND_REDUCE_SCATTER] = "reduce_scatter",
    [COLL_KIND_ALL_TO_ALL] = "all_to_all",
    [COLL_KIND_BARRIER] = "barrier",
    [COLL_KIND_P2P] = "send/recv",
    [COLL_KIND_GATHER] = "gather",
    [COLL_KIND_SCATTER] = "scatter",
    [COLL_KIND_ALL_TO_ALLV] = "all_to_allv",
};

const char *sched_kind_name(coll_kind_t kind) {
  return (unsigned)kind < COLL_KIND_COUNT ? kind_names[kind] : "unknown";
}

void sched_buffer_counts(coll_kind_t kind, size_t count, int nranks, size_t *in_count,
                         size_t *out_count) {
  size_t n = nranks > 0 ? (size_t)nranks : 1;
  *in_count =
      kind == COLL_KIND_REDUCE_SCATTER || kind == COLL_KIND_ALL_TO_ALL || kind == COLL_KIND_SCATTER
          ? n * count
          : count;
  *out_count =
      kind == COLL_KIND_ALL_GATHER || kind == COLL_KIND_ALL_TO_ALL || kind == COLL_KIND_GATHER
          ? n * count
          : count;
  if (kind == COLL_KIND_ALL_TO_ALLV) *in_count = *out_count = 0; /* sched_vcounts_extent */
}

bool sched_vcounts_extent(const size_t *v, int nranks, size_t *in_count, size_t *out_count) {
  *in_count = *out_count = 0;
  for (int p = 0; p < nranks; p++) {
    size_t sc = sched_v(v, nranks, SCHED_V_SENDCOUNTS, p),
           sd = sched_v(v, nranks, SCHED_V_SDISPLS, p);
    size_t rc = sched_v(v, nranks, SCHED_V_RECVCOUNTS, p),
           rd = sched_v(v, nranks, SCHED_V_RDISPLS, p);
    if (sc > SIZE_MAX - sd || rc > SIZE_MAX - rd) return false;
    if (sc > 0 && sd + sc > *in_count) *in_count = sd + sc;
    if (rc > 0 && rd + rc > *out_count) *out_count = rd + rc;
  }
  return true;
}

void sched_free(sched_t *s) {
  if (s == NULL) return;
  free(s->steps);
  free(s->ops);
  s->steps = NULL;
  s->ops = NULL;
  s->nsteps = s->steps_cap = s->nops = s->ops_cap = 0;
}

void sched_reset(sched_t *s) {
  s->nsteps = 0;
  s->nops = 0;
  s->scratch_count = 0;
}

/* Grow an array to hold at least `need` elements (doubling). */
static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap * 2 : 16;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*arr, ncap * elem);
  if (p == NULL) return -1;
  *arr = p;
  *cap = ncap;
  return 0;
}

coll_status_t sched_begin_step(sched_t *s) {
  if (grow((void **)&s->steps, &s->steps_cap, s->nsteps + 1, sizeof *s->steps) != 0)
    return coll_error(COLL_ERR_NO_MEMORY, "schedule: cannot grow to %zu steps", s->nsteps + 1);
  if (s->nops > UINT32_MAX) return coll_error(COLL_ERR_NO_MEMORY, "schedule: more than 2^32 ops");
  s->steps[s->nsteps].first_op = (uint32_t)s->nops;
  s->steps[s->nsteps].nops = 0;
  s->nsteps++;
  return COLL_OK;
}

static coll_status_t add_op(sched_t *s, sched_op_t op) {
  if (s->nsteps == 0) {
    coll_status_t st = sched_begin_step(s);
    if (st != COLL_OK) return st;
  }
  if (s->nops >= UINT32_MAX ||
      grow((void **)&s->ops, &s->ops_cap, s->nops + 1, sizeof *s->ops) != 0)
    return coll_error(COLL_ERR_NO_MEMORY, "schedule: cannot grow to %zu ops", s->nops + 1);
  s->ops[s->nops++] = op;
  s->steps[s->nsteps - 1].nops++;
  return COLL_OK;
}

sched_op_t algo_op_send(int peer, sched_buf_t buf, size_t offset, size_t count) {
  return (sched_op_t){.kind = SCHED_SEND,
                      .buf = (uint8_t)buf,
                      .src_buf = (uint8_t)buf,
                      .peer = peer,
                      .offset = offset,
                      .src_offset = offset,
                      .count = count};
}

sched_op_t algo_op_recv_copy(int peer, sched_buf_t buf, size_t offset, size_t count) {
  return (sched_op_t){.kind = SCHED_RECV_COPY,
                      .buf = (uint8_t)buf,
                      .src_buf = (uint8_t)buf,
                      .peer = peer,
                      .offset = offset,
                      .src_offset = offset,
                      .count = count};
}

sched_op_t algo_op_recv_reduce(int peer, sched_buf_t buf, size_t offset, sched_buf_t src_buf,
                               size_t src_offset, size_t count) {
  return (sched_op_t){.kind = SCHED_RECV_REDUCE,
                      .buf = (uint8_t)buf,
                      .src_buf = (uint8_t)src_buf,
                      .peer = peer,
                      .offset = offset,
                      .src_offset = src_offset,
                      .count = count};
}

coll_status_t sched_send(sched_t *s, int peer, sched_buf_t buf, size_t offset, size_t count) {
  return add_op(s, algo_op_send(peer, buf, offset, count));
}

coll_status_t sched_recv_copy(sched_t *s, int peer, sched_buf_t buf, size_t offset, size_t count) {
  return add_op(s, algo_op_recv_copy(peer, buf, offset, count));
}

coll_status_t sched_recv_reduce(sched_t *s, int peer, sched_buf_t buf, size_t offset,
                                sched_buf_t src_buf, size_t src_offset, size_t count) {
  return add_op(s, algo_op_recv_reduce(peer, buf, offset, src_buf, src_offset, count));
}

coll_status_t sched_local_copy(sched_t *s, sched_buf_t buf, size_t offset, sched_buf_t src_buf,
                               size_t src_offset, size_t count) {
  return add_op(s, (sched_op_t){.kind = SCHED_LOCAL_COPY,
                                .buf = (uint8_t)buf,
                                .src_buf = (uint8_t)src_buf,
                                .peer = -1,
                                .offset = offset,
                                .src_offset = src_offset,
                                .count = count});
}

coll_status_t sched_local_reduce(sched_t *s, sched_buf_t buf, size_t offset, sched_buf_t src_buf,
                                 size_t src_offset, size_t count) {
  return add_op(s, (sched_op_t){.kind = SCHED_LOCAL_REDUCE,
                                .buf = (uint8_t)buf,
                                .src_buf = (uint8_t)src_buf,
                                .peer = -1,
                                .offset = offset,
                                .src_offset = src_offset,
                                .count = count});
}

void sched_finish(sched_t *s) {
  size_t out_ops = 0, out_steps = 0;
  for (size_t st = 0; st < s->nsteps; st++) {
    size_t first = out_ops;
    sched_step_t step = s->steps[st];
    for (uint32_t i = 0; i < step.nops; i++) {
      sched_op_t op = s->ops[step.first_op + i];
      if (op.count > 0) s->ops[out_ops++] = op;
    }
    if (out_ops > first) {
      s->steps[out_steps].first_op = (uint32_t)first;
      s->steps[out_steps].nops = (uint32_t)(out_ops - first);
      out_steps++;
    }
  }
  s->nops = out_ops;
  s->nsteps = out_steps;
}

size_t sched_bytes_sent(const sched_t *s) {
  size_t elems = 0;
  for (size_t i = 0; i < s->nops; i++)
    if (s->ops[i].kind == SCHED_SEND) elems += s->ops[i].count;
  return elems * s->elem_size;
}

/* ---- plans ---- */

coll_status_t algo_plan_add(algo_plan_t *plan, size_t time, sched_op_t op) {
  if (op.count == 0) return COLL_OK;
  if (grow((void **)&plan->ops, &plan->cap, plan->nops + 1, sizeof *plan->ops) != 0)
    return coll_error(COLL_ERR_NO_MEMORY, "schedule plan: cannot grow to %zu ops", plan->nops + 1);
  plan->ops[plan->nops] = (algo_timed_op_t){.time = time, .seq = plan->nops, .op = op};
  plan->nops++;
  return COLL_OK;
}

static int by_time_then_seq(const void *a, const void *b) {
  const algo_timed_op_t *x = a, *y = b;
  if (x->time != y->time) return x->time < y->time ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

coll_status_t algo_plan_emit(algo_plan_t *plan, sched_t *s) {
  coll_status_t st = COLL_OK;
  qsort(plan->ops, plan->nops, sizeof *plan->ops, by_time_then_seq);
  for (size_t i = 0; i < plan->nops && st == COLL_OK; i++) {
    if (i == 0 || plan->ops[i].time != plan->ops[i - 1].time) st = sched_begin_step(s);
    if (st == COLL_OK) st = add_op(s, plan->ops[i].op);
  }
  algo_plan_free(plan);
  return st;
}

void algo_plan_free(algo_plan_t *plan) {
  free(plan->ops);
  plan->ops = NULL;
  plan->nops = plan->cap = 0;
}
