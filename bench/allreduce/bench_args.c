/* Option parsing for allreduce_bench and the reference programs. Hand-written rather than
 * getopt so that every bad value gets a message naming the option, and so that the
 * parser keeps no global state (it is unit-tested by calling it many times). */
#include "bench_args.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum opt_id {
  OPT_MINBYTES,
  OPT_MAXBYTES,
  OPT_STEPBYTES,
  OPT_STEPFACTOR,
  OPT_ITERS,
  OPT_WARMUP,
  OPT_CHECK,
  OPT_DTYPE,
  OPT_OP,
  OPT_BLOCKING,
  OPT_REGISTER,
  OPT_ROOT,
  OPT_NTHREADS,
  OPT_NGPUS,
  OPT_ALGO,
  OPT_TRANSPORT,
  OPT_CSV,
  OPT_JSON,
  OPT_MIN_BUSBW,
  OPT_COLLECTIVE,
  OPT_HELP,
};

struct opt_def {
  char short_name; /* 0: long form only */
  const char *long_name;
  int takes_value;
  enum opt_id id;
};

/* Letters and long names follow nccl-tests' all_reduce_perf, then our additions. */
static const struct opt_def opt_defs[] = {
  {.short_name = 'b', .long_name = "minbytes", .takes_value = 1, .id = OPT_MINBYTES},
  {.short_name = 'e', .long_name = "maxbytes", .takes_value = 1, .id = OPT_MAXBYTES},
  {.short_name = 'i', .long_name = "stepbytes", .takes_value = 1, .id = OPT_STEPBYTES},
  {.short_name = 'f', .long_name = "stepfactor", .takes_value = 1, .id = OPT_STEPFACTOR},
  {.short_name = 'n', .long_name = "iters", .takes_value = 1, .id = OPT_ITERS},
  {.short_name = 'w', .long_name = "warmup_iters", .takes_value = 1, .id = OPT_WARMUP},
  {.short_name = 'c', .long_name = "check", .takes_value = 1, .id = OPT_CHECK},
  {.short_name = 'd', .long_name = "datatype", .takes_value = 1, .id = OPT_DTYPE},
  {.short_name = 'o', .long_name = "op", .takes_value = 1, .id = OPT_OP},
  {.short_name = 'z', .long_name = "blocking", .takes_value = 1, .id = OPT_BLOCKING},
  {.short_name = 'R', .long_name = "local_register", .takes_value = 1, .id = OPT_REGISTER},
  {.short_name = 'r', .long_name = "root", .takes_value = 1, .id = OPT_ROOT},
  {.short_name = 't', .long_name = "nthreads", .takes_value = 1, .id = OPT_NTHREADS},
  {.short_name = 'g', .long_name = "ngpus", .takes_value = 1, .id = OPT_NGPUS},
  {.short_name = 'A', .long_name = "algo", .takes_value = 1, .id = OPT_ALGO},
  {.short_name = 'T', .long_name = "transport", .takes_value = 1, .id = OPT_TRANSPORT},
  {.short_name = 0, .long_name = "csv", .takes_value = 1, .id = OPT_CSV},
  {.short_name = 0, .long_name = "json", .takes_value = 1, .id = OPT_JSON},
  {.short_name = 0, .long_name = "min-busbw", .takes_value = 1, .id = OPT_MIN_BUSBW},
  {.short_name = 'C', .long_name = "collective", .takes_value = 1, .id = OPT_COLLECTIVE},
  {.short_name = 'h', .long_name = "help", .takes_value = 0, .id = OPT_HELP},
};

/* nccl-tests' type names first (they are what we print), then aliases. */
static const struct {
  const char *name;
  int dtype;
} dtype_names[] = {
  {.name = "int8", .dtype = COLL_INT8},       {.name = "uint8", .dtype = COLL_UINT8},
  {.name = "int32", .dtype = COLL_INT32},     {.name = "uint32", .dtype = COLL_UINT32},
  {.name = "int64", .dtype = COLL_INT64},     {.name = "uint64", .dtype = COLL_UINT64},
  {.name = "half", .dtype = COLL_FLOAT16},    {.name = "float", .dtype = COLL_FLOAT32},
  {.name = "double", .dtype = COLL_FLOAT64},  {.name = "bfloat16", .dtype = COLL_BFLOAT16},
  {.name = "float16", .dtype = COLL_FLOAT16}, {.name = "float32", .dtype = COLL_FLOAT32},
  {.name = "float64", .dtype = COLL_FLOAT64}, {.name = "bf16", .dtype = COLL_BFLOAT16},
  {.name = "float8_e4m3", .dtype = COLL_FLOAT8E4M3},
  {.name = "float8_e5m2", .dtype = COLL_FLOAT8E5M2},
};

