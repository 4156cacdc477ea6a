/* What NCCL 2.28-2.32 added, through libnccl.so.2 from a program written against nccl.h
 * (built against ours and against NVIDIA's 2.32.3 header: tests/nccl/meson.build), ranks
 * as forked processes: ncclGroupSimulateEnd against coll-sim's prediction, a peer's
 * ncclCommRevoke stopping a call that waits for it, grow ids (test_nccl_elastic.c grows,
 * shrinks and kills ranks), suspend and memory statistics, ncclConfig_t of other versions'
 * sizes, the nccl*Config collectives, windows and the refused one-sided calls, the
 * parameter API, encryption, fp8, gather and scatter in place, and the device API's host
 * side. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "multiproc.h"
#include "nccl.h"
#include "nccl_check.h"
#include "suite_run.h"

/* The device API's host functions: NVIDIA declares them in nccl_device.h, which is not
 * part of this library's header; the types crossing the ABI are spelled out here (sizes
 * from NVIDIA's nccl_device/core.h and host.h). */
typedef struct {
  int nRanks, rank, stride;
} test_team_t;
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank, nRanks, cudaDev, nvmlDev;
  _Bool deviceApiSupport, multimemSupport;
  int ginType, nLsaTeams;
  _Bool hostRmaSupport;
  int railedGinType;
  uint64_t commHash;
  int ginMinStride, ginConnectionType;
  _Bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  _Bool cftSupport, cftMulticastSupport, cftCountedSupport;
} test_properties_t;
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, test_properties_t *props);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm);
test_team_t ncclTeamWorld(ncclComm_t comm);
test_team_t ncclTeamLsa(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, test_team_t team, int rank);

/* The id travels from rank 0 to the others through a pipe (one 128-byte write each). */
typedef struct {
  int fds[2];
  int (*fn)(int rank, int nranks, ncclComm_t comm);
} job_t;

static int join(job_t *job, int rank, int nranks, ncclComm_t *comm) {
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    for (int i = 1; i < nranks; i++)
      CHECK(write(job->fds[1], &id, sizeof id) == (ssize_t)sizeof id, "pipe write");
  } else {
    CHECK(read(job->fds[0], &id, sizeof id) == (ssize_t)sizeof id, "pipe read");
  }
  CHECK_NCCL(ncclCommInitRank(comm, nranks, id, rank));
  return 0;
}

static int rank_main(int rank, int nranks, void *arg) {
  job_t *job = arg;
  ncclComm_t comm;
  if (join(job, rank, nranks, &comm)) return 1;
  int bad = job->fn(rank, nranks, comm);
  if (comm != NULL) ncclCommDestroy(comm);
  return bad;
}

static void run_ranks(int n, int (*fn)(int, int, ncclComm_t)) {
  job_t job = {.fn = fn};
  ck_assert_int_eq(pipe(job.fds), 0);
  ck_assert_int_eq(mp_run(n, 90000, rank_main, &job), 0);
  close(job.fds[0]);
  close(job.fds[1]);
}

/* ---- ncclGroupSimulateEnd ---- */

/* coll-sim's predicted_s for ALGO (COLL_SIM names the program: tests/nccl/meson.build). */
static double coll_sim_prediction(const char *algo, const char *collective, int n, size_t bytes) {
  const char *sim = getenv("COLL_SIM");
  if (sim == NULL) return -1;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s -c %s -n %d --bytes %zu --json --no-table", sim, algo,
           collective, n, bytes);
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  static char out[1 << 20];
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  pclose(p);
  const char *at = strstr(out, "\"predicted_s\":");
  return at == NULL ? -1 : strtod(at + strlen("\"predicted_s\":"), NULL);
}

static int near(double a, double b) {
  return a > 0 && b > 0 && (a > b ? a - b : b - a) <= 1e-4 * b;
}

