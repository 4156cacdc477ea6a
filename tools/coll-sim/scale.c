/* coll-sim's timing mode (scale.h): runs sim_time on the request's topology, once or over
 * a sweep of rank counts x sizes x algorithms, and reports the predicted time, bus
 * bandwidth, bytes per uplink and the busiest link as text or JSON, the sweep's crossover
 * sizes, and the sweep's plot (scale_svg.c). */
#include "scale.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo_internal.h"
#include "algo/topo.h"
#include "common/error.h"
#include "options.h"
#include "writers.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* nccl-tests' bus bandwidth: what each rank's busiest link must carry, per second. */
static double bus_factor(coll_kind_t kind, int n) {
  if (n < 2) return 1;
  if (kind == COLL_KIND_ALL_REDUCE) return 2.0 * (n - 1) / n;
  if (kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER) return (double)(n - 1) / n;
  return 1;
}

static const char *link_kind_json(sim_link_kind_t k) {
  static const char *const names[] = {
      [SIM_LINK_NONE] = "none",
      [SIM_LINK_UPLINK_EGRESS] = "uplink_egress",
      [SIM_LINK_UPLINK_INGRESS] = "uplink_ingress",
      [SIM_LINK_PORT_OUT] = "port_out",
      [SIM_LINK_PORT_IN] = "port_in",
  };
  return names[k];
}

/* One timing run of algo on n ranks and `bytes`; *wall: seconds it took. */
static coll_status_t run_one(const cli_t *cli, int algo, int n, size_t bytes,
                             sim_time_result_t *res, double *wall) {
  const sim_request_t *q = &cli->req;
  sched_params_t p = {.collective = q->collective,
                      .count = bytes / algo_elem_size(q->dtype),
                      .dtype = q->dtype,
                      .nranks = n,
                      .root = q->root,
                      .segment_bytes = q->segment_bytes};
  /* One node map for both sides: the simulator's links and the schedules (node-aware
   * algorithms read it from p; the others ignore it). */
  sim_topo_t topo = cli->scale.topo;
  algo_topo_t map = {0};
  int per = topo.ranks_per_node > 0 && topo.ranks_per_node < n ? topo.ranks_per_node : n;
  if (per < n) {
    coll_status_t st = algo_topo_placed(&map, n, per, cli->scale.round_robin != 0);
    if (st != COLL_OK) return st;
    topo.node_of = map.node_of;
    p.topo = &map;
  }
  double t0 = now_s();
  coll_status_t st = sim_time_algo((coll_algo_t)algo, &p, &topo, res);
  *wall = now_s() - t0;
  algo_topo_free(&map);
  return st;
}

static void machine_line(FILE *out, const cli_t *cli) {
  const sim_topo_t *t = &cli->scale.topo;
  fprintf(out,
          "machine: intra-node port %.4g GB/s, %.3g us; uplink %.4g GB/s per direction, %.3g "
          "us, %s; %.3g us per message\n",
          t->intra_bw / 1e9, t->intra_latency_s * 1e6, t->uplink_bw / 1e9,
          t->uplink_latency_s * 1e6,
          t->no_sharing ? "NOT shared (naive model)" : "shared by the round's flows",
          t->message_latency_s * 1e6);
}

static void nodes_text(char *buf, size_t len, const cli_t *cli, int n, int nnodes) {
  int per = cli->scale.topo.ranks_per_node;
  if (nnodes <= 1)
    snprintf(buf, len, "one node");
  else
    snprintf(buf, len, "%d nodes of %d%s", nnodes, per,
             cli->scale.round_robin ? ", placed round-robin" : "");
  (void)n;
}

static void min_mean_max(const uint64_t *v, int n, double *mn, double *mean, double *mx) {
  *mn = n ? (double)v[0] : 0, *mx = *mn, *mean = 0;
  for (int i = 0; i < n; i++) {
    double x = (double)v[i];
    if (x < *mn) *mn = x;
    if (x > *mx) *mx = x;
    *mean += x / n;
  }
}

