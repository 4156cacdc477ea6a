/* ib transport, devices: pick the RDMA device, port and GID this rank uses, and describe
 * every device for coll-info --ib (the first thing to run when RDMA setup fails).
 *
 * Rules:
 *  - Device: COLL_IB_DEVICE=name or name:port; otherwise the first device (in
 *    ibv_get_device_list order) with an ACTIVE port. A named device or port that is not
 *    active is an error, not a silent fallback.
 *  - GID: COLL_IB_GID_INDEX=n when set (it must hold a valid entry). Otherwise on
 *    Ethernet (RoCE) the best entry by type: RoCE v2 with an IPv4-mapped address (routable,
 *    what most fabrics use), then other RoCE v2, then RoCE v1; the lowest index wins a tie.
 *    On InfiniBand the LID routes within the subnet and no GID is needed. */
#include "transport/ib/ib_device.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "common/error.h"

typedef struct {
  const char *name;  /* NULL: any */
  int port;          /* 0: any */
  int64_t gid_index; /* -1: automatic */
} wish_t;

void ib_gid_to_text(const union ibv_gid *gid, char *text, size_t len) {
  if (inet_ntop(AF_INET6, gid->raw, text, (socklen_t)len) == NULL) snprintf(text, len, "?");
}

static bool gid_is_zero(const union ibv_gid *gid) {
  for (size_t i = 0; i < sizeof gid->raw; i++)
    if (gid->raw[i] != 0) return false;
  return true;
}

static bool gid_is_ipv4_mapped(const union ibv_gid *gid) {
  for (int i = 0; i < 10; i++)
    if (gid->raw[i] != 0) return false;
  return gid->raw[10] == 0xff && gid->raw[11] == 0xff;
}

static const char *gid_type_name(unsigned type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "unknown";
  }
}

static const char *link_layer_name(uint8_t ll) {
  switch (ll) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
      return "Ethernet";
    default:
      return "unspecified";
  }
}

static int mtu_bytes(enum ibv_mtu mtu) { return mtu >= IBV_MTU_256 ? 128 << (int)mtu : 0; }

/* Higher is better; 0: not usable. */
static int gid_score(const struct ibv_gid_entry *e) {
  if (gid_is_zero(&e->gid)) return 0;
  switch (e->gid_type) {
    case IBV_GID_TYPE_ROCE_V2:
      return gid_is_ipv4_mapped(&e->gid) ? 3 : 2;
    case IBV_GID_TYPE_ROCE_V1:
      return 1;
    default:
      return 0;
  }
}

static coll_status_t read_wish(wish_t *w) {
  w->name = coll_env_str("COLL_IB_DEVICE");
  w->port = 0;
  return coll_env_int("COLL_IB_GID_INDEX", 0, 1 << 20, -1, &w->gid_index);
}

/* Split "name:port" into the two; false when the port does not parse. */
static bool split_device(const char *spec, char *name, size_t len, int *port) {
  const char *colon = strrchr(spec, ':');
  size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
  if (n == 0 || n >= len) return false;
  memcpy(name, spec, n);
  name[n] = '\0';
  *port = 0;
  if (colon != NULL) {
    int64_t p;
    if (!coll_parse_int(colon + 1, &p) || p < 1 || p > 255) return false;
    *port = (int)p;
  }
  return true;
}

/* Fill the GID part of pick for an active port. */
static coll_status_t pick_gid(struct ibv_context *ctx, const struct ibv_port_attr *pa,
                              int64_t forced, ib_port_pick_t *pick) {
  pick->gid_index = -1;
  memset(&pick->gid, 0, sizeof pick->gid);
  pick->gid_type = "IB";
  snprintf(pick->gid_text, sizeof pick->gid_text, "-");
  if (forced >= 0) {
    struct ibv_gid_entry e;
    int rc = forced < pa->gid_tbl_len
                 ? ibv_query_gid_ex(ctx, (uint32_t)pick->port, (uint32_t)forced, &e, 0)
                 : ENOENT;
    if (rc != 0 || gid_is_zero(&e.gid))
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "COLL_IB_GID_INDEX=%lld: device %s port %d has no valid GID there "
                        "(table of %d entries%s%s; coll-info --ib lists them)",
                        (long long)forced, pick->device, pick->port, pa->gid_tbl_len,
                        rc != 0 ? ": " : "", rc != 0 ? strerror(rc) : "");
    pick->gid_index = (int)forced;
    pick->gid = e.gid;
    pick->gid_type = gid_type_name(e.gid_type);
    ib_gid_to_text(&e.gid, pick->gid_text, sizeof pick->gid_text);
    return COLL_OK;
  }
  if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) return COLL_OK; /* LID routing */
  int best = 0;
  for (int i = 0; i < pa->gid_tbl_len; i++) {
    struct ibv_gid_entry e;
    if (ibv_query_gid_ex(ctx, (uint32_t)pick->port, (uint32_t)i, &e, 0) != 0) continue;
    int score = gid_score(&e);
    if (score <= best) continue;
    best = score;
    pick->gid_index = i;
    pick->gid = e.gid;
    pick->gid_type = gid_type_name(e.gid_type);
    ib_gid_to_text(&e.gid, pick->gid_text, sizeof pick->gid_text);
  }
  if (best == 0)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "device %s port %d (Ethernet) has no usable RoCE GID (does its network "
                      "interface have an IP address?)",
                      pick->device, pick->port);
  return COLL_OK;
}

