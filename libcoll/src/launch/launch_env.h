/* A launcher's environment (torchrun/collrun, Open MPI, Slurm) read into a coll_config_t,
 * and COLL_ALGO read into an algorithm (launch_env.c). */
#ifndef COLL_LAUNCH_LAUNCH_ENV_H
#define COLL_LAUNCH_LAUNCH_ENV_H

#include <stddef.h>

#include "coll.h"

/* Fill cfg from the launcher's environment (torchrun, SLURM, Open MPI). Strings in cfg
 * point into the environment, or into addr_buf when the store's host was derived from
 * the launcher's variables (Slurm's node list, Open MPI's URI). */
coll_status_t launch_env_config(coll_config_t *cfg, char *addr_buf, size_t addr_cap);
/* COLL_ALGO as an algorithm (AUTO when unset); an unknown name is an error. */
coll_status_t launch_env_algo(coll_algo_t *algo);

#endif
