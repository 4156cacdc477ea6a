/* ib transport, devices: which RDMA device, port and GID a rank uses (COLL_IB_DEVICE,
 * COLL_IB_GID_INDEX or the automatic choice), and the report coll-info --ib prints. */
#ifndef COLL_TRANSPORT_IB_DEVICE_H
#define COLL_TRANSPORT_IB_DEVICE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "coll.h"

/* The port a rank uses and what a peer needs to address it. */
typedef struct {
  char device[64];
  int port;
  int gid_index;        /* -1 on InfiniBand when the LID alone routes */
  union ibv_gid gid;    /* all zero when gid_index is -1 */
  char gid_text[48];    /* "::ffff:10.0.2.15" */
  const char *gid_type; /* "RoCE v2", "RoCE v1", "IB" */
  uint8_t link_layer;   /* IBV_LINK_LAYER_ETHERNET or IBV_LINK_LAYER_INFINIBAND */
  uint16_t lid;
  enum ibv_mtu mtu; /* the port's active MTU */
} ib_port_pick_t;

/* Choose the device, port and GID (see ib_device.c for the rules and the environment).
 * On success *ctx (when not NULL) is the opened device; the caller closes it. Every
 * failure is a status with a message naming the device and port: no device, an unknown
 * COLL_IB_DEVICE, a port that is not active, a bad COLL_IB_GID_INDEX. */
coll_status_t ib_device_pick(ib_port_pick_t *pick, struct ibv_context **ctx);

/* Print every device, port (state, link layer, MTU, LID) and GID (index, type, address),
 * then the pick or why there is none. Returns the pick's status. */
coll_status_t ib_device_report(FILE *out);

/* "RoCE v2 ::ffff:10.0.2.15" style text of a GID, for messages. */
void ib_gid_to_text(const union ibv_gid *gid, char *text, size_t len);

#endif
