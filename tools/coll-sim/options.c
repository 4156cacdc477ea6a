/* coll-sim's options: getopt_long with strict number checks (every bad value names its
 * option and exits 2) and the help text that documents every option and output. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"

/* In sections: C11 promises string literals of 4095 bytes only. */
static const char *const help_sections[] = {
    "usage: coll-sim ALGO -n N --bytes S [options]\n"
    "\n"
    "Run the schedule libcoll builds for ALGO on N ranks in one process (no network: the\n"
    "schedule simulator of libcoll/src/sim/sim.c) and show what happens: every step,\n"
    "which rank sends which part of the buffer to whom, the bytes on every link, the\n"
    "bytes each rank sends, and the time the cost model predicts.\n"
    "\n"
    "ALGO, all_reduce:  ring | tree (double binary tree) | hd (halving-doubling) | master\n"
    "                   | ring_nodes (the ring in node order) | two_level (reduce-scatter\n"
    "                   in the node, all-reduce across, all-gather in the node) | leaders\n"
    "                   (reduce to one rank per node, all-reduce, broadcast); see --hosts\n"
    "ALGO, broadcast:   chain (= ring) | binomial (= tree, hd) | direct (= master)\n"
    "ALGO, gather and scatter: direct (= master) | binomial (= tree, hd)\n"
    "ALGO, all_to_allv: pairwise (= ring)\n"
    "\n"
    "options:\n"
    "  -n, --nranks N          number of ranks, 1..1024 (required); up to 65536 in timing\n"
    "                          mode (below), which a larger N turns on\n"
    "  -b, --bytes S           buffer size in bytes; suffixes K, M, G (x1024) allowed;\n"
    "                          a multiple of the element size (required)\n"
    "  -c, --collective C      all_reduce (default), broadcast, gather, scatter or\n"
    "                          all_to_allv (S is then the largest block: rank r sends rank\n"
    "                          p ((r + 2p) mod 3) x S/2 bytes, so some pairs send nothing;\n"
    "                          blocks lie in peer order, without gaps)\n"
    "  -r, --root R            root of broadcast, gather and scatter, 0..N-1 (default 0)\n"
    "  -d, --dtype T           element type: int8 uint8 int32 uint32 int64 uint64 float16\n"
    "                          bfloat16 float32 float64 float8_e4m3 float8_e5m2\n"
    "                          (default float32)\n"
    "  -s, --segment BYTES     pipelining unit (default: the algorithm's, 512K); suffixes\n"
    "                          as for --bytes\n"
    "      --hosts LIST        the node of each rank, N numbers (e.g. 0,1,0,1: round-robin\n"
    "                          on 2 nodes), for the node-aware algorithms and the cost model\n"
    "                          (between nodes: tcp's constants, inside: the transport's);\n"
    "                          default: every rank on one node\n"
    "\n",
    "cost model (time ~ steps x alpha + bytes x beta + reduced bytes x gamma):\n"
    "  -t, --transport T       shm (default) or tcp: the constants measured on this machine\n"
    "                          kind (libcoll/src/algo/cost.c)\n"
    "      --alpha SEC         seconds per step (message latency), e.g. 1.5e-6\n"
    "      --beta SEC          seconds per byte sent (1 / bandwidth), e.g. 1.6e-10\n"
    "      --gamma SEC         seconds per byte reduced, e.g. 1.1e-10\n"
    "                          (--alpha/--beta/--gamma override the transport's values)\n"
    "\n"
    "output (text on stdout unless --json):\n"
    "  -e, --explain           print the algorithm's rule and its formulas (steps, bytes\n"
    "                          per rank) next to the counted numbers\n"
    "      --json              print one JSON object instead of text: request, counted\n"
    "                          numbers, formulas, predictions and every step's transfers\n"
    "      --no-table          leave out the step table (summary only)\n"
    "      --max-steps K       table: show the first and last K/2 steps only (default 64;\n"
    "                          0 shows all)\n"
    "      --svg FILE          write one SVG picture, one panel per step, ranks on a circle\n"
    "                          (or as a tree for tree), arrows labelled with the part sent\n"
    "                          (--svg and --html: all_reduce and broadcast only)\n"
    "      --max-panels K      SVG: at most K panels; the middle steps are left out and the\n"
    "                          picture says which (default 24)\n"
    "      --html FILE         write one self-contained page (no network) that animates the\n"
    "                          steps (buttons prev/next, keys left/right; page.html?autostep=K\n"
    "                          or #step=K opens after K steps, ?clicks=nnp presses next,\n"
    "                          next, prev) and shows each rank's buffer filling up cell\n"
    "                          by cell\n"
    "  -h, --help              show this help and exit\n"
    "\n",
    "gather, scatter and all_to_allv name plain element ranges of the buffer each op uses\n"
    "(a rank's own block, or the root's n blocks: block r at r x S).\n"
    "reading the table: step i lists, for every rank busy in that step, what it sends and\n"
    "receives. Ranges are named after the algorithm's parts: chunk (ring: n parts), block\n"
    "(hd: p parts), half (tree), segment (master, broadcast); \"segment 1 of chunk 2\" is\n"
    "one pipelined piece of chunk 2 (c2.1 in pictures), \"part of chunk 2\" any other\n"
    "piece (c2'); element ranges are inclusive. Steps are the simulator's rounds, numbered\n"
    "from 0: ops in one step run at the same time.\n"
    "\n",
    "exit status: 0 success, 1 the simulation or an output file failed, 2 bad arguments.\n",
    "\n"
    "timing mode, for large jobs (libcoll/src/sim/sim_time.c, docs/coll_sim_scale.md):\n"
    "the same schedules, the same rounds as above, but no data is moved and no step is\n"
    "recorded; each round is priced on a machine of nodes: a message inside a node uses\n"
    "the sender's port out and the receiver's port in, one between nodes the sender node's\n"
    "uplink egress and the receiver node's uplink ingress; the flows on one link in one\n"
    "round share its bandwidth, a round lasts as long as its busiest link (latency +\n"
    "bytes / bandwidth) plus --msg-lat per message of the rank that sends most, and the\n"
    "predicted time is the sum of the rounds. Prints the time, bus bandwidth, bytes per\n"
    "uplink (each node's egress and ingress; --json lists them all), the busiest link.\n"
    "      --timing            timing mode (implied by every option below and by N > 1024)\n"
    "      --ranks-per-node K  nodes of K consecutive ranks (default: all on one node)\n"
    "      --round-robin       rank r on node r % nodes instead (as some launchers place)\n"
    "      --intra-bw GBPS     each rank's port inside its node, GB/s per direction (150)\n"
    "      --intra-lat US      latency of a message inside a node, microseconds (2)\n"
    "      --uplink-bw GBPS    each node's uplink, GB/s per direction (25 = 200 Gb/s)\n"
    "      --uplink-lat US     latency of a message between nodes, microseconds (5)\n"
    "      --msg-lat US        per message a rank sends in a round, microseconds (1)\n"
    "      --no-sharing        every flow gets a whole uplink (the naive model, k times too\n"
    "                          fast when k ranks of a node send off-node at once)\n"
    "      --sweep-ranks LIST  run every N of LIST (e.g. 8,64,512,4096,16384) x every size\n"
    "                          x every algorithm: a table (predicted time, bus bandwidth,\n"
    "                          busiest link bytes, seconds the simulation took) and the\n"
    "                          message sizes where the fastest algorithm changes\n"
    "      --sweep-sizes LIST  sizes for the sweep (default 8,1K,64K,1M,16M,256M)\n"
    "      --sweep-algos LIST  algorithms for the sweep (default ALGO and, if different,\n"
    "                          ring and tree); any all_reduce algorithm libcoll names,\n"
    "                          node-aware ones included\n"
    "      --plot FILE         sweep: SVG of time (smallest size) and bus bandwidth\n"
    "                          (largest size) against ranks, one line per algorithm\n"
    "example: coll-sim ring -n 16384 --ranks-per-node 8 --bytes 64M\n"
    "         coll-sim tree --bytes 8 --ranks-per-node 8 --sweep-ranks 8,512,16384 --plot p.svg\n",
};