/* Try the ports of one opened device; COLL_OK with pick filled, or the reason. */
static coll_status_t try_device(struct ibv_context *ctx, const wish_t *w, ib_port_pick_t *pick) {
  struct ibv_device_attr da;
  int rc = ibv_query_device(ctx, &da);
  if (rc != 0) return coll_error_errno(COLL_ERR_SYSTEM, rc, "ibv_query_device on %s", pick->device);
  if (w->port > da.phys_port_cnt)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_IB_DEVICE: device %s has no port %d (%d ports)", pick->device, w->port,
                      da.phys_port_cnt);
  coll_status_t st = COLL_ERR_UNSUPPORTED;
  char why[256] = "";
  for (int p = 1; p <= da.phys_port_cnt; p++) {
    if (w->port != 0 && p != w->port) continue;
    struct ibv_port_attr pa;
    rc = ibv_query_port(ctx, (uint8_t)p, &pa);
    if (rc != 0) {
      st = coll_error_errno(COLL_ERR_SYSTEM, rc, "ibv_query_port on %s port %d", pick->device, p);
      snprintf(why, sizeof why, "%s", coll_last_error());
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      snprintf(why, sizeof why, "device %s port %d is %s (link layer %s), not ACTIVE", pick->device,
               p, ibv_port_state_str(pa.state), link_layer_name(pa.link_layer));
      continue;
    }
    pick->port = p;
    pick->link_layer = pa.link_layer;
    pick->lid = pa.lid;
    pick->mtu = pa.active_mtu;
    st = pick_gid(ctx, &pa, w->gid_index, pick);
    if (st == COLL_OK) return COLL_OK;
    snprintf(why, sizeof why, "%s", coll_last_error());
  }
  return coll_error(st == COLL_OK ? COLL_ERR_UNSUPPORTED : st, "%s",
                    why[0] != '\0' ? why : "no port");
}

coll_status_t ib_device_pick(ib_port_pick_t *pick, struct ibv_context **ctx_out) {
  memset(pick, 0, sizeof *pick);
  pick->gid_index = -1;
  if (ctx_out != NULL) *ctx_out = NULL;
  wish_t w;
  coll_status_t st = read_wish(&w);
  if (st != COLL_OK) return st;
  char want[64] = "";
  if (w.name != NULL && !split_device(w.name, want, sizeof want, &w.port))
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "COLL_IB_DEVICE='%s' is not a device name or name:port (port 1..255)",
                      w.name);
  errno = 0;
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list == NULL)
    return coll_error_errno(COLL_ERR_UNSUPPORTED, errno,
                            "no RDMA device: ibv_get_device_list failed (is the RDMA kernel "
                            "support loaded?)");
  if (n == 0) {
    ibv_free_device_list(list);
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "no RDMA device found (ibv_get_device_list lists none: no RDMA NIC, "
                      "its kernel driver not loaded, or no provider such as ibverbs-providers)");
  }
  char names[256] = "";
  char why[320] = "";
  st = COLL_ERR_UNSUPPORTED;
  bool found = false;
  for (int i = 0; i < n; i++) {
    const char *name = ibv_get_device_name(list[i]);
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", used > 0 ? ", " : "", name);
    if (want[0] != '\0' && strcmp(want, name) != 0) continue;
    if (found && st == COLL_OK) continue;
    found = true;
    snprintf(pick->device, sizeof pick->device, "%s", name);
    struct ibv_context *ctx = ibv_open_device(list[i]);
    if (ctx == NULL) {
      st = coll_error_errno(COLL_ERR_SYSTEM, errno, "ibv_open_device %s", name);
      snprintf(why, sizeof why, "%s", coll_last_error());
      continue;
    }
    st = try_device(ctx, &w, pick);
    if (st == COLL_OK && ctx_out != NULL)
      *ctx_out = ctx;
    else
      ibv_close_device(ctx);
    if (st != COLL_OK) snprintf(why, sizeof why, "%s", coll_last_error());
  }
  ibv_free_device_list(list);
  if (want[0] != '\0' && !found)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "COLL_IB_DEVICE=%s: no such device (found: %s)",
                      w.name, names);
  if (st != COLL_OK) {
    memset(pick, 0, sizeof *pick);
    pick->gid_index = -1;
    return coll_error(st, "no usable RDMA port: %s", why);
  }
  return COLL_OK;
}

