/* coll-sim: runs the simulator on every rank's schedule and turns its event list into
 * steps of matched transfers, names element ranges after the algorithm's own units, and
 * replays the steps on per-element sets of ranks to show buffers filling up. */
#include "trace.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "common/error.h"

const char *trace_algo_name(coll_kind_t kind, coll_algo_t algo) {
  static const char *const allreduce[COLL_ALGO_COUNT] = {[COLL_ALGO_AUTO] = "auto",
                                                         [COLL_ALGO_RING] = "ring",
                                                         [COLL_ALGO_TREE] = "tree",
                                                         [COLL_ALGO_HD] = "hd",
                                                         [COLL_ALGO_MASTER] = "master",
                                                         [COLL_ALGO_ARENA] = "arena",
                                                         [COLL_ALGO_RING_NODES] = "ring_nodes",
                                                         [COLL_ALGO_TWO_LEVEL] = "two_level",
                                                         [COLL_ALGO_LEADERS] = "leaders"};
  /* Broadcast: the builders behind each algorithm id (see schedule.c). */
  static const char *const broadcast[COLL_ALGO_COUNT] = {[COLL_ALGO_AUTO] = "auto",
                                                         [COLL_ALGO_RING] = "chain",
                                                         [COLL_ALGO_TREE] = "binomial",
                                                         [COLL_ALGO_HD] = "binomial",
                                                         [COLL_ALGO_MASTER] = "direct"};
  /* gather and scatter (gather.c): direct or binomial; all_to_allv pairwise. */
  static const char *const rooted[COLL_ALGO_COUNT] = {[COLL_ALGO_AUTO] = "auto",
                                                      [COLL_ALGO_TREE] = "binomial",
                                                      [COLL_ALGO_HD] = "binomial",
                                                      [COLL_ALGO_MASTER] = "direct"};
  static const char *const pairwise[COLL_ALGO_COUNT] = {
      [COLL_ALGO_AUTO] = "auto", [COLL_ALGO_RING] = "pairwise"};
  if ((unsigned)algo >= COLL_ALGO_COUNT) return "?";
  const char *name = kind == COLL_KIND_BROADCAST                             ? broadcast[algo]
                     : kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER ? rooted[algo]
                     : kind == COLL_KIND_ALL_TO_ALLV                         ? pairwise[algo]
                                                                             : allreduce[algo];
  return name != NULL ? name : "?";
}

const char *trace_collective_name(coll_kind_t kind) {
  return kind == COLL_KIND_ALL_REDUCE ? "all_reduce" : sched_kind_name(kind);
}

size_t trace_alltoallv_count(const sim_request_t *q, int from, int to) {
  return (size_t)((from + 2 * to) % 3) * (q->count / 2);
}

void trace_alltoallv_layout(const sim_request_t *q, int r, size_t *v) {
  int n = q->nranks;
  size_t sat = 0, rat = 0;
  for (int p = 0; p < n; p++) {
    v[SCHED_V_SENDCOUNTS * n + p] = trace_alltoallv_count(q, r, p);
    v[SCHED_V_RECVCOUNTS * n + p] = trace_alltoallv_count(q, p, r);
    v[SCHED_V_SDISPLS * n + p] = sat;
    v[SCHED_V_RDISPLS * n + p] = rat;
    sat += v[SCHED_V_SENDCOUNTS * n + p];
    rat += v[SCHED_V_RECVCOUNTS * n + p];
  }
}

const char *trace_dtype_name(coll_dtype_t dtype) {
  static const char *const names[COLL_DTYPE_COUNT] = {
      [COLL_INT8] = "int8",       [COLL_UINT8] = "uint8",       [COLL_INT32] = "int32",
      [COLL_UINT32] = "uint32",   [COLL_INT64] = "int64",       [COLL_UINT64] = "uint64",
      [COLL_FLOAT16] = "float16", [COLL_BFLOAT16] = "bfloat16", [COLL_FLOAT32] = "float32",
      [COLL_FLOAT64] = "float64", [COLL_FLOAT8E4M3] = "float8_e4m3",
      [COLL_FLOAT8E5M2] = "float8_e5m2"};
  return (unsigned)dtype < COLL_DTYPE_COUNT && names[dtype] != NULL ? names[dtype] : "?";
}