static void help(void) {
  for (size_t i = 0; i < sizeof help_sections / sizeof help_sections[0]; i++)
    fputs(help_sections[i], stdout);
}

static int bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("coll-sim: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs(" (coll-sim --help documents every option)\n", stderr);
  return CLI_ERROR;
}

static int parse_size(const char *text, size_t *out) {
  char *end;
  errno = 0;
  if (text[0] == '-' || text[0] == '\0') return -1;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text) return -1;
  unsigned long long unit = 1;
  if (*end == 'k' || *end == 'K') unit = 1ULL << 10;
  if (*end == 'm' || *end == 'M') unit = 1ULL << 20;
  if (*end == 'g' || *end == 'G') unit = 1ULL << 30;
  if (unit != 1) end++;
  if (*end != '\0' || v > (1ULL << 40) / unit) return -1;
  *out = (size_t)(v * unit);
  return 0;
}

static int parse_int(const char *text, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_seconds(const char *text, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < 0 || v > 1e3) return -1;
  *out = v;
  return 0;
}

/* The collectives of kinds bit k (see parse_algo), for messages. */
static const char *const kind_bit_names[] = {"all_reduce", "broadcast", "gather/scatter",
                                             "all_to_allv"};

/* -2: the name exists, for the collectives in *name_kinds only. */
static int parse_algo(const char *name, coll_kind_t kind, coll_algo_t *algo, int *name_kinds) {
  static const struct {
    const char *name;
    coll_algo_t algo;
    int kinds; /* bit 0: all_reduce, 1: broadcast, 2: gather and scatter, 3: all_to_allv */
  } names[] = {
      {.name = "ring", .algo = COLL_ALGO_RING, .kinds = 11},
      {.name = "tree", .algo = COLL_ALGO_TREE, .kinds = 7},
      {.name = "hd", .algo = COLL_ALGO_HD, .kinds = 7},
      {.name = "master", .algo = COLL_ALGO_MASTER, .kinds = 7},
      {.name = "chain", .algo = COLL_ALGO_RING, .kinds = 2},
      {.name = "binomial", .algo = COLL_ALGO_TREE, .kinds = 6},
      {.name = "direct", .algo = COLL_ALGO_MASTER, .kinds = 6},
      {.name = "pairwise", .algo = COLL_ALGO_RING, .kinds = 8},
  };
  int bit = kind == COLL_KIND_BROADCAST                             ? 2
            : kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER ? 4
            : kind == COLL_KIND_ALL_TO_ALLV                         ? 8
                                                                    : 1;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) {
      *name_kinds = names[i].kinds;
      if (!(names[i].kinds & bit)) return -2;
      *algo = names[i].algo;
      return 0;
    }
  /* Any other all_reduce algorithm by libcoll's own name (coll_algo_name), so that new
   * ones (node-aware) are simulated without a change here. */
  for (int a = COLL_ALGO_RING; a < COLL_ALGO_COUNT; a++) {
    const char *known = coll_algo_name((coll_algo_t)a);
    if (a == COLL_ALGO_ARENA || known == NULL || strcmp(name, known) != 0) continue;
    *name_kinds = 1;
    if (!(bit & 1)) return -2;
    *algo = (coll_algo_t)a;
    return 0;
  }
  return -1;
}

