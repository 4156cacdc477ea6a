/* train: data-parallel MLP training on Fashion-MNIST (or any MNIST-format folder) with
 * libtrain and libcoll. One process per rank, started by collrun (or alone). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: train [options]        (alone, or: collrun -n 4 train [options])\n"
          "Trains an MLP on MNIST-format data; gradients averaged across ranks (DDP).\n"
          "\n"
          "  --epochs N           epochs to train (10)\n"
          "  --batch N            samples per rank per micro-batch (64)\n"
          "  --lr X               learning rate (0.05 for sgd, 0.001 for adam)\n"
          "  --lr-schedule NAME   constant, or cosine from --lr down to 0 over all epochs\n"
          "                       (cosine)\n"
          "  --momentum X         SGD momentum (0.9)\n"
          "  --weight-decay X     L2 weight decay added to the gradient (0)\n"
          "  --optimizer NAME     sgd or adam (sgd)\n"
          "  --seed N             initialisation and shuffling seed (42)\n"
          "  --hidden LIST        hidden layer widths, comma-separated; '' for none (256,256)\n"
          "  --data DIR           MNIST-format folder with train-/t10k- images and labels,\n"
          "                       .gz or plain (" TRAIN_DEFAULT_DATA_DIR
          ")\n"
          "  --drop-last          drop the samples that do not fill equal shards and the\n"
          "                       last incomplete step (default: pad by wrapping around)\n"
          "  --no-shuffle         keep the data set order\n"
          "  --bucket-mb X        gradient bucket size in MiB for the all-reduce (25)\n"
          "  --accumulate K       micro-batches per optimizer step; only the last one\n"
          "                       communicates (1)\n"
          "  --check-sync         after each epoch check that all ranks hold identical\n"
          "                       parameters; fail loudly if not\n"
          "  --checkpoint FILE    rank 0 writes parameters, optimizer state and position\n"
          "                       here (atomically: write, fsync, rename)\n"
          "  --checkpoint-every N write it every N steps (0: at the end of each epoch) (0)\n"
          "  --resume             continue from --checkpoint FILE if it exists\n"
          "  --device NAME        cpu or cuda; cuda uses GPU LOCAL_RANK %% device count (cpu)\n"
          "  --blas-threads N     BLAS threads per rank (OPENBLAS_NUM_THREADS or 1)\n"
          "  --max-steps N        stop after N optimizer steps in all (0: no limit)\n"
          "  --warmup-steps N     leave this run's first N steps out of the final samples/s,\n"
          "                       communication share and step phases; they still train (0)\n"
          "  --log-every N        steps between progress lines when stdout is no TTY (100)\n"
          "  --no-eval            skip the test-set evaluation after each epoch\n"
          "  --quiet              no per-step progress (epoch summaries only)\n");
  /* Two strings: C11 promises 4095 characters in one literal. */
  fprintf(out,
          "  --elastic            survive lost ranks: every step is committed only when all\n"
          "                       ranks agree; when a rank dies the others shrink the job\n"
          "                       and redo that step; replacements (collrun --replace, or\n"
          "                       COLL_ELASTIC_JOIN=1) are taken in and get the state.\n"
          "                       Needs collrun's store; CPU only; no --accumulate,\n"
          "                       --resume or evaluation (--checkpoint: at the end, by a\n"
          "                       rank alive, confirmed by all before \"done\"). A rank\n"
          "                       the others declared failed (stopped, too slow) exits\n"
          "                       with status 3\n"
          "  --shards S           --elastic: a step is S shards of --batch samples, shard s\n"
          "                       on rank s mod world, so the global batch stays S x batch\n"
          "                       whatever the world size (8; needs S >= ranks)\n"
          "  --bit-identical      --elastic: sum the shards' gradients exactly (64-bit fixed\n"
          "                       point), so a run that lost ranks ends with exactly the\n"
          "                       parameters of one that lost none (1.5 times the bytes,\n"
          "                       three collectives a step; a NaN or infinite gradient\n"
          "                       stops the run)\n"
          "  --sample-log FILE    --elastic: each process appends to FILE.<pid> one line per\n"
          "                       committed step: step, epoch and all its sample indices\n"
          "  --elastic-timeout-ms N  --elastic: communicator deadline; a stopped rank is\n"
          "                       declared failed after it (10000)\n"
          "  --help               this text\n"
          "\n"
          "Ranks come from the launcher: RANK/WORLD_SIZE/LOCAL_RANK with MASTER_ADDR/\n"
          "MASTER_PORT (collrun, torchrun), or srun's SLURM_* and mpirun's OMPI_COMM_WORLD_*\n"
          "(the store's address is then derived: see docs/cluster.md). With none of\n"
          "WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE set, it runs as a single rank.\n"
          "When every rank of the host has a core (collrun's one core per rank, or unbound\n"
          "ranks on at least as many CPUs), waiting ranks poll for up to 10 ms before\n"
          "sleeping (libcoll's default; COLL_SPIN_US changes it).\n"
          "At the end rank 0 prints samples/s and its step time by phase.\n");
}

