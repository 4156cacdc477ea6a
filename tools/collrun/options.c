/* collrun's command line: getopt_long parsing with strict number checks, and the help text
 * that documents every option, every variable set for the ranks, and the exit codes. */
#include "options.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"

/* In sections: C11 promises string literals of 4095 bytes only. */
static const char *const help_sections[] = {
    "usage: collrun -n N [options] PROG [ARGS...]\n"
    "\n"
    "Start N processes of PROG on this node, host the rendezvous store they meet at,\n"
    "prefix their output with their rank, and stop the whole job when one rank fails\n"
    "(unless --elastic).\n"
    "Options end at PROG (or at \"--\"); everything after it is passed to PROG.\n"
    "\n"
    "options:\n"
    "  -n, --nproc-per-node N  ranks to start on this node (1..256, required)\n"
    "      --nnodes M          nodes in the job (default 1); run one collrun per node\n"
    "      --node-rank K       this node's index, 0..M-1 (default 0); node 0 hosts the store\n"
    "      --master-addr A     address the ranks reach the store at (default 127.0.0.1).\n"
    "                          One node: the store listens on A (on all interfaces when A is\n"
    "                          not a numeric IPv4 address). Several nodes: node 0's store\n"
    "                          listens on all interfaces (0.0.0.0) and A must reach node 0.\n"
    "      --master-port P     the store's port. Default on one node: a free port picked at\n"
    "                          start. Required with --nnodes > 1 (same P on every node).\n"
    "      --token T           job token the store demands from every client. Default:\n"
    "                          $COLL_JOB_TOKEN if set; else on one node a random token made\n"
    "                          for this job; else (several nodes) no token at all.\n"
    "      --no-prefix         do not prefix output lines with \"[RANK] \"\n"
    "      --grace-ms MS       when stopping ranks, SIGKILL those still alive MS ms after the\n"
    "                          SIGTERM (default 3000)\n"
    "      --timeout SEC       stop the job if it runs longer than SEC seconds (decimals\n"
    "                          allowed; default: no limit)\n"
    "      --bind core|none    core (the default, as mpirun's --bind-to core): rank i runs\n"
    "                          on the i-th CPU collrun may use (of its own affinity mask,\n"
    "                          which taskset or a cgroup may narrow); with more ranks than\n"
    "                          CPUs, rank i on the CPUs its 1/N share of them overlaps (4\n"
    "                          ranks on CPUs 0-1: ranks 0,1 on 0 and 2,3 on 1). none: every\n"
    "                          rank inherits collrun's mask (libcoll only picks a CPU in it\n"
    "                          for each rank to start on and return to when it waits,\n"
    "                          COLL_SPREAD). Default from $COLLRUN_BIND.\n"
    "      --elastic           a rank that dies (signal or non-zero exit) does not stop the\n"
    "                          job: collrun says so and the others go on (they must survive\n"
    "                          it: coll_comm_agree/coll_comm_shrink, docs/elastic.md); see\n"
    "                          \"elastic jobs\" below\n"
    "      --replace N         implies --elastic; up to N times in all, start a new process\n"
    "                          for a dead rank, with its argv and environment plus\n"
    "                          COLL_ELASTIC_JOIN=1 (it joins the survivors: coll_comm_join)\n"
    "      --replace-delay-ms MS  wait MS ms after a death before starting its replacement\n"
    "                          (default 0)\n"
    "  -h, --help              show this help and exit\n"
    "torchrun's spellings (--nproc_per_node, --node_rank, --master_addr, --master_port)\n"
    "are accepted too.\n"
    "\n",
    "environment of each rank (everything else is inherited from collrun):\n"
    "  RANK               global rank: K * N + LOCAL_RANK\n"
    "  WORLD_SIZE         M * N\n"
    "  LOCAL_RANK         rank on this node, 0..N-1\n"
    "  LOCAL_WORLD_SIZE   N\n"
    "  GROUP_RANK         this node's rank K (torchrun's name for it)\n"
    "  GROUP_WORLD_SIZE   M\n"
    "  MASTER_ADDR        host of the store (--master-addr)\n"
    "  MASTER_PORT        port of the store\n"
    "  COLL_JOB_TOKEN     the job token; unset when the job has none\n"
    "  COLL_STORE_HOSTED  1: a launcher hosts the store, so rank 0 must not start its own\n"
    "                     (PyTorch 2.10+: importing torch_coll makes the env://\n"
    "                     rendezvous use it; a script runs unchanged, rank 0 may die)\n"
    "  COLL_ELASTIC_JOIN  1 in a replacement started by --replace (unset otherwise)\n"
    "  OMP_NUM_THREADS    1 when N > 1 and collrun's environment does not set it (as\n"
    "                     torchrun does: N ranks sharing the cores should not each start\n"
    "                     one thread per core)\n"
    "stdin of every rank is /dev/null.\n"
    "\n"
    "environment read by collrun: COLLRUN_BIND (core or none: --bind's default),\n"
    "COLL_JOB_TOKEN (--token's default).\n"
    "\n",
    "output: every line a rank writes to stdout (stderr) is written whole to collrun's\n"
    "stdout (stderr) as \"[RANK] line\"; lines of different ranks never mix. A line longer\n"
    "than 64 KiB is cut into 64 KiB lines; an unfinished last line gets a newline.\n"
    "\n"
    "failure: when a rank exits with a non-zero code or is killed by a signal, collrun sends\n"
    "SIGTERM to every other rank, SIGKILL after --grace-ms, and prints one line such as\n"
    "  collrun: rank 2 (pid 1234) exited with code 3; last output: ... | ...\n"
    "with the rank's last 5 lines of output. Each rank runs in its own process group and\n"
    "signals go to the whole group, so processes a rank started are stopped with it. A rank\n"
    "gets SIGKILL if collrun itself dies.\n"
    "\n",
    "signals: SIGINT and SIGTERM sent to collrun are forwarded to every rank (SIGKILL after\n"
    "--grace-ms); a second one sends SIGKILL at once.\n"
    "\n"
    "several nodes: on each node K run\n"
    "  collrun -n N --nnodes M --node-rank K --master-addr HOST0 --master-port P PROG\n"
    "Node 0's collrun hosts the store; the others host nothing: they wait (up to 60 s) for\n"
    "HOST0:P to answer, then start their ranks. Give every node the same token (--token or\n"
    "COLL_JOB_TOKEN), or none: without a token anyone who reaches HOST0:P may join the job.\n"
    "The collruns watch each other through the store (keys under \"collrun/\"): a failure,\n"
    "time-out or signal on one node is seen by the others within about a second and stops\n"
    "their ranks too (they print \"collrun: another node failed (node K: ...)\" and exit with\n"
    "the same code). Node 0 keeps the store up after its own ranks end until every other\n"
    "node's ranks have ended (at most 60 s; after a failure, --grace-ms plus 5 s).\n"
    "\n"
    "elastic jobs (--elastic, --replace): a rank's death is reported as\n"
    "  collrun: rank 2 (pid 1234) was killed by SIGKILL; the job goes on with the others\n"
    "and the job goes on; the store stays up until every process has ended. With --replace\n"
    "a new process is started for the dead rank (same RANK, LOCAL_RANK, argv...) while no\n"
    "rank has finished yet and replacements are left. A replacement still running 5 s after\n"
    "every other process ended (never taken in) is stopped and not counted as failed. Exit\n"
    "status: 0 when at least one rank exited 0 and no rank failed after that; else the\n"
    "code of the last failure (128+S for signal S). Several nodes: each collrun replaces\n"
    "only its own node's ranks, and a death is not reported to the other nodes.\n"
    "\n"
    "exit status (without --elastic): 0 when every rank exited 0; the exit code of the first rank that failed,\n"
    "or 128+S when it was killed by signal S; 128+S when collrun got signal S; 124 when\n"
    "--timeout expired; 127 when PROG cannot be found; 2 for a usage error; 1 when the\n"
    "launcher itself failed (store, fork).\n",
};