/* "8,64,1K": up to SCALE_MAX_LIST sizes (or ranks when as_int). */
static int parse_list(const char *text, size_t *out, size_t *n) {
  char buf[512];
  if (strlen(text) >= sizeof buf) return -1;
  strcpy(buf, text);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    if (*n == SCALE_MAX_LIST || parse_size(tok, &out[*n]) != 0 || out[*n] == 0) return -1;
    (*n)++;
  }
  return *n > 0 ? 0 : -1;
}

/* Microseconds or GB/s into seconds or bytes per second. */
static int parse_unit(const char *text, double scale, int positive, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < 0 || (positive && v == 0) ||
      v > 1e9)
    return -1;
  *out = v * scale;
  return 0;
}

static int parse_dtype(const char *name, coll_dtype_t *dtype) {
  for (int d = 0; d < COLL_DTYPE_COUNT; d++)
    if (strcmp(name, trace_dtype_name((coll_dtype_t)d)) == 0) {
      *dtype = (coll_dtype_t)d;
      return 0;
    }
  if (strcmp(name, "float") == 0)
    *dtype = COLL_FLOAT32;
  else if (strcmp(name, "double") == 0)
    *dtype = COLL_FLOAT64;
  else if (strcmp(name, "half") == 0)
    *dtype = COLL_FLOAT16;
  else
    return -1;
  return 0;
}

