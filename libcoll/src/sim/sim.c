/* Schedule simulator (see sim.h): validation of every op and step, then rounds in which
 * each rank's current step runs its local ops and matches its sends with the receives in
 * the peers' current steps, until every rank is done or no rank can move (deadlock). */
#include "sim/sim.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "common/error.h"
#include "mem/memops.h"

static const char *const op_names[] = {
    [SCHED_SEND] = "send",
    [SCHED_RECV_COPY] = "recv_copy",
    [SCHED_RECV_REDUCE] = "recv_reduce",
    [SCHED_LOCAL_COPY] = "local_copy",
    [SCHED_LOCAL_REDUCE] = "local_reduce",
};

static int is_recv(const sched_op_t *op) {
  return op->kind == SCHED_RECV_COPY || op->kind == SCHED_RECV_REDUCE;
}

/* Per-rank run state. */
typedef struct {
  const sched_t *s;
  size_t step;        /* current step; == s->nsteps when finished */
  uint8_t *done;      /* [s->nops] */
  size_t *seq;        /* [s->nops]: k for the k-th send to / recv from that peer */
  size_t *recv_start; /* [n + 1]: where the receives from each peer begin in recv_list */
  size_t *recv_list;  /* receive op indices ordered by (peer, k) */
  size_t pending;     /* ops of the current step not yet done */
  char *scratch;      /* s->scratch_count elements (data runs only) */
} rank_state_t;

typedef struct {
  int n;
  const sim_config_t *cfg;
  size_t esize;
  mem_reduce_fn reduce;
  rank_state_t *ranks;
  sim_result_t *res;
} sim_t;

/* ---- validation ---- */

/* A region an op reads or writes. INPUT and OUTPUT are one memory (in-place aliasing). */
typedef struct {
  int mem; /* 0: INPUT/OUTPUT, 1: SCRATCH */
  size_t lo, hi;
  int write;
} region_t;

/* all_gather, reduce_scatter, all_to_all(v), gather and scatter have INPUT and OUTPUT of
 * different sizes: their in-place forms alias at an offset (or not at all), so they count
 * as two memories. */
static int mem_of_in(const sched_t *s, uint8_t buf) {
  if (buf == SCHED_BUF_SCRATCH) return 1;
  bool sized = s->collective == COLL_KIND_ALL_GATHER || s->collective == COLL_KIND_REDUCE_SCATTER ||
               s->collective == COLL_KIND_ALL_TO_ALL || s->collective == COLL_KIND_ALL_TO_ALLV ||
               s->collective == COLL_KIND_GATHER || s->collective == COLL_KIND_SCATTER;
  return sized && buf == SCHED_BUF_INPUT ? 2 : 0;
}

static int footprint(const sched_t *s, const sched_op_t *op, region_t out[2]) {
  int k = 0;
  switch (op->kind) {
    case SCHED_SEND:
      out[k++] = (region_t){mem_of_in(s, op->buf), op->offset, op->offset + op->count, 0};
      break;
    case SCHED_RECV_COPY:
      out[k++] = (region_t){mem_of_in(s, op->buf), op->offset, op->offset + op->count, 1};
      break;
    default: /* RECV_REDUCE, LOCAL_COPY, LOCAL_REDUCE */
      out[k++] = (region_t){mem_of_in(s, op->buf), op->offset, op->offset + op->count, 1};
      out[k++] = (region_t){mem_of_in(s, op->src_buf), op->src_offset, op->src_offset + op->count, 0};
      break;
  }
  return k;
}

static int overlap(const region_t *a, const region_t *b) {
  return a->mem == b->mem && a->lo < b->hi && b->lo < a->hi;
}

static size_t buf_len(const sched_t *s, uint8_t buf) {
  return buf == SCHED_BUF_SCRATCH ? s->scratch_count
         : buf == SCHED_BUF_INPUT ? s->in_count
                                  : s->out_count;
}

/* [offset, offset + count) within [0, len), without overflowing. */
static int in_bounds(size_t offset, size_t count, size_t len) {
  return count <= len && offset <= len - count;
}