static void write_one_text(FILE *out, const cli_t *cli, const sim_time_result_t *r, double wall) {
  const sim_request_t *q = &cli->req;
  char nodes[96], tb[32], b1[32], b2[32], b3[32], b4[32], link[96];
  nodes_text(nodes, sizeof nodes, cli, r->nranks, r->nnodes);
  report_time(r->time_s, tb, sizeof tb);
  report_bytes((double)q->bytes, b1, sizeof b1);
  fprintf(out, "%s %s, %d ranks on %s, %s %s (timing mode: no data moved)\n",
          trace_algo_name(q->collective, q->algo)[0] != '?'
              ? trace_algo_name(q->collective, q->algo)
              : coll_algo_name(q->algo),
          trace_collective_name(q->collective), r->nranks, nodes, b1, trace_dtype_name(q->dtype));
  machine_line(out, cli);
  double algbw = r->time_s > 0 ? (double)q->bytes / r->time_s : 0;
  fprintf(out, "predicted time: %s  (algbw %.3g GB/s, busbw %.3g GB/s)\n", tb, algbw / 1e9,
          algbw * bus_factor(q->collective, r->nranks) / 1e9);
  fprintf(out, "rounds: %zu (longest schedule: %zu steps); messages: %llu\n", r->nrounds,
          r->max_steps, (unsigned long long)r->messages);
  report_bytes((double)r->bytes_total, b1, sizeof b1);
  report_bytes((double)r->bytes_intra, b2, sizeof b2);
  report_bytes((double)r->bytes_uplink, b3, sizeof b3);
  fprintf(out, "bytes: %s in all, %s inside nodes, %s across nodes\n", b1, b2, b3);
  if (r->nnodes > 1) {
    double mn, mean, mx;
    min_mean_max(r->uplink_egress, r->nnodes, &mn, &mean, &mx);
    report_bytes(mn, b1, sizeof b1), report_bytes(mean, b2, sizeof b2);
    report_bytes(mx, b3, sizeof b3);
    fprintf(out, "uplink egress per node: min %s, mean %s, max %s\n", b1, b2, b3);
    min_mean_max(r->uplink_ingress, r->nnodes, &mn, &mean, &mx);
    report_bytes(mn, b1, sizeof b1), report_bytes(mean, b2, sizeof b2);
    report_bytes(mx, b3, sizeof b3);
    fprintf(out, "uplink ingress per node: min %s, mean %s, max %s\n", b1, b2, b3);
    report_time(r->uplink_time_s, b4, sizeof b4);
    fprintf(out,
            "most flows sharing one uplink direction in a round: %zu; rounds where an uplink "
            "was the slowest link: %s of the time\n",
            r->max_round_flows, b4);
  }
  sim_link_name(r->busiest_kind, r->busiest_index, link, sizeof link);
  report_bytes((double)r->busiest_bytes, b1, sizeof b1);
  fprintf(out, "busiest link: %s, %s\n", link, b1);
  fprintf(out, "simulated %d schedules (%zu distinct) in %.2f s\n", r->nranks,
          r->distinct_schedules, wall);
}

static void topo_json(FILE *out, const cli_t *cli) {
  const sim_topo_t *t = &cli->scale.topo;
  fprintf(out,
          "  \"topology\": {\"ranks_per_node\": %d, \"round_robin\": %s, \"intra_bw\": %.6g, "
          "\"intra_latency_s\": %.6g, \"uplink_bw\": %.6g, \"uplink_latency_s\": %.6g, "
          "\"message_latency_s\": %.6g, \"uplink_shared\": %s},\n",
          t->ranks_per_node, cli->scale.round_robin ? "true" : "false", t->intra_bw,
          t->intra_latency_s, t->uplink_bw, t->uplink_latency_s, t->message_latency_s,
          t->no_sharing ? "false" : "true");
}

static void u64_array(FILE *out, const uint64_t *v, int n) {
  fputc('[', out);
  for (int i = 0; i < n; i++) fprintf(out, "%s%llu", i ? ", " : "", (unsigned long long)v[i]);
  fputc(']', out);
}

