/* Hazard analysis of a schedule, done once per cached schedule: for every op, the
 * earlier ops (within EXEC_LOOKBACK ops and EXEC_STEPS_AHEAD steps) it must wait for
 * because they touch the same bytes: it may not read what an earlier op writes, nor
 * write what an earlier op reads or writes. Buffers are compared by name; in-place
 * calls make INPUT and OUTPUT one buffer (out-of-place ones never overlap: the API
 * rejects partial overlap). */
#include <stdlib.h>

#include "common/error.h"
#include "exec/exec.h"

typedef struct {
  uint8_t buf;
  size_t lo, hi; /* elements [lo, hi) */
} named_range_t;

static named_range_t nrange(bool in_place, uint8_t buf, size_t offset, size_t count) {
  if (in_place && buf == SCHED_BUF_INPUT) buf = SCHED_BUF_OUTPUT;
  return (named_range_t){.buf = buf, .lo = offset, .hi = offset + count};
}

static bool overlap(named_range_t a, named_range_t b) {
  return a.buf == b.buf && a.lo < b.hi && b.lo < a.hi && a.lo < a.hi && b.lo < b.hi;
}

/* The elements an op writes (w, absent for SEND) and reads (r[0..nr)). */
static void op_ranges(const sched_op_t *op, bool in_place, named_range_t *w, named_range_t r[1],
                      int *nr, bool *writes) {
  *nr = 0;
  *writes = op->kind != SCHED_SEND;
  if (op->kind == SCHED_SEND) {
    r[(*nr)++] = nrange(in_place, op->buf, op->offset, op->count);
    return;
  }
  *w = nrange(in_place, op->buf, op->offset, op->count);
  /* LOCAL_REDUCE also reads its destination, which w already covers. */
  if (op->kind != SCHED_RECV_COPY)
    r[(*nr)++] = nrange(in_place, op->src_buf, op->src_offset, op->count);
}

static bool conflict(const sched_op_t *a, const sched_op_t *b, bool in_place) {
  named_range_t wa = {0}, wb = {0}, ra[1], rb[1];
  int na, nb;
  bool xa, xb;
  op_ranges(a, in_place, &wa, ra, &na, &xa);
  op_ranges(b, in_place, &wb, rb, &nb, &xb);
  if (xa && xb && overlap(wa, wb)) return true;
  if (xa && nb && overlap(wa, rb[0])) return true;
  if (xb && na && overlap(ra[0], wb)) return true;
  return false;
}

coll_status_t exec_deps_build(exec_cache_entry_t *e, bool in_place) {
  const sched_t *s = &e->sched;
  size_t cap = s->nops + 16, n = 0;
  uint32_t *deps = malloc(cap * sizeof *deps);
  uint32_t *start = malloc((s->nops + 1) * sizeof *start);
  if (deps == NULL || start == NULL) goto nomem;
  for (size_t i = 0; i < s->nops; i++) {
    start[i] = (uint32_t)n;
    size_t first = i > EXEC_LOOKBACK ? i - EXEC_LOOKBACK : 0;
    for (size_t j = i; j-- > first;) {
      if (e->op_step[j] + EXEC_STEPS_AHEAD <= e->op_step[i]) break;
      if (!conflict(&s->ops[i], &s->ops[j], in_place)) continue;
      if (n == cap) {
        cap *= 2;
        uint32_t *grown = realloc(deps, cap * sizeof *deps);
        if (grown == NULL) goto nomem;
        deps = grown;
      }
      deps[n++] = (uint32_t)j;
    }
  }
  start[s->nops] = (uint32_t)n;
  e->deps = deps;
  e->dep_start = start;
  return COLL_OK;
nomem:
  free(deps);
  free(start);
  return coll_error(COLL_ERR_NO_MEMORY, "out of memory analysing a schedule of %zu ops", s->nops);
}