static coll_status_t check_op(const sched_t *s, int r, size_t st, size_t i, int n) {
  const sched_op_t *op = &s->ops[i];
  if (op->kind > SCHED_LOCAL_REDUCE || op->buf > SCHED_BUF_SCRATCH ||
      op->src_buf > SCHED_BUF_SCRATCH)
    return coll_error(COLL_ERR_INTERNAL, "sim: rank %d step %zu op %zu: bad kind or buffer", r, st,
                      i);
  int remote = op->kind <= SCHED_RECV_REDUCE;
  if (remote && (op->peer < 0 || op->peer >= n || op->peer == r))
    return coll_error(COLL_ERR_INTERNAL, "sim: rank %d step %zu op %zu (%s): bad peer %d", r, st, i,
                      op_names[op->kind], op->peer);
  if (!in_bounds(op->offset, op->count, buf_len(s, op->buf)) ||
      (op->kind >= SCHED_RECV_REDUCE &&
       !in_bounds(op->src_offset, op->count, buf_len(s, op->src_buf))))
    return coll_error(COLL_ERR_INTERNAL,
                      "sim: rank %d step %zu op %zu (%s): range [%zu, +%zu) out of bounds", r, st,
                      i, op_names[op->kind], op->offset, op->count);
  region_t fp[2];
  if (footprint(s, op, fp) == 2 && overlap(&fp[0], &fp[1]) && fp[0].lo != fp[1].lo)
    return coll_error(COLL_ERR_INTERNAL,
                      "sim: rank %d step %zu op %zu (%s): source and destination partly "
                      "overlap",
                      r, st, i, op_names[op->kind]);
  return COLL_OK;
}

/* Two ops of one step must not touch the same elements unless both only read. A sweep
 * over the regions sorted by start finds any such pair in O(k log k) (broadcast steps
 * can hold thousands of ops). An op whose source and destination are the same elements
 * (an in-place reduce) counts as one written region. */
typedef struct {
  region_t reg;
  size_t op;
} tagged_region_t;

static int by_mem_then_lo(const void *a, const void *b) {
  const tagged_region_t *x = a, *y = b;
  if (x->reg.mem != y->reg.mem) return x->reg.mem - y->reg.mem;
  return x->reg.lo < y->reg.lo ? -1 : x->reg.lo > y->reg.lo;
}

static coll_status_t check_step(const sched_t *s, int r, size_t st, tagged_region_t *tmp) {
  const sched_step_t *step = &s->steps[st];
  size_t k = 0;
  for (uint32_t i = 0; i < step->nops; i++) {
    size_t oi = step->first_op + i;
    region_t fp[2];
    int nfp = footprint(s, &s->ops[oi], fp);
    if (nfp == 2 && fp[0].mem == fp[1].mem && fp[0].lo == fp[1].lo) nfp = 1; /* fp[0] writes */
    for (int x = 0; x < nfp; x++)
      if (fp[x].hi > fp[x].lo) tmp[k++] = (tagged_region_t){fp[x], oi};
  }
  qsort(tmp, k, sizeof *tmp, by_mem_then_lo);
  size_t any_hi = 0, w_hi = 0, any_op = 0, w_op = 0;
  for (size_t i = 0; i < k; i++) {
    if (i == 0 || tmp[i].reg.mem != tmp[i - 1].reg.mem) any_hi = w_hi = 0;
    const region_t *x = &tmp[i].reg;
    size_t other = SIZE_MAX;
    if (x->lo < w_hi) other = w_op;
    if (x->write && x->lo < any_hi) other = any_op;
    if (other != SIZE_MAX)
      return coll_error(COLL_ERR_INTERNAL,
                        "sim: rank %d step %zu: ops %zu (%s) and %zu (%s) touch the same "
                        "elements and one writes",
                        r, st, other, op_names[s->ops[other].kind], tmp[i].op,
                        op_names[s->ops[tmp[i].op].kind]);
    if (x->hi > any_hi) any_hi = x->hi, any_op = tmp[i].op;
    if (x->write && x->hi > w_hi) w_hi = x->hi, w_op = tmp[i].op;
  }
  return COLL_OK;
}

