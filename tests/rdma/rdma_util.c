/* Helpers of the 'rdma' tests (see rdma_util.h). */
#include "rdma_util.h"

#include "transport/ib/ib_device.h"

bool rdma_have_port(void) {
  ib_port_pick_t pick;
  return ib_device_pick(&pick, NULL) == COLL_OK;
}