enum {
  OPT_NNODES = 256,
  OPT_NODE_RANK,
  OPT_MASTER_ADDR,
  OPT_MASTER_PORT,
  OPT_TOKEN,
  OPT_NO_PREFIX,
  OPT_GRACE_MS,
  OPT_TIMEOUT,
  OPT_BIND,
  OPT_ELASTIC,
  OPT_REPLACE,
  OPT_REPLACE_DELAY_MS,
};

static const struct option long_options[] = {
    {.name = "nproc-per-node", .has_arg = required_argument, .val = 'n'},
    {.name = "nproc_per_node", .has_arg = required_argument, .val = 'n'},
    {.name = "nnodes", .has_arg = required_argument, .val = OPT_NNODES},
    {.name = "node-rank", .has_arg = required_argument, .val = OPT_NODE_RANK},
    {.name = "node_rank", .has_arg = required_argument, .val = OPT_NODE_RANK},
    {.name = "master-addr", .has_arg = required_argument, .val = OPT_MASTER_ADDR},
    {.name = "master_addr", .has_arg = required_argument, .val = OPT_MASTER_ADDR},
    {.name = "master-port", .has_arg = required_argument, .val = OPT_MASTER_PORT},
    {.name = "master_port", .has_arg = required_argument, .val = OPT_MASTER_PORT},
    {.name = "token", .has_arg = required_argument, .val = OPT_TOKEN},
    {.name = "no-prefix", .has_arg = no_argument, .val = OPT_NO_PREFIX},
    {.name = "grace-ms", .has_arg = required_argument, .val = OPT_GRACE_MS},
    {.name = "timeout", .has_arg = required_argument, .val = OPT_TIMEOUT},
    {.name = "bind", .has_arg = required_argument, .val = OPT_BIND},
    {.name = "elastic", .has_arg = no_argument, .val = OPT_ELASTIC},
    {.name = "replace", .has_arg = required_argument, .val = OPT_REPLACE},
    {.name = "replace-delay-ms", .has_arg = required_argument, .val = OPT_REPLACE_DELAY_MS},
    {.name = "help", .has_arg = no_argument, .val = 'h'},
    {0},
};

