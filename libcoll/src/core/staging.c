/* How much staging memory a communicator holds (coll_comm_mem_stats): the transports'
 * buffers, the host links' scratch and this rank's share of the arena, and the peak. */
#include "core/comm.h"

size_t comm_staging_now(const coll_comm_t *comm) {
  size_t t = comm->transports ? transport_set_staging_bytes(comm->transports) : 0;
  return t + comm->links.scratch_bytes + arena_staging_bytes(comm->arena);
}

void comm_update_staging_peak(coll_comm_t *comm) {
  size_t now = comm_staging_now(comm);
  if (now > comm->staging_peak) comm->staging_peak = now;
}