/* Validate every rank and number the messages per (src, dst) pair. */
static coll_status_t prepare(sim_t *sim, const sched_t *scheds) {
  int n = sim->n;
  size_t *sends = calloc((size_t)n * (size_t)n, sizeof *sends);
  size_t *recvs = calloc((size_t)n * (size_t)n, sizeof *recvs);
  size_t max_step_ops = 1;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < scheds[r].nsteps; i++)
      if (scheds[r].steps[i].nops > max_step_ops) max_step_ops = scheds[r].steps[i].nops;
  tagged_region_t *tmp = calloc(2 * max_step_ops, sizeof *tmp);
  coll_status_t st = COLL_OK;
  if (sends == NULL || recvs == NULL || tmp == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory");
    goto out;
  }
  for (int r = 0; r < n && st == COLL_OK; r++) {
    const sched_t *s = &scheds[r];
    rank_state_t *rs = &sim->ranks[r];
    rs->s = s;
    if (s->nranks != n || s->rank != r) {
      st = coll_error(COLL_ERR_INTERNAL, "sim: schedule %d says rank %d of %d", r, s->rank,
                      s->nranks);
      break;
    }
    rs->done = calloc(s->nops ? s->nops : 1, 1);
    rs->seq = calloc(s->nops ? s->nops : 1, sizeof *rs->seq);
    if (sim->cfg->inputs != NULL && s->scratch_count > 0)
      rs->scratch = calloc(s->scratch_count, sim->esize);
    if (rs->done == NULL || rs->seq == NULL ||
        (sim->cfg->inputs != NULL && s->scratch_count > 0 && rs->scratch == NULL)) {
      st = coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory");
      break;
    }
    for (size_t stp = 0; stp < s->nsteps && st == COLL_OK; stp++) {
      const sched_step_t *step = &s->steps[stp];
      if ((size_t)step->first_op + step->nops > s->nops) {
        st = coll_error(COLL_ERR_INTERNAL, "sim: rank %d step %zu: ops out of range", r, stp);
        break;
      }
      for (uint32_t i = 0; i < step->nops && st == COLL_OK; i++) {
        size_t oi = step->first_op + i;
        st = check_op(s, r, stp, oi, n);
        if (st != COLL_OK) break;
        const sched_op_t *op = &s->ops[oi];
        if (op->kind == SCHED_SEND)
          rs->seq[oi] = sends[(size_t)r * n + op->peer]++;
        else if (is_recv(op))
          rs->seq[oi] = recvs[(size_t)op->peer * n + r]++;
      }
      if (st == COLL_OK) st = check_step(s, r, stp, tmp);
    }
  }
  for (int a = 0; a < n && st == COLL_OK; a++)
    for (int b = 0; b < n && st == COLL_OK; b++)
      if (sends[(size_t)a * n + b] != recvs[(size_t)a * n + b])
        st = coll_error(COLL_ERR_MISMATCH,
                        "sim: rank %d sends %zu messages to rank %d, which "
                        "receives %zu",
                        a, sends[(size_t)a * n + b], b, recvs[(size_t)a * n + b]);
  /* Index the receives by (peer, k) so that a send finds its match in O(1). */
  for (int b = 0; b < n && st == COLL_OK; b++) {
    rank_state_t *rs = &sim->ranks[b];
    rs->recv_start = calloc((size_t)n + 1, sizeof *rs->recv_start);
    if (rs->recv_start == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory");
      break;
    }
    for (int a = 0; a < n; a++)
      rs->recv_start[a + 1] = rs->recv_start[a] + recvs[(size_t)a * n + b];
    rs->recv_list = calloc(rs->recv_start[n] ? rs->recv_start[n] : 1, sizeof *rs->recv_list);
    if (rs->recv_list == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory");
      break;
    }
    for (size_t oi = 0; oi < rs->s->nops; oi++)
      if (is_recv(&rs->s->ops[oi]))
        rs->recv_list[rs->recv_start[rs->s->ops[oi].peer] + rs->seq[oi]] = oi;
  }
out:
  free(sends);
  free(recvs);
  free(tmp);
  return st;
}

/* ---- running ---- */

static char *buf_ptr(sim_t *sim, int r, uint8_t buf, size_t offset) {
  char *base = buf == SCHED_BUF_INPUT    ? (char *)sim->cfg->inputs[r]
               : buf == SCHED_BUF_OUTPUT ? (char *)sim->cfg->outputs[r]
                                         : sim->ranks[r].scratch;
  return base + offset * sim->esize;
}

static coll_status_t record(sim_t *sim, size_t round, int r, size_t oi) {
  sim_result_t *res = sim->res;
  if (!sim->cfg->record_events) return COLL_OK;
  if (res->nevents == res->events_cap) {
    size_t cap = res->events_cap ? res->events_cap * 2 : 256;
    sim_event_t *e = realloc(res->events, cap * sizeof *e);
    if (e == NULL) return coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory for events");
    res->events = e;
    res->events_cap = cap;
  }
  rank_state_t *rs = &sim->ranks[r];
  res->events[res->nevents++] = (sim_event_t){
      .round = round, .rank = r, .step = rs->step, .op_index = oi, .op = rs->s->ops[oi]};
  return COLL_OK;
}

static void complete(sim_t *sim, int r, size_t oi) {
  sim->ranks[r].done[oi] = 1;
  sim->ranks[r].pending--;
}

static void run_local(sim_t *sim, int r, const sched_op_t *op) {
  if (sim->cfg->inputs == NULL) return;
  char *dst = buf_ptr(sim, r, op->buf, op->offset);
  char *src = buf_ptr(sim, r, op->src_buf, op->src_offset);
  if (op->kind == SCHED_LOCAL_COPY)
    memmove(dst, src, op->count * sim->esize);
  else
    sim->reduce(dst, dst, src, op->count);
}