enum {
  OPT_EPOCHS = 256,
  OPT_BATCH,
  OPT_LR,
  OPT_LR_SCHEDULE,
  OPT_MOMENTUM,
  OPT_WD,
  OPT_OPTIMIZER,
  OPT_SEED,
  OPT_HIDDEN,
  OPT_DATA,
  OPT_DROP_LAST,
  OPT_NO_SHUFFLE,
  OPT_BUCKET_MB,
  OPT_ACCUMULATE,
  OPT_CHECK_SYNC,
  OPT_CHECKPOINT,
  OPT_CHECKPOINT_EVERY,
  OPT_RESUME,
  OPT_DEVICE,
  OPT_BLAS_THREADS,
  OPT_MAX_STEPS,
  OPT_WARMUP_STEPS,
  OPT_LOG_EVERY,
  OPT_NO_EVAL,
  OPT_QUIET,
  OPT_ELASTIC,
  OPT_SHARDS,
  OPT_BIT_IDENTICAL,
  OPT_SAMPLE_LOG,
  OPT_ELASTIC_TIMEOUT,
  OPT_HELP,
};

static const struct option options[] = {
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WD},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"seed", required_argument, NULL, OPT_SEED},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"data", required_argument, NULL, OPT_DATA},
    {"drop-last", no_argument, NULL, OPT_DROP_LAST},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"bucket-mb", required_argument, NULL, OPT_BUCKET_MB},
    {"accumulate", required_argument, NULL, OPT_ACCUMULATE},
    {"check-sync", no_argument, NULL, OPT_CHECK_SYNC},
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"blas-threads", required_argument, NULL, OPT_BLAS_THREADS},
    {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP_STEPS},
    {"log-every", required_argument, NULL, OPT_LOG_EVERY},
    {"no-eval", no_argument, NULL, OPT_NO_EVAL},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"elastic", no_argument, NULL, OPT_ELASTIC},
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"bit-identical", no_argument, NULL, OPT_BIT_IDENTICAL},
    {"sample-log", required_argument, NULL, OPT_SAMPLE_LOG},
    {"elastic-timeout-ms", required_argument, NULL, OPT_ELASTIC_TIMEOUT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Whole-string integer in [min, max]; prints the error itself. */
static bool parse_long(const char *flag, const char *text, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "train: --%s '%s': expected an integer in %ld..%ld\n", flag, text, min, max);
    return false;
  }
  *out = v;
  return true;
}

static bool parse_float(const char *flag, const char *text, double min, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < min) {
    fprintf(stderr, "train: --%s '%s': expected a number >= %g\n", flag, text, min);
    return false;
  }
  *out = v;
  return true;
}

static bool parse_hidden(const char *text, train_config_t *cfg) {
  cfg->n_hidden = 0;
  const char *p = text;
  while (*p != '\0') {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno != 0 || end == p || v < 1 || v > 65536 || (*end != ',' && *end != '\0') ||
        cfg->n_hidden == TRAIN_MAX_HIDDEN) {
      fprintf(stderr,
              "train: --hidden '%s': expected up to %d comma-separated widths in 1..65536\n", text,
              TRAIN_MAX_HIDDEN);
      return false;
    }
    cfg->hidden[cfg->n_hidden++] = (size_t)v;
    p = *end == ',' ? end + 1 : end;
  }
  return true;
}