static int rank_simulate(int rank, int nranks, ncclComm_t comm) {
  float buf[4096];
  for (int i = 0; i < 4096; i++) buf[i] = (float)rank;
  /* COLL_ALGO=ring (set by the test): the all-reduce is the ring's, the broadcast the
   * chain's (the ring's broadcast). */
  double ring = coll_sim_prediction("ring", "all_reduce", nranks, sizeof buf);
  double chain = coll_sim_prediction("chain", "broadcast", nranks, 1024 * sizeof(float));
  CHECK(ring > 0 && chain > 0, "coll-sim gave %g and %g (COLL_SIM=%s)", ring, chain,
        getenv("COLL_SIM") ? getenv("COLL_SIM") : "unset");
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, comm, NULL));
  CHECK_NCCL(ncclGroupSimulateEnd(&info));
  CHECK(near(info.estimatedTime, ring), "one all-reduce: %g s, coll-sim %g s",
        (double)info.estimatedTime, ring);
  CHECK(buf[0] == (float)rank, "the simulated group ran: %g", (double)buf[0]);
  info = (ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, comm, NULL));
  CHECK_NCCL(ncclBroadcast(buf, buf, 1024, ncclFloat32, 0, comm, NULL));
  CHECK_NCCL(ncclGroupSimulateEnd(&info));
  CHECK(near(info.estimatedTime, ring + chain), "two calls: %g s, coll-sim %g + %g s",
        (double)info.estimatedTime, ring, chain);
  /* Bad arguments leave the group open; a real end still runs. */
  ncclSimInfo_t bad = info;
  bad.magic = 1;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, comm, NULL));
  CHECK_REFUSED(ncclGroupSimulateEnd(&bad), ncclInvalidArgument, NULL, "NCCL_SIM_INFO_INITIALIZER");
  CHECK_NCCL(ncclGroupEnd());
  CHECK(buf[0] == (float)(nranks * (nranks - 1) / 2), "after the real end: %g", (double)buf[0]);
  CHECK_REFUSED(ncclGroupSimulateEnd(&info), ncclInvalidUsage, NULL, "no ncclGroupStart");
  return 0;
}

START_TEST(simulate_end_gives_the_cost_models_time_and_runs_nothing) {
  setenv("COLL_ALGO", "ring", 1);
  run_ranks(_i, rank_simulate);
  unsetenv("COLL_ALGO");
}
END_TEST

/* ---- ncclCommRevoke (test_nccl_elastic.c has more: shrink, grow, a killed rank) ---- */

static int rank_revoke(int rank, int nranks, ncclComm_t comm) {
  (void)nranks;
  int32_t x = 1;
  if (rank == 0) {
    /* Rank 1 never joins this all-reduce: its revoke reaches this rank and ends it. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(comm), "revoked") != NULL,
          "the pending all-reduce gave %d (%s)", (int)r, ncclGetLastError(comm));
    CHECK(s < 10, "the peer's revoke took %.1f s to stop the call (deadline 60 s)", s);
  } else {
    usleep(300 * 1000);
  }
  CHECK_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm,
                "revoked");
  CHECK_REFUSED(ncclCommFinalize(comm), ncclInvalidUsage, comm, "revoked");
  CHECK_REFUSED(ncclCommRevoke(comm, 1), ncclInvalidArgument, comm, "revokeFlags");
  ncclResult_t async = ncclInProgress;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async state after revoke %d", (int)async);
  int count = 0;
  CHECK_NCCL(ncclCommCount(comm, &count));
  CHECK(count == 2, "count %d", count);
  return 0;
}

START_TEST(a_peers_revoke_stops_a_waiting_call_and_later_ones_are_refused) {
  setenv("COLL_TIMEOUT_MS", "60000", 1);
  run_ranks(2, rank_revoke);
}
END_TEST

/* ---- grow, suspend, memory statistics ---- */

static int rank_grow_suspend(int rank, int nranks, ncclComm_t comm) {
  ncclUniqueId id, again;
  CHECK_NCCL(ncclCommGetUniqueId(comm, &id));
  CHECK_REFUSED(ncclCommGetUniqueId(comm, &again), ncclInvalidUsage, comm, "not been used");
  /* A grow that adds nobody is refused, and ends the attempt (test_nccl_elastic.c grows). */
  ncclComm_t grown = (ncclComm_t)&grown;
  CHECK_REFUSED(ncclCommGrow(comm, nranks, rank == 0 ? &id : NULL, -1, &grown, NULL),
                ncclInvalidArgument, comm, "does not add ranks");
  CHECK(grown == NULL, "newcomm not cleared");
  CHECK_NCCL(ncclCommGetUniqueId(comm, &again));
  /* libcoll's grow id names the communicator's lineage (its store), not one grow. */
  CHECK(memcmp(&id, &again, sizeof id) == 0, "two grow ids of one communicator differ");

  int32_t x = 1;
  CHECK_REFUSED(ncclCommSuspend(comm, 4), ncclInvalidArgument, comm, "NCCL_SUSPEND_MEM");
  CHECK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  CHECK_REFUSED(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm,
                "suspended");
  uint64_t suspended = 9, releasable = 9, persist = 9, total = 9;
  CHECK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
  CHECK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &releasable));
  CHECK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemPersist, &persist));
  CHECK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total));
  /* Host buffers only: libcoll holds no GPU memory for this communicator. */
  CHECK(suspended == 1 && releasable == 0 && persist == 0 && total == 0,
        "stats %llu %llu %llu %llu", (unsigned long long)suspended, (unsigned long long)releasable,
        (unsigned long long)persist, (unsigned long long)total);
  CHECK_REFUSED(ncclCommMemStats(comm, (ncclCommMemStat_t)7, &total), ncclInvalidArgument, comm,
                "stat 7");
  CHECK_NCCL(ncclCommResume(comm));
  CHECK_REFUSED(ncclCommResume(comm), ncclInvalidUsage, comm, "not suspended");
  CHECK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
  CHECK(suspended == 0, "still suspended");
  CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(x == nranks, "sum %d", x);
  return 0;
}