static const struct {
  const char *name;
  int op;
} op_names[] = {
  {.name = "sum", .op = COLL_SUM}, {.name = "prod", .op = COLL_PROD},
  {.name = "max", .op = COLL_MAX}, {.name = "min", .op = COLL_MIN},
  {.name = "avg", .op = COLL_AVG}, {.name = "band", .op = COLL_BAND},
  {.name = "bor", .op = COLL_BOR}, {.name = "bxor", .op = COLL_BXOR},
};

static const struct {
  const char *name;
  int algo;
} algo_names[] = {
  {.name = "auto", .algo = COLL_ALGO_AUTO}, {.name = "ring", .algo = COLL_ALGO_RING},
  {.name = "tree", .algo = COLL_ALGO_TREE}, {.name = "hd", .algo = COLL_ALGO_HD},
  {.name = "master", .algo = COLL_ALGO_MASTER}, {.name = "arena", .algo = COLL_ALGO_ARENA},
  {.name = "ring_nodes", .algo = COLL_ALGO_RING_NODES},
  {.name = "two_level", .algo = COLL_ALGO_TWO_LEVEL},
  {.name = "leaders", .algo = COLL_ALGO_LEADERS},
};

static const char *const transport_names[] = {"shm", "tcp", "ib"};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

int bench_dtype_from_name(const char *name) {
  for (size_t i = 0; i < COUNT_OF(dtype_names); i++)
    if (strcasecmp(name, dtype_names[i].name) == 0) return dtype_names[i].dtype;
  return -1;
}

const char *bench_dtype_name(int dtype) {
  for (size_t i = 0; i < COUNT_OF(dtype_names); i++)
    if (dtype_names[i].dtype == dtype) return dtype_names[i].name;
  return "?";
}

size_t bench_dtype_size(int dtype) {
  static const size_t sizes[COLL_DTYPE_COUNT] = {
    [COLL_INT8] = 1,    [COLL_UINT8] = 1,    [COLL_INT32] = 4,   [COLL_UINT32] = 4,
    [COLL_INT64] = 8,   [COLL_UINT64] = 8,   [COLL_FLOAT16] = 2, [COLL_BFLOAT16] = 2,
    [COLL_FLOAT32] = 4, [COLL_FLOAT64] = 8,   [COLL_FLOAT8E4M3] = 1, [COLL_FLOAT8E5M2] = 1,
  };
  return dtype >= 0 && dtype < COLL_DTYPE_COUNT ? sizes[dtype] : 0;
}

int bench_op_from_name(const char *name) {
  for (size_t i = 0; i < COUNT_OF(op_names); i++)
    if (strcasecmp(name, op_names[i].name) == 0) return op_names[i].op;
  return -1;
}

const char *bench_op_name(int op) {
  for (size_t i = 0; i < COUNT_OF(op_names); i++)
    if (op_names[i].op == op) return op_names[i].name;
  return "?";
}

void bench_args_defaults(bench_args_t *args) {
  *args = (bench_args_t){
    .min_bytes = 32u << 20,
    .max_bytes = 32u << 20,
    .step_bytes = 1u << 20,
    .step_factor = 1,
    .iters = 20,
    .warmup = 5,
    .check = 1,
    .blocking = 0,
    .dtype = COLL_FLOAT32,
    .op = COLL_SUM,
    .algo = BENCH_ALGO_UNSET,
    .transport = NULL,
    .csv_path = NULL,
    .json_path = NULL,
    .min_busbw = -1.0,
    .help = 0,
  };
}

