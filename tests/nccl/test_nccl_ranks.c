/* libnccl.so.2 from a program written only against nccl.h: ranks as forked processes, the
 * unique id handed from rank 0 to the others through a pipe, every collective and
 * point-to-point call on host buffers checked against a reference computed here, split,
 * the non-blocking init, premul-sum operators (host-immediate and device-residence
 * scalars), error codes with their messages, and a killed peer (ncclRemoteError or
 * ncclTimeout, not a hang). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "multiproc.h"
#include "nccl.h"
#include "nccl_check.h"
#include "suite_run.h"

/* Built against our nccl.h and NVIDIA's (tests/nccl/meson.build). NVIDIA's 2.28.9 header
 * has no ncclTimeout; the library returns 8 for a passed deadline whichever header a
 * program was built with. */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
#define ncclTimeout ((ncclResult_t)8)
#endif

enum { MAX_RANKS = 4 };

/* Rank 0 writes the id once for every other rank (128 bytes: one atomic pipe write). */
typedef struct {
  int fds[2];
} id_pipe_t;

static int share_id(id_pipe_t *p, int rank, int nranks, ncclUniqueId *id) {
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(id));
    for (int i = 1; i < nranks; i++)
      CHECK(write(p->fds[1], id, sizeof *id) == (ssize_t)sizeof *id, "pipe write");
  } else {
    CHECK(read(p->fds[0], id, sizeof *id) == (ssize_t)sizeof *id, "pipe read");
  }
  return 0;
}

static int join(id_pipe_t *p, int rank, int nranks, ncclComm_t *comm) {
  ncclUniqueId id;
  if (share_id(p, rank, nranks, &id)) return 1;
  CHECK_NCCL(ncclCommInitRank(comm, nranks, id, rank));
  return 0;
}

/* Rank r's element i: small integers, exact in every type (float16 and bfloat16 too). */
static double input(int r, size_t i) { return (double)((r + 1) * 3 + (int)(i % 5)); }

static int all_reduce_every_type(ncclComm_t comm, int rank, int n) {
  const ncclDataType_t types[] = {ncclInt8,   ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                  ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  const size_t count = 37;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    /* Sum of at most 4 ranks of values <= 16: < 100, exact everywhere. */
    float f32[37];
    double f64[37];
    int32_t i32[37];
    for (size_t i = 0; i < count; i++) {
      f32[i] = (float)input(rank, i);
      f64[i] = input(rank, i);
      i32[i] = (int32_t)input(rank, i);
    }
    union {
      int8_t i8[37];
      uint8_t u8[37];
      int32_t i32[37];
      uint32_t u32[37];
      int64_t i64[37];
      uint64_t u64[37];
      uint16_t h[37];
      float f[37];
      double d[37];
    } buf;
    memset(&buf, 0, sizeof buf);
    for (size_t i = 0; i < count; i++) {
      switch (types[t]) {
        case ncclInt8:
          buf.i8[i] = (int8_t)i32[i];
          break;
        case ncclUint8:
          buf.u8[i] = (uint8_t)i32[i];
          break;
        case ncclInt32:
          buf.i32[i] = i32[i];
          break;
        case ncclUint32:
          buf.u32[i] = (uint32_t)i32[i];
          break;
        case ncclInt64:
          buf.i64[i] = i32[i];
          break;
        case ncclUint64:
          buf.u64[i] = (uint64_t)i32[i];
          break;
        case ncclFloat32:
          buf.f[i] = f32[i];
          break;
        case ncclFloat64:
          buf.d[i] = f64[i];
          break;
        case ncclFloat16: {
          /* Small integers: exponent and mantissa by hand (value in 1..2047). */
          int v = i32[i], e = 0;
          while ((v >> e) > 1) e++;
          buf.h[i] = (uint16_t)(((e + 15) << 10) | (((v << 10) >> e) & 0x3ff));
          break;
        }
        case ncclBfloat16: {
          float x = f32[i];
          uint32_t bits;
          memcpy(&bits, &x, 4);
          buf.h[i] = (uint16_t)(bits >> 16);
          break;
        }
        default:
          break;
      }
    }
    CHECK_NCCL(ncclAllReduce(&buf, &buf, count, types[t], ncclSum, comm, NULL));
    for (size_t i = 0; i < count; i++) {
      double want = 0, got = 0;
      for (int r = 0; r < n; r++) want += input(r, i);
      switch (types[t]) {
        case ncclInt8:
          got = buf.i8[i];
          break;
        case ncclUint8:
          got = buf.u8[i];
          break;
        case ncclInt32:
          got = buf.i32[i];
          break;
        case ncclUint32:
          got = buf.u32[i];
          break;
        case ncclInt64:
          got = (double)buf.i64[i];
          break;
        case ncclUint64:
          got = (double)buf.u64[i];
          break;
        case ncclFloat32:
          got = buf.f[i];
          break;
        case ncclFloat64:
          got = buf.d[i];
          break;
        case ncclFloat16: {
          int e = (buf.h[i] >> 10) - 15;
          got = ldexp(1.0 + (buf.h[i] & 0x3ff) / 1024.0, e);
          break;
        }
        case ncclBfloat16: {
          uint32_t bits = (uint32_t)buf.h[i] << 16;
          float x;
          memcpy(&x, &bits, 4);
          got = x;
          break;
        }
        default:
          break;
      }
      CHECK(got == want, "type %d element %zu: %g, want %g", (int)types[t], i, got, want);
    }
  }
  return 0;
}

