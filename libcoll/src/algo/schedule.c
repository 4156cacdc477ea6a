/* Schedules: building (growable step and op arrays), finishing, byte counts, the plan
 * helper for lock-step algorithms, and algo_build(), which validates the parameters and
 * dispatches to the algorithm files. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "common/error.h"

static const size_t elem_sizes[COLL_DTYPE_COUNT] = {
    [COLL_INT8] = 1,    [COLL_UINT8] = 1,   [COLL_INT32] = 4,   [COLL_UINT32] = 4,
    [COLL_INT64] = 8,   [COLL_UINT64] = 8,  [COLL_FLOAT16] = 2, [COLL_BFLOAT16] = 2,
    [COLL_FLOAT32] = 4, [COLL_FLOAT64] = 8,
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
  s->elem_size = algo_elem_size(p->dtype);
}

static const char *const kind_names[COLL_KIND_COUNT] = {
    [COLL_KIND_ALL_REDUCE] = "all_reduce",         [COLL_KIND_BROADCAST] = "broadcast",
    [COLL_KIND_REDUCE] = "reduce",                 [COLL_KIND_ALL_GATHER] = "all_gather",
    [COLL_KIND_REDUCE_SCATTER] = "reduce_scatter", [COLL_KIND_ALL_TO_ALL] = "all_to_all",
    [COLL_KIND_BARRIER] = "barrier",               [COLL_KIND_P2P] = "send/recv",
};

const char *sched_kind_name(coll_kind_t kind) {
  return (unsigned)kind < COLL_KIND_COUNT ? kind_names[kind] : "unknown";
}

void sched_buffer_counts(coll_kind_t kind, size_t count, int nranks, size_t *in_count,
                         size_t *out_count) {
  size_t n = nranks > 0 ? (size_t)nranks : 1;
  *in_count = kind == COLL_KIND_REDUCE_SCATTER || kind == COLL_KIND_ALL_TO_ALL ? n * count : count;
  *out_count = kind == COLL_KIND_ALL_GATHER || kind == COLL_KIND_ALL_TO_ALL ? n * count : count;
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

/* ---- dispatch ---- */

typedef coll_status_t (*builder_fn)(const sched_params_t *p, sched_t *s);

/* Which builder implements (collective, algo). Broadcast: RING is a pipelined chain,
 * TREE and HD a binomial tree (recursive doubling is a binomial tree), MASTER the root
 * sending to every rank directly. */
static const builder_fn builders[COLL_KIND_COUNT][COLL_ALGO_COUNT] = {
    [COLL_KIND_ALL_REDUCE] =
        {
            [COLL_ALGO_RING] = algo_ring_allreduce,
            [COLL_ALGO_TREE] = algo_tree_allreduce,
            [COLL_ALGO_HD] = algo_hd_allreduce,
            [COLL_ALGO_MASTER] = algo_master_allreduce,
        },
    [COLL_KIND_BROADCAST] =
        {
            [COLL_ALGO_RING] = algo_chain_broadcast,
            [COLL_ALGO_TREE] = algo_binomial_broadcast,
            [COLL_ALGO_HD] = algo_binomial_broadcast,
            [COLL_ALGO_MASTER] = algo_direct_broadcast,
        },
    /* The newer collectives: reduce is a pipelined
     * chain (ring) or a binomial tree (tree, hd); all_gather a ring or Bruck's
     * log-step algorithm (hd); reduce_scatter a ring or recursive halving (hd, powers
     * of two); all_to_all pairwise exchange;
     * barrier a one-byte all-reduce (reduce.c, allgather.c, reduce_scatter.c, alltoall.c).
     * Missing pairs fall back to the cost model. */
    [COLL_KIND_REDUCE] =
        {
            [COLL_ALGO_RING] = algo_chain_reduce,
            [COLL_ALGO_TREE] = algo_binomial_reduce,
            [COLL_ALGO_HD] = algo_binomial_reduce,
        },
    [COLL_KIND_ALL_GATHER] =
        {
            [COLL_ALGO_RING] = algo_ring_allgather,
            [COLL_ALGO_HD] = algo_bruck_allgather,
        },
    [COLL_KIND_REDUCE_SCATTER] = {[COLL_ALGO_RING] = algo_ring_reduce_scatter,
                                  [COLL_ALGO_HD] = algo_halving_reduce_scatter},
    [COLL_KIND_ALL_TO_ALL] = {[COLL_ALGO_RING] = algo_pairwise_alltoall},
    [COLL_KIND_BARRIER] =
        {
            [COLL_ALGO_RING] = algo_ring_allreduce,
            [COLL_ALGO_TREE] = algo_tree_allreduce,
            [COLL_ALGO_HD] = algo_hd_allreduce,
            [COLL_ALGO_MASTER] = algo_master_allreduce,
        },
};

static coll_status_t validate(coll_algo_t algo, const sched_params_t *p, const sched_t *s) {
  if (p == NULL || s == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: NULL params or schedule");
  if ((unsigned)p->collective >= COLL_KIND_COUNT)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: unknown collective %d",
                      (int)p->collective);
  if ((unsigned)algo >= COLL_ALGO_COUNT || algo == COLL_ALGO_AUTO)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "algo_build: algorithm %d is not a concrete algorithm (AUTO must be "
                      "resolved with algo_select first)",
                      (int)algo);
  if (algo_elem_size(p->dtype) == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: unknown dtype %d", (int)p->dtype);
  if (p->nranks < 1 || p->rank < 0 || p->rank >= p->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: rank %d of %d ranks is invalid",
                      p->rank, p->nranks);
  if ((p->collective == COLL_KIND_BROADCAST || p->collective == COLL_KIND_REDUCE) &&
      (p->root < 0 || p->root >= p->nranks))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: root %d of %d ranks",
                      p->root, p->nranks);
  if (p->count > SIZE_MAX / 16 / algo_elem_size(p->dtype) / (size_t)p->nranks)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "algo_build: count %zu is too large", p->count);
  return COLL_OK;
}

coll_status_t algo_build(coll_algo_t algo, const sched_params_t *p, sched_t *s) {
  coll_status_t st = validate(algo, p, s);
  if (st != COLL_OK) return st;
  sched_init(s, p, algo);
  builder_fn fn = builders[p->collective][algo];
  if (fn == NULL)
    return coll_error(COLL_ERR_UNSUPPORTED, "algorithm %d does not implement collective %d",
                      (int)algo, (int)p->collective);
  if (p->count > 0) {
    st = fn(p, s);
    if (st != COLL_OK) {
      sched_free(s);
      return st;
    }
  }
  sched_finish(s);
  return COLL_OK;
}