enum {
  OPT_ALPHA = 256,
  OPT_BETA,
  OPT_GAMMA,
  OPT_JSON,
  OPT_SVG,
  OPT_HTML,
  OPT_MAX_PANELS,
  OPT_MAX_STEPS,
  OPT_NO_TABLE,
  OPT_HOSTS,
  OPT_TIMING,
  OPT_RANKS_PER_NODE,
  OPT_ROUND_ROBIN,
  OPT_INTRA_BW,
  OPT_INTRA_LAT,
  OPT_UPLINK_BW,
  OPT_UPLINK_LAT,
  OPT_MSG_LAT,
  OPT_NO_SHARING,
  OPT_SWEEP_RANKS,
  OPT_SWEEP_SIZES,
  OPT_SWEEP_ALGOS,
  OPT_PLOT,
};

static const struct option long_opts[] = {
    {.name = "nranks", .has_arg = required_argument, .val = 'n'},
    {.name = "bytes", .has_arg = required_argument, .val = 'b'},
    {.name = "collective", .has_arg = required_argument, .val = 'c'},
    {.name = "root", .has_arg = required_argument, .val = 'r'},
    {.name = "dtype", .has_arg = required_argument, .val = 'd'},
    {.name = "segment", .has_arg = required_argument, .val = 's'},
    {.name = "transport", .has_arg = required_argument, .val = 't'},
    {.name = "alpha", .has_arg = required_argument, .val = OPT_ALPHA},
    {.name = "beta", .has_arg = required_argument, .val = OPT_BETA},
    {.name = "gamma", .has_arg = required_argument, .val = OPT_GAMMA},
    {.name = "explain", .has_arg = no_argument, .val = 'e'},
    {.name = "json", .has_arg = no_argument, .val = OPT_JSON},
    {.name = "svg", .has_arg = required_argument, .val = OPT_SVG},
    {.name = "html", .has_arg = required_argument, .val = OPT_HTML},
    {.name = "max-panels", .has_arg = required_argument, .val = OPT_MAX_PANELS},
    {.name = "max-steps", .has_arg = required_argument, .val = OPT_MAX_STEPS},
    {.name = "no-table", .has_arg = no_argument, .val = OPT_NO_TABLE},
    {.name = "timing", .has_arg = no_argument, .val = OPT_TIMING},
    {.name = "ranks-per-node", .has_arg = required_argument, .val = OPT_RANKS_PER_NODE},
    {.name = "round-robin", .has_arg = no_argument, .val = OPT_ROUND_ROBIN},
    {.name = "hosts", .has_arg = required_argument, .val = OPT_HOSTS},
    {.name = "intra-bw", .has_arg = required_argument, .val = OPT_INTRA_BW},
    {.name = "intra-lat", .has_arg = required_argument, .val = OPT_INTRA_LAT},
    {.name = "uplink-bw", .has_arg = required_argument, .val = OPT_UPLINK_BW},
    {.name = "uplink-lat", .has_arg = required_argument, .val = OPT_UPLINK_LAT},
    {.name = "msg-lat", .has_arg = required_argument, .val = OPT_MSG_LAT},
    {.name = "no-sharing", .has_arg = no_argument, .val = OPT_NO_SHARING},
    {.name = "sweep-ranks", .has_arg = required_argument, .val = OPT_SWEEP_RANKS},
    {.name = "sweep-sizes", .has_arg = required_argument, .val = OPT_SWEEP_SIZES},
    {.name = "sweep-algos", .has_arg = required_argument, .val = OPT_SWEEP_ALGOS},
    {.name = "plot", .has_arg = required_argument, .val = OPT_PLOT},
    {.name = "help", .has_arg = no_argument, .val = 'h'},
    {0},
};

/* What timing mode adds to the checks: the sweep's lists and defaults, the collectives it
 * prices. */
