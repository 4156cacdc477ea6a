/* What the trainer reads from the launcher's environment itself: coll.h offers no way to
 * learn the world size without joining the job (coll_comm_init_env fails without a
 * launcher), nor a communicator's local rank, though libcoll's launch_env.c reads both. */
#include "trainer_launcher.h"

#include <stddef.h>
#include <stdlib.h>

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

int trainer_launcher_world(void) {
  static const char *const names[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int n = env_int(names[i], 0);
    if (n > 0) return n;
  }
  return 0;
}

int trainer_launcher_local_rank(int fallback) { return env_int("LOCAL_RANK", fallback); }