/* 0: parsed; 1: --help shown; 2: usage error. */
static int parse_args(int argc, char **argv, train_config_t *cfg) {
  bool lr_set = false;
  long v;
  double f;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    const char *name = c >= OPT_EPOCHS && c <= OPT_HELP ? options[c - OPT_EPOCHS].name : "?";
    switch (c) {
      case OPT_EPOCHS:
        if (!parse_long(name, optarg, 1, 1000000, &v)) return 2;
        cfg->epochs = (int)v;
        break;
      case OPT_BATCH:
        if (!parse_long(name, optarg, 1, 1 << 20, &v)) return 2;
        cfg->batch = (size_t)v;
        break;
      case OPT_LR:
        if (!parse_float(name, optarg, 1e-12, &f)) return 2;
        cfg->opt.lr = (float)f;
        lr_set = true;
        break;
      case OPT_LR_SCHEDULE:
        if (!train_lr_schedule_parse(optarg, &cfg->lr_schedule)) {
          fprintf(stderr, "train: --lr-schedule '%s': expected constant or cosine\n", optarg);
          return 2;
        }
        break;
      case OPT_MOMENTUM:
        if (!parse_float(name, optarg, 0.0, &f) || f >= 1.0) {
          if (f >= 1.0) fprintf(stderr, "train: --momentum must be below 1\n");
          return 2;
        }
        cfg->opt.momentum = (float)f;
        break;
      case OPT_WD:
        if (!parse_float(name, optarg, 0.0, &f)) return 2;
        cfg->opt.weight_decay = (float)f;
        break;
      case OPT_OPTIMIZER:
        if (!train_opt_parse(optarg, &cfg->opt.kind)) {
          fprintf(stderr, "train: --optimizer '%s': expected sgd or adam\n", optarg);
          return 2;
        }
        break;
      case OPT_SEED:
        if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2;
        cfg->seed = (uint64_t)v;
        break;
      case OPT_HIDDEN:
        if (!parse_hidden(optarg, cfg)) return 2;
        break;
      case OPT_DATA:
        cfg->data_dir = optarg;
        break;
      case OPT_DROP_LAST:
        cfg->drop_last = true;
        break;
      case OPT_NO_SHUFFLE:
        cfg->shuffle = false;
        break;
      case OPT_BUCKET_MB:
        if (!parse_float(name, optarg, 1e-6, &f)) return 2;
        cfg->bucket_mb = f;
        break;
      case OPT_ACCUMULATE:
        if (!parse_long(name, optarg, 1, 1 << 20, &v)) return 2;
        cfg->accumulate = (int)v;
        break;
      case OPT_CHECK_SYNC:
        cfg->check_sync = true;
        break;
      case OPT_CHECKPOINT:
        cfg->checkpoint = optarg;
        break;
      case OPT_CHECKPOINT_EVERY:
        if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2;
        cfg->checkpoint_every = v;
        break;
      case OPT_RESUME:
        cfg->resume = true;
        break;
      case OPT_DEVICE:
        if (!train_device_parse(optarg, &cfg->device)) {
          fprintf(stderr, "train: --device '%s': expected cpu or cuda\n", optarg);
          return 2;
        }
        break;
      case OPT_BLAS_THREADS:
        if (!parse_long(name, optarg, 1, 1024, &v)) return 2;
        cfg->blas_threads = (int)v;
        break;
      case OPT_MAX_STEPS:
        if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2;
        cfg->max_steps = v;
        break;
      case OPT_WARMUP_STEPS:
        if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2;
        cfg->warmup_steps = v;
        break;
      case OPT_LOG_EVERY:
        if (!parse_long(name, optarg, 1, 1 << 30, &v)) return 2;
        cfg->log_every = (int)v;
        break;
      case OPT_NO_EVAL:
        cfg->evaluate = false;
        break;
      case OPT_QUIET:
        cfg->quiet = true;
        break;
      case OPT_ELASTIC:
        cfg->elastic = true;
        break;
      case OPT_SHARDS:
        if (!parse_long(name, optarg, 1, 4096, &v)) return 2;
        cfg->shards = (int)v;
        break;
      case OPT_BIT_IDENTICAL:
        cfg->bit_identical = true;
        break;
      case OPT_SAMPLE_LOG:
        cfg->sample_log = optarg;
        break;
      case OPT_ELASTIC_TIMEOUT:
        if (!parse_long(name, optarg, 100, 24L * 3600 * 1000, &v)) return 2;
        cfg->elastic_timeout_ms = (int)v;
        break;
      case OPT_HELP:
        usage(stdout);
        return 1;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "train: unexpected argument '%s' (see --help)\n", argv[optind]);
    return 2;
  }
  if (cfg->opt.kind == TRAIN_OPT_ADAM && !lr_set) cfg->opt.lr = 1e-3f;
  if (cfg->resume && cfg->checkpoint == NULL) {
    fprintf(stderr, "train: --resume needs --checkpoint FILE\n");
    return 2;
  }
  if (!cfg->elastic && (cfg->bit_identical || cfg->sample_log != NULL)) {
    fprintf(stderr, "train: --bit-identical and --sample-log need --elastic\n");
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  train_config_t cfg;
  train_config_defaults(&cfg);
  int rc = parse_args(argc, argv, &cfg);
  if (rc == 1) return 0;
  if (rc != 0) return 2;
  train_result_t res;
  train_status_t st = train_run(&cfg, &res);
  if (st != TRAIN_OK) {
    fprintf(stderr, "train: %s: %s\n", train_status_string(st), train_last_error());
    return st == TRAIN_ERR_FENCED ? 3 : 1; /* 3: documented in --help (--elastic) */
  }
  return 0;
}
