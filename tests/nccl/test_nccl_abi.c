/* NCCL 2.27.7's ABI as nccl.h declares it: sizes, enum values, the config's field
 * offsets (x86_64 / LP64), NCCL_VERSION, and configs of other sizes (an older NCCL's
 * shorter struct, a newer one's longer) read only up to their `size`. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

START_TEST(sizes_and_values_are_nccl_2_27_7s) {
  ck_assert_uint_eq(sizeof(ncclUniqueId), 128);
  ck_assert_uint_eq(sizeof(ncclResult_t), sizeof(int));
  ck_assert_uint_eq(sizeof(ncclRedOp_t), sizeof(int));
  ck_assert_uint_eq(sizeof(ncclDataType_t), sizeof(int));
  const int results[] = {ncclSuccess,       ncclUnhandledCudaError, ncclSystemError,
                         ncclInternalError, ncclInvalidArgument,    ncclInvalidUsage,
                         ncclRemoteError,   ncclInProgress,         ncclTimeout};
  for (int i = 0; i < 9; i++) ck_assert_int_eq(results[i], i);
  const int types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                       ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                       ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (int i = 0; i < 12; i++) ck_assert_int_eq(types[i], i);
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
  ck_assert_int_eq(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  ck_assert_uint_eq(NCCL_API_MAGIC, 0xcafebeefu);
  ck_assert_int_eq(NCCL_SPLIT_NOCOLOR, -1);
  ck_assert_int_eq(NCCL_MAJOR, 2);
  ck_assert_int_eq(NCCL_MINOR, 27);
  ck_assert_int_eq(NCCL_PATCH, 7);
  ck_assert_str_eq(NCCL_SUFFIX, "");
  ck_assert_int_eq(NCCL_VERSION_CODE, 22707);
  ck_assert_int_eq(NCCL_VERSION(2, 27, 7), 22707);
  ck_assert_int_eq(NCCL_VERSION(2, 8, 4), 2804);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, 22707);
}
END_TEST

START_TEST(config_fields_lie_where_nccl_puts_them) {
  ck_assert_uint_eq(offsetof(ncclConfig_t, size), 0);
  ck_assert_uint_eq(offsetof(ncclConfig_t, magic), 8);
  ck_assert_uint_eq(offsetof(ncclConfig_t, version), 12);
  ck_assert_uint_eq(offsetof(ncclConfig_t, blocking), 16);
  ck_assert_uint_eq(offsetof(ncclConfig_t, cgaClusterSize), 20);
  ck_assert_uint_eq(offsetof(ncclConfig_t, minCTAs), 24);
  ck_assert_uint_eq(offsetof(ncclConfig_t, maxCTAs), 28);
  ck_assert_uint_eq(offsetof(ncclConfig_t, netName), 32);
  ck_assert_uint_eq(offsetof(ncclConfig_t, splitShare), 40);
  ck_assert_uint_eq(offsetof(ncclConfig_t, trafficClass), 44);
  ck_assert_uint_eq(offsetof(ncclConfig_t, commName), 48);
  ck_assert_uint_eq(offsetof(ncclConfig_t, collnetEnable), 56);
  ck_assert_uint_eq(offsetof(ncclConfig_t, CTAPolicy), 60);
  ck_assert_uint_eq(offsetof(ncclConfig_t, shrinkShare), 64);
  ck_assert_uint_eq(offsetof(ncclConfig_t, nvlsCTAs), 68);
  ck_assert_uint_eq(sizeof(ncclConfig_t), 72);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ck_assert_uint_eq(cfg.size, sizeof cfg);
  ck_assert_uint_eq(cfg.magic, 0xcafebeefu);
  ck_assert_uint_eq(cfg.version, 22707);
  ck_assert_int_eq(cfg.blocking, INT_MIN);
  ck_assert_ptr_null(cfg.netName);
  ck_assert_int_eq(cfg.nvlsCTAs, INT_MIN);
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
  for (int i = 0; i < 10000 && state == ncclInProgress; i++)
    ck_assert_int_eq(ncclCommGetAsyncError(comm, &state), ncclSuccess);
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
  } older = {sizeof older, NCCL_API_MAGIC, NCCL_VERSION(2, 14, 3), 0};
  init_with_config(&older);
  /* A struct cut before `blocking`: the default (blocking) applies. */
  struct {
    size_t size;
    unsigned magic, version;
  } oldest = {sizeof oldest, NCCL_API_MAGIC, NCCL_VERSION(2, 13, 0)};
  init_with_config(&oldest);
  /* A newer NCCL's longer struct: the fields beyond 2.27's are not read. */
  struct {
    ncclConfig_t known;
    int later[16];
  } newer;
  memset(&newer, 0x5a, sizeof newer);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  newer.known = init;
  newer.known.size = sizeof newer;
  newer.known.version = 23100;
  newer.known.blocking = 1;
  init_with_config(&newer);
  init_with_config(NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nccl abi");
  TCase *tc = tcase_create("abi");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, sizes_and_values_are_nccl_2_27_7s);
  tcase_add_test(tc, config_fields_lie_where_nccl_puts_them);
  tcase_add_test(tc, configs_of_older_and_newer_ncclx_are_read_up_to_their_size);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