static void write_one_json(FILE *out, const cli_t *cli, const sim_time_result_t *r, double wall) {
  const sim_request_t *q = &cli->req;
  double algbw = r->time_s > 0 ? (double)q->bytes / r->time_s : 0;
  fprintf(out, "{\n  \"mode\": \"timing\",\n  \"algo\": \"%s\",\n  \"collective\": \"%s\",\n",
          coll_algo_name(q->algo), trace_collective_name(q->collective));
  fprintf(out, "  \"nranks\": %d,\n  \"nnodes\": %d,\n  \"bytes\": %zu,\n  \"dtype\": \"%s\",\n",
          r->nranks, r->nnodes, q->bytes, trace_dtype_name(q->dtype));
  topo_json(out, cli);
  fprintf(out,
          "  \"predicted_s\": %.9g,\n  \"algbw\": %.6g,\n  \"busbw\": %.6g,\n  \"rounds\": %zu,\n"
          "  \"max_steps_per_rank\": %zu,\n  \"messages\": %llu,\n  \"bytes_total\": %llu,\n"
          "  \"bytes_intra\": %llu,\n  \"bytes_uplink\": %llu,\n",
          r->time_s, algbw, algbw * bus_factor(q->collective, r->nranks), r->nrounds, r->max_steps,
          (unsigned long long)r->messages, (unsigned long long)r->bytes_total,
          (unsigned long long)r->bytes_intra, (unsigned long long)r->bytes_uplink);
  fputs("  \"uplink_egress\": ", out);
  u64_array(out, r->uplink_egress, r->nnodes);
  fputs(",\n  \"uplink_ingress\": ", out);
  u64_array(out, r->uplink_ingress, r->nnodes);
  fprintf(out,
          ",\n  \"busiest_link\": {\"kind\": \"%s\", \"index\": %d, \"bytes\": %llu},\n"
          "  \"max_round_flows\": %zu,\n  \"uplink_bound_s\": %.9g,\n"
          "  \"distinct_schedules\": %zu,\n  \"wall_s\": %.3f\n}\n",
          link_kind_json(r->busiest_kind), r->busiest_index, (unsigned long long)r->busiest_bytes,
          r->max_round_flows, r->uplink_time_s, r->distinct_schedules, wall);
}

/* ---- the sweep ---- */

typedef struct {
  int nranks, a, b; /* algos[a] is faster below, algos[b] from the crossover on */
  size_t lo, hi;    /* the sizes between which it changes */
  double estimate;  /* where the times' ratio crosses 1, interpolated in log-log */
} crossover_t;

static size_t find_crossovers(const cli_t *cli, const scale_row_t *rows, crossover_t *out,
                              size_t cap) {
  const scale_opts_t *sc = &cli->scale;
  size_t n = 0, na = sc->nalgos, ns = sc->nsizes;
  for (size_t ri = 0; ri < sc->nranks; ri++)
    for (size_t a = 0; a < na; a++)
      for (size_t b = 0; b < na; b++) {
        if (a == b) continue;
        for (size_t s = 0; s + 1 < ns; s++) {
          const scale_row_t *a0 = &rows[(ri * ns + s) * na + a],
                            *b0 = &rows[(ri * ns + s) * na + b];
          const scale_row_t *a1 = a0 + na, *b1 = b0 + na;
          if (!(a0->time_s < b0->time_s && a1->time_s > b1->time_s) || n == cap) continue;
          double d0 = log(a0->time_s / b0->time_s), d1 = log(a1->time_s / b1->time_s);
          double x0 = log((double)a0->bytes), x1 = log((double)a1->bytes);
          out[n++] = (crossover_t){.nranks = sc->ranks[ri],
                                   .a = sc->algos[a],
                                   .b = sc->algos[b],
                                   .lo = a0->bytes,
                                   .hi = a1->bytes,
                                   .estimate = exp(x0 + (x1 - x0) * d0 / (d0 - d1))};
        }
      }
  return n;
}