int bench_parse_size(const char *text, size_t *bytes) {
  char *end = NULL;
  errno = 0;
  double value = strtod(text, &end);
  if (end == text || errno != 0 || !(value >= 0.0)) return -1;
  double unit = 1.0;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': unit = 1024.0; end++; break;
  case 'm': case 'M': unit = 1024.0 * 1024.0; end++; break;
  case 'g': case 'G': unit = 1024.0 * 1024.0 * 1024.0; end++; break;
  default: return -1;
  }
  if (*end != '\0') return -1;
  double total = value * unit;
  /* 2^50 bytes is far beyond any buffer this benchmark could allocate. */
  if (total > 1125899906842624.0) return -1;
  *bytes = (size_t)total;
  return 0;
}

static int set_error(char *err, size_t err_len, const char *fmt, ...) {
  if (err != NULL && err_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int parse_long(const char *text, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 0);
  if (end == text || *end != '\0' || errno != 0 || value < lo || value > hi) return -1;
  *out = value;
  return 0;
}

static const struct opt_def *find_short(char c) {
  for (size_t i = 0; i < COUNT_OF(opt_defs); i++)
    if (opt_defs[i].short_name == c) return &opt_defs[i];
  return NULL;
}

static const struct opt_def *find_long(const char *name, size_t len) {
  for (size_t i = 0; i < COUNT_OF(opt_defs); i++)
    if (strlen(opt_defs[i].long_name) == len && strncmp(opt_defs[i].long_name, name, len) == 0)
      return &opt_defs[i];
  return NULL;
}

/* Apply one option; `shown` is how the user spelled it, for messages. */
static int apply(const struct opt_def *def, const char *shown, const char *value,
                 bench_args_t *args, char *err, size_t err_len) {
  long n = 0;
  switch (def->id) {
  case OPT_MINBYTES:
  case OPT_MAXBYTES:
  case OPT_STEPBYTES: {
    size_t bytes = 0;
    if (bench_parse_size(value, &bytes) != 0)
      return set_error(err, err_len,
                       "invalid size '%s' for %s (expected a number with optional K, M or G)",
                       value, shown);
    if (def->id == OPT_MINBYTES) args->min_bytes = bytes;
    if (def->id == OPT_MAXBYTES) args->max_bytes = bytes;
    if (def->id == OPT_STEPBYTES) args->step_bytes = bytes;
    return 0;
  }
  case OPT_STEPFACTOR:
    if (parse_long(value, 1, 1L << 20, &n) != 0)
      return set_error(err, err_len, "invalid factor '%s' for %s (expected an integer >= 1)",
                       value, shown);
    args->step_factor = n;
    return 0;
  case OPT_ITERS:
    if (parse_long(value, 1, 1000000, &n) != 0)
      return set_error(err, err_len, "invalid iteration count '%s' for %s (expected 1..1000000)",
                       value, shown);
    args->iters = (int)n;
    return 0;
  case OPT_WARMUP:
    if (parse_long(value, 0, 1000000, &n) != 0)
      return set_error(err, err_len, "invalid warm-up count '%s' for %s (expected 0..1000000)",
                       value, shown);
    args->warmup = (int)n;
    return 0;
  case OPT_CHECK:
  case OPT_BLOCKING:
  case OPT_REGISTER:
    if (parse_long(value, 0, 1, &n) != 0)
      return set_error(err, err_len, "invalid value '%s' for %s (expected 0 or 1)", value, shown);
    if (def->id == OPT_CHECK) args->check = (int)n;
    else if (def->id == OPT_BLOCKING) args->blocking = (int)n;
    else args->local_register = (int)n;
    return 0;
  case OPT_DTYPE:
    if (strcasecmp(value, "all") == 0) {
      args->dtype = BENCH_ALL;
      return 0;
    }
    args->dtype = bench_dtype_from_name(value);
    if (args->dtype < 0)
      return set_error(err, err_len,
                       "unknown type '%s' for %s (expected int8, uint8, int32, uint32, int64, "
                       "uint64, half, float, double, bfloat16 or all)",
                       value, shown);
    return 0;
  case OPT_OP:
    if (strcasecmp(value, "all") == 0) {
      args->op = BENCH_ALL;
      return 0;
    }
    args->op = bench_op_from_name(value);
    if (args->op < 0)
      return set_error(err, err_len,
                       "unknown op '%s' for %s (expected sum, prod, max, min, avg, band, bor, "
                       "bxor or all)",
                       value, shown);
    return 0;
  case OPT_ROOT:
    /* The root of broadcast and reduce (checked against the rank count at run time);
     * all-reduce ignores it, as nccl-tests does. -1 means rank 0. */
    if (parse_long(value, -1, 1 << 20, &n) != 0)
      return set_error(err, err_len, "%s '%s': expected a rank (0, 1, ...)", shown, value);
    args->root = n < 0 ? 0 : (int)n;
    return 0;
  case OPT_COLLECTIVE:
    for (int c = 0; c < BENCH_COLLECTIVE_COUNT; c++) {
      if (strcmp(value, bench_collective_name(c)) == 0) {
        args->collective = c;
        return 0;
      }
    }
    return set_error(err, err_len,
                     "unknown collective '%s' for %s (expected all_reduce, broadcast, reduce, "
                     "all_gather, reduce_scatter or all_to_all)",
                     value, shown);
  case OPT_NTHREADS:
  case OPT_NGPUS:
    if (parse_long(value, 1, 1, &n) != 0)
      return set_error(err, err_len,
                       "%s '%s': one rank per process here (launch more ranks with collrun -n)",
                       shown, value);
    return 0;
  case OPT_ALGO:
    for (size_t i = 0; i < COUNT_OF(algo_names); i++) {
      if (strcasecmp(value, algo_names[i].name) == 0) {
        args->algo = algo_names[i].algo;
        return 0;
      }
    }
    return set_error(err, err_len,
                     "unknown algorithm '%s' for %s (expected ring, tree, hd, master, arena or auto)",
                     value, shown);
  case OPT_TRANSPORT:
    for (size_t i = 0; i < COUNT_OF(transport_names); i++) {
      if (strcmp(value, transport_names[i]) == 0) {
        args->transport = transport_names[i];
        return 0;
      }
    }
    return set_error(err, err_len, "unknown transport '%s' for %s (expected shm, tcp or ib)",
                     value, shown);
  case OPT_CSV:
  case OPT_JSON:
    if (value[0] == '\0')
      return set_error(err, err_len, "%s needs a file name", shown);
    if (def->id == OPT_CSV) args->csv_path = value;
    else args->json_path = value;
    return 0;
  case OPT_MIN_BUSBW: {
    char *end = NULL;
    errno = 0;
    double x = strtod(value, &end);
    if (end == value || *end != '\0' || errno != 0 || !(x >= 0.0))
      return set_error(err, err_len, "invalid bandwidth '%s' for %s (expected GB/s >= 0)",
                       value, shown);
    args->min_busbw = x;
    return 0;
  }
  case OPT_HELP:
    args->help = 1;
    return 0;
  }
  return set_error(err, err_len, "internal error: unhandled option %s", shown);
}

int bench_args_parse(int argc, char **argv, bench_args_t *args, char *err, size_t err_len) {
  bench_args_defaults(args);
  if (err != NULL && err_len > 0) err[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const struct opt_def *def = NULL;
    const char *value = NULL;
    char shown[64];
    if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0') {
      const char *name = arg + 2;
      const char *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      def = find_long(name, len);
      snprintf(shown, sizeof shown, "--%.*s", (int)(len > 40 ? 40 : len), name);
      if (def == NULL) return set_error(err, err_len, "unknown option '%s' (see --help)", arg);
      if (eq != NULL) {
        if (!def->takes_value)
          return set_error(err, err_len, "option %s takes no value", shown);
        value = eq + 1;
      }
    } else if (arg[0] == '-' && arg[1] != '\0' && arg[1] != '-') {
      def = find_short(arg[1]);
      snprintf(shown, sizeof shown, "-%c", arg[1]);
      if (def == NULL) return set_error(err, err_len, "unknown option '%s' (see --help)", arg);
      if (arg[2] != '\0') {
        if (!def->takes_value)
          return set_error(err, err_len, "option %s takes no value", shown);
        value = arg + 2;
      }
    } else {
      return set_error(err, err_len, "unexpected argument '%s' (see --help)", arg);
    }
    if (def->takes_value && value == NULL) {
      if (i + 1 >= argc) return set_error(err, err_len, "option %s needs a value", shown);
      value = argv[++i];
    }
    if (apply(def, shown, value, args, err, err_len) != 0) return -1;
  }
  if (args->min_bytes > args->max_bytes)
    return set_error(err, err_len, "invalid sizes: minbytes (-b) %zu > maxbytes (-e) %zu",
                     args->min_bytes, args->max_bytes);
  if (args->step_factor <= 1 && args->step_bytes == 0 && args->min_bytes != args->max_bytes)
    return set_error(err, err_len, "step of 0 bytes (-i 0) with factor 1 would never end");
  return 0;
}

