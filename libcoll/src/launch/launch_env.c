/* Reading a launcher's environment into a coll_config_t: torchrun/collrun (RANK,
 * WORLD_SIZE, LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_*) or Slurm (SLURM_PROCID, ...). The
 * store is at MASTER_ADDR:MASTER_PORT; under Slurm and Open MPI either may be left out and
 * is then found from the launcher's own variables (see docs/cluster.md). */
#include "launch/launch_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "launch/hostlist.h"
#include "launch/launch_port.h"

enum { ONE_RANK_PORT = 29500 }; /* torchrun's MASTER_PORT default; one rank never opens it */

/* Fills what the user did not set: addr (into addr[cap]) when want_addr, *port when
 * want_port. */
typedef coll_status_t (*store_finder_t)(const coll_config_t *cfg, bool want_addr, bool want_port,
                                        char *addr, size_t cap, int *port);

/* One launcher's variable names; local is optional, find_store NULL when the launcher
 * says nothing about where rank 0 runs. */
typedef struct {
  const char *launcher;
  const char *rank;
  const char *size;
  const char *local;
  store_finder_t find_store;
} launcher_vars_t;

static coll_status_t slurm_store(const coll_config_t *cfg, bool want_addr, bool want_port,
                                 char *addr, size_t cap, int *port);
static coll_status_t ompi_store(const coll_config_t *cfg, bool want_addr, bool want_port,
                                char *addr, size_t cap, int *port);

/* Open MPI before Slurm: mpirun inside a Slurm allocation starts its daemons with srun,
 * so its ranks inherit the daemon's SLURM_PROCID as well as their own OMPI_* ranks. */
static const launcher_vars_t launchers[] = {
    {.launcher = "torchrun/collrun", .rank = "RANK", .size = "WORLD_SIZE", .local = "LOCAL_RANK"},
    {.launcher = "Open MPI",
     .rank = "OMPI_COMM_WORLD_RANK",
     .size = "OMPI_COMM_WORLD_SIZE",
     .local = "OMPI_COMM_WORLD_LOCAL_RANK",
     .find_store = ompi_store},
    {.launcher = "Slurm",
     .rank = "SLURM_PROCID",
     .size = "SLURM_NTASKS",
     .local = "SLURM_LOCALID",
     .find_store = slurm_store},
};
enum { NLAUNCHERS = sizeof launchers / sizeof launchers[0] };

/* Parse a required integer variable within [min, max]; errors name the variable. */
static coll_status_t required_int(const char *name, int64_t min, int64_t max, const char *launcher,
                                  int *out) {
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

static const char *first_set(const char *const *names, size_t n, const char **which) {
  for (size_t i = 0; i < n; i++) {
    const char *v = coll_env_str(names[i]);
    if (v != NULL) {
      if (which != NULL) *which = names[i];
      return v;
    }
  }
  return NULL;
}

/* Slurm: the first node of the step hosts rank 0 (srun places SLURM_PROCID 0 on node 0 of
 * the step); the port comes from the job and step ids, so concurrent steps differ. */
static coll_status_t slurm_store(const coll_config_t *cfg, bool want_addr, bool want_port,
                                 char *addr, size_t cap, int *port) {
  if (want_addr) {
    static const char *const lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                        "SLURM_NODELIST"};
    const char *var = NULL;
    const char *list = first_set(lists, sizeof lists / sizeof lists[0], &var);
    if (list == NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "Slurm launch without a node list: none of SLURM_STEP_NODELIST, "
                        "SLURM_JOB_NODELIST, SLURM_NODELIST is set; set MASTER_ADDR to the "
                        "host of rank 0 (and MASTER_PORT)");
    coll_status_t st = hostlist_nth(list, 0, addr, cap);
    if (st != COLL_OK) return coll_error_prefix(st, "%s: ", var);
    int64_t node = 0;
    st = coll_env_int("SLURM_NODEID", 0, 1 << 24, 0, &node);
    if (st != COLL_OK) return st;
    if (cfg->rank == 0 && node != 0 && strcmp(var, "SLURM_STEP_NODELIST") == 0)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "Slurm: rank 0 runs on node %lld of the step, not on its first node "
                        "%s where the ranks look for the store (a custom task distribution?); "
                        "set MASTER_ADDR to rank 0's host",
                        (long long)node, addr);
    coll_log(COLL_LOG_INFO, "store host %s: first node of %s=%s", addr, var, list);
  }
  if (want_port) {
    static const char *const jobs[] = {"SLURM_JOB_ID", "SLURM_JOBID"};
    static const char *const steps[] = {"SLURM_STEP_ID", "SLURM_STEPID"};
    const char *job = first_set(jobs, 2, NULL);
    const char *step = first_set(steps, 2, NULL);
    if (job == NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "Slurm launch without SLURM_JOB_ID: set MASTER_PORT (the store's port)");
    *port = launch_port_derive(job, step);
    coll_log(COLL_LOG_INFO, "store port %d: derived from SLURM_JOB_ID=%s SLURM_STEP_ID=%s", *port,
             job, step != NULL ? step : "(unset)");
  }
  return COLL_OK;
}