static int ops_on_float_and_int(ncclComm_t comm, int rank, int n) {
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (size_t o = 0; o < 5; o++) {
    float f[8], fout[8];
    int32_t v[8], vout[8];
    for (int i = 0; i < 8; i++) {
      f[i] = (float)(rank + 1 + i);
      v[i] = rank + 1 + i;
    }
    CHECK_NCCL(ncclAllReduce(f, fout, 8, ncclFloat32, ops[o], comm, NULL));
    CHECK_NCCL(ncclAllReduce(v, vout, 8, ncclInt32, ops[o], comm, NULL));
    for (int i = 0; i < 8; i++) {
      double want = ops[o] == ncclProd ? 1 : ops[o] == ncclMin ? 1e9 : ops[o] == ncclMax ? -1e9 : 0;
      for (int r = 0; r < n; r++) {
        double x = r + 1 + i;
        if (ops[o] == ncclSum || ops[o] == ncclAvg) want += x;
        if (ops[o] == ncclProd) want *= x;
        if (ops[o] == ncclMax) want = x > want ? x : want;
        if (ops[o] == ncclMin) want = x < want ? x : want;
      }
      double want_int = ops[o] == ncclAvg ? (double)((long)want / n) : want;
      if (ops[o] == ncclAvg) want /= n;
      CHECK(fabs(fout[i] - want) <= 1e-5 * fabs(want), "op %d float %d: %g, want %g", (int)ops[o],
            i, fout[i], want);
      CHECK(vout[i] == want_int, "op %d int %d: %d, want %g", (int)ops[o], i, vout[i], want_int);
    }
  }
  return 0;
}

