/* allreduce_bench's output: statistics and the nccl-tests-compatible text rows, plus CSV
 * and JSON files for scripts (bench/compare/compare.sh). */
#include "bench_report.h"

#include <errno.h>
#include <stdlib.h>

#include "bench_args.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
  if (n <= 0) return 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_busbw_factor(int nranks) {
  if (nranks <= 0) return 0.0;
  return 2.0 * (nranks - 1) / nranks;
}

void bench_result_set(bench_result_t *r, size_t bytes, double time_us, int nranks) {
  r->time_us = time_us;
  r->algbw = time_us > 0.0 ? (double)bytes / 1e3 / time_us : 0.0;
  r->busbw = r->algbw * bench_busbw_factor(nranks);
}

void bench_time_str(double us, char *buf, size_t len) {
  if (us >= 10000.0) snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0) snprintf(buf, len, "%7.1f", us);
  else snprintf(buf, len, "%7.2f", us);
}

void bench_print_columns(FILE *out) {
  fprintf(out, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n",
          "", "", "", "", "");
  fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
          "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
          "busbw", "#wrong");
  fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
          "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
          "");
}

static void print_result(FILE *out, const bench_result_t *r) {
  char time[32];
  bench_time_str(r->time_us, time, sizeof time);
  if (r->wrong < 0) fprintf(out, "  %7s  %6.2f  %6.2f  %5s", time, r->algbw, r->busbw, "N/A");
  else fprintf(out, "  %7s  %6.2f  %6.2f  %5lld", time, r->algbw, r->busbw, r->wrong);
}

void bench_print_row(FILE *out, const bench_row_t *row) {
  /* All-reduce has no root: nccl-tests prints -1 there. */
  fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, bench_dtype_name(row->dtype),
          bench_op_name(row->op), -1);
  print_result(out, &row->oop);
  print_result(out, &row->ip);
  fputc('\n', out);
  fflush(out);
}

static int finish(FILE *f) {
  int failed = ferror(f);
  if (fclose(f) != 0 || failed) {
    if (errno == 0) errno = EIO;
    return -1;
  }
  return 0;
}

int bench_write_csv(const char *path, const bench_meta_t *meta, const bench_row_t *rows,
                    size_t nrows) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  /* One self-describing table: the run's parameters repeat on each row so that rows from
   * several runs can be concatenated and still be told apart. */
  fprintf(f, "size,count,type,redop,root,"
             "oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,"
             "nranks,algo,transport,iters,warmup,check,blocking,timing\n");
  for (size_t i = 0; i < nrows; i++) {
    const bench_row_t *r = &rows[i];
    fprintf(f, "%zu,%zu,%s,%s,-1,%.3f,%.4f,%.4f,%lld,%.3f,%.4f,%.4f,%lld,%d,%s,%s,%d,%d,%d,%d,median\n",
            r->bytes, r->count, bench_dtype_name(r->dtype), bench_op_name(r->op), r->oop.time_us,
            r->oop.algbw, r->oop.busbw, r->oop.wrong, r->ip.time_us, r->ip.algbw, r->ip.busbw,
            r->ip.wrong, meta->nranks, meta->algo, meta->transport, meta->iters, meta->warmup,
            meta->check, meta->blocking);
  }
  return finish(f);
}

static void json_result(FILE *f, const char *name, const bench_result_t *r) {
  fprintf(f, "\"%s\": {\"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %lld}",
          name, r->time_us, r->algbw, r->busbw, r->wrong);
}

int bench_write_json(const char *path, const bench_meta_t *meta, const bench_row_t *rows,
                     size_t nrows) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  /* Names come from fixed tables (no user text), so no string escaping is needed. */
  fprintf(f, "{\n  \"benchmark\": \"allreduce_bench\",\n  \"nranks\": %d,\n", meta->nranks);
  fprintf(f, "  \"algo\": \"%s\",\n  \"transport\": \"%s\",\n", meta->algo, meta->transport);
  fprintf(f, "  \"iters\": %d,\n  \"warmup\": %d,\n  \"check\": %d,\n  \"blocking\": %d,\n",
          meta->iters, meta->warmup, meta->check, meta->blocking);
  fprintf(f, "  \"min_bytes\": %zu,\n  \"max_bytes\": %zu,\n  \"step_bytes\": %zu,\n"
             "  \"step_factor\": %ld,\n",
          meta->min_bytes, meta->max_bytes, meta->step_bytes, meta->step_factor);
  fprintf(f, "  \"timing\": \"median of iterations, each timed alone after a small all-reduce "
             "that aligns the ranks; max over ranks\",\n");
  fprintf(f, "  \"memory\": {\"bench_buffer_bytes\": %zu, \"staging_bytes\": %zu, "
             "\"staging_bytes_peak\": %zu, \"vmhwm_kib\": %zu},\n",
          meta->bench_buffer_bytes, meta->staging_bytes, meta->staging_bytes_peak,
          meta->vmhwm_kib);
  fprintf(f, "  \"avg_busbw\": %.4f,\n  \"wrong_total\": %lld,\n  \"results\": [", meta->avg_busbw,
          meta->wrong_total);
  for (size_t i = 0; i < nrows; i++) {
    const bench_row_t *r = &rows[i];
    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
               "\"root\": -1, ",
            i ? "," : "", r->bytes, r->count, bench_dtype_name(r->dtype), bench_op_name(r->op));
    json_result(f, "out_of_place", &r->oop);
    fputs(", ", f);
    json_result(f, "in_place", &r->ip);
    fputc('}', f);
  }
  fputs("\n  ]\n}\n", f);
  return finish(f);
}
