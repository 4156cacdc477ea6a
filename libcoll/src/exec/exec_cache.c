/* The executor's schedule cache: a call's schedule is built once (algo_build, or the
 * one step of a point-to-point group), checked against the call's buffers, given its
 * hazard lists (exec_deps.c) and kept for the next call of the same shape (least
 * recently used evicted; all_to_allv's shape includes its per-peer counts). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "exec/exec.h"

static bool is_transfer(uint8_t kind) { return kind <= SCHED_RECV_REDUCE; }

/* Reject schedules that would touch memory outside the call's buffers: a bug in an
 * algorithm must become an error, not a corruption. */
static coll_status_t validate_schedule(const sched_t *s, int nranks, int rank) {
  for (size_t i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    size_t limit[3] = {s->in_count, s->out_count, s->scratch_count};
    if (op->buf > SCHED_BUF_SCRATCH || op->src_buf > SCHED_BUF_SCRATCH ||
        op->kind > SCHED_LOCAL_REDUCE)
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu has a bad buffer or kind", i);
    if (op->offset > limit[op->buf] || op->count > limit[op->buf] - op->offset)
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu is out of its buffer", i);
    bool uses_src = op->kind == SCHED_RECV_REDUCE || op->kind >= SCHED_LOCAL_COPY;
    if (uses_src &&
        (op->src_offset > limit[op->src_buf] || op->count > limit[op->src_buf] - op->src_offset))
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu reads out of its buffer", i);
    if (is_transfer(op->kind) && (op->peer < 0 || op->peer >= nranks || op->peer == rank))
      return coll_error(COLL_ERR_INTERNAL, "schedule op %zu has bad peer %d", i, (int)op->peer);
  }
  return COLL_OK;
}

static void entry_clear(exec_cache_entry_t *e) {
  if (e->valid) sched_free(&e->sched);
  free(e->vcounts);
  free(e->op_step);
  free(e->state);
  free(e->seq);
  free(e->dep_start);
  free(e->deps);
  memset(e, 0, sizeof *e);
}

/* P2P: one step with every transfer of the call, each on its own element range of a
 * byte-typed INPUT (sends) or OUTPUT (receives), so no two look like a hazard; the
 * executor maps op i to the user's buffer (its run's op_base). Not cached. */
static coll_status_t p2p_build(const coll_base_t *base, const coll_call_t *call, sched_t *s) {
  if (call->kind != COLL_KIND_P2P) return COLL_OK;
  sched_params_t p = {.collective = COLL_KIND_P2P,
                      .count = call->count,
                      .dtype = COLL_UINT8,
                      .rank = base->rank,
                      .nranks = base->nranks};
  sched_init(s, &p, COLL_ALGO_RING);
  const coll_p2p_t *ops = call->p2p ? call->p2p : &call->one;
  size_t nops = call->p2p ? call->np2p : 1, off = 0;
  coll_status_t st = sched_begin_step(s);
  for (size_t i = 0; i < nops && st == COLL_OK; i++) {
    /* The API drops zero-byte transfers on both sides. */
    st = ops[i].send ? sched_send(s, ops[i].peer, SCHED_BUF_INPUT, off, ops[i].bytes)
                     : sched_recv_copy(s, ops[i].peer, SCHED_BUF_OUTPUT, off, ops[i].bytes);
    off += ops[i].bytes;
  }
  return st;
}

static size_t vcounts_bytes(int nranks) { return 4 * (size_t)nranks * sizeof(size_t); }

static coll_status_t entry_build(exec_t *x, const coll_call_t *call, exec_cache_entry_t *e) {
  const coll_base_t *base = x->base;
  sched_params_t p = {
      .collective = call->kind,
      .count = call->count,
      .dtype = call->dtype,
      .rank = base->rank,
      .nranks = base->nranks,
      .root = call->root,
      .segment_bytes = call->segment_bytes,
      .vcounts = call->vcounts,
      .topo = base_topo(base),
  };
  coll_status_t st = p2p_build(base, call, &e->sched);
  if (call->kind != COLL_KIND_P2P) st = algo_build(call->algo, &p, &e->sched);
  if (st == COLL_ERR_UNSUPPORTED && call->kind != COLL_KIND_ALL_REDUCE) {
    /* A forced algorithm without a form for this collective: use the cost model's
     * choice, which every rank makes alike. */
    sched_free(&e->sched);
    st = algo_build(algo_select(&p, x->cost), &p, &e->sched);
  }
  if (st != COLL_OK) {
    sched_free(&e->sched);
    return st;
  }
  e->valid = true;
  st = validate_schedule(&e->sched, base->nranks, base->rank);
  if (st != COLL_OK) return st;
  size_t n = e->sched.nops ? e->sched.nops : 1;
  e->op_step = malloc(n * sizeof *e->op_step);
  e->state = malloc(n);
  e->seq = malloc(n * sizeof *e->seq);
  if (e->op_step == NULL || e->state == NULL || e->seq == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a schedule of %zu ops", n);
  for (size_t s = 0; s < e->sched.nsteps; s++)
    for (uint32_t k = 0; k < e->sched.steps[s].nops; k++)
      e->op_step[e->sched.steps[s].first_op + k] = (uint32_t)s;
  bool in_place = call->sendbuf == call->recvbuf;
  st = exec_deps_build(e, in_place);
  if (st != COLL_OK) return st;
  e->in_place = in_place;
  e->kind = call->kind;
  e->count = call->count;
  e->dtype = call->dtype;
  e->root = call->root;
  e->algo = call->algo;
  e->segment_bytes = call->segment_bytes;
  if (call->kind == COLL_KIND_ALL_TO_ALLV) {
    e->vcounts = malloc(vcounts_bytes(base->nranks));
    if (e->vcounts == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a schedule");
    memcpy(e->vcounts, call->vcounts, vcounts_bytes(base->nranks));
  }
  return COLL_OK;
}

/* Whether e holds call's all_to_allv layout (always, for the other collectives). */
static bool same_layout(const exec_cache_entry_t *e, const coll_call_t *call, int nranks) {
  return call->kind != COLL_KIND_ALL_TO_ALLV ||
         (e->vcounts != NULL && memcmp(e->vcounts, call->vcounts, vcounts_bytes(nranks)) == 0);
}

/* The cached schedule for call, built on a miss (least recently used entry evicted). */
coll_status_t exec_cache_get(exec_t *x, const coll_call_t *call, exec_cache_entry_t **out) {
  exec_cache_entry_t *victim = &x->cache[0];
  for (int k = 0; k < EXEC_CACHE_SIZE; k++) {
    exec_cache_entry_t *e = &x->cache[k];
    if (e->valid && call->kind != COLL_KIND_P2P && e->kind == call->kind &&
        e->count == call->count && e->dtype == call->dtype && e->root == call->root &&
        e->algo == call->algo && e->segment_bytes == call->segment_bytes &&
        e->in_place == (call->sendbuf == call->recvbuf) && same_layout(e, call, x->base->nranks)) {
      e->last_use = ++x->use_clock;
      *out = e;
      return COLL_OK;
    }
    if (!e->valid || (victim->valid && e->last_use < victim->last_use)) victim = e;
  }
  entry_clear(victim);
  coll_status_t st = entry_build(x, call, victim);
  if (st != COLL_OK) {
    entry_clear(victim);
    return st;
  }
  victim->last_use = ++x->use_clock;
  *out = victim;
  return COLL_OK;
}

void exec_cache_clear(exec_t *x) {
  for (int k = 0; k < EXEC_CACHE_SIZE; k++) entry_clear(&x->cache[k]);
}
