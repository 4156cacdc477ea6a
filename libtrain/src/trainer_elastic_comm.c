/* The communicator of an elastic run (--elastic): the checks of the configuration, the
 * launcher's job (only with a store that outlives the ranks), a replacement's join, and
 * the shrink and grow that follow an agreement. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "trainer_elastic.h"

double elastic_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double elastic_unix_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool trainer_elastic_joining(void) {
  const char *v = getenv("COLL_ELASTIC_JOIN");
  return v != NULL && strcmp(v, "1") == 0;
}

train_status_t trainer_elastic_validate(const train_config_t *c) {
  if (c->comm != NULL)
    return train_error(TRAIN_ERR_INVALID,
                       "--elastic makes its own communicator from the launcher's environment "
                       "(cfg->comm must be NULL)");
  if (c->shards < 1 || c->shards > 4096)
    return train_error(TRAIN_ERR_INVALID, "--shards must be in 1..4096");
  if (c->accumulate != 1)
    return train_error(TRAIN_ERR_INVALID,
                       "--accumulate with --elastic: a step is already --shards shards of "
                       "--batch samples, summed");
  if (c->device != TRAIN_DEVICE_CPU)
    return train_error(TRAIN_ERR_UNSUPPORTED, "--elastic runs on the CPU only");
  if (c->resume || c->checkpoint_every > 0)
    return train_error(TRAIN_ERR_INVALID,
                       "--resume/--checkpoint-every with --elastic: not implemented (the state "
                       "survives in the ranks that live; --checkpoint FILE is written at the end)");
  if (c->elastic_timeout_ms < 100)
    return train_error(TRAIN_ERR_INVALID, "--elastic-timeout-ms must be >= 100");
  return TRAIN_OK;
}

static train_status_t adopt(trainer_run_t *r, coll_comm_t *comm) {
  r->comm = comm;
  r->own_comm = true;
  coll_status_t cs = coll_comm_set_timeout(comm, r->cfg->elastic_timeout_ms);
  /* Every step's agreement is a round trip to the launcher's store, whose thread has no
   * CPU of its own when the ranks fill the CPUs (collrun binds one per rank): a rank
   * polling 10 ms (the default, good for DDP) keeps it waiting. 200 us: 2 ranks on a
   * busy 2-CPU VM went from 21-25 to 33-47 steps/s on Fashion-MNIST (COLL_SPIN_US wins). */
  if (cs == COLL_OK) cs = coll_comm_set_poll_us(comm, 200);
  if (cs == COLL_OK) cs = coll_comm_rank(comm, &r->rank);
  if (cs == COLL_OK) cs = coll_comm_size(comm, &r->world);
  return cs == COLL_OK ? TRAIN_OK : train_comm_error(cs, "the elastic communicator");
}

train_status_t trainer_elastic_comm(trainer_run_t *r, const coll_launch_info_t *launch) {
  r->local_rank = launch->local_rank;
  /* A replacement sets up model and data first and joins afterwards (elastic_join), so
   * the members wait for it as short a time as possible. */
  if (trainer_elastic_joining()) return TRAIN_OK;
  const char *hosted = getenv("COLL_STORE_HOSTED");
  if (!launch->found || hosted == NULL || strcmp(hosted, "1") != 0)
    return train_error(TRAIN_ERR_INVALID,
                       "--elastic needs a rendezvous store that outlives the ranks: run it "
                       "under collrun, which hosts the store (COLL_STORE_HOSTED=1). Without "
                       "it rank 0 would host the store, and its death would end the job");
  coll_comm_t *comm = NULL;
  coll_status_t cs = coll_comm_init_env(&comm);
  if (cs != COLL_OK) return train_comm_error(cs, "joining the job (coll_comm_init_env)");
  train_status_t st = adopt(r, comm);
  if (st == TRAIN_OK && r->world > r->cfg->shards)
    st = train_error(TRAIN_ERR_INVALID, "--elastic: %d ranks but --shards %d (need >= ranks)",
                     r->world, r->cfg->shards);
  return st;
}

train_status_t elastic_join(trainer_run_t *r) {
  coll_comm_t *comm = NULL;
  /* The members take a replacement in at their next step's agreement; the wait is
   * longer than one step and one recovery. */
  int wait_ms = r->cfg->elastic_timeout_ms * 6;
  if (wait_ms < 60000) wait_ms = 60000;
  coll_status_t cs = coll_comm_join(NULL, wait_ms, &comm);
  if (cs != COLL_OK)
    return train_comm_error(cs, "COLL_ELASTIC_JOIN=1: joining the running job (coll_comm_join)");
  return adopt(r, comm);
}

train_status_t elastic_shrink(trainer_run_t *r, const coll_agreement_t *a) {
  coll_comm_revoke(r->comm); /* idempotent; stops whatever a peer still waits for */
  coll_comm_t *smaller = NULL;
  coll_status_t cs = coll_comm_shrink(r->comm, a->failed, a->nfailed, &smaller);
  if (cs != COLL_OK) return train_comm_error(cs, "shrinking the communicator");
  coll_comm_destroy(r->comm);
  return adopt(r, smaller);
}

train_status_t elastic_grow(trainer_run_t *r, int joiners) {
  coll_comm_t *bigger = NULL;
  coll_status_t cs = coll_comm_grow(r->comm, joiners, &bigger);
  if (cs != COLL_OK) return train_comm_error(cs, "growing the communicator");
  coll_comm_destroy(r->comm);
  return adopt(r, bigger);
}