void bench_args_usage(const char *prog, FILE *out) {
  fprintf(out,
          "Usage: %s [options]   (run one process per rank: collrun -n N %s ...)\n"
          "All-reduce bandwidth and latency, with nccl-tests' all_reduce_perf options and "
          "columns.\n"
          "  -b, --minbytes SIZE      smallest message (K, M, G suffixes; default 32M)\n"
          "  -e, --maxbytes SIZE      largest message (default 32M)\n"
          "  -f, --stepfactor N       multiply the size by N each step (default 1: use -i)\n"
          "  -i, --stepbytes SIZE     add SIZE each step when the factor is 1 (default 1M)\n"
          "  -n, --iters N            timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N     warm-up iterations (default 5)\n"
          "  -c, --check 0|1          verify results, count wrong elements (default 1)\n"
          "  -d, --datatype TYPE      int8 uint8 int32 uint32 int64 uint64 half float double\n"
          "                           bfloat16, or all (default float)\n"
          "  -o, --op OP              sum prod max min avg band bor bxor (integer types), or\n"
          "                           all (default sum)\n"
          "  -z, --blocking 0|1       0: coll_all_reduce_async + wait; 1: blocking call "
          "(default 0)\n"
          "  -R, --local_register 0|1 1: allocate the buffers with coll_mem_alloc (shared\n"
          "                           windows: the zero-copy all-reduce on one host over\n"
          "                           shm; plain memory elsewhere) (default 0)\n"
          "  -A, --algo ALGO          ring tree hd master arena ring_nodes two_level leaders\n"
          "                           auto (coll_comm_set_algo; the last three follow the\n"
          "                           hosts of the ranks, COLL_HOST_ID)\n"
          "  -T, --transport T        shm or tcp (sets COLL_TRANSPORT before init)\n"
          "      --csv FILE           also write the results as CSV (rank 0)\n"
          "      --json FILE          also write the results as JSON (rank 0)\n"
          "      --min-busbw GB/S     fail (exit 1) when the largest size's out-of-place busbw\n"
          "                           is below this\n"
          "  -C, --collective NAME    all_reduce (default), broadcast, reduce, all_gather,\n"
          "                           reduce_scatter, all_to_all; SIZE is nccl-tests' (the\n"
          "                           whole buffer: all ranks' blocks); only all_reduce is\n"
          "                           checked (-c)\n"
          "  -r, --root N             root of broadcast and reduce (default 0)\n"
          "  -h, --help               this text\n"
          "Accepted for nccl-tests compatibility: -t 1, -g 1.\n"
          "Time per size: the median of the timed iterations, each timed on its own after a\n"
          "small all-reduce that lines the ranks up; the slowest rank's median is reported.\n"
          "algbw = size / time; busbw = algbw * 2(n-1)/n for all_reduce, (n-1)/n for\n"
          "all_gather, reduce_scatter and all_to_all, 1 for broadcast and reduce (GB/s = 1e9\n"
          "bytes/s).\n"
          "Exit status: 0 success; 1 wrong results, failed call or busbw below --min-busbw;\n"
          "2 bad options.\n",
          prog, prog);
}

const char *bench_collective_name(int collective) {
  static const char *const names[BENCH_COLLECTIVE_COUNT] = {
    [BENCH_ALL_REDUCE] = "all_reduce",         [BENCH_BROADCAST] = "broadcast",
    [BENCH_REDUCE] = "reduce",                 [BENCH_ALL_GATHER] = "all_gather",
    [BENCH_REDUCE_SCATTER] = "reduce_scatter", [BENCH_ALL_TO_ALL] = "all_to_all",
  };
  return collective >= 0 && collective < BENCH_COLLECTIVE_COUNT ? names[collective] : "?";
}

double bench_collective_busbw_factor(int collective, int nranks) {
  if (nranks <= 0) return 0.0;
  switch (collective) {
  case BENCH_ALL_REDUCE:
    return 2.0 * (nranks - 1) / nranks;
  case BENCH_BROADCAST:
  case BENCH_REDUCE:
    return 1.0;
  default:
    return (double)(nranks - 1) / nranks;
  }
}