START_TEST(grow_ids_suspend_and_memory_statistics) { run_ranks(2, rank_grow_suspend); }
END_TEST

/* ---- the nccl*Config collectives, fp8, gather and scatter in place ---- */

static int rank_config_calls(int rank, int nranks, ncclComm_t comm) {
  float v[8], out[32];
  for (int i = 0; i < 8; i++) v[i] = (float)(rank + i);
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  CHECK_NCCL(ncclAllReduceConfig(v, out, 8, ncclFloat32, ncclSum, comm, NULL, &cfg));
  float base = (float)(nranks * (nranks - 1) / 2);
  for (int i = 0; i < 8; i++)
    CHECK(out[i] == base + (float)(i * nranks), "[%d] %g", i, (double)out[i]);
  CHECK_NCCL(ncclAllGatherConfig(v, out, 2, ncclFloat32, comm, NULL, &cfg));
  for (int r = 0; r < nranks; r++) CHECK(out[2 * r + 1] == (float)(r + 1), "gather %d", r);
  cfg.algSelection = "ring";
  CHECK_REFUSED(ncclAllReduceConfig(v, out, 8, ncclFloat32, ncclSum, comm, NULL, &cfg),
                ncclInvalidUsage, comm, "algSelection");
  cfg.forceAlgSelection = 0; /* a hint only */
  CHECK_NCCL(ncclBroadcastConfig(v, out, 8, ncclFloat32, 0, comm, NULL, &cfg));
  CHECK(out[7] == 7.0f, "broadcast %g", (double)out[7]);
  cfg.magic = 0;
  CHECK_REFUSED(ncclReduceConfig(v, out, 8, ncclFloat32, ncclMax, 0, comm, NULL, &cfg),
                ncclInvalidArgument, comm, "NCCL_COLLCONFIG_INITIALIZER");

  /* Gather and scatter in place at the root (2.28's rules). */
  int32_t g[4 * 3];
  for (int i = 0; i < 4 * 3; i++) g[i] = -1;
  int root = nranks - 1;
  for (int i = 0; i < 3; i++) g[rank * 3 + i] = rank * 10 + i;
  const int32_t *send = rank == root ? &g[root * 3] : &g[rank * 3];
  CHECK_NCCL(ncclGather(send, g, 3, ncclInt32, root, comm, NULL));
  if (rank == root)
    for (int r = 0; r < nranks; r++)
      CHECK(g[r * 3 + 2] == r * 10 + 2, "gather in place: block %d is %d", r, g[r * 3 + 2]);
  int32_t s[4 * 3], mine[3];
  for (int i = 0; i < nranks * 3; i++) s[i] = 100 + i;
  int32_t *recv = rank == root ? &s[root * 3] : mine;
  CHECK_NCCL(ncclScatter(s, recv, 3, ncclInt32, root, comm, NULL));
  CHECK(recv[1] == 100 + rank * 3 + 1, "scatter in place: %d", recv[1]);

  /* fp8 e4m3 (bytes: 1.0 = 0x38, 1.5 = 0x3c, 448 = 0x7e, the largest finite value):
   * a sum of ones is exact up to 4 ranks; the max of 448s stays 448. */
  uint8_t f8[4] = {0x38, 0x38, 0x7e, 0x3c}, r8[4];
  CHECK_NCCL(ncclAllReduce(f8, r8, 4, ncclFloat8e4m3, ncclSum, comm, NULL));
  const uint8_t sums[5] = {0, 0x38, 0x40, 0x44, 0x48}; /* 1, 2, 3, 4 */
  CHECK(r8[0] == sums[nranks] && r8[2] == 0x7e, "fp8 sum: 0x%02x 0x%02x", r8[0], r8[2]);
  CHECK_NCCL(ncclAllReduce(f8, r8, 4, ncclFloat8e4m3, ncclMax, comm, NULL));
  CHECK(r8[2] == 0x7e && r8[3] == 0x3c, "fp8 max: 0x%02x 0x%02x", r8[2], r8[3]);
  return 0;
}