static int scale_options(cli_t *cli, const char *algo_name, const char *sweep_algos, long n,
                         int have_bytes) {
  scale_opts_t *sc = &cli->scale;
  if (cli->req.collective == COLL_KIND_ALL_TO_ALLV)
    return bad("timing mode does not take all_to_allv (its layout is per rank)");
  if (cli->hosts != NULL)
    return bad("timing mode places ranks with --ranks-per-node (and --round-robin), not "
               "--hosts");
  if (!sc->sweep) return CLI_OK;
  if (sc->nranks == 0) {
    if (n < 0) return bad("--sweep-sizes/--sweep-algos need --sweep-ranks (or -n)");
    sc->ranks[0] = (int)n, sc->nranks = 1;
  }
  if (sc->nsizes == 0 && have_bytes) sc->sizes[0] = cli->req.bytes, sc->nsizes = 1;
  if (sc->nsizes == 0) {
    static const size_t sizes[] = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
    for (size_t i = 0; i < 6; i++) sc->sizes[i] = sizes[i];
    sc->nsizes = 6;
  }
  size_t esize = algo_elem_size(cli->req.dtype);
  for (size_t i = 0; i < sc->nsizes; i++)
    if (sc->sizes[i] % esize != 0)
      return bad("sweep size %zu is not a multiple of the element size (%zu)", sc->sizes[i], esize);
  for (size_t i = 0; i < sc->nranks; i++)
    if (cli->req.root >= sc->ranks[i]) return bad("--root is not below every swept N");
  char buf[512];
  const char *list = sweep_algos;
  if (list == NULL) {
    snprintf(buf, sizeof buf, "%s%s%s", algo_name, strcmp(algo_name, "ring") ? ",ring" : "",
             strcmp(algo_name, "tree") ? ",tree" : "");
    list = buf;
  } else {
    if (strlen(list) >= sizeof buf) return bad("--sweep-algos: list too long");
    strcpy(buf, list);
    list = buf;
  }
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int kinds = 0;
    coll_algo_t a;
    if (sc->nalgos == SCALE_MAX_LIST) return bad("--sweep-algos: too many");
    if (parse_algo(tok, cli->req.collective, &a, &kinds) != 0)
      return bad("--sweep-algos: '%s' is not a %s algorithm", tok,
                 trace_collective_name(cli->req.collective));
    sc->algos[sc->nalgos++] = (int)a;
  }
  return CLI_OK;
}