/* Match rank a's send (op index si) with its receive (the k-th from a on rank b) if that
 * is in b's current step. */
static coll_status_t try_match(sim_t *sim, size_t round, int a, size_t si, int *matched) {
  rank_state_t *ra = &sim->ranks[a];
  const sched_op_t *send = &ra->s->ops[si];
  int b = send->peer;
  rank_state_t *rb = &sim->ranks[b];
  *matched = 0;
  if (rb->step >= rb->s->nsteps) return COLL_OK;
  const sched_step_t *step = &rb->s->steps[rb->step];
  size_t ri = rb->recv_list[rb->recv_start[a] + ra->seq[si]];
  /* Receives complete in step order: an unmatched one is in the current step or later. */
  if (ri >= (size_t)step->first_op + step->nops || rb->done[ri]) return COLL_OK;
  const sched_op_t *recv = &rb->s->ops[ri];
  if (recv->count != send->count)
    return coll_error(COLL_ERR_MISMATCH,
                      "sim: message %zu from rank %d to rank %d: rank %d step %zu sends %zu "
                      "elements, rank %d step %zu receives %zu",
                      ra->seq[si], a, b, a, ra->step, send->count, b, rb->step, recv->count);
  if (sim->cfg->inputs != NULL) {
    const char *src = buf_ptr(sim, a, send->buf, send->offset);
    char *dst = buf_ptr(sim, b, recv->buf, recv->offset);
    if (recv->kind == SCHED_RECV_COPY)
      memcpy(dst, src, send->count * sim->esize);
    else
      sim->reduce(dst, buf_ptr(sim, b, recv->src_buf, recv->src_offset), src, send->count);
  }
  size_t bytes = send->count * sim->esize;
  sim->res->bytes_sent[a] += bytes;
  sim->res->bytes_received[b] += bytes;
  sim->res->link_bytes[(size_t)a * sim->n + b] += bytes;
  coll_status_t st = record(sim, round, a, si);
  if (st == COLL_OK) st = record(sim, round, b, ri);
  complete(sim, a, si);
  complete(sim, b, ri);
  *matched = 1;
  return st;
}

/* Enter rank r's next step (or finish); its local ops run when the step starts. */
static void enter_step(sim_t *sim, int r, size_t step) {
  rank_state_t *rs = &sim->ranks[r];
  rs->step = step;
  rs->pending = step < rs->s->nsteps ? rs->s->steps[step].nops : 0;
}

static coll_status_t deadlock_error(sim_t *sim) {
  char msg[512];
  size_t len = 0;
  for (int r = 0; r < sim->n && len + 64 < sizeof msg; r++) {
    rank_state_t *rs = &sim->ranks[r];
    if (rs->step >= rs->s->nsteps) continue;
    const sched_step_t *step = &rs->s->steps[rs->step];
    for (uint32_t i = 0; i < step->nops && len + 64 < sizeof msg; i++) {
      size_t oi = step->first_op + i;
      if (rs->done[oi]) continue;
      const sched_op_t *op = &rs->s->ops[oi];
      len += (size_t)snprintf(msg + len, sizeof msg - len, " rank %d step %zu %s peer %d;", r,
                              rs->step, op_names[op->kind], op->peer);
    }
  }
  return coll_error(COLL_ERR_INTERNAL, "sim: deadlock, no rank can progress:%s", msg);
}

static coll_status_t run(sim_t *sim) {
  int n = sim->n;
  size_t round = 0;
  for (int r = 0; r < n; r++) enter_step(sim, r, 0);
  for (;;) {
    int active = 0, progressed = 0;
    coll_status_t st = COLL_OK;
    /* Local ops first: they need no peer. */
    for (int r = 0; r < n && st == COLL_OK; r++) {
      rank_state_t *rs = &sim->ranks[r];
      if (rs->step >= rs->s->nsteps) continue;
      active = 1;
      const sched_step_t *step = &rs->s->steps[rs->step];
      for (uint32_t i = 0; i < step->nops && st == COLL_OK; i++) {
        size_t oi = step->first_op + i;
        const sched_op_t *op = &rs->s->ops[oi];
        if (rs->done[oi] || op->kind < SCHED_LOCAL_COPY) continue;
        run_local(sim, r, op);
        st = record(sim, round, r, oi);
        complete(sim, r, oi);
        progressed = 1;
      }
    }
    if (!active) break;
    /* Then every pending send looks for its receive in the peer's current step. */
    for (int r = 0; r < n && st == COLL_OK; r++) {
      rank_state_t *rs = &sim->ranks[r];
      if (rs->step >= rs->s->nsteps) continue;
      const sched_step_t *step = &rs->s->steps[rs->step];
      for (uint32_t i = 0; i < step->nops && st == COLL_OK; i++) {
        size_t oi = step->first_op + i;
        if (rs->done[oi] || rs->s->ops[oi].kind != SCHED_SEND) continue;
        int matched;
        st = try_match(sim, round, r, oi, &matched);
        progressed |= matched;
      }
    }
    if (st != COLL_OK) return st;
    for (int r = 0; r < n; r++) {
      rank_state_t *rs = &sim->ranks[r];
      if (rs->step < rs->s->nsteps && rs->pending == 0) {
        enter_step(sim, r, rs->step + 1);
        progressed = 1; /* also covers empty steps of unfinished schedules */
      }
    }
    if (!progressed) return deadlock_error(sim);
    round++;
  }
  sim->res->nrounds = round;
  return COLL_OK;
}