/* The algorithm's own vocabulary for parts of the buffer (see each algorithm file). */
static unit_t choose_unit(const sim_request_t *q) {
  sched_params_t p = {.collective = q->collective,
                      .count = q->count,
                      .dtype = q->dtype,
                      .nranks = q->nranks,
                      .root = q->root,
                      .segment_bytes = q->segment_bytes,
                      .topo = q->topo};
  size_t seg = algo_segment_elems(&p);
  if (q->collective == COLL_KIND_ALL_REDUCE) {
    /* Ring and tree pipeline each unit as segments cut the way ring.c and tree.c do. */
    if (q->algo == COLL_ALGO_RING)
      return (unit_t){.name = "chunk",
                      .nparts = (size_t)q->nranks,
                      .nsub = algo_div_up(algo_div_up(q->count, (size_t)q->nranks), seg)};
    if (q->algo == COLL_ALGO_HD) {
      size_t pw = 1;
      while (pw * 2 <= (size_t)q->nranks) pw *= 2;
      return (unit_t){.name = "block", .nparts = pw};
    }
    if (q->algo == COLL_ALGO_TREE)
      return (unit_t){
          .name = "half", .nparts = 2, .nsub = algo_div_up(algo_part_len(q->count, 2, 0), seg)};
  }
  if (q->collective == COLL_KIND_GATHER || q->collective == COLL_KIND_SCATTER ||
      q->collective == COLL_KIND_ALL_TO_ALLV)
    return (unit_t){.name = "element", .nparts = 0}; /* plain ranges: buffers differ in size */
  size_t nseg = q->count == 0 ? 1 : algo_div_up(q->count, seg);
  return (unit_t){.name = "segment", .nparts = nseg, .seg_elems = seg};
}

size_t trace_unit_start(const trace_t *t, size_t i) {
  const unit_t *u = &t->unit;
  if (u->seg_elems == 0) return algo_part_start(t->req.count, u->nparts, i);
  size_t s = i * u->seg_elems;
  return s < t->req.count ? s : t->req.count;
}

