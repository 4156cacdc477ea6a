/* Unit tests of allreduce_bench's pieces that need no communicator: option parsing, the
 * verifiable data patterns (reduced here in-process), statistics and output formats. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_data.h"
#include "bench_report.h"
#include "coll.h"
#include "suite_run.h"

/* Parse a NULL-terminated list of arguments (the program name is added). */
static int parse(bench_args_t *args, char *err, const char *first, ...) {
  char *argv[32] = {"allreduce_bench"};
  int argc = 1;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *))
    argv[argc++] = (char *)a;
  va_end(ap);
  return bench_args_parse(argc, argv, args, err, 256);
}

START_TEST(defaults_match_nccl_tests) {
  bench_args_t a;
  char err[256];
  ck_assert_int_eq(parse(&a, err, NULL), 0);
  ck_assert_uint_eq(a.min_bytes, 32u << 20);
  ck_assert_uint_eq(a.max_bytes, 32u << 20);
  ck_assert_int_eq(a.iters, 20);
  ck_assert_int_eq(a.warmup, 5);
  ck_assert_int_eq(a.check, 1);
  ck_assert_int_eq(a.blocking, 0);
  ck_assert_int_eq(a.local_register, 0);
  ck_assert_int_eq(a.dtype, COLL_FLOAT32);
  ck_assert_int_eq(a.op, COLL_SUM);
  ck_assert_int_eq(a.algo, BENCH_ALGO_UNSET);
  ck_assert(a.min_busbw < 0.0);
}
END_TEST

START_TEST(every_option_is_parsed_in_short_and_long_form) {
  bench_args_t a;
  char err[256];
  ck_assert_int_eq(parse(&a, err, "-b", "8", "-e", "64M", "-f", "4", "-i", "1K", "-n", "7", "-w",
                         "0", "-c", "0", "-d", "bfloat16", "-o", "max", "-z", "1", "-A", "ring",
                         "-T", "tcp", "--csv", "out.csv", "--json=out.json", "--min-busbw",
                         "2.5", NULL),
                   0);
  ck_assert_uint_eq(a.min_bytes, 8);
  ck_assert_uint_eq(a.max_bytes, 64u << 20);
  ck_assert_int_eq(a.step_factor, 4);
  ck_assert_uint_eq(a.step_bytes, 1024);
  ck_assert_int_eq(a.iters, 7);
  ck_assert_int_eq(a.warmup, 0);
  ck_assert_int_eq(a.check, 0);
  ck_assert_int_eq(a.dtype, COLL_BFLOAT16);
  ck_assert_int_eq(a.op, COLL_MAX);
  ck_assert_int_eq(a.blocking, 1);
  ck_assert_int_eq(a.algo, COLL_ALGO_RING);
  ck_assert_str_eq(a.transport, "tcp");
  ck_assert_str_eq(a.csv_path, "out.csv");
  ck_assert_str_eq(a.json_path, "out.json");
  ck_assert(fabs(a.min_busbw - 2.5) < 1e-12);
  ck_assert_int_eq(parse(&a, err, "-R", "1", NULL), 0);
  ck_assert_int_eq(a.local_register, 1);
  ck_assert_int_eq(parse(&a, err, "--local_register=0", NULL), 0);
  ck_assert_int_eq(a.local_register, 0);
  ck_assert_int_eq(parse(&a, err, "-R", "2", NULL), -1);
  ck_assert_int_eq(parse(&a, err, "--minbytes=1G", "--maxbytes", "2g", "--iters=3",
                         "--datatype", "all", "--op=all", "-b4", "--algo", "hd", NULL),
                   0);
  ck_assert_uint_eq(a.min_bytes, 4);
  ck_assert_uint_eq(a.max_bytes, 2ull << 30);
  ck_assert_int_eq(a.dtype, BENCH_ALL);
  ck_assert_int_eq(a.op, BENCH_ALL);
  ck_assert_int_eq(a.algo, COLL_ALGO_HD);
  ck_assert_int_eq(parse(&a, err, "-h", NULL), 0);
  ck_assert_int_eq(a.help, 1);
}
END_TEST