static int sweep(const cli_t *cli) {
  const scale_opts_t *sc = &cli->scale;
  size_t nrows = sc->nranks * sc->nsizes * sc->nalgos;
  scale_row_t *rows = calloc(nrows, sizeof *rows);
  crossover_t *xs = calloc(nrows + 1, sizeof *xs);
  if (rows == NULL || xs == NULL) {
    fputs("coll-sim: out of memory\n", stderr);
    free(rows), free(xs);
    return 1;
  }
  FILE *out = stdout;
  if (!cli->json) {
    machine_line(out, cli);
    fprintf(out, "%-7s %-6s %-11s %10s %13s %11s %14s %9s\n", "ranks", "nodes", "algo", "bytes",
            "predicted", "busbw GB/s", "busiest link", "sim wall");
  }
  int failed = 0;
  size_t k = 0;
  for (size_t ri = 0; ri < sc->nranks && !failed; ri++)
    for (size_t si = 0; si < sc->nsizes && !failed; si++)
      for (size_t ai = 0; ai < sc->nalgos && !failed; ai++, k++) {
        sim_time_result_t r;
        double wall;
        int n = sc->ranks[ri];
        coll_status_t st = run_one(cli, sc->algos[ai], n, sc->sizes[si], &r, &wall);
        if (st != COLL_OK) {
          fprintf(stderr, "coll-sim: %s on %d ranks, %zu bytes: %s\n",
                  coll_algo_name((coll_algo_t)sc->algos[ai]), n, sc->sizes[si], coll_last_error());
          failed = 1;
          break;
        }
        double algbw = r.time_s > 0 ? (double)sc->sizes[si] / r.time_s : 0;
        rows[k] = (scale_row_t){.nranks = n,
                                .algo = sc->algos[ai],
                                .bytes = sc->sizes[si],
                                .time_s = r.time_s,
                                .busbw = algbw * bus_factor(cli->req.collective, n),
                                .busiest_bytes = r.busiest_bytes,
                                .wall_s = wall};
        if (!cli->json) {
          char tb[32], bb[32], lb[32];
          report_time(r.time_s, tb, sizeof tb);
          report_bytes((double)sc->sizes[si], bb, sizeof bb);
          report_bytes((double)r.busiest_bytes, lb, sizeof lb);
          fprintf(out, "%-7d %-6d %-11s %10s %13s %11.3f %14s %8.2fs\n", n, r.nnodes,
                  coll_algo_name((coll_algo_t)sc->algos[ai]), bb, tb, rows[k].busbw / 1e9, lb,
                  wall);
          fflush(out);
        }
        sim_time_result_free(&r);
      }
  if (failed) {
    free(rows), free(xs);
    return 1;
  }
  size_t nx = find_crossovers(cli, rows, xs, nrows + 1);
  if (cli->json) {
    fputs("{\n  \"mode\": \"sweep\",\n", out);
    fprintf(out, "  \"collective\": \"%s\",\n  \"dtype\": \"%s\",\n",
            trace_collective_name(cli->req.collective), trace_dtype_name(cli->req.dtype));
    topo_json(out, cli);
    fputs("  \"rows\": [", out);
    for (size_t i = 0; i < nrows; i++)
      fprintf(out,
              "%s\n    {\"nranks\": %d, \"algo\": \"%s\", \"bytes\": %zu, \"predicted_s\": %.9g, "
              "\"busbw\": %.6g, \"busiest_link_bytes\": %llu, \"wall_s\": %.3f}",
              i ? "," : "", rows[i].nranks, coll_algo_name((coll_algo_t)rows[i].algo),
              rows[i].bytes, rows[i].time_s, rows[i].busbw, rows[i].busiest_bytes, rows[i].wall_s);
    fputs("\n  ],\n  \"crossovers\": [", out);
    for (size_t i = 0; i < nx; i++)
      fprintf(out,
              "%s\n    {\"nranks\": %d, \"faster_below\": \"%s\", \"faster_above\": \"%s\", "
              "\"bytes_low\": %zu, \"bytes_high\": %zu, \"bytes_estimate\": %.0f}",
              i ? "," : "", xs[i].nranks, coll_algo_name((coll_algo_t)xs[i].a),
              coll_algo_name((coll_algo_t)xs[i].b), xs[i].lo, xs[i].hi, xs[i].estimate);
    fputs("\n  ]\n}\n", out);
  } else {
    fputs(nx ? "crossovers (the faster algorithm changes between two swept sizes; estimate "
               "interpolated in log-log):\n"
             : "no crossover between the swept sizes\n",
          out);
    for (size_t i = 0; i < nx; i++) {
      char lo[32], hi[32], est[32];
      report_bytes((double)xs[i].lo, lo, sizeof lo);
      report_bytes((double)xs[i].hi, hi, sizeof hi);
      report_bytes(xs[i].estimate, est, sizeof est);
      fprintf(out, "  %6d ranks: %s faster up to %s, %s from %s on (crossover ~ %s)\n",
              xs[i].nranks, coll_algo_name((coll_algo_t)xs[i].a), lo,
              coll_algo_name((coll_algo_t)xs[i].b), hi, est);
    }
  }
  int rc = 0;
  if (sc->plot_path != NULL && scale_write_svg(sc->plot_path, cli, rows, nrows) != 0) rc = 1;
  free(rows);
  free(xs);
  return rc;
}

int scale_main(const cli_t *cli) {
  if (cli->scale.sweep) return sweep(cli);
  if (cli->scale.plot_path != NULL) {
    fputs("coll-sim: --plot draws a sweep: add --sweep-ranks\n", stderr);
    return 2;
  }
  sim_time_result_t r;
  double wall;
  coll_status_t st = run_one(cli, (int)cli->req.algo, cli->req.nranks, cli->req.bytes, &r, &wall);
  if (st != COLL_OK) {
    fprintf(stderr, "coll-sim: simulation failed: %s\n", coll_last_error());
    return 1;
  }
  if (cli->json)
    write_one_json(stdout, cli, &r, wall);
  else
    write_one_text(stdout, cli, &r, wall);
  sim_time_result_free(&r);
  return fflush(stdout) != 0;
}