static int rooted_and_gathering(ncclComm_t comm, int rank, int n) {
  enum { C = 5 };
  int32_t send[MAX_RANKS * C], recv[MAX_RANKS * C], want;
  for (int root = 0; root < n; root++) {
    /* Broadcast with separate buffers, then in place (ncclBcast). */
    for (int i = 0; i < C; i++) send[i] = rank * 100 + i;
    memset(recv, 0xff, sizeof recv);
    CHECK_NCCL(ncclBroadcast(send, recv, C, ncclInt32, root, comm, NULL));
    for (int i = 0; i < C; i++) CHECK(recv[i] == root * 100 + i, "broadcast root %d [%d]", root, i);
    CHECK_NCCL(ncclBcast(send, C, ncclInt32, root, comm, NULL));
    for (int i = 0; i < C; i++) CHECK(send[i] == root * 100 + i, "bcast root %d [%d]", root, i);
    /* Reduce. */
    for (int i = 0; i < C; i++) send[i] = rank + i;
    memset(recv, 0, sizeof recv);
    CHECK_NCCL(ncclReduce(send, recv, C, ncclInt32, ncclSum, root, comm, NULL));
    if (rank == root)
      for (int i = 0; i < C; i++) {
        want = n * (n - 1) / 2 + n * i;
        CHECK(recv[i] == want, "reduce root %d [%d]: %d, want %d", root, i, recv[i], want);
      }
    /* Gather and scatter. */
    for (int i = 0; i < C; i++) send[i] = rank * 10 + i;
    memset(recv, 0, sizeof recv);
    CHECK_NCCL(ncclGather(send, recv, C, ncclInt32, root, comm, NULL));
    if (rank == root)
      for (int r = 0; r < n; r++)
        for (int i = 0; i < C; i++)
          CHECK(recv[r * C + i] == r * 10 + i, "gather root %d from %d [%d]", root, r, i);
    for (int j = 0; j < n * C; j++) send[j] = rank * 1000 + j;
    memset(recv, 0, sizeof recv);
    CHECK_NCCL(ncclScatter(send, recv, C, ncclInt32, root, comm, NULL));
    for (int i = 0; i < C; i++)
      CHECK(recv[i] == root * 1000 + rank * C + i, "scatter root %d [%d]: %d", root, i, recv[i]);
  }
  /* All-gather, reduce-scatter, all-to-all. */
  for (int i = 0; i < C; i++) send[i] = rank * 10 + i;
  CHECK_NCCL(ncclAllGather(send, recv, C, ncclInt32, comm, NULL));
  for (int r = 0; r < n; r++)
    for (int i = 0; i < C; i++) CHECK(recv[r * C + i] == r * 10 + i, "all_gather %d [%d]", r, i);
  for (int j = 0; j < n * C; j++) send[j] = rank + j;
  CHECK_NCCL(ncclReduceScatter(send, recv, C, ncclInt32, ncclSum, comm, NULL));
  for (int i = 0; i < C; i++) {
    want = n * (n - 1) / 2 + n * (rank * C + i);
    CHECK(recv[i] == want, "reduce_scatter [%d]: %d, want %d", i, recv[i], want);
  }
  for (int j = 0; j < n * C; j++) send[j] = rank * 100 + j;
  CHECK_NCCL(ncclAlltoAll(send, recv, C, ncclInt32, comm, NULL));
  for (int r = 0; r < n; r++)
    for (int i = 0; i < C; i++)
      CHECK(recv[r * C + i] == r * 100 + rank * C + i, "alltoall from %d [%d]", r, i);
  return 0;
}

static int send_recv_ring(ncclComm_t comm, int rank, int n) {
  if (n < 2) return 0;
  float out[64], in[64];
  for (int i = 0; i < 64; i++) out[i] = (float)(rank * 64 + i);
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  /* Both directions in one group: cannot deadlock. */
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(out, 64, ncclFloat32, next, comm, NULL));
  CHECK_NCCL(ncclRecv(in, 64, ncclFloat32, prev, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < 64; i++) CHECK(in[i] == (float)(prev * 64 + i), "recv [%d]: %g", i, in[i]);
  return 0;
}