/* Each bad command line, and a word its message must contain. */
static const struct {
  const char *args[3];
  const char *needle;
} bad_lines[] = {
  {.args = {"-b", "12X"}, .needle = "-b"},
  {.args = {"-e", "-5"}, .needle = "invalid size"},
  {.args = {"-d", "float128"}, .needle = "float128"},
  {.args = {"-o", "xor"}, .needle = "unknown op"},
  {.args = {"-A", "star"}, .needle = "algorithm"},
  {.args = {"-T", "carrier-pigeon"}, .needle = "transport"},
  {.args = {"-c", "2"}, .needle = "0 or 1"},
  {.args = {"-n", "0"}, .needle = "iteration"},
  {.args = {"-n"}, .needle = "needs a value"},
  {.args = {"--frobnicate"}, .needle = "unknown option"},
  {.args = {"-q"}, .needle = "unknown option"},
  {.args = {"stray"}, .needle = "unexpected argument"},
  {.args = {"-b", "2M", "-e"}, .needle = "needs a value"},
  {.args = {"--min-busbw", "fast"}, .needle = "bandwidth"},
  {.args = {"-g", "2"}, .needle = "collrun"},
  {.args = {"--help=yes"}, .needle = "takes no value"},
};

START_TEST(bad_options_give_a_message_naming_them) {
  bench_args_t a;
  char err[256];
  const char *const *line = bad_lines[_i].args;
  ck_assert_int_eq(parse(&a, err, line[0], line[1], line[2], NULL), -1);
  ck_assert_msg(strstr(err, bad_lines[_i].needle) != NULL, "message '%s' lacks '%s'", err,
                bad_lines[_i].needle);
}
END_TEST

START_TEST(min_bytes_above_max_bytes_is_refused) {
  bench_args_t a;
  char err[256];
  ck_assert_int_eq(parse(&a, err, "-b", "2M", "-e", "1M", NULL), -1);
  ck_assert_ptr_nonnull(strstr(err, "minbytes"));
}
END_TEST

START_TEST(sizes_accept_binary_suffixes) {
  size_t n = 0;
  ck_assert_int_eq(bench_parse_size("0", &n), 0);
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(bench_parse_size("1.5k", &n), 0);
  ck_assert_uint_eq(n, 1536);
  ck_assert_int_eq(bench_parse_size("3M", &n), 0);
  ck_assert_uint_eq(n, 3u << 20);
  ck_assert_int_eq(bench_parse_size("", &n), -1);
  ck_assert_int_eq(bench_parse_size("1MB", &n), -1);
  ck_assert_int_eq(bench_parse_size("1T", &n), -1);
  ck_assert_int_eq(bench_parse_size("99999999G", &n), -1);
}
END_TEST

START_TEST(type_and_op_names_round_trip) {
  for (int t = 0; t < COLL_DTYPE_COUNT; t++)
    ck_assert_int_eq(bench_dtype_from_name(bench_dtype_name(t)), t);
  for (int o = 0; o < COLL_OP_COUNT; o++) ck_assert_int_eq(bench_op_from_name(bench_op_name(o)), o);
  ck_assert_str_eq(bench_dtype_name(COLL_FLOAT16), "half");
  ck_assert_str_eq(bench_dtype_name(COLL_FLOAT32), "float");
  ck_assert_int_eq(bench_dtype_from_name("float32"), COLL_FLOAT32);
}
END_TEST

START_TEST(half_and_bfloat16_conversions_round_to_nearest_even) {
  for (int v = -2048; v <= 2048; v++) {
    ck_assert(bench_half_to_float(bench_float_to_half((float)v)) == (float)v);
    if (v >= -256 && v <= 256) ck_assert(bench_bf16_to_float(bench_float_to_bf16((float)v)) == (float)v);
  }
  ck_assert_uint_eq(bench_float_to_half(1.0f), 0x3c00);
  ck_assert_uint_eq(bench_float_to_half(65504.0f), 0x7bff);
  ck_assert_uint_eq(bench_float_to_half(1e6f), 0x7c00);
  ck_assert_uint_eq(bench_float_to_half(2049.0f), 0x6800); /* tie goes to even 2048 */
  ck_assert_uint_eq(bench_float_to_half(2051.0f), 0x6802); /* tie goes to even 2052 */
  ck_assert(bench_half_to_float(0x0001) == ldexpf(1.0f, -24));
  ck_assert_uint_eq(bench_float_to_bf16(1.0f), 0x3f80);
  ck_assert_uint_eq(bench_float_to_bf16(257.0f), 0x4380); /* tie to even 256 */
  ck_assert(isnan(bench_half_to_float(bench_float_to_half(NAN))));
}
END_TEST

/* Can `dtype` hold x exactly? */
static int exact_in(int dtype, double x) {
  static const double lo[] = {
    [COLL_INT8] = -128, [COLL_UINT8] = 0, [COLL_INT32] = -2147483648.0, [COLL_UINT32] = 0,
    [COLL_INT64] = -9.2e18, [COLL_UINT64] = 0,
  };
  static const double hi[] = {
    [COLL_INT8] = 127, [COLL_UINT8] = 255, [COLL_INT32] = 2147483647.0,
    [COLL_UINT32] = 4294967295.0, [COLL_INT64] = 9.2e18, [COLL_UINT64] = 1.8e19,
  };
  if (dtype <= COLL_UINT64) return x == floor(x) && x >= lo[dtype] && x <= hi[dtype];
  unsigned char buf[8];
  bench_data_set(buf, 0, dtype, x);
  return bench_data_get(buf, 0, dtype) == x;
}