/* Open MPI (mpirun): one node needs only loopback; across nodes rank 0 is mapped to the
 * first node, normally the one mpirun runs on, whose addresses are in the HNP URI. */
static coll_status_t ompi_store(const coll_config_t *cfg, bool want_addr, bool want_port,
                                char *addr, size_t cap, int *port) {
  if (want_addr) {
    int64_t local_size = 0;
    coll_status_t st = coll_env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1 << 24, 0, &local_size);
    if (st != COLL_OK) return st;
    const char *uri = coll_env_str("OMPI_MCA_orte_hnp_uri");
    char addrs[LAUNCH_ADDRS_MAX][LAUNCH_ADDR_LEN];
    int n = 0;
    if (local_size == cfg->size) {
      snprintf(addr, cap, "127.0.0.1");
      coll_log(COLL_LOG_INFO, "store host 127.0.0.1: all %d ranks on this node", cfg->size);
    } else {
      st = launch_uri_ipv4(uri, addrs, LAUNCH_ADDRS_MAX, &n);
      if (st != COLL_OK) return coll_error_prefix(st, "OMPI_MCA_orte_hnp_uri: ");
      if (n == 0)
        return coll_error(COLL_ERR_INVALID_ARGUMENT,
                          "Open MPI across nodes: cannot tell where rank 0 runs (no IPv4 "
                          "address in OMPI_MCA_orte_hnp_uri); set MASTER_ADDR to rank 0's "
                          "host and MASTER_PORT, and pass them with "
                          "mpirun -x MASTER_ADDR -x MASTER_PORT");
      bool here = false;
      for (int i = 0; i < n && !here; i++) here = launch_addr_is_local(addrs[i]);
      if (cfg->rank == 0 && !here)
        return coll_error(COLL_ERR_INVALID_ARGUMENT,
                          "Open MPI: rank 0 does not run on mpirun's host (%s), where the "
                          "ranks look for the store; set MASTER_ADDR to rank 0's host and "
                          "MASTER_PORT, passed with mpirun -x MASTER_ADDR -x MASTER_PORT",
                          addrs[0]);
      snprintf(addr, cap, "%s", addrs[launch_pick_reachable(addrs, n)]);
      coll_log(COLL_LOG_INFO, "store host %s: mpirun's host (OMPI_MCA_orte_hnp_uri=%s)", addr, uri);
    }
  }
  if (want_port) {
    static const char *const jobs[] = {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
    const char *var = NULL;
    const char *job = first_set(jobs, 2, &var);
    if (job == NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "Open MPI launch without a job id (OMPI_MCA_ess_base_jobid): set "
                        "MASTER_PORT and pass it with mpirun -x MASTER_PORT");
    *port = launch_port_derive(job, NULL);
    coll_log(COLL_LOG_INFO, "store port %d: derived from %s=%s", *port, var, job);
  }
  return COLL_OK;
}

/* The launcher whose rank variable is set; else one whose size is (to name what is
 * missing); NULL when none. */
static const launcher_vars_t *find_launcher(void) {
  for (int i = 0; i < NLAUNCHERS; i++)
    if (coll_env_str(launchers[i].rank) != NULL) return &launchers[i];
  for (int i = 0; i < NLAUNCHERS; i++)
    if (coll_env_str(launchers[i].size) != NULL) return &launchers[i];
  return NULL;
}

