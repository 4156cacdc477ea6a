/* NCCL's ABI as nccl.h declares it: sizes, enum values, the config's field offsets
 * (x86_64 / LP64), NCCL_VERSION, and configs of other sizes (an older NCCL's shorter
 * struct, a newer one's longer) read only up to their `size`. Built against our nccl.h and
 * again against NVIDIA's (tests/nccl/meson.build): a fact of a later NCCL is checked where
 * the header is that new, and ncclGetVersion must report LIBNCCL_VERSION_CODE, our
 * library's version (from our nccl.h), whichever header the test was compiled with. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "suite_run.h"

#ifndef LIBNCCL_VERSION_CODE
#error "LIBNCCL_VERSION_CODE (our nccl.h's NCCL_VERSION_CODE) comes from meson"
#endif
#define SINCE(x, y) (NCCL_VERSION_CODE >= NCCL_VERSION(2, x, y))
/* The config's magic; NVIDIA's 2.28.9 header has no name for it. */
#define CONFIG_MAGIC 0xcafebeefu

START_TEST(sizes_and_values_are_nccls) {
  ck_assert_uint_eq(sizeof(ncclUniqueId), 128);
  ck_assert_uint_eq(sizeof(ncclResult_t), sizeof(int));
  ck_assert_uint_eq(sizeof(ncclRedOp_t), sizeof(int));
  ck_assert_uint_eq(sizeof(ncclDataType_t), sizeof(int));
  const int results[] = {ncclSuccess,       ncclUnhandledCudaError, ncclSystemError,
                         ncclInternalError, ncclInvalidArgument,    ncclInvalidUsage,
                         ncclRemoteError,   ncclInProgress};
  for (int i = 0; i < 8; i++) ck_assert_int_eq(results[i], i);
  /* ncclTimeout: not in 2.28.9's header (ncclNumResults 8 there), 8 in 2.30.7's. */
#if SINCE(29, 0)
  ck_assert_int_eq(ncclTimeout, 8);
  ck_assert_int_eq(ncclNumResults, 9);
#else
  ck_assert_int_eq(ncclNumResults, 8);
#endif
  const int types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                       ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                       ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (int i = 0; i < 12; i++) ck_assert_int_eq(types[i], i);
  ck_assert_int_eq(ncclNumTypes, 12);
  ck_assert_int_eq(ncclChar, 0);
  ck_assert_int_eq(ncclInt, 2);
  ck_assert_int_eq(ncclHalf, 6);
  ck_assert_int_eq(ncclFloat, 7);
  ck_assert_int_eq(ncclDouble, 8);
  ck_assert_int_eq(ncclSum, 0);
  ck_assert_int_eq(ncclProd, 1);
  ck_assert_int_eq(ncclMax, 2);
  ck_assert_int_eq(ncclMin, 3);
  ck_assert_int_eq(ncclAvg, 4);
  ck_assert_int_eq(ncclNumOps, 5);
  ck_assert_int_eq(ncclMaxRedOp, 0x7fffffff);
  ck_assert_int_eq(ncclScalarDevice, 0);
  ck_assert_int_eq(ncclScalarHostImmediate, 1);
  ck_assert_int_eq(NCCL_CONFIG_UNDEF_INT, INT_MIN);
#ifdef NCCL_API_MAGIC
  ck_assert_uint_eq(NCCL_API_MAGIC, CONFIG_MAGIC);
#endif
  ck_assert_int_eq(NCCL_SPLIT_NOCOLOR, -1);
  ck_assert_int_eq(NCCL_MAJOR, 2);
  ck_assert_int_eq(NCCL_VERSION_CODE, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  ck_assert_int_eq(NCCL_VERSION(2, 27, 7), 22707);
  ck_assert_int_eq(NCCL_VERSION(2, 8, 4), 2804);
  ck_assert_int_eq(NCCL_VERSION(2, 32, 3), 23203);
  /* The library is as new as the header at least, and says which it is. */
  ck_assert_int_ge(LIBNCCL_VERSION_CODE, NCCL_VERSION_CODE);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, LIBNCCL_VERSION_CODE);
}
END_TEST

/* Offsets NCCL gives each field (fields are appended, never moved); the struct's size is
 * that of the newest field set the header has. */
