/* coll-sim's text report: the step table in words, the bytes on each link, the bytes
 * each rank sends, the cost model's prediction and, with --explain, the algorithm's rule
 * and formulas beside the counted numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "info.h"
#include "writers.h"

/* What the cost model needs of the simulated request. */
static sched_params_t request_params(const trace_t *t) {
  return (sched_params_t){.collective = t->req.collective,
                          .count = t->req.count,
                          .dtype = t->req.dtype,
                          .nranks = t->req.nranks,
                          .root = t->req.root,
                          .segment_bytes = t->req.segment_bytes,
                          .topo = t->req.topo};
}

double report_predict(const trace_t *t, coll_algo_t algo) {
  sched_params_t p = request_params(t);
  if (t->req.collective != COLL_KIND_ALL_TO_ALLV) return algo_predict(algo, &p, &t->req.cost);
  /* all_to_allv: the busiest rank's prediction (each rank's own layout). */
  size_t *v = malloc(4 * (size_t)p.nranks * sizeof *v);
  double worst = v == NULL ? NAN : 0;
  p.count = (size_t)p.nranks;
  p.vcounts = v;
  for (int r = 0; v != NULL && r < p.nranks; r++) {
    trace_alltoallv_layout(&t->req, r, v);
    p.rank = r;
    double e = algo_predict(algo, &p, &t->req.cost);
    if (e > worst) worst = e;
  }
  free(v);
  return worst;
}