coll_status_t coll_launch_info(coll_launch_info_t *info) {
  if (info == NULL) return coll_error(COLL_ERR_INVALID_ARGUMENT, "coll_launch_info: info is NULL");
  *info = (coll_launch_info_t){.local_rank = -1};
  const launcher_vars_t *lv = find_launcher();
  if (lv == NULL) {
    coll_error_clear();
    return COLL_OK;
  }
  int size = 0, rank = 0;
  int64_t local = -1;
  coll_status_t st = required_int(lv->size, 1, 1 << 24, lv->launcher, &size);
  if (st == COLL_OK) st = required_int(lv->rank, 0, size - 1, lv->launcher, &rank);
  if (st == COLL_OK) st = coll_env_int(lv->local, 0, size - 1, -1, &local);
  if (st != COLL_OK) return coll_error_prefix(st, "coll_launch_info: ");
  *info = (coll_launch_info_t){
      .found = 1, .rank = rank, .size = size, .local_rank = (int)local, .launcher = lv->launcher};
  coll_error_clear();
  return COLL_OK;
}

coll_status_t launch_env_config(coll_config_t *cfg, char *addr_buf, size_t addr_cap) {
  memset(cfg, 0, sizeof *cfg);
  const launcher_vars_t *lv = find_launcher();
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
  cfg->token = NULL; /* coll_comm_init_config reads COLL_JOB_TOKEN */
  cfg->host_store = -1;
  cfg->timeout_ms = 0;
  if (cfg->size == 1) {
    /* One rank opens no store, but its configuration is checked like any other:
     * MASTER_ADDR and MASTER_PORT when set, else torchrun's default port. */
    cfg->master_addr = coll_env_str("MASTER_ADDR");
    cfg->master_port = ONE_RANK_PORT;
    if (coll_env_str("MASTER_PORT") == NULL) return COLL_OK;
    return required_int("MASTER_PORT", 1, 65535, lv->launcher, &cfg->master_port);
  }

  /* Every larger job meets at MASTER_ADDR:MASTER_PORT; they override what the launcher's
   * variables suggest. */
  cfg->master_addr = coll_env_str("MASTER_ADDR");
  bool want_port = coll_env_str("MASTER_PORT") == NULL;
  if (!want_port) {
    st = required_int("MASTER_PORT", 1, 65535, lv->launcher, &cfg->master_port);
    if (st != COLL_OK) return st;
  }
  bool want_addr = cfg->master_addr == NULL;
  if ((want_addr || want_port) && lv->find_store != NULL) {
    if (addr_buf == NULL || addr_cap == 0)
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "launch_env_config: no address buffer");
    st = lv->find_store(cfg, want_addr, want_port, addr_buf, addr_cap, &cfg->master_port);
    if (st != COLL_OK) return st;
    if (want_addr) cfg->master_addr = addr_buf;
    return COLL_OK;
  }
  if (want_addr)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "environment variable MASTER_ADDR is not set (the store's host, "
                      "needed with %s-style launch)",
                      lv->launcher);
  if (want_port) return required_int("MASTER_PORT", 1, 65535, lv->launcher, &cfg->master_port);
  return COLL_OK;
}

coll_status_t launch_env_algo(coll_algo_t *algo) {
  *algo = COLL_ALGO_AUTO;
  const char *v = coll_env_str("COLL_ALGO");
  if (v == NULL) return COLL_OK;
  /* The names accepted and the names the error lists come from one loop: they cannot
   * drift apart when an algorithm is added. */
  char names[128] = "";
  size_t len = 0;
  for (int a = 0; a < COLL_ALGO_COUNT; a++) {
    const char *name = coll_algo_name((coll_algo_t)a);
    if (strcasecmp(v, name) == 0) {
      *algo = (coll_algo_t)a;
      return COLL_OK;
    }
    if (len < sizeof names)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", a > 0 ? ", " : "", name);
  }
  return coll_error(COLL_ERR_INVALID_ARGUMENT,
                    "environment variable COLL_ALGO='%s' is not one of %s", v, names);
}
