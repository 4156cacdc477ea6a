/* coll-info with libibverbs: the device report and the pick of the ib transport
 * (libcoll/src/transport/ib/ib_device.c), so the tool shows exactly what a rank would use. */
#include "coll.h"
#include "info.h"
#include "transport/ib/ib_device.h"

int info_ib(FILE *out, bool full) {
  if (full) return ib_device_report(out) == COLL_OK ? 0 : 1;
  ib_port_pick_t pick;
  if (ib_device_pick(&pick, NULL) != COLL_OK) {
    fprintf(out, "  ib: no usable RDMA port: %s\n", coll_last_error());
    return 1;
  }
  fprintf(out, "  ib: would use device %s port %d, GID index %d (%s %s)\n", pick.device, pick.port,
          pick.gid_index, pick.gid_type, pick.gid_text);
  return 0;
}