START_TEST(config_collectives_fp8_and_in_place_gather_scatter) { run_ranks(_i, rank_config_calls); }
END_TEST

/* ---- ncclConfig_t from other NCCL versions ---- */

static int rank_config_sizes(int rank, int nranks, ncclComm_t comm) {
  (void)nranks;
  (void)comm;
  /* A 2.14 program's struct ends after netName: non-blocking still works. */
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.size = offsetof(ncclConfig_t, netName) + sizeof(const char *);
  old.version = NCCL_VERSION(2, 14, 3);
  old.blocking = 0;
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclComm_t c = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&c, 1, id, 0, &old);
  CHECK(r == ncclInProgress || r == ncclSuccess, "2.14-size config: %d (%s)", (int)r,
        ncclGetLastError(NULL));
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; i++) { /* up to 30 s */
    CHECK_NCCL(ncclCommGetAsyncError(c, &state));
    if (state == ncclInProgress) usleep(1000);
  }
  CHECK(state == ncclSuccess, "init %d", (int)state);
  CHECK_NCCL(ncclCommDestroy(c));
  /* A later NCCL's longer struct: the fields past ours are not read. */
  struct {
    ncclConfig_t known;
    int later[16];
  } longer;
  memset(&longer, 0x5a, sizeof longer);
  longer.known = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  longer.known.size = sizeof longer;
  longer.known.version = NCCL_VERSION(2, 40, 0);
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRankConfig(&c, 1, id, 0, &longer.known));
  CHECK_NCCL(ncclCommDestroy(c));
  /* A version before the field existed: blocking = 0 is not the caller's, so ignored. */
  ncclConfig_t early = NCCL_CONFIG_INITIALIZER;
  early.version = NCCL_VERSION(2, 13, 0);
  early.blocking = 0;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRankConfig(&c, 1, id, 0, &early));
  CHECK_NCCL(ncclCommDestroy(c));
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  CHECK_REFUSED(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument, NULL,
                "NCCL_CONFIG_INITIALIZER");
  bad = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  bad.blocking = 7;
  CHECK_REFUSED(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument, NULL,
                "blocking is 7");
  return 0;
}

START_TEST(configs_of_older_and_newer_sizes) {
  /* One rank: the test makes its own communicators. */
  run_ranks(1, rank_config_sizes);
}
END_TEST

/* ---- windows, one-sided calls, the device API, parameters, encryption ---- */