static options_result_t usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static options_result_t usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("collrun: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\nTry 'collrun --help' for more information.\n", stderr);
  va_end(ap);
  return OPTIONS_USAGE_ERROR;
}

/* Strict integer in [min, max]; prints the error itself. */
static bool parse_int_option(const char *name, const char *text, int64_t min, int64_t max,
                             int *out) {
  int64_t v;
  if (!coll_parse_int(text, &v) || v < min || v > max) {
    usage_error("%s '%s' must be an integer in [%lld, %lld]", name, text, (long long)min,
                (long long)max);
    return false;
  }
  *out = (int)v;
  return true;
}

static bool parse_seconds(const char *text, double *out) {
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !isfinite(v) || v <= 0 || v > 1e7) {
    usage_error("--timeout '%s' must be a number of seconds in (0, 1e7]", text);
    return false;
  }
  *out = v;
  return true;
}

options_result_t options_parse(int argc, char **argv, options_t *options) {
  *options = (options_t){
      .nproc = 0,
      .nnodes = 1,
      .node_rank = 0,
      .master_addr = "127.0.0.1",
      .master_port = 0,
      .token = coll_env_str("COLL_JOB_TOKEN"),
      .prefix = true,
      .grace_ms = OPTIONS_DEFAULT_GRACE_MS,
      .timeout_s = 0,
      .bind = BINDING_CORE,
  };
  const char *bind_env = coll_env_str("COLLRUN_BIND");
  if (bind_env != NULL && !binding_parse_policy(bind_env, &options->bind))
    return usage_error("COLLRUN_BIND '%s' must be core or none", bind_env);
  bool have_port = false;
  opterr = 0; /* we print our own messages */
  optind = 1;
  int c;
  /* '+': stop at the first non-option, which is PROG; its own options follow it. */
  while ((c = getopt_long(argc, argv, "+:hn:", long_options, NULL)) != -1) {
    bool ok = true;
    switch (c) {
      case 'h':
        for (size_t i = 0; i < sizeof help_sections / sizeof help_sections[0]; i++)
          fputs(help_sections[i], stdout);
        return OPTIONS_HELP;
      case 'n':
        ok = parse_int_option("-n", optarg, 1, OPTIONS_MAX_RANKS_PER_NODE, &options->nproc);
        break;
      case OPT_NNODES:
        ok = parse_int_option("--nnodes", optarg, 1, OPTIONS_MAX_NODES, &options->nnodes);
        break;
      case OPT_NODE_RANK:
        ok = parse_int_option("--node-rank", optarg, 0, OPTIONS_MAX_NODES - 1, &options->node_rank);
        break;
      case OPT_MASTER_ADDR:
        if (*optarg == '\0') return usage_error("--master-addr must not be empty");
        options->master_addr = optarg;
        break;
      case OPT_MASTER_PORT:
        ok = parse_int_option("--master-port", optarg, 1, 65535, &options->master_port);
        have_port = true;
        break;
      case OPT_TOKEN:
        options->token = *optarg == '\0' ? NULL : optarg;
        break;
      case OPT_NO_PREFIX:
        options->prefix = false;
        break;
      case OPT_GRACE_MS:
        ok = parse_int_option("--grace-ms", optarg, 0, 3600000, &options->grace_ms);
        break;
      case OPT_TIMEOUT:
        ok = parse_seconds(optarg, &options->timeout_s);
        break;
      case OPT_BIND:
        if (!binding_parse_policy(optarg, &options->bind))
          return usage_error("--bind '%s' must be core or none", optarg);
        break;
      case OPT_ELASTIC:
        options->elastic = true;
        break;
      case OPT_REPLACE:
        ok = parse_int_option("--replace", optarg, 0, 1000000, &options->replace);
        options->elastic = true;
        break;
      case OPT_REPLACE_DELAY_MS:
        ok = parse_int_option("--replace-delay-ms", optarg, 0, 3600000, &options->replace_delay_ms);
        break;
      case ':':
        return usage_error("option '%s' needs a value", argv[optind - 1]);
      default:
        /* An unknown short option may sit inside a cluster ("-xn4"): name the letter. */
        if (optopt != 0) return usage_error("unknown option '-%c'", optopt);
        return usage_error("unknown option '%s'", argv[optind - 1]);
    }
    if (!ok) return OPTIONS_USAGE_ERROR; /* the parser printed why */
  }
  if (optind >= argc) return usage_error("missing PROG to run");
  if (options->nproc == 0) return usage_error("-n N (ranks on this node) is required");
  if (options->node_rank >= options->nnodes)
    return usage_error("--node-rank %d must be below --nnodes (%d)", options->node_rank,
                       options->nnodes);
  if (options->nnodes > 1 && !have_port)
    return usage_error("--master-port is required with --nnodes > 1 (every node must know it)");
  if ((int64_t)options->nnodes * options->nproc > INT32_MAX)
    return usage_error("--nnodes times -n is too large");
  options->prog_argv = argv + optind;
  return OPTIONS_RUN;
}
