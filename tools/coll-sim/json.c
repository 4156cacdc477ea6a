/* coll-sim --json: one JSON object with the request, the counted numbers, the formulas'
 * numbers and every step's transfers, for tests and scripts. All strings come from fixed
 * tables, so none needs escaping. */
#include <math.h>
#include <stdlib.h>

#include "info.h"
#include "writers.h"

static void size_array(FILE *out, const size_t *v, int n) {
  fputc('[', out);
  for (int i = 0; i < n; i++) fprintf(out, "%s%zu", i ? ", " : "", v[i]);
  fputc(']', out);
}

static void number(FILE *out, double v) {
  if (isfinite(v))
    fprintf(out, "%.6g", v);
  else
    fputs("null", out);
}

int write_json(FILE *out, const cli_t *cli, const trace_t *t) {
  (void)cli;
  const sim_request_t *q = &t->req;
  int n = q->nranks;
  const algo_info_t *info = info_get(q->collective, q->algo);
  double *want = calloc((size_t)n, sizeof *want);
  if (want == NULL) {
    fputs("coll-sim: out of memory\n", stderr);
    return -1;
  }
  info_expected_bytes(t, want);
  fprintf(out, "{\n  \"algo\": \"%s\",\n  \"collective\": \"%s\",\n  \"nranks\": %d,\n",
          trace_algo_name(q->collective, q->algo), trace_collective_name(q->collective), n);
  fprintf(out, "  \"bytes\": %zu,\n  \"count\": %zu,\n  \"dtype\": \"%s\",\n  \"root\": %d,\n",
          q->bytes, q->count, trace_dtype_name(q->dtype), q->root);
  fprintf(out, "  \"segment_bytes\": %zu,\n  \"unit\": \"%s\",\n  \"unit_parts\": %zu,\n",
          q->segment_bytes, t->unit.name, t->unit.nparts);
  fprintf(out, "  \"nseg\": %zu,\n  \"steps\": %zu,\n  \"max_steps_per_rank\": %zu,\n",
          info_nseg(t), t->nsteps, t->res.max_steps);
  fputs("  \"bytes_sent\": ", out);
  size_array(out, t->res.bytes_sent, n);
  fputs(",\n  \"bytes_received\": ", out);
  size_array(out, t->res.bytes_received, n);
  fputs(",\n  \"bytes_reduced\": ", out);
  size_array(out, t->bytes_reduced, n);
  fputs(",\n  \"link_bytes\": [", out);
  for (int a = 0; a < n; a++) {
    fputs(a ? ",\n    " : "\n    ", out);
    size_array(out, t->res.link_bytes + (size_t)a * n, n);
  }
  fputs("\n  ],\n  \"formula\": {", out);
  if (info != NULL)
    fprintf(out,
            "\n    \"rule\": \"%s\",\n    \"steps_text\": \"%s\",\n    \"bytes_text\": \"%s\","
            "\n    \"file\": \"%s\",",
            info->rule, info->steps_formula, info->bytes_formula, info->file);
  long steps = info_expected_steps(t);
  fputs("\n    \"steps\": ", out);
  if (steps >= 0)
    fprintf(out, "%ld", steps);
  else
    fputs("null", out);
  fputs(",\n    \"bytes_sent\": [", out);
  for (int r = 0; r < n; r++) fprintf(out, "%s%.1f", r ? ", " : "", want[r]);
  fputs("]\n  },\n", out);
  fprintf(out,
          "  \"cost\": {\"transport\": \"%s\", \"alpha\": %.6g, \"beta\": %.6g, "
          "\"gamma\": %.6g, \"predicted_s\": ",
          q->transport, q->cost.alpha, q->cost.beta, q->cost.gamma);
  number(out, report_predict(t, q->algo));
  fputs(", \"estimate_s\": ", out);
  number(out, t->estimate_s);
  fputs("},\n  \"transfers\": [", out);
  for (size_t k = 0; k < t->nsteps; k++) {
    const tstep_t *s = &t->steps[k];
    for (size_t i = 0; i < s->nxfers; i++) {
      const xfer_t *x = &t->xfers[s->first_xfer + i];
      fprintf(out,
              "%s\n    {\"step\": %zu, \"src\": %d, \"dst\": %d, \"offset\": %zu, "
              "\"count\": %zu, \"reduce\": %s}",
              k == 0 && i == 0 ? "" : ",", k, x->src, x->dst, x->dst_offset, x->count,
              x->reduce ? "true" : "false");
    }
  }
  fputs("\n  ]\n}\n", out);
  free(want);
  return ferror(out) ? -1 : 0;
}