static int premul_sum(ncclComm_t comm, int rank, int n) {
  double scalar = 0.5 * (rank + 1);
  ncclRedOp_t op;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm));
  CHECK(op >= ncclNumOps, "premul op %d below ncclNumOps", (int)op);
  double x[3] = {2, 4, 6}, want = 0;
  for (int r = 0; r < n; r++) want += 0.5 * (r + 1);
  CHECK_NCCL(ncclAllReduce(x, x, 3, ncclFloat64, op, comm, NULL));
  for (int i = 0; i < 3; i++) CHECK(x[i] == want * 2 * (i + 1), "premul [%d]: %g", i, x[i]);
  /* The op belongs to its type. */
  float f = 1;
  CHECK(ncclAllReduce(&f, &f, 1, ncclFloat32, op, comm, NULL) == ncclInvalidArgument,
        "premul op of float64 used on float32 accepted");
  CHECK_NCCL(ncclRedOpDestroy(op, comm));
  CHECK(ncclRedOpDestroy(op, comm) == ncclInvalidArgument, "second destroy accepted");
  return 0;
}

/* A ncclScalarDevice op reads its scalar at each call that uses it (here the scalar is in
 * host memory, this library's extension: read when the call is issued, for a grouped call
 * at ncclGroupEnd); a ncclScalarHostImmediate op made from the same variable keeps the
 * value it had at creation. Rank r's element i is r + i, its scalar (r + 1) at creation
 * and (r + 1) * (k + 2) before round k: every sum is exact. */
