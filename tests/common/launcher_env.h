/* The environment a test's ranks start from: no launcher's variables and no COLL_* job
 * settings but those the test sets itself. */
#ifndef TESTS_COMMON_LAUNCHER_ENV_H
#define TESTS_COMMON_LAUNCHER_ENV_H

/* Unset every launcher variable the library reads (torchrun's, Slurm's, Open MPI's,
 * PMIx's, MASTER_ADDR/PORT) and the COLL_* settings of a job (store, token, algorithm,
 * transport, timeout, chunk size, host id). COLL_DEBUG stays: it only makes the library
 * talk. */
void launcher_env_clear(void);

#endif