#define FIELD_AT(field, offset) ck_assert_uint_eq(offsetof(ncclConfig_t, field), offset)
START_TEST(config_fields_lie_where_nccl_puts_them) {
  FIELD_AT(size, 0);
  FIELD_AT(magic, 8);
  FIELD_AT(version, 12);
  FIELD_AT(blocking, 16);
  FIELD_AT(cgaClusterSize, 20);
  FIELD_AT(minCTAs, 24);
  FIELD_AT(maxCTAs, 28);
  FIELD_AT(netName, 32);
  FIELD_AT(splitShare, 40);
  FIELD_AT(trafficClass, 44);
  FIELD_AT(commName, 48);
  FIELD_AT(collnetEnable, 56);
  FIELD_AT(CTAPolicy, 60);
  FIELD_AT(shrinkShare, 64);
  FIELD_AT(nvlsCTAs, 68);
  size_t size = 72;
#if SINCE(28, 0)
  FIELD_AT(nChannelsPerNetPeer, 72);
  FIELD_AT(nvlinkCentricSched, 76);
  size = 80;
#endif
#if SINCE(30, 0)
  FIELD_AT(graphUsageMode, 80);
  FIELD_AT(numRmaCtx, 84);
  FIELD_AT(maxP2pPeers, 88);
  FIELD_AT(graphStreamOrdering, 92);
  size = 96;
#endif
#if SINCE(31, 0)
  FIELD_AT(launchOrderImplicit, 96);
  FIELD_AT(numRmaSig, 100);
  FIELD_AT(rmaEagerInit, 104);
  FIELD_AT(hostCftMode, 108);
  FIELD_AT(nvlsHostMode, 112);
  size = 120;
#endif
  ck_assert_uint_eq(sizeof(ncclConfig_t), size);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ck_assert_uint_eq(cfg.size, sizeof cfg);
  ck_assert_uint_eq(cfg.magic, CONFIG_MAGIC);
  ck_assert_uint_eq(cfg.version, NCCL_VERSION_CODE);
  ck_assert_int_eq(cfg.blocking, INT_MIN);
  ck_assert_ptr_null(cfg.netName);
  ck_assert_int_eq(cfg.nvlsCTAs, INT_MIN);
#if SINCE(31, 0)
  ck_assert_int_eq(cfg.nvlsHostMode, INT_MIN);
#endif
}
END_TEST

/* One rank needs no peer, so a config of any size can be tried in this process. */
static void init_with_config(void *config) {
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, config);
  ck_assert_msg(r == ncclSuccess || r == ncclInProgress, "init: %d (%s)", (int)r,
                ncclGetLastError(NULL));
  ncclResult_t state = r;
  /* The init runs on a thread of its own: up to 30 s on a loaded (or sanitized) machine. */
  for (int i = 0; i < 30000 && state == ncclInProgress; i++) {
    ck_assert_int_eq(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state == ncclInProgress) usleep(1000);
  }
  ck_assert_int_eq(state, ncclSuccess);
  int32_t x = 3;
  ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  ck_assert_int_eq(x, 3);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}

START_TEST(configs_of_older_and_newer_ncclx_are_read_up_to_their_size) {
  /* An older NCCL's struct ends after `blocking`; blocking = 0 is still honoured. */
  struct {
    size_t size;
    unsigned magic, version;
    int blocking;
  } older = {sizeof older, CONFIG_MAGIC, NCCL_VERSION(2, 14, 3), 0};
  init_with_config(&older);
  /* A struct cut before `blocking`: the default (blocking) applies. */
  struct {
    size_t size;
    unsigned magic, version;
  } oldest = {sizeof oldest, CONFIG_MAGIC, NCCL_VERSION(2, 13, 0)};
  init_with_config(&oldest);
  /* A newer NCCL's longer struct: the fields beyond the header's are not read. */
  struct {
    ncclConfig_t known;
    int later[16];
  } newer;
  memset(&newer, 0x5a, sizeof newer);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  newer.known = init;
  newer.known.size = sizeof newer;
  newer.known.version = NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR + 1, 0);
  newer.known.blocking = 1;
  init_with_config(&newer);
  init_with_config(NULL);
}
END_TEST

SUITE_MAIN("nccl abi", suite_tests("abi", 60, sizes_and_values_are_nccls,
                                   config_fields_lie_where_nccl_puts_them,
                                   configs_of_older_and_newer_ncclx_are_read_up_to_their_size))