static int premul_scalar_residence(ncclComm_t comm, int rank, int n) {
  enum { C = 5 };
  double scalar = rank + 1, x[C * MAX_RANKS], y[C * MAX_RANKS];
  int32_t iscalar = rank + 1, ix[C], iy[C];
  ncclRedOp_t dev, imm, idev;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&dev, &scalar, ncclFloat64, ncclScalarDevice, comm));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&imm, &scalar, ncclFloat64, ncclScalarHostImmediate, comm));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&idev, &iscalar, ncclInt32, ncclScalarDevice, comm));
  CHECK(dev != imm && dev >= ncclNumOps && idev >= ncclNumOps, "ops %d %d %d", (int)dev, (int)imm,
        (int)idev);
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < C * n; i++) x[i] = y[i] = rank + i;
    for (int i = 0; i < C; i++) ix[i] = rank + i;
    if (k < 2) {
      scalar = (rank + 1) * (k + 2);
      iscalar = (rank + 1) * (k + 2);
      CHECK_NCCL(ncclAllReduce(x, x, C, ncclFloat64, dev, comm, NULL));
      CHECK_NCCL(ncclAllReduce(ix, iy, C, ncclInt32, idev, comm, NULL));
    } else {
      /* Recorded in a group with the round-1 value, changed before ncclGroupEnd: the
       * call is issued at the end and reads the new value. */
      CHECK_NCCL(ncclGroupStart());
      CHECK_NCCL(ncclAllReduce(x, x, C, ncclFloat64, dev, comm, NULL));
      CHECK_NCCL(ncclAllReduce(ix, iy, C, ncclInt32, idev, comm, NULL));
      scalar = (rank + 1) * (k + 2);
      iscalar = (rank + 1) * (k + 2);
      CHECK_NCCL(ncclGroupEnd());
    }
    CHECK_NCCL(ncclAllReduce(y, y, C, ncclFloat64, imm, comm, NULL));
    for (int i = 0; i < C; i++) {
      double want = 0, want_imm = 0;
      for (int r = 0; r < n; r++) {
        want += (double)(r + 1) * (k + 2) * (r + i);
        want_imm += (double)(r + 1) * (r + i);
      }
      CHECK(x[i] == want, "round %d: device-residence [%d] is %g, want %g", k, i, x[i], want);
      CHECK(iy[i] == (int32_t)want, "round %d: int32 [%d] is %d, want %g", k, i, (int)iy[i], want);
      CHECK(y[i] == want_imm, "round %d: host-immediate [%d] is %g, want %g", k, i, y[i], want_imm);
    }
  }
  /* reduce_scatter and reduce read it too. */
  scalar = 2 * (rank + 1);
  for (int i = 0; i < C * n; i++) x[i] = rank + i;
  CHECK_NCCL(ncclReduceScatter(x, y, C, ncclFloat64, dev, comm, NULL));
  for (int i = 0; i < C; i++) {
    double want = 0;
    for (int r = 0; r < n; r++) want += 2.0 * (r + 1) * (r + rank * C + i);
    CHECK(y[i] == want, "reduce_scatter [%d] is %g, want %g", i, y[i], want);
  }
  scalar = -(rank + 1);
  CHECK_NCCL(ncclReduce(x, y, C, ncclFloat64, dev, n - 1, comm, NULL));
  for (int i = 0; i < C && rank == n - 1; i++) {
    double want = 0;
    for (int r = 0; r < n; r++) want -= (double)(r + 1) * (r + i);
    CHECK(y[i] == want, "reduce [%d] is %g, want %g", i, y[i], want);
  }
  /* Errors: the op's type at the call, a failing call (its message kept), NULL scalar,
   * an unknown residence, a destroyed op. */
  float f = 1;
  CHECK(ncclAllReduce(&f, &f, 1, ncclFloat32, dev, comm, NULL) == ncclInvalidArgument,
        "device-residence op of float64 used on float32 accepted");
  CHECK(strstr(ncclGetLastError(comm), "datatype") != NULL, "message: %s", ncclGetLastError(comm));
  CHECK(ncclReduce(x, y, C, ncclFloat64, dev, 99, comm, NULL) == ncclInvalidArgument,
        "root 99 accepted");
  CHECK(strstr(ncclGetLastError(comm), "99") != NULL, "message: %s", ncclGetLastError(comm));
  ncclRedOp_t bad = ncclSum;
  CHECK(ncclRedOpCreatePreMulSum(&bad, NULL, ncclFloat64, ncclScalarDevice, comm) ==
            ncclInvalidArgument,
        "NULL device scalar accepted");
  CHECK(strstr(ncclGetLastError(comm), "scalar is NULL") != NULL, "message: %s",
        ncclGetLastError(comm));
  CHECK(ncclRedOpCreatePreMulSum(&bad, &scalar, ncclFloat64, (ncclScalarResidence_t)7, comm) ==
            ncclInvalidArgument,
        "residence 7 accepted");
  CHECK(strstr(ncclGetLastError(comm), "residence 7") != NULL, "message: %s",
        ncclGetLastError(comm));
  CHECK(bad == ncclSum, "a refused create wrote op %d", (int)bad);
  CHECK_NCCL(ncclRedOpDestroy(dev, comm));
  CHECK_NCCL(ncclRedOpDestroy(idev, comm));
  CHECK_NCCL(ncclRedOpDestroy(imm, comm));
  CHECK(ncclAllReduce(x, x, C, ncclFloat64, dev, comm, NULL) == ncclInvalidArgument,
        "destroyed device-residence op accepted");
  CHECK(ncclRedOpDestroy(dev, comm) == ncclInvalidArgument, "second destroy accepted");
  /* The communicator still works, with the same handles made again. */
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&dev, &scalar, ncclFloat64, ncclScalarDevice, comm));
  scalar = 1;
  x[0] = rank;
  CHECK_NCCL(ncclAllReduce(x, x, 1, ncclFloat64, dev, comm, NULL));
  CHECK(x[0] == n * (n - 1) / 2.0, "after errors: %g", x[0]);
  CHECK_NCCL(ncclRedOpDestroy(dev, comm));
  return 0;
}