void report_time(double s, char *buf, size_t len) {
  if (!isfinite(s))
    snprintf(buf, len, "n/a");
  else if (s < 1e-3)
    snprintf(buf, len, "%.2f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, len, "%.3f ms", s * 1e3);
  else
    snprintf(buf, len, "%.3f s", s);
}

void report_bytes(double b, char *buf, size_t len) {
  if (b < 1024)
    snprintf(buf, len, "%.0f B", b);
  else if (b < 1024.0 * 1024)
    snprintf(buf, len, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024)
    snprintf(buf, len, "%.1f MiB", b / 1024 / 1024);
  else
    snprintf(buf, len, "%.2f GiB", b / 1024 / 1024 / 1024);
}

/* ---- the step table ---- */

/* One thing a rank does in a step, merged from messages that continue each other (same
 * kind and peer, next range) or repeat the same range to other peers. */
typedef struct {
  int kind;    /* 0 send, 1 receive-copy, 2 receive-reduce, 3 local copy, 4 local reduce */
  int scratch; /* the range is in the executor's scratch, not the call's buffers */
  int peers[8];
  int npeers;
  int more_peers;
  size_t offset, count, messages;
} action_t;

static int same_target(const action_t *a, int kind, int peer, int scratch) {
  return a->kind == kind && a->scratch == scratch && a->npeers == 1 && !a->more_peers &&
         a->peers[0] == peer;
}

static void add_action(action_t *acts, size_t *nacts, int kind, int peer, int buf, size_t off,
                       size_t count) {
  int scratch = buf == SCHED_BUF_SCRATCH;
  if (*nacts > 0) {
    action_t *a = &acts[*nacts - 1];
    if (same_target(a, kind, peer, scratch) && a->offset + a->count == off) {
      a->count += count;
      a->messages++;
      return;
    }
    if (a->kind == kind && kind == 0 && a->scratch == scratch && a->offset == off &&
        a->count == count) {
      if (a->npeers < 8)
        a->peers[a->npeers++] = peer;
      else
        a->more_peers++;
      a->messages++;
      return;
    }
  }
  acts[(*nacts)++] = (action_t){.kind = kind,
                                .scratch = scratch,
                                .peers = {peer},
                                .npeers = 1,
                                .offset = off,
                                .count = count,
                                .messages = 1};
}

static void print_action(FILE *out, const trace_t *t, const action_t *a) {
  static const char *const verbs[] = {"sends", "receives", "receives and reduces", "copies locally",
                                      "reduces locally"};
  char range[160];
  if (a->scratch) /* scratch is not cut into the buffer's units */
    snprintf(range, sizeof range, "scratch elements %zu..%zu", a->offset, a->offset + a->count - 1);
  else
    trace_range_name(t, a->offset, a->count, range, sizeof range);
  fprintf(out, "%s %s", verbs[a->kind], range);
  if (a->kind <= 2) {
    fprintf(out, " %s rank%s ", a->kind == 0 ? "to" : "from", a->npeers > 1 ? "s" : "");
    for (int i = 0; i < a->npeers; i++) fprintf(out, "%s%d", i ? ", " : "", a->peers[i]);
    if (a->more_peers) fprintf(out, " and %d more", a->more_peers);
  }
  if (a->messages > 1 && a->npeers == 1) fprintf(out, " (%zu messages)", a->messages);
}

static void print_step(FILE *out, const trace_t *t, size_t k, action_t *acts) {
  const tstep_t *s = &t->steps[k];
  fprintf(out, "step %zu\n", k);
  for (int r = 0; r < t->req.nranks; r++) {
    size_t nacts = 0;
    for (size_t i = 0; i < s->nlocals; i++) {
      const local_t *l = &t->locals[s->first_local + i];
      if (l->rank == r)
        add_action(acts, &nacts, l->op.kind == SCHED_LOCAL_COPY ? 3 : 4, -1, l->op.buf,
                   l->op.offset, l->op.count);
    }
    for (size_t i = 0; i < s->nxfers; i++) {
      const xfer_t *x = &t->xfers[s->first_xfer + i];
      if (x->src == r) add_action(acts, &nacts, 0, x->dst, x->src_buf, x->src_offset, x->count);
    }
    for (size_t i = 0; i < s->nxfers; i++) {
      const xfer_t *x = &t->xfers[s->first_xfer + i];
      if (x->dst == r)
        add_action(acts, &nacts, x->reduce ? 2 : 1, x->src, x->dst_buf, x->dst_offset, x->count);
    }
    if (nacts == 0) continue;
    fprintf(out, "  rank %d ", r);
    for (size_t i = 0; i < nacts; i++) {
      if (i) fputs("; ", out);
      print_action(out, t, &acts[i]);
    }
    fputc('\n', out);
  }
}

/* Room for a rank's actions in any step: at most its ops, 2 per message at most. */
static action_t *alloc_actions(const trace_t *t) {
  size_t most = 1;
  for (size_t k = 0; k < t->nsteps; k++) {
    size_t ops = t->steps[k].nxfers * 2 + t->steps[k].nlocals;
    if (ops > most) most = ops;
  }
  return calloc(most, sizeof(action_t));
}

int report_step(FILE *out, const trace_t *t, size_t k) {
  action_t *acts = alloc_actions(t);
  if (acts == NULL) return -1;
  print_step(out, t, k, acts);
  free(acts);
  return 0;
}

static void print_table(FILE *out, const cli_t *cli, const trace_t *t) {
  action_t *acts = alloc_actions(t);
  if (acts == NULL) return;
  size_t K = t->nsteps, keep = cli->max_steps;
  for (size_t k = 0; k < K; k++) {
    if (keep != 0 && K > keep && k == keep / 2) {
      size_t skip_to = K - (keep - keep / 2);
      fprintf(out, "... steps %zu..%zu left out (%zu steps; --max-steps 0 shows all)\n", k,
              skip_to - 1, skip_to - k);
      k = skip_to - 1;
      continue;
    }
    print_step(out, t, k, acts);
  }
  free(acts);
}

/* ---- numbers ---- */

static void print_matrix(FILE *out, const trace_t *t) {
  int n = t->req.nranks;
  if (n > 16) {
    fprintf(out, "\nbytes on each link: %d x %d matrix left out (over 16 ranks; --json has it)\n",
            n, n);
    return;
  }
  fprintf(out, "\nbytes on each link (row: from rank, column: to rank)\n%8s", "");
  for (int b = 0; b < n; b++) {
    char head[16];
    snprintf(head, sizeof head, "to %d", b);
    fprintf(out, " %12s", head);
  }
  fputc('\n', out);
  for (int a = 0; a < n; a++) {
    fprintf(out, "from %-3d", a);
    for (int b = 0; b < n; b++) {
      size_t v = t->res.link_bytes[(size_t)a * n + b];
      if (a == b || v == 0)
        fprintf(out, " %12s", "-");
      else
        fprintf(out, " %12zu", v);
    }
    fputc('\n', out);
  }
}

static void print_ranks(FILE *out, const trace_t *t) {
  int n = t->req.nranks;
  size_t total = 0, busiest = 0;
  int who = 0;
  fprintf(out, "\nbytes per rank\n  %-6s %14s %14s %14s\n", "rank", "sent", "received", "reduced");
  for (int r = 0; r < n; r++) {
    size_t s = t->res.bytes_sent[r], rv = t->res.bytes_received[r];
    fprintf(out, "  %-6d %14zu %14zu %14zu\n", r, s, rv, t->bytes_reduced[r]);
    total += s;
    if (s + rv > busiest) busiest = s + rv, who = r;
  }
  char tb[32], bb[32];
  report_bytes((double)total, tb, sizeof tb);
  report_bytes((double)busiest, bb, sizeof bb);
  fprintf(out, "  total on the wire: %zu bytes (%s); busiest rank: %d, %zu bytes in + out (%s)\n",
          total, tb, who, busiest, bb);
}

static void print_cost(FILE *out, const cli_t *cli, const trace_t *t) {
  const algo_cost_t *c = &t->req.cost;
  char pt[32], et[32];
  report_time(report_predict(t, t->req.algo), pt, sizeof pt);
  report_time(t->estimate_s, et, sizeof et);
  fprintf(out,
          "\ncost model (%s): alpha %.3g s/step, beta %.3g s/byte (%.2f GB/s), gamma %.3g "
          "s/byte (%.2f GB/s)\n",
          t->req.transport, c->alpha, c->beta, c->beta > 0 ? 1e-9 / c->beta : INFINITY, c->gamma,
          c->gamma > 0 ? 1e-9 / c->gamma : INFINITY);
  fprintf(out, "  predicted time (algo_predict, libcoll/src/algo/cost.c): %s\n", pt);
  fprintf(out, "  step-by-step estimate from the counted steps: %s\n", et);
  fputs(
      "    (each step: alpha + the busiest rank's bytes in or out x beta + its reduced bytes "
      "x gamma)\n",
      out);
  if (!cli->explain) return;
  fprintf(out, "  every algorithm for this %s under the same model:",
          trace_collective_name(t->req.collective));
  coll_algo_t best = COLL_ALGO_RING;
  double best_t = INFINITY;
  /* The arena (one host, shared memory, no schedule) is not simulated: named apart. */
  int listed = 0;
  for (int a = COLL_ALGO_RING; a < COLL_ALGO_COUNT; a++) {
    if (a == COLL_ALGO_ARENA) continue;
    if ((t->req.collective == COLL_KIND_BROADCAST || t->req.collective == COLL_KIND_GATHER ||
         t->req.collective == COLL_KIND_SCATTER) &&
        a == COLL_ALGO_HD)
      continue; /* the binomial tree again */
    if (strcmp(trace_algo_name(t->req.collective, (coll_algo_t)a), "?") == 0) continue;
    double p = report_predict(t, (coll_algo_t)a);
    report_time(p, pt, sizeof pt);
    fprintf(out, "%s %s %s", listed++ ? "," : "",
            trace_algo_name(t->req.collective, (coll_algo_t)a), pt);
    if (p < best_t) best_t = p, best = (coll_algo_t)a;
  }
  fprintf(out, "\n  cheapest here: %s", trace_algo_name(t->req.collective, best));
  /* The library chooses among fewer (algo_select: master, a teaching baseline, never). */
  sched_params_t p = request_params(t);
  coll_algo_t chosen =
      t->req.collective == COLL_KIND_ALL_TO_ALLV ? COLL_ALGO_RING : algo_select(&p, &t->req.cost);
  if (chosen != best)
    fprintf(out, "; the library's cost model picks %s (algo_select, whose candidates leave %s out)",
            trace_algo_name(t->req.collective, chosen), trace_algo_name(t->req.collective, best));
  fputc('\n', out);
  size_t arena_min = algo_arena_min_bytes(t->req.nranks);
  if (t->req.collective == COLL_KIND_ALL_REDUCE && arena_min > 0)
    fprintf(out,
            "  (not simulated: arena, the single-host shared-memory all-reduce; on one host "
            "over shm the library takes it instead of the cheapest schedule from %zu bytes at "
            "%d ranks, a measured rule (algo_arena_preferred): S = %zu %s)\n",
            arena_min, t->req.nranks, t->req.bytes,
            t->req.bytes >= arena_min ? "meets it" : "is below it");
  size_t small_max = algo_small_max_bytes(t->req.nranks);
  if (t->req.collective == COLL_KIND_ALL_REDUCE && small_max > 0)
    fprintf(out,
            "  on one host over shm: S = %zu bytes %s %zu, the measured threshold at %d ranks "
            "(algo_small_max_bytes, COLL_SMALL_BYTES), so the library %s the arena's "
            "small-message path (1 step instead of the schedule's, each rank writes its input "
            "into cache lines that carry their round and the call's fingerprint digest and "
            "reduces the others' lines as it reads them ((n-1) S read and reduced per rank; "
            "libcoll/src/onehost/small.c))\n",
            t->req.bytes, t->req.bytes <= small_max ? "<=" : ">", small_max, t->req.nranks,
            t->req.bytes <= small_max ? "takes" : "does not take");
}

static void print_explain(FILE *out, const trace_t *t) {
  const algo_info_t *info = info_get(t->req.collective, t->req.algo);
  int n = t->req.nranks;
  if (info == NULL) return;
  double *want = calloc((size_t)n, sizeof *want);
  if (want == NULL) return;
  info_expected_bytes(t, want);
  fprintf(out, "\nexplain: %s\n  rule: %s\n", info->title, info->rule);
  fprintf(out, "  implemented in %s (the comment at its top has the diagram)\n", info->file);
  fprintf(out, "  n = %d ranks, S = %zu bytes, nseg = %zu segment(s) per pipelined piece\n", n,
          t->req.bytes, info_nseg(t));
  long steps = info_expected_steps(t);
  fprintf(out, "  steps:          %-42s formula: ", info->steps_formula);
  if (steps >= 0)
    fprintf(out, "%ld", steps);
  else
    fputs("~", out);
  fprintf(out, "   counted: %zu\n", t->nsteps);
  fprintf(out, "  bytes per rank: %s\n", info->bytes_formula);
  int all_match = 1;
  for (int r = 0; r < n; r++) {
    size_t got = t->res.bytes_sent[r];
    int match = fabs(want[r] - (double)got) < 0.5;
    all_match &= match;
    if (n <= 16 || r < 8 || r >= n - 4)
      fprintf(out, "    rank %-4d formula %14.1f   counted %14zu%s\n", r, want[r], got,
              match ? "" : "   (differs: S does not split evenly into the parts)");
    else if (r == 8)
      fprintf(out, "    ... ranks 8..%d left out\n", n - 5);
  }
  fprintf(out, "  %s\n",
          all_match ? "every rank's counted bytes equal the formula"
                    : "some ranks differ from the formula (uneven parts)");
  free(want);
}

int write_text(FILE *out, const cli_t *cli, const trace_t *t) {
  const sim_request_t *q = &t->req;
  char sb[32];
  report_bytes((double)q->bytes, sb, sizeof sb);
  fprintf(out, "coll-sim: %s %s, %d ranks, %zu bytes (%s = %zu x %s)",
          trace_algo_name(q->collective, q->algo), trace_collective_name(q->collective), q->nranks,
          q->bytes, sb, q->count, trace_dtype_name(q->dtype));
  if (coll_kind_rooted(q->collective)) fprintf(out, ", root %d", q->root);
  int half = strcmp(t->unit.name, "half") == 0;
  if (q->collective == COLL_KIND_ALL_TO_ALLV)
    fprintf(out, "\n  rank r sends rank p ((r + 2p) mod 3) x %zu elements; %zu steps\n\n",
            q->count / 2, t->nsteps);
  else if (t->unit.nparts == 0)
    fprintf(out, "\n  %s blocks of %zu elements, ranges in elements; %zu steps\n\n",
            q->collective == COLL_KIND_GATHER ? "the root gathers" : "the root scatters", q->count,
            t->nsteps);
  else
    fprintf(out, "\n  %zu %s%s of the buffer; %zu steps\n\n", t->unit.nparts,
            half && t->unit.nparts != 1 ? "halve" : t->unit.name, t->unit.nparts == 1 ? "" : "s",
            t->nsteps);
  if (cli->table) print_table(out, cli, t);
  print_matrix(out, t);
  print_ranks(out, t);
  print_cost(out, cli, t);
  if (cli->explain) print_explain(out, t);
  return ferror(out) ? -1 : 0;
}