/* Reduce the inputs of n ranks in the element type, rank by rank, as any algorithm might:
 * every partial result must stay exact, the final one must equal the expected value,
 * and bench_data_check must agree (and catch one corrupted element). */
static void check_pattern(int dtype, int op, int nranks) {
  enum { COUNT = 301 };
  size_t elem = bench_dtype_size(dtype);
  unsigned char *in = malloc((size_t)nranks * COUNT * elem);
  unsigned char *out = malloc(COUNT * elem);
  ck_assert_ptr_nonnull(in);
  ck_assert_ptr_nonnull(out);
  for (int r = 0; r < nranks; r++)
    bench_data_fill(in + (size_t)r * COUNT * elem, COUNT, dtype, op, r, nranks, 42);
  for (size_t i = 0; i < COUNT; i++) {
    double acc = bench_data_get(in, i, dtype);
    ck_assert(acc >= 0.0);
    for (int r = 1; r < nranks; r++) {
      double v = bench_data_get(in + (size_t)r * COUNT * elem, i, dtype);
      switch (op) {
      case COLL_SUM:
      case COLL_AVG: acc += v; break;
      case COLL_PROD: acc *= v; break;
      case COLL_MIN: acc = v < acc ? v : acc; break;
      case COLL_MAX: acc = v > acc ? v : acc; break;
      case COLL_BAND: acc = (double)((uint64_t)acc & (uint64_t)v); break;
      case COLL_BOR: acc = (double)((uint64_t)acc | (uint64_t)v); break;
      case COLL_BXOR: acc = (double)((uint64_t)acc ^ (uint64_t)v); break;
      }
      ck_assert_msg(exact_in(dtype, acc), "%s %s n=%d: partial %g not exact",
                    bench_dtype_name(dtype), bench_op_name(op), nranks, acc);
    }
    if (op == COLL_AVG) acc /= nranks;
    ck_assert_msg(acc == bench_data_expected(i, dtype, op, nranks, 42),
                  "%s %s n=%d elem %zu: reduced %g, expected %g", bench_dtype_name(dtype),
                  bench_op_name(op), nranks, i, acc, bench_data_expected(i, dtype, op, nranks, 42));
    bench_data_set(out, i, dtype, acc);
  }
  ck_assert_uint_eq(bench_data_check(out, COUNT, dtype, op, nranks, 42), 0);
  /* One element off (fp8: by more than its spacing, (v + 1) * 4, since v + 1 may round
   * back to v). */
  double v = bench_data_get(out, COUNT / 2, dtype);
  int fp8 = dtype == COLL_FLOAT8E4M3 || dtype == COLL_FLOAT8E5M2;
  bench_data_set(out, COUNT / 2, dtype, fp8 ? (v + 1) * 4 : v + 1);
  ck_assert_uint_eq(bench_data_check(out, COUNT, dtype, op, nranks, 42), 1);
  /* A different seed is a different pattern: stale data cannot pass. */
  ck_assert_uint_gt(bench_data_check(out, COUNT, dtype, op, nranks, 43), 0);
  free(in);
  free(out);
}

START_TEST(patterns_reduce_exactly_for_every_type_op_and_rank_count) {
  static const int rank_counts[] = {1, 2, 3, 5, 8, 16};
  for (int t = 0; t < COLL_DTYPE_COUNT; t++)
    for (int o = 0; o < COLL_OP_COUNT; o++)
      for (size_t k = 0; k < sizeof rank_counts / sizeof rank_counts[0]; k++)
        if (bench_op_applies(t, o)) check_pattern(t, o, rank_counts[k]);
}
END_TEST

START_TEST(patterns_differ_between_ranks_and_elements) {
  float a[64], b[64];
  bench_data_fill(a, 64, COLL_FLOAT32, COLL_MAX, 0, 2, 7);
  bench_data_fill(b, 64, COLL_FLOAT32, COLL_MAX, 1, 2, 7);
  int differ = 0, distinct = 0;
  for (int i = 0; i < 64; i++) {
    differ += a[i] != b[i];
    distinct += i > 0 && a[i] != a[i - 1];
  }
  ck_assert_int_gt(differ, 32);
  ck_assert_int_gt(distinct, 32);
}
END_TEST