int cli_parse(int argc, char **argv, cli_t *cli) {
  long n = -1, root = 0, v;
  const char *sweep_algos = NULL;
  int have_bytes = 0;
  const char *algo_name = NULL, *collective = "all_reduce";
  double alpha = -1, beta = -1, gamma = -1;
  *cli = (cli_t){.req = {.dtype = COLL_FLOAT32, .transport = "shm"},
                 .max_panels = 24,
                 .max_steps = 64,
                 .table = 1};
  cli->req.cost = algo_cost_shm_default;
  sim_topo_default(&cli->scale.topo);
  cli->scale.topo.ranks_per_node = 0;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":n:b:c:r:d:s:t:eh", long_opts, NULL)) != -1) {
    const char *arg = optarg;
    switch (c) {
      case 'n':
        if (parse_int(arg, 1, 65536, &n) != 0) return bad("--nranks: '%s' is not 1..65536", arg);
        break;
      case 'b':
        if (parse_size(arg, &cli->req.bytes) != 0)
          return bad("--bytes: '%s' is not a size such as 4096, 64K or 1M", arg);
        have_bytes = 1;
        break;
      case 'c':
        collective = arg;
        break;
      case 'r':
        if (parse_int(arg, 0, 65535, &root) != 0) return bad("--root: '%s' is not a rank", arg);
        break;
      case 'd':
        if (parse_dtype(arg, &cli->req.dtype) != 0) return bad("--dtype: unknown type '%s'", arg);
        break;
      case 's':
        if (parse_size(arg, &cli->req.segment_bytes) != 0 || cli->req.segment_bytes == 0)
          return bad("--segment: '%s' is not a positive size", arg);
        break;
      case 't':
        if (strcmp(arg, "shm") == 0) {
          cli->req.cost = algo_cost_shm_default;
        } else if (strcmp(arg, "tcp") == 0) {
          cli->req.cost = algo_cost_tcp_default;
        } else {
          return bad("--transport: '%s' is neither shm nor tcp", arg);
        }
        cli->req.transport = strcmp(arg, "shm") == 0 ? "shm" : "tcp";
        break;
      case OPT_ALPHA:
        if (parse_seconds(arg, &alpha) != 0) return bad("--alpha: '%s' is not seconds >= 0", arg);
        break;
      case OPT_BETA:
        if (parse_seconds(arg, &beta) != 0) return bad("--beta: '%s' is not seconds >= 0", arg);
        break;
      case OPT_GAMMA:
        if (parse_seconds(arg, &gamma) != 0) return bad("--gamma: '%s' is not seconds >= 0", arg);
        break;
      case 'e':
        cli->explain = 1;
        break;
      case OPT_JSON:
        cli->json = 1;
        break;
      case OPT_SVG:
        cli->svg_path = arg;
        break;
      case OPT_HTML:
        cli->html_path = arg;
        break;
      case OPT_MAX_PANELS:
        if (parse_int(arg, 1, 10000, &v) != 0)
          return bad("--max-panels: '%s' is not 1..10000", arg);
        cli->max_panels = (size_t)v;
        break;
      case OPT_MAX_STEPS:
        if (parse_int(arg, 0, 1000000, &v) != 0)
          return bad("--max-steps: '%s' is not 0..1000000", arg);
        cli->max_steps = (size_t)v;
        break;
      case OPT_NO_TABLE:
        cli->table = 0;
        break;
      case OPT_TIMING:
        cli->scale.on = 1;
        break;
      case OPT_RANKS_PER_NODE:
        if (parse_int(arg, 1, 65536, &v) != 0)
          return bad("--ranks-per-node: '%s' is not 1..65536", arg);
        cli->scale.topo.ranks_per_node = (int)v;
        cli->scale.on = 1;
        break;
      case OPT_HOSTS:
        cli->hosts = arg;
        break;
      case OPT_ROUND_ROBIN:
        cli->scale.round_robin = cli->scale.on = 1;
        break;
      case OPT_INTRA_BW:
      case OPT_UPLINK_BW: {
        double *dst = c == OPT_INTRA_BW ? &cli->scale.topo.intra_bw : &cli->scale.topo.uplink_bw;
        if (parse_unit(arg, 1e9, 1, dst) != 0)
          return bad("%s: '%s' is not GB/s > 0", c == OPT_INTRA_BW ? "--intra-bw" : "--uplink-bw",
                     arg);
        cli->scale.on = 1;
        break;
      }
      case OPT_INTRA_LAT:
      case OPT_UPLINK_LAT:
      case OPT_MSG_LAT: {
        double *dst = c == OPT_INTRA_LAT    ? &cli->scale.topo.intra_latency_s
                      : c == OPT_UPLINK_LAT ? &cli->scale.topo.uplink_latency_s
                                            : &cli->scale.topo.message_latency_s;
        if (parse_unit(arg, 1e-6, 0, dst) != 0)
          return bad("%s: '%s' is not microseconds >= 0",
                     c == OPT_INTRA_LAT    ? "--intra-lat"
                     : c == OPT_UPLINK_LAT ? "--uplink-lat"
                                           : "--msg-lat",
                     arg);
        cli->scale.on = 1;
        break;
      }
      case OPT_NO_SHARING:
        cli->scale.topo.no_sharing = cli->scale.on = 1;
        break;
      case OPT_SWEEP_RANKS: {
        size_t list[SCALE_MAX_LIST];
        if (parse_list(arg, list, &cli->scale.nranks) != 0)
          return bad("--sweep-ranks: '%s' is not a list such as 8,64,512", arg);
        for (size_t i = 0; i < cli->scale.nranks; i++) {
          if (list[i] > 65536) return bad("--sweep-ranks: %zu is over 65536", list[i]);
          cli->scale.ranks[i] = (int)list[i];
        }
        cli->scale.sweep = cli->scale.on = 1;
        break;
      }
      case OPT_SWEEP_SIZES:
        if (parse_list(arg, cli->scale.sizes, &cli->scale.nsizes) != 0)
          return bad("--sweep-sizes: '%s' is not a list such as 8,64K,1M", arg);
        cli->scale.sweep = cli->scale.on = 1;
        break;
      case OPT_SWEEP_ALGOS:
        sweep_algos = arg;
        cli->scale.sweep = cli->scale.on = 1;
        break;
      case OPT_PLOT:
        cli->scale.plot_path = arg;
        cli->scale.on = 1;
        break;
      case 'h':
        help();
        return CLI_HELP;
      case ':':
        return bad("option %s needs a value", argv[optind - 1]);
      default:
        return bad("unknown option %s", argv[optind - 1]);
    }
  }
  if (optind < argc) algo_name = argv[optind++];
  if (optind < argc) return bad("unexpected argument '%s' after ALGO", argv[optind]);
  if (strcmp(collective, "all_reduce") == 0 || strcmp(collective, "allreduce") == 0)
    cli->req.collective = COLL_KIND_ALL_REDUCE;
  else if (strcmp(collective, "broadcast") == 0)
    cli->req.collective = COLL_KIND_BROADCAST;
  else if (strcmp(collective, "gather") == 0)
    cli->req.collective = COLL_KIND_GATHER;
  else if (strcmp(collective, "scatter") == 0)
    cli->req.collective = COLL_KIND_SCATTER;
  else if (strcmp(collective, "all_to_allv") == 0 || strcmp(collective, "alltoallv") == 0)
    cli->req.collective = COLL_KIND_ALL_TO_ALLV;
  else
    return bad("--collective: '%s' is none of all_reduce, broadcast, gather, scatter, all_to_allv",
               collective);
  bool pictured =
      cli->req.collective == COLL_KIND_ALL_REDUCE || cli->req.collective == COLL_KIND_BROADCAST;
  if (!pictured && (cli->svg_path != NULL || cli->html_path != NULL))
    return bad("--svg and --html draw all_reduce and broadcast only; use the table or --json");
  if (algo_name == NULL) return bad("ALGO is missing");
  if (strcmp(algo_name, "arena") == 0)
    return bad("'arena' is the single-host shared-memory all-reduce: the ranks copy into one "
               "shared segment and reduce there, no messages, no schedule; this simulator does "
               "not model it (force it in a real run with COLL_ALGO=arena or allreduce_bench -A "
               "arena; see docs/algorithms.md, 'Arena')");
  int name_kinds = 0;
  int rc = parse_algo(algo_name, cli->req.collective, &cli->req.algo, &name_kinds);
  if (rc == -2 && (name_kinds & (name_kinds - 1)) == 0) {
    int k = 0;
    while (!(name_kinds & (1 << k))) k++;
    return bad("'%s' is an algorithm of %s; add --collective %s", algo_name, kind_bit_names[k],
               k == 2 ? "gather (or scatter)" : kind_bit_names[k]);
  }
  if (rc == -2) {
    char list[96] = "";
    for (int k = 0; k < 4; k++)
      if (name_kinds & (1 << k))
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                 kind_bit_names[k]);
    return bad("'%s' is not a %s algorithm (it is one of %s: choose with --collective)", algo_name,
               trace_collective_name(cli->req.collective), list);
  }
  if (rc != 0) return bad("unknown ALGO '%s'", algo_name);
  if (n > 1024) cli->scale.on = 1;
  cli->req.root = (int)root;
  if (cli->scale.on) {
    int rc2 = scale_options(cli, algo_name, sweep_algos, n, have_bytes);
    if (rc2 != CLI_OK) return rc2;
    if (cli->scale.sweep) return CLI_OK;
    if (cli->svg_path != NULL || cli->html_path != NULL || cli->explain)
      return bad("--svg, --html and --explain show the steps of small runs, not timing mode "
                 "(the sweep draws --plot)");
  }
  if (n < 0) return bad("-n N (the number of ranks) is required");
  if (!have_bytes) return bad("--bytes S is required");
  cli->req.nranks = (int)n;
  if (root >= n) return bad("--root %ld: there are only %ld ranks", root, n);
  if (!coll_kind_rooted(cli->req.collective) && root != 0)
    return bad("--root applies to broadcast, gather and scatter only");
  cli->req.root = (int)root;
  size_t esize = algo_elem_size(cli->req.dtype);
  if (cli->req.bytes % esize != 0)
    return bad("--bytes %zu is not a multiple of the %s element size (%zu bytes)", cli->req.bytes,
               trace_dtype_name(cli->req.dtype), esize);
  cli->req.count = cli->req.bytes / esize;
  if (cli->req.count == 0) return bad("--bytes must be at least one element (%zu bytes)", esize);
  if (cli->req.segment_bytes != 0 && cli->req.segment_bytes < esize)
    return bad("--segment %zu is smaller than one element (%zu bytes)", cli->req.segment_bytes,
               esize);
  /* The simulator records every op: keep the event list within memory. */
  size_t seg_elems =
      cli->req.segment_bytes ? cli->req.segment_bytes / esize : ALGO_DEFAULT_SEGMENT_BYTES / esize;
  if (!cli->scale.on && cli->req.count / (seg_elems ? seg_elems : 1) * (size_t)n > 4000000)
    return bad("--bytes / --segment x N is over 4 million messages; use a larger --segment, or "
               "--timing");
  if (alpha >= 0 || beta >= 0 || gamma >= 0) cli->req.transport = "custom";
  if (alpha >= 0) cli->req.cost.alpha = alpha;
  if (beta >= 0) cli->req.cost.beta = beta;
  if (gamma >= 0) cli->req.cost.gamma = gamma;
  return CLI_OK;
}