static int rank_local_calls(int rank, int nranks, ncclComm_t comm) {
  char buf[64];
  ncclWindow_t win = NULL;
  CHECK_NCCL(ncclCommWindowRegister(comm, buf, sizeof buf, &win, NCCL_WIN_DEFAULT));
  void *user = NULL;
  CHECK_NCCL(ncclWinGetUserPtr(comm, win, &user));
  CHECK(user == buf, "user pointer %p, registered %p", user, (void *)buf);
  CHECK_REFUSED(ncclWinGetUserPtr(comm, (ncclWindow_t)buf, &user), ncclInvalidArgument, comm,
                "not registered");
  CHECK_REFUSED(ncclPutSignal(buf, 4, ncclInt8, 0, win, 0, 0, 0, 0, comm, NULL), ncclInvalidUsage,
                comm, "one-sided");
  CHECK_REFUSED(ncclSignal(0, 0, 0, 0, comm, NULL), ncclInvalidUsage, comm, "one-sided");
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  CHECK_REFUSED(ncclWaitSignal(1, &desc, comm, NULL), ncclInvalidUsage, comm, "one-sided");
  CHECK_NCCL(ncclCommWindowDeregister(comm, win));

  test_properties_t props;
  memset(&props, 0x7f, sizeof props);
  props.size = sizeof props;
  props.magic = NCCL_API_MAGIC;
  props.version = NCCL_VERSION_CODE;
  CHECK_NCCL(ncclCommQueryProperties(comm, &props));
  CHECK(props.rank == rank && props.nRanks == nranks && !props.deviceApiSupport &&
            !props.multimemSupport && !props.hostRmaSupport && !props.ginSupport[1],
        "properties: rank %d of %d, device API %d", props.rank, props.nRanks,
        (int)props.deviceApiSupport);
  /* Every rank's hash is the same: a 2-rank all-gather of it. */
  uint64_t hashes[4];
  CHECK_NCCL(ncclAllGather(&props.commHash, hashes, 1, ncclUint64, comm, NULL));
  for (int r = 0; r < nranks; r++) CHECK(hashes[r] == hashes[0], "hash of rank %d differs", r);
  char devcomm[256];
  CHECK_REFUSED(ncclDevCommCreate(comm, NULL, devcomm), ncclInvalidUsage, comm, "device API");
  test_team_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm);
  CHECK(world.nRanks == nranks && world.rank == rank && world.stride == 1, "world team");
  CHECK(lsa.nRanks == 1 && lsa.rank == 0, "LSA team");
  CHECK(ncclTeamRankToWorld(comm, world, 0) == 0, "rank 0 of the world team");

  ncclParamHandle_t h;
  setenv("COLL_TIMEOUT_MS", "123456", 1);
  CHECK_NCCL(ncclParamBind(&h, "COLL_TIMEOUT_MS"));
  int32_t i32 = 0;
  CHECK_NCCL(ncclParamGetI32(h, &i32));
  CHECK(i32 == 123456, "COLL_TIMEOUT_MS read %d", i32);
  int8_t i8;
  CHECK_REFUSED(ncclParamGetI8(h, &i8), ncclInvalidArgument, NULL, "fits");
  unsetenv("COLL_TIMEOUT_MS");
  uint64_t u64 = 0;
  CHECK_NCCL(ncclParamGetU64(h, &u64));
  CHECK(u64 == 300000, "default %llu", (unsigned long long)u64);
  const char *str = NULL;
  int len = 0;
  CHECK_NCCL(ncclParamGetParameter("COLL_ALGO", &str, &len));
  CHECK(strcmp(str, "auto") == 0 && len == 4, "COLL_ALGO \"%s\"", str);
  CHECK_REFUSED(ncclParamBind(&h, "NCCL_DEBUG"), ncclInvalidArgument, NULL, "not a parameter");
  const char **keys = NULL;
  int nkeys = 0;
  CHECK_NCCL(ncclParamGetAllParameterKeys(&keys, &nkeys));
  int found = 0;
  for (int i = 0; i < nkeys; i++) found += strcmp(keys[i], "COLL_TRANSPORT") == 0;
  CHECK(found == 1, "COLL_TRANSPORT listed %d times among %d keys", found, nkeys);

  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  CHECK_NCCL(ncclSetEncryption(&enc));
  enc.mode = NCCL_ENCRYPTION_MODE_PSK;
  enc.psk = "secret";
  CHECK_REFUSED(ncclSetEncryption(&enc), ncclInvalidUsage, NULL, "not encrypted");
  ncclResetDebugInit();
  return 0;
}

START_TEST(windows_refused_rma_device_api_parameters_encryption) { run_ranks(2, rank_local_calls); }
END_TEST

SUITE_MAIN("nccl 2.28-2.32",
           suite_loop_tests("processes", 120, 2, 4,
                            simulate_end_gives_the_cost_models_time_and_runs_nothing),
           suite_tests("processes", 120,
                       a_peers_revoke_stops_a_waiting_call_and_later_ones_are_refused,
                       grow_ids_suspend_and_memory_statistics),
           suite_loop_tests("processes", 120, 1, 5,
                            config_collectives_fp8_and_in_place_gather_scatter),
           suite_tests("processes", 120, configs_of_older_and_newer_sizes,
                       windows_refused_rma_device_api_parameters_encryption))