START_TEST(median_and_bandwidth_follow_nccl_tests) {
  double v[] = {5, 1, 4, 2, 3};
  ck_assert(bench_median(v, 5) == 3.0);
  double w[] = {10, 1, 2, 9};
  ck_assert(bench_median(w, 4) == 5.5);
  bench_result_t r;
  bench_result_set(&r, 1000000, 1000.0, 4); /* 1 MB in 1 ms: 1 GB/s */
  ck_assert(fabs(r.algbw - 1.0) < 1e-12);
  ck_assert(fabs(r.busbw - 1.5) < 1e-12);
  ck_assert(bench_busbw_factor(1) == 0.0);
  ck_assert(bench_busbw_factor(2) == 1.0);
  char s[32];
  bench_time_str(12.345, s, sizeof s);
  ck_assert_str_eq(s, "  12.35");
  bench_time_str(123.45, s, sizeof s);
  ck_assert_str_eq(s, "  123.5");
  bench_time_str(12345.6, s, sizeof s);
  ck_assert_str_eq(s, "  12346");
}
END_TEST

static char *slurp(FILE *f) {
  static char buf[8192];
  rewind(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  return buf;
}

START_TEST(rows_print_in_nccl_tests_layout) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  bench_row_t row = {.bytes = 1048576, .count = 262144, .dtype = COLL_FLOAT32, .op = COLL_SUM};
  bench_result_set(&row.oop, row.bytes, 500.0, 2);
  bench_result_set(&row.ip, row.bytes, 250.0, 2);
  row.oop.wrong = 0;
  row.ip.wrong = -1;
  bench_print_columns(f);
  bench_print_row(f, &row);
  const char *text = slurp(f);
  ck_assert_ptr_nonnull(strstr(text, "out-of-place"));
  ck_assert_ptr_nonnull(strstr(text, "#wrong"));
  ck_assert_ptr_nonnull(
    strstr(text, "     1048576        262144     float     sum      -1    500.0    2.10    2.10      0    250.0    4.19    4.19    N/A\n"));
  fclose(f);
}
END_TEST

START_TEST(csv_and_json_files_hold_every_row) {
  char dir[] = "/tmp/bench_unitXXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char csv[64], json[64];
  snprintf(csv, sizeof csv, "%s/r.csv", dir);
  snprintf(json, sizeof json, "%s/r.json", dir);
  bench_row_t rows[2] = {
    {.bytes = 8, .count = 2, .dtype = COLL_FLOAT32, .op = COLL_SUM},
    {.bytes = 64, .count = 16, .dtype = COLL_FLOAT32, .op = COLL_SUM},
  };
  for (int i = 0; i < 2; i++) {
    bench_result_set(&rows[i].oop, rows[i].bytes, 10.0, 2);
    bench_result_set(&rows[i].ip, rows[i].bytes, 10.0, 2);
  }
  bench_meta_t meta = {.nranks = 2, .algo = "ring", .transport = "shm", .iters = 5};
  ck_assert_int_eq(bench_write_csv(csv, &meta, rows, 2), 0);
  ck_assert_int_eq(bench_write_json(json, &meta, rows, 2), 0);
  FILE *f = fopen(csv, "r");
  const char *text = slurp(f);
  ck_assert_ptr_nonnull(strstr(text, "size,count,type,redop,root,oop_time_us"));
  ck_assert_ptr_nonnull(strstr(text, "\n64,16,float,sum,-1,10.000,0.0064,0.0064,0,"));
  fclose(f);
  f = fopen(json, "r");
  text = slurp(f);
  ck_assert_ptr_nonnull(strstr(text, "\"nranks\": 2"));
  ck_assert_ptr_nonnull(strstr(text, "{\"size\": 64, \"count\": 16, \"type\": \"float\""));
  fclose(f);
  ck_assert_int_eq(bench_write_csv("/nonexistent-dir/x.csv", &meta, rows, 2), -1);
  unlink(csv);
  unlink(json);
  rmdir(dir);
}
END_TEST

SUITE_MAIN("bench",
           suite_tests("args", 0, defaults_match_nccl_tests,
                       every_option_is_parsed_in_short_and_long_form),
           suite_loop_tests("args", 0, 0, (int)(sizeof bad_lines / sizeof bad_lines[0]),
                            bad_options_give_a_message_naming_them),
           suite_tests("args", 0, min_bytes_above_max_bytes_is_refused,
                       sizes_accept_binary_suffixes, type_and_op_names_round_trip),
           suite_tests("data", 0, half_and_bfloat16_conversions_round_to_nearest_even,
                       patterns_reduce_exactly_for_every_type_op_and_rank_count,
                       patterns_differ_between_ranks_and_elements),
           suite_tests("report", 0, median_and_bandwidth_follow_nccl_tests,
                       rows_print_in_nccl_tests_layout, csv_and_json_files_hold_every_row))