static int errors_have_codes_and_messages(ncclComm_t comm, int rank) {
  float f = 0;
  /* fp8 reduces since 2.32.3's ABI (test_nccl_232 checks its values). */
  CHECK_NCCL(ncclAllReduce(&f, &f, 1, ncclFloat8e4m3, ncclSum, comm, NULL));
  CHECK(ncclAllReduce(&f, &f, 1, (ncclDataType_t)77, ncclSum, comm, NULL) == ncclInvalidArgument,
        "type 77 accepted");
  CHECK(ncclAllReduce(&f, &f, 1, ncclFloat32, (ncclRedOp_t)40, comm, NULL) == ncclInvalidArgument,
        "op 40 accepted");
  CHECK(ncclAllReduce(&f, &f, 1, ncclFloat32, ncclSum, NULL, NULL) == ncclInvalidArgument,
        "NULL comm accepted");
  CHECK(strstr(ncclGetLastError(NULL), "comm is NULL") != NULL, "message: %s",
        ncclGetLastError(NULL));
  CHECK(ncclBroadcast(&f, &f, 1, ncclFloat32, 99, comm, NULL) == ncclInvalidArgument,
        "root 99 accepted");
  CHECK(strstr(ncclGetLastError(comm), "99") != NULL, "message: %s", ncclGetLastError(comm));
  CHECK(ncclGroupEnd() == ncclInvalidUsage, "GroupEnd without GroupStart accepted");
  ncclComm_t c;
  ncclUniqueId zero;
  memset(&zero, 0, sizeof zero);
  CHECK(ncclCommInitRank(&c, 2, zero, 5) == ncclInvalidArgument, "rank 5 of 2 accepted");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  CHECK(ncclCommInitRankConfig(&c, 1, zero, 0, &cfg) == ncclInvalidArgument, "bad magic");
  CHECK(strstr(ncclGetLastError(NULL), "magic") != NULL, "message: %s", ncclGetLastError(NULL));
  CHECK(strcmp(ncclGetErrorString(ncclRemoteError), ncclGetErrorString(ncclTimeout)) != 0,
        "two codes, one string");
  int v = 0;
  CHECK_NCCL(ncclGetVersion(&v));
  CHECK(v == LIBNCCL_VERSION_CODE, "version %d, our library is %d", v, LIBNCCL_VERSION_CODE);
  return 0;
}

static int split_even_odd(ncclComm_t comm, int rank, int n) {
  ncclComm_t half = NULL, none = NULL;
  CHECK_NCCL(ncclCommSplit(comm, rank % 2, -rank, &half, NULL));
  int count = 0, me = -1;
  CHECK_NCCL(ncclCommCount(half, &count));
  CHECK_NCCL(ncclCommUserRank(half, &me));
  int want_count = (n + (rank % 2 == 0)) / 2;
  CHECK(count == want_count, "split size %d, want %d", count, want_count);
  /* key -rank: the highest rank of the colour comes first. */
  int mates_above = 0;
  for (int r = rank + 1; r < n; r++) mates_above += r % 2 == rank % 2;
  CHECK(me == mates_above, "split rank %d, want %d", me, mates_above);
  int32_t x = rank;
  CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, half, NULL));
  int32_t want = 0;
  for (int r = rank % 2; r < n; r += 2) want += r;
  CHECK(x == want, "split sum %d, want %d", x, want);
  CHECK_NCCL(ncclCommSplit(comm, rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, &none, NULL));
  CHECK((none != NULL) == (rank == 0), "NOCOLOR gave a communicator");
  CHECK_NCCL(ncclCommDestroy(none));
  CHECK_NCCL(ncclCommDestroy(half));
  return 0;
}