void sim_result_free(sim_result_t *res) {
  if (res == NULL) return;
  free(res->bytes_sent);
  free(res->bytes_received);
  free(res->link_bytes);
  free(res->events);
  memset(res, 0, sizeof *res);
}

coll_status_t sim_run(const sched_t *scheds, int nranks, const sim_config_t *cfg,
                      sim_result_t *res) {
  if (scheds == NULL || cfg == NULL || res == NULL || nranks < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_run: NULL argument or no ranks");
  memset(res, 0, sizeof *res);
  sim_t sim = {.n = nranks, .cfg = cfg, .esize = algo_elem_size(cfg->dtype), .res = res};
  if (sim.esize == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_run: unknown dtype %d", (int)cfg->dtype);
  if (cfg->inputs != NULL && cfg->outputs == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_run: inputs without outputs");
  sim.reduce = mem_host_reduce_fn(cfg->dtype, cfg->op);
  if (sim.reduce == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_run: unknown op %d", (int)cfg->op);
  coll_status_t st = COLL_OK;
  res->nranks = nranks;
  res->bytes_sent = calloc((size_t)nranks, sizeof *res->bytes_sent);
  res->bytes_received = calloc((size_t)nranks, sizeof *res->bytes_received);
  res->link_bytes = calloc((size_t)nranks * (size_t)nranks, sizeof *res->link_bytes);
  sim.ranks = calloc((size_t)nranks, sizeof *sim.ranks);
  if (!res->bytes_sent || !res->bytes_received || !res->link_bytes || !sim.ranks) {
    st = coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory");
    goto out;
  }
  st = prepare(&sim, scheds);
  if (st == COLL_OK) st = run(&sim);
  if (st == COLL_OK) {
    for (int r = 0; r < nranks; r++)
      if (scheds[r].nsteps > res->max_steps) res->max_steps = scheds[r].nsteps;
    if (cfg->op == COLL_AVG && cfg->inputs != NULL && scheds[0].collective == COLL_KIND_ALL_REDUCE)
      for (int r = 0; r < nranks; r++)
        mem_host_finish_avg(cfg->outputs[r], scheds[r].count, cfg->dtype, nranks);
  }
out:
  if (sim.ranks != NULL)
    for (int r = 0; r < nranks; r++) {
      free(sim.ranks[r].done);
      free(sim.ranks[r].seq);
      free(sim.ranks[r].recv_start);
      free(sim.ranks[r].recv_list);
      free(sim.ranks[r].scratch);
    }
  free(sim.ranks);
  if (st != COLL_OK) sim_result_free(res);
  return st;
}

coll_status_t sim_run_algo(coll_algo_t algo, const sched_params_t *p, const sim_config_t *cfg,
                           sim_result_t *res) {
  if (p == NULL || p->nranks < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_run_algo: bad parameters");
  sched_t *scheds = calloc((size_t)p->nranks, sizeof *scheds);
  if (scheds == NULL) return coll_error(COLL_ERR_NO_MEMORY, "sim: out of memory");
  coll_status_t st = COLL_OK;
  int built = 0;
  for (; built < p->nranks && st == COLL_OK; built++) {
    sched_params_t q = *p;
    q.rank = built;
    if (cfg != NULL && cfg->vcounts != NULL) q.vcounts = cfg->vcounts[built];
    st = algo_build(algo, &q, &scheds[built]);
  }
  if (st == COLL_OK) st = sim_run(scheds, p->nranks, cfg, res);
  for (int r = 0; r < built; r++) sched_free(&scheds[r]);
  free(scheds);
  return st;
}