static void report_gids(FILE *out, struct ibv_context *ctx, int port, int len) {
  int shown = 0;
  for (int i = 0; i < len; i++) {
    struct ibv_gid_entry e;
    if (ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)i, &e, 0) != 0 || gid_is_zero(&e.gid))
      continue;
    char text[48];
    ib_gid_to_text(&e.gid, text, sizeof text);
    fprintf(out, "      GID[%d] %-8s %s\n", i, gid_type_name(e.gid_type), text);
    shown++;
  }
  if (shown == 0) fprintf(out, "      no valid GID (table of %d entries)\n", len);
}

static void report_device(FILE *out, struct ibv_device *dev) {
  const char *name = ibv_get_device_name(dev);
  struct ibv_context *ctx = ibv_open_device(dev);
  if (ctx == NULL) {
    fprintf(out, "  %s: cannot open: %s\n", name, strerror(errno));
    return;
  }
  struct ibv_device_attr da;
  int rc = ibv_query_device(ctx, &da);
  if (rc != 0) {
    fprintf(out, "  %s: ibv_query_device: %s\n", name, strerror(rc));
    ibv_close_device(ctx);
    return;
  }
  fprintf(out, "  %s: %d port%s, max QPs %d, max MR size %llu\n", name, da.phys_port_cnt,
          da.phys_port_cnt == 1 ? "" : "s", da.max_qp, (unsigned long long)da.max_mr_size);
  for (int p = 1; p <= da.phys_port_cnt; p++) {
    struct ibv_port_attr pa;
    rc = ibv_query_port(ctx, (uint8_t)p, &pa);
    if (rc != 0) {
      fprintf(out, "    port %d: ibv_query_port: %s\n", p, strerror(rc));
      continue;
    }
    fprintf(out, "    port %d: %s, link layer %s, active MTU %d, LID %u\n", p,
            ibv_port_state_str(pa.state), link_layer_name(pa.link_layer), mtu_bytes(pa.active_mtu),
            (unsigned)pa.lid);
    report_gids(out, ctx, p, pa.gid_tbl_len);
  }
  ibv_close_device(ctx);
}

coll_status_t ib_device_report(FILE *out) {
  int n = 0;
  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  fprintf(out, "RDMA devices (libibverbs):\n");
  if (list == NULL || n == 0) {
    fprintf(out, "  none found%s%s\n", list == NULL && errno != 0 ? ": " : "",
            list == NULL && errno != 0 ? strerror(errno) : "");
  } else {
    for (int i = 0; i < n; i++) report_device(out, list[i]);
  }
  if (list != NULL) ibv_free_device_list(list);
  const char *dev = coll_env_str("COLL_IB_DEVICE");
  const char *gid = coll_env_str("COLL_IB_GID_INDEX");
  fprintf(out, "Settings: COLL_IB_DEVICE=%s COLL_IB_GID_INDEX=%s\n", dev ? dev : "(auto)",
          gid ? gid : "(auto)");
  ib_port_pick_t pick;
  coll_status_t st = ib_device_pick(&pick, NULL);
  if (st != COLL_OK) {
    fprintf(out, "Pick: none: %s\n", coll_last_error());
    return st;
  }
  if (pick.gid_index >= 0)
    fprintf(out, "Pick: device %s port %d, GID index %d (%s %s), MTU %d\n", pick.device, pick.port,
            pick.gid_index, pick.gid_type, pick.gid_text, mtu_bytes(pick.mtu));
  else
    fprintf(out, "Pick: device %s port %d, LID %u (InfiniBand, no GID), MTU %d\n", pick.device,
            pick.port, (unsigned)pick.lid, mtu_bytes(pick.mtu));
  return COLL_OK;
}
