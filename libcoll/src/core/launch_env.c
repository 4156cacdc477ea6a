/* Reading a launcher's environment into a coll_config_t: torchrun/collrun (RANK,
 * WORLD_SIZE, LOCAL_RANK), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or Open MPI
 * (OMPI_COMM_WORLD_*), with MASTER_ADDR/MASTER_PORT for the store in every case. */
#include <string.h>
#include <strings.h>

#include "common/env.h"
#include "common/error.h"
#include "core/comm.h"

/* One launcher's variable names; local is optional. */
typedef struct {
  const char *launcher;
  const char *rank;
  const char *size;
  const char *local;
} launcher_vars_t;

static const launcher_vars_t launchers[] = {
    {.launcher = "torchrun/collrun", .rank = "RANK", .size = "WORLD_SIZE", .local = "LOCAL_RANK"},
    {.launcher = "Slurm",
     .rank = "SLURM_PROCID",
     .size = "SLURM_NTASKS",
     .local = "SLURM_LOCALID"},
    {.launcher = "Open MPI",
     .rank = "OMPI_COMM_WORLD_RANK",
     .size = "OMPI_COMM_WORLD_SIZE",
     .local = "OMPI_COMM_WORLD_LOCAL_RANK"},
};

/* Parse a required integer variable within [min, max]; errors name the variable. */
static coll_status_t required_int(const char *name, int64_t min, int64_t max,
                                  const char *launcher, int *out) {
  if (coll_env_str(name) == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "environment variable %s is not set (needed with %s-style launch)", name,
                      launcher);
  int64_t v;
  coll_status_t st = coll_env_int(name, min, max, 0, &v);
  if (st != COLL_OK) return st;
  *out = (int)v;
  return COLL_OK;
}

coll_status_t launch_env_config(coll_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  const launcher_vars_t *lv = NULL;
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
    if (coll_env_str(launchers[i].rank) != NULL || coll_env_str(launchers[i].size) != NULL) {
      lv = &launchers[i];
      break;
    }
  }
  if (lv == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "no launcher environment found: set RANK and WORLD_SIZE (torchrun, "
                      "collrun), or run under srun (SLURM_PROCID, SLURM_NTASKS) or mpirun "
                      "(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), with MASTER_ADDR and "
                      "MASTER_PORT");
  coll_status_t st = required_int(lv->size, 1, 1 << 24, lv->launcher, &cfg->size);
  if (st != COLL_OK) return st;
  st = required_int(lv->rank, 0, cfg->size - 1, lv->launcher, &cfg->rank);
  if (st != COLL_OK) return st;
  int64_t local;
  st = coll_env_int(lv->local, 0, cfg->size - 1, -1, &local);
  if (st != COLL_OK) return st;
  cfg->local_rank = (int)local;

  cfg->master_addr = coll_env_str("MASTER_ADDR");
  if (cfg->size > 1) {
    /* One rank needs no store; every larger job meets at MASTER_ADDR:MASTER_PORT. */
    if (cfg->master_addr == NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "environment variable MASTER_ADDR is not set (the store's host, "
                        "needed with %s-style launch)",
                        lv->launcher);
    st = required_int("MASTER_PORT", 1, 65535, lv->launcher, &cfg->master_port);
    if (st != COLL_OK) return st;
  }
  cfg->token = NULL; /* coll_comm_init_config reads COLL_JOB_TOKEN */
  cfg->host_store = -1;
  cfg->timeout_ms = 0;
  return COLL_OK;
}

coll_status_t launch_env_algo(coll_algo_t *algo) {
  *algo = COLL_ALGO_AUTO;
  const char *v = coll_env_str("COLL_ALGO");
  if (v == NULL) return COLL_OK;
  for (int a = 0; a < COLL_ALGO_COUNT; a++) {
    if (strcasecmp(v, coll_algo_name((coll_algo_t)a)) == 0) {
      *algo = (coll_algo_t)a;
      return COLL_OK;
    }
  }
  return coll_error(COLL_ERR_INVALID_ARGUMENT,
                    "environment variable COLL_ALGO='%s' is not one of auto, ring, tree, hd, "
                    "master",
                    v);
}