static int rank_everything(int rank, int nranks, void *arg) {
  ncclComm_t comm;
  if (join(arg, rank, nranks, &comm)) return 1;
  int count = 0, me = -1, device = -1;
  CHECK_NCCL(ncclCommCount(comm, &count));
  CHECK_NCCL(ncclCommUserRank(comm, &me));
  CHECK_NCCL(ncclCommCuDevice(comm, &device));
  CHECK(count == nranks && me == rank && device >= 0, "count %d rank %d device %d", count, me,
        device);
  if (all_reduce_every_type(comm, rank, nranks) || ops_on_float_and_int(comm, rank, nranks) ||
      rooted_and_gathering(comm, rank, nranks) || send_recv_ring(comm, rank, nranks) ||
      premul_sum(comm, rank, nranks) || premul_scalar_residence(comm, rank, nranks) ||
      errors_have_codes_and_messages(comm, rank) || split_even_odd(comm, rank, nranks))
    return 1;
  ncclResult_t async = ncclInternalError;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d", (int)async);
  CHECK_NCCL(ncclCommFinalize(comm));
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

/* A rank ends as a program does, with exit(): libnccl's atexit handler then waits for
 * the destroys it runs in the background (mp_run's children would otherwise _exit). */
typedef struct {
  mp_rank_fn fn;
  id_pipe_t pipe;
} exiting_rank_t;

static int exiting(int rank, int nranks, void *arg) {
  exiting_rank_t *e = arg;
  exit(e->fn(rank, nranks, &e->pipe));
}

static void run_ranks(int n, mp_rank_fn fn) {
  exiting_rank_t e = {.fn = fn};
  ck_assert_int_eq(pipe(e.pipe.fds), 0);
  ck_assert_int_eq(mp_run(n, 90000, exiting, &e), 0);
  close(e.pipe.fds[0]);
  close(e.pipe.fds[1]);
}

START_TEST(every_call_matches_the_reference_at_1_to_4_ranks) { run_ranks(_i, rank_everything); }
END_TEST

/* config.blocking = 0: ncclInProgress at once, then ncclCommGetAsyncError until done. */
static int rank_nonblocking(int rank, int nranks, void *arg) {
  ncclUniqueId id;
  if (share_id(arg, rank, nranks, &id)) return 1;
  if (rank == 1) usleep(300 * 1000); /* the others' inits must wait for this one */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  CHECK(r == ncclInProgress || r == ncclSuccess, "init returned %d", (int)r);
  CHECK(comm != NULL, "no communicator handle");
  ncclResult_t state = ncclInProgress;
  int polls = 0;
  for (; state == ncclInProgress && polls < 20000; polls++) {
    CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) usleep(1000);
  }
  CHECK(state == ncclSuccess, "init ended with %d after %d polls", (int)state, polls);
  int32_t x = 1;
  CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(x == nranks, "sum %d", x);
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

START_TEST(nonblocking_init_reports_in_progress_then_success) { run_ranks(3, rank_nonblocking); }
END_TEST

/* Rank 1 dies after the init: rank 0's next all-reduce fails with the peer named. */
static int rank_killed_peer(int rank, int nranks, void *arg) {
  setenv("COLL_TIMEOUT_MS", "4000", 1);
  ncclComm_t comm;
  if (join(arg, rank, nranks, &comm)) return 1;
  int32_t x = 1;
  CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  if (rank == 1) _exit(0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  CHECK(r == ncclRemoteError || r == ncclTimeout, "all_reduce with a dead peer returned %d (%s)",
        (int)r, ncclGetLastError(comm));
  CHECK(s < 10, "failure took %.1f s", s);
  CHECK(
      strstr(ncclGetLastError(comm), "rank 1") != NULL || strstr(ncclGetLastError(comm), "peer 1"),
      "message does not name the peer: %s", ncclGetLastError(comm));
  ncclResult_t async = ncclSuccess;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == r, "async error %d, call %d", (int)async, (int)r);
  CHECK_NCCL(ncclCommAbort(comm));
  return 0;
}

START_TEST(a_killed_peer_is_a_remote_error_or_timeout_not_a_hang) {
  run_ranks(2, rank_killed_peer);
}
END_TEST

SUITE_MAIN("nccl ranks",
           suite_loop_tests("processes", 120, 1, MAX_RANKS + 1,
                            every_call_matches_the_reference_at_1_to_4_ranks),
           suite_tests("processes", 120, nonblocking_init_reports_in_progress_then_success,
                       a_killed_peer_is_a_remote_error_or_timeout_not_a_hang))