/* The unit holding element e. */
static size_t unit_of(const trace_t *t, size_t e) {
  size_t lo = 0, hi = t->unit.nparts; /* trace_unit_start(lo) <= e < start(hi) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (trace_unit_start(t, mid) <= e)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Which units [off, off+count) covers: first, last, and whether it is exactly whole units. */
static void cover(const trace_t *t, size_t off, size_t count, size_t *first, size_t *last,
                  int *whole) {
  *first = unit_of(t, off);
  *last = unit_of(t, off + count - 1);
  *whole = trace_unit_start(t, *first) == off && trace_unit_start(t, *last + 1) == off + count;
}

/* Whether [off, off+count) is exactly pipelined segment *j of unit u. */
static int is_sub(const trace_t *t, size_t u, size_t off, size_t count, size_t *j) {
  size_t nsub = t->unit.nsub, ustart = trace_unit_start(t, u);
  size_t ulen = trace_unit_start(t, u + 1) - ustart;
  if (nsub <= 1 || off < ustart) return 0;
  size_t lo = 0, hi = nsub; /* part_start(lo) <= off - ustart < part_start(hi) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (algo_part_start(ulen, nsub, mid) <= off - ustart)
      lo = mid;
    else
      hi = mid;
  }
  *j = lo;
  return algo_part_start(ulen, nsub, lo) == off - ustart && algo_part_len(ulen, nsub, lo) == count;
}

void trace_range_name(const trace_t *t, size_t off, size_t count, char *buf, size_t len) {
  if (count == 0) {
    snprintf(buf, len, "nothing");
    return;
  }
  if (t->unit.nparts == 0) {
    snprintf(buf, len, "elements %zu..%zu", off, off + count - 1);
    return;
  }
  size_t first, last;
  int whole;
  cover(t, off, count, &first, &last, &whole);
  const char *u = t->unit.name;
  size_t a = off, b = off + count - 1, j;
  if (t->unit.nparts == 1 && whole)
    snprintf(buf, len, "the whole buffer (elements %zu..%zu)", a, b);
  else if (whole && first == last)
    snprintf(buf, len, "%s %zu (elements %zu..%zu)", u, first, a, b);
  else if (whole)
    snprintf(buf, len, "%ss %zu-%zu (elements %zu..%zu)", u, first, last, a, b);
  else if (first == last && is_sub(t, first, off, count, &j))
    snprintf(buf, len, "segment %zu of %s %zu (elements %zu..%zu)", j, u, first, a, b);
  else if (first == last)
    snprintf(buf, len, "part of %s %zu (elements %zu..%zu)", u, first, a, b);
  else
    snprintf(buf, len, "elements %zu..%zu", a, b);
}

void trace_range_short(const trace_t *t, size_t off, size_t count, char *buf, size_t len) {
  if (count == 0 || t->unit.nparts == 0) {
    if (count == 0)
      snprintf(buf, len, "-");
    else
      snprintf(buf, len, "%zu..%zu", off, off + count - 1);
    return;
  }
  size_t first, last;
  int whole;
  cover(t, off, count, &first, &last, &whole);
  char u = t->unit.name[0];
  size_t j;
  if (t->unit.nparts == 1 && whole)
    snprintf(buf, len, "all");
  else if (whole && first == last)
    snprintf(buf, len, "%c%zu", u, first);
  else if (whole)
    snprintf(buf, len, "%c%zu-%zu", u, first, last);
  else if (first == last && is_sub(t, first, off, count, &j))
    snprintf(buf, len, "%c%zu.%zu", u, first, j);
  else if (first == last)
    snprintf(buf, len, "%c%zu'", u, first);
  else
    snprintf(buf, len, "%zu..%zu", off, off + count - 1);
}

/* ---- building ---- */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (q == NULL) return -1;
  *p = q;
  *cap = c;
  return 0;
}

/* Time of one step under the cost model, from what it moves: one latency, the busiest
 * rank's bytes in or out, the busiest rank's reduced bytes. */
static double step_time(const trace_t *t, const tstep_t *s, size_t *in, size_t *out, size_t *red) {
  int n = t->req.nranks;
  memset(in, 0, (size_t)n * sizeof *in);
  memset(out, 0, (size_t)n * sizeof *out);
  memset(red, 0, (size_t)n * sizeof *red);
  for (size_t i = 0; i < s->nxfers; i++) {
    const xfer_t *x = &t->xfers[s->first_xfer + i];
    size_t b = x->count * t->esize;
    out[x->src] += b;
    in[x->dst] += b;
    if (x->reduce) red[x->dst] += b;
  }
  for (size_t i = 0; i < s->nlocals; i++) {
    const local_t *l = &t->locals[s->first_local + i];
    if (l->op.kind == SCHED_LOCAL_REDUCE) red[l->rank] += l->op.count * t->esize;
  }
  size_t wire = 0, reduced = 0;
  for (int r = 0; r < n; r++) {
    size_t m = in[r] > out[r] ? in[r] : out[r];
    if (m > wire) wire = m;
    if (red[r] > reduced) reduced = red[r];
  }
  return t->req.cost.alpha + (double)wire * t->req.cost.beta + (double)reduced * t->req.cost.gamma;
}

static coll_status_t regroup(trace_t *t) {
  const sim_result_t *res = &t->res;
  size_t xcap = 0, lcap = 0;
  t->nsteps = res->nrounds;
  t->steps = calloc(t->nsteps ? t->nsteps : 1, sizeof *t->steps);
  t->bytes_reduced = calloc((size_t)t->req.nranks, sizeof *t->bytes_reduced);
  if (t->steps == NULL || t->bytes_reduced == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "coll-sim: out of memory");
  /* Events are in round order; a matched message is recorded as its send immediately
   * followed by its receive (sim.c, try_match). */
  for (size_t i = 0; i < res->nevents; i++) {
    const sim_event_t *e = &res->events[i];
    tstep_t *st = &t->steps[e->round];
    if (e->op.kind == SCHED_SEND) {
      const sim_event_t *rv = i + 1 < res->nevents ? &res->events[i + 1] : NULL;
      if (rv == NULL || rv->round != e->round || rv->rank != e->op.peer || rv->op.peer != e->rank ||
          rv->op.kind == SCHED_SEND)
        return coll_error(COLL_ERR_INTERNAL, "coll-sim: send event %zu has no receive after it", i);
      if (grow((void **)&t->xfers, &xcap, t->nxfers + 1, sizeof *t->xfers) != 0)
        return coll_error(COLL_ERR_NO_MEMORY, "coll-sim: out of memory");
      if (st->nxfers == 0) st->first_xfer = t->nxfers;
      int reduce = rv->op.kind == SCHED_RECV_REDUCE;
      t->xfers[t->nxfers++] = (xfer_t){.src = e->rank,
                                       .dst = rv->rank,
                                       .src_buf = e->op.buf,
                                       .dst_buf = rv->op.buf,
                                       .reduce = reduce,
                                       .red_buf = rv->op.src_buf,
                                       .red_offset = rv->op.src_offset,
                                       .src_offset = e->op.offset,
                                       .dst_offset = rv->op.offset,
                                       .count = e->op.count};
      st->nxfers++;
      if (reduce) t->bytes_reduced[rv->rank] += e->op.count * t->esize;
      i++;
    } else if (e->op.kind == SCHED_LOCAL_COPY || e->op.kind == SCHED_LOCAL_REDUCE) {
      if (grow((void **)&t->locals, &lcap, t->nlocals + 1, sizeof *t->locals) != 0)
        return coll_error(COLL_ERR_NO_MEMORY, "coll-sim: out of memory");
      if (st->nlocals == 0) st->first_local = t->nlocals;
      t->locals[t->nlocals++] = (local_t){.rank = e->rank, .op = e->op};
      st->nlocals++;
      if (e->op.kind == SCHED_LOCAL_REDUCE) t->bytes_reduced[e->rank] += e->op.count * t->esize;
    } else {
      return coll_error(COLL_ERR_INTERNAL, "coll-sim: receive event %zu without its send", i);
    }
  }
  return COLL_OK;
}

coll_status_t trace_build(const sim_request_t *req, trace_t *t) {
  memset(t, 0, sizeof *t);
  t->req = *req;
  t->esize = algo_elem_size(req->dtype);
  t->unit = choose_unit(req);
  sched_params_t p = {.collective = req->collective,
                      .count = req->count,
                      .dtype = req->dtype,
                      .nranks = req->nranks,
                      .root = req->root,
                      .segment_bytes = req->segment_bytes,
                      .topo = req->topo};
  sim_config_t cfg = {.dtype = req->dtype, .op = COLL_SUM, .record_events = 1};
  size_t **layouts = NULL, n4 = 4 * (size_t)req->nranks;
  if (req->collective == COLL_KIND_ALL_TO_ALLV) {
    p.count = (size_t)req->nranks; /* schedule.h: the length of each count array */
    layouts = calloc((size_t)req->nranks, sizeof *layouts);
    for (int r = 0; layouts != NULL && r < req->nranks; r++) {
      layouts[r] = malloc(n4 * sizeof **layouts);
      if (layouts[r] == NULL) break;
      trace_alltoallv_layout(req, r, layouts[r]);
    }
    cfg.vcounts = (const size_t *const *)layouts;
  }
  bool ready = req->collective != COLL_KIND_ALL_TO_ALLV ||
               (layouts != NULL && layouts[req->nranks - 1] != NULL);
  coll_status_t st = ready ? sim_run_algo(req->algo, &p, &cfg, &t->res)
                           : coll_error(COLL_ERR_NO_MEMORY, "coll-sim: out of memory");
  for (int r = 0; layouts != NULL && r < req->nranks; r++) free(layouts[r]);
  free(layouts);
  if (st != COLL_OK) return st;
  st = regroup(t);
  size_t n = (size_t)req->nranks;
  size_t *tmp = st == COLL_OK ? calloc(3 * n, sizeof *tmp) : NULL;
  if (st == COLL_OK && tmp == NULL) st = coll_error(COLL_ERR_NO_MEMORY, "coll-sim: out of memory");
  for (size_t k = 0; st == COLL_OK && k < t->nsteps; k++)
    t->estimate_s += step_time(t, &t->steps[k], tmp, tmp + n, tmp + 2 * n);
  free(tmp);
  if (st != COLL_OK) trace_free(t);
  return st;
}

void trace_free(trace_t *t) {
  sim_result_free(&t->res);
  free(t->xfers);
  free(t->locals);
  free(t->steps);
  free(t->bytes_reduced);
  memset(t, 0, sizeof *t);
}

/* ---- replay on sets of ranks ---- */

static uint64_t *buf_of(uint64_t *mem, size_t count, int r, uint8_t buf) {
  return mem + ((size_t)r * 3 + buf) * count;
}

static void snapshot(const trace_t *t, const uint64_t *mem, replay_t *rp, size_t k) {
  int n = t->req.nranks;
  for (int r = 0; r < n; r++) {
    int shows_input = t->req.collective == COLL_KIND_BROADCAST && r == t->req.root;
    const uint64_t *b =
        buf_of((uint64_t *)mem, t->req.count, r, shows_input ? SCHED_BUF_INPUT : SCHED_BUF_OUTPUT);
    for (size_t c = 0; c < rp->ncells; c++) {
      cell_state_t *cs = &rp->cells[(k * (size_t)n + (size_t)r) * rp->ncells + c];
      size_t lo = rp->cell_start[c], hi = rp->cell_start[c + 1], fin = 0;
      cs->mask = lo < hi ? b[lo] : 0;
      cs->uniform = 1;
      for (size_t e = lo; e < hi; e++) {
        if (b[e] != cs->mask) cs->uniform = 0;
        if (b[e] == rp->final_mask) fin++;
      }
      cs->final_permille = hi > lo ? (uint16_t)(fin * 1000 / (hi - lo)) : 1000;
    }
  }
}

static void apply_local(uint64_t *mem, size_t count, const local_t *l) {
  uint64_t *dst = buf_of(mem, count, l->rank, l->op.buf) + l->op.offset;
  const uint64_t *src = buf_of(mem, count, l->rank, l->op.src_buf) + l->op.src_offset;
  for (size_t e = 0; e < l->op.count; e++)
    dst[e] = l->op.kind == SCHED_LOCAL_COPY ? src[e] : dst[e] | src[e];
}

size_t trace_cells(const trace_t *t, size_t max_cells, size_t *cell_start) {
  const unit_t *u = &t->unit;
  size_t count = t->req.count, ncells = 0;
  if (u->nparts >= 2 && u->nparts <= max_cells && u->nparts <= count) {
    /* The algorithm's units, each cut into its pipelined segments when they fit. */
    size_t sub = u->nsub > 1 && u->nparts * u->nsub <= max_cells ? u->nsub : 1;
    for (size_t i = 0; i < u->nparts; i++) {
      size_t ustart = trace_unit_start(t, i), ulen = trace_unit_start(t, i + 1) - ustart;
      for (size_t j = 0; j < sub; j++)
        if (algo_part_len(ulen, sub, j) > 0 && cell_start != NULL)
          cell_start[ncells++] = ustart + algo_part_start(ulen, sub, j);
        else if (algo_part_len(ulen, sub, j) > 0)
          ncells++;
    }
  } else {
    size_t n = (size_t)t->req.nranks < 4 ? 4 : (size_t)t->req.nranks;
    ncells = n < max_cells ? n : max_cells;
    if (ncells > count) ncells = count;
    if (ncells == 0) ncells = 1;
    if (cell_start != NULL)
      for (size_t c = 0; c < ncells; c++) cell_start[c] = algo_part_start(count, ncells, c);
  }
  if (cell_start != NULL) cell_start[ncells] = count;
  return ncells;
}

coll_status_t trace_replay(const trace_t *t, size_t max_cells, replay_t *rp) {
  memset(rp, 0, sizeof *rp);
  int n = t->req.nranks;
  size_t count = t->req.count;
  if (n > 64)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "buffer pictures need at most 64 ranks (sets of ranks are 64-bit masks)");
  if (count * (size_t)n > ((size_t)1 << 22))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "buffer pictures need elements x ranks <= 4194304 (have %zu x %d); use "
                      "a smaller --bytes",
                      count, n);
  size_t ncells = trace_cells(t, max_cells, NULL);
  rp->ncells = ncells;
  rp->nstates = t->nsteps + 1;
  rp->cell_start = calloc(ncells + 1, sizeof *rp->cell_start);
  rp->cells = calloc(rp->nstates * (size_t)n * ncells, sizeof *rp->cells);
  uint64_t *mem = calloc(count * 3 * (size_t)n + 1, sizeof *mem);
  if (rp->cell_start == NULL || rp->cells == NULL || mem == NULL) {
    free(mem);
    replay_free(rp);
    return coll_error(COLL_ERR_NO_MEMORY, "coll-sim: out of memory for the replay");
  }
  trace_cells(t, max_cells, rp->cell_start);
  rp->final_mask = t->req.collective == COLL_KIND_BROADCAST
                       ? (uint64_t)1 << t->req.root
                       : (n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1);
  for (int r = 0; r < n; r++) {
    uint64_t *in = buf_of(mem, count, r, SCHED_BUF_INPUT);
    int has_data = t->req.collective == COLL_KIND_ALL_REDUCE || r == t->req.root;
    for (size_t e = 0; e < count; e++) in[e] = has_data ? (uint64_t)1 << r : 0;
  }
  snapshot(t, mem, rp, 0);
  for (size_t k = 0; k < t->nsteps; k++) {
    const tstep_t *s = &t->steps[k];
    /* Within a step no op writes what another reads (the simulator checks it), so
     * applying them one after the other is the same as applying them together. */
    for (size_t i = 0; i < s->nlocals; i++) apply_local(mem, count, &t->locals[s->first_local + i]);
    for (size_t i = 0; i < s->nxfers; i++) {
      const xfer_t *x = &t->xfers[s->first_xfer + i];
      const uint64_t *src = buf_of(mem, count, x->src, x->src_buf) + x->src_offset;
      uint64_t *dst = buf_of(mem, count, x->dst, x->dst_buf) + x->dst_offset;
      if (!x->reduce) {
        memcpy(dst, src, x->count * sizeof *dst);
        continue;
      }
      const uint64_t *local = buf_of(mem, count, x->dst, x->red_buf) + x->red_offset;
      for (size_t e = 0; e < x->count; e++) dst[e] = local[e] | src[e];
    }
    snapshot(t, mem, rp, k + 1);
  }
  free(mem);
  return COLL_OK;
}

void replay_free(replay_t *rp) {
  free(rp->cell_start);
  free(rp->cells);
  memset(rp, 0, sizeof *rp);
}
