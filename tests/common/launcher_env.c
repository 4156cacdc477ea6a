/* The launcher variables a test clears (see launcher_env.h). */
#include "launcher_env.h"

#include <stdlib.h>

void launcher_env_clear(void) {
  static const char *const vars[] = {
      "RANK",
      "WORLD_SIZE",
      "LOCAL_RANK",
      "SLURM_PROCID",
      "SLURM_NTASKS",
      "SLURM_LOCALID",
      "SLURM_NODEID",
      "SLURM_STEP_NODELIST",
      "SLURM_JOB_NODELIST",
      "SLURM_NODELIST",
      "SLURM_JOB_ID",
      "SLURM_JOBID",
      "SLURM_STEP_ID",
      "SLURM_STEPID",
      "SLURMD_NODENAME",
      "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_LOCAL_RANK",
      "OMPI_COMM_WORLD_LOCAL_SIZE",
      "OMPI_MCA_orte_hnp_uri",
      "OMPI_MCA_ess_base_jobid",
      "PMIX_NAMESPACE",
      "MASTER_ADDR",
      "MASTER_PORT",
      "COLL_STORE_HOSTED",
      "COLL_JOB_TOKEN",
      "COLL_ALGO",
      "COLL_TRANSPORT",
      "COLL_TIMEOUT_MS",
      "COLL_CHUNK_SIZE",
      "COLL_HOST_ID",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}
