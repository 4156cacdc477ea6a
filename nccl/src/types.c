/* NCCL's data types and reduction operators as libcoll's, and the premul-sum operators
 * (ncclRedOpCreatePreMulSum / ncclRedOpDestroy) kept per communicator: a host-immediate
 * scalar is copied at creation, a device-residence one is read at each call using it. */
#include <string.h>

#include "nccl_internal.h"

ncclResult_t nccl_dtype(ncclComm_t comm, ncclDataType_t in, coll_dtype_t *out, const char *what) {
  switch (in) {
    case ncclInt8:
      *out = COLL_INT8;
      return ncclSuccess;
    case ncclUint8:
      *out = COLL_UINT8;
      return ncclSuccess;
    case ncclInt32:
      *out = COLL_INT32;
      return ncclSuccess;
    case ncclUint32:
      *out = COLL_UINT32;
      return ncclSuccess;
    case ncclInt64:
      *out = COLL_INT64;
      return ncclSuccess;
    case ncclUint64:
      *out = COLL_UINT64;
      return ncclSuccess;
    case ncclFloat16:
      *out = COLL_FLOAT16;
      return ncclSuccess;
    case ncclFloat32:
      *out = COLL_FLOAT32;
      return ncclSuccess;
    case ncclFloat64:
      *out = COLL_FLOAT64;
      return ncclSuccess;
    case ncclBfloat16:
      *out = COLL_BFLOAT16;
      return ncclSuccess;
    case ncclFloat8e4m3:
      *out = COLL_FLOAT8E4M3;
      return ncclSuccess;
    case ncclFloat8e5m2:
      *out = COLL_FLOAT8E5M2;
      return ncclSuccess;
    case ncclNumTypes:
      break;
  }
  return nccl_fail(comm, ncclInvalidArgument, "rank %d: %s: unknown datatype %d",
                   comm ? comm->rank : -1, what, (int)in);
}

ncclResult_t nccl_op(ncclComm_t comm, ncclRedOp_t in, ncclDataType_t dtype, coll_op_t *out,
                     const void **scalar_at_call, const char *what) {
  *scalar_at_call = NULL;
  switch ((int)in) {
    case ncclSum:
      *out = COLL_SUM;
      return ncclSuccess;
    case ncclProd:
      *out = COLL_PROD;
      return ncclSuccess;
    case ncclMax:
      *out = COLL_MAX;
      return ncclSuccess;
    case ncclMin:
      *out = COLL_MIN;
      return ncclSuccess;
    case ncclAvg:
      *out = COLL_AVG;
      return ncclSuccess;
    default:
      break;
  }
  int index = (int)in - ncclNumOps;
  if (index < 0 || index >= NCCL_MAX_PREMUL_OPS || !comm->premul[index].used)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: op %d is neither a built-in operator nor one "
                     "ncclRedOpCreatePreMulSum made on this communicator",
                     comm->rank, what, (int)in);
  nccl_premul_t *p = &comm->premul[index];
  if (p->dtype != dtype)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: op %d was made for datatype %d, the call passes %d", comm->rank,
                     what, (int)in, (int)p->dtype, (int)dtype);
  if (p->residence == ncclScalarDevice)
    *scalar_at_call = p->scalar;
  else
    *out = p->coll_op;
  return ncclSuccess;
}

ncclResult_t nccl_premul_at_call(const nccl_call_t *call, coll_op_t *op) {
  const char *what = "premul-sum op (ncclScalarDevice)";
  /* Aligned for every type; libcoll copies one element of the call's dtype from it. */
  _Alignas(8) unsigned char value[8] = {0};
  size_t bytes = coll_dtype_size(call->dtype);
  ncclResult_t r =
      nccl_read_scalar(call->comm, value, call->premul_scalar, bytes, call->stream, what);
  if (r != ncclSuccess) return r;
  coll_status_t st = coll_op_create_premul_sum(call->comm->coll, value, call->dtype, op);
  return st == COLL_OK ? ncclSuccess : nccl_fail_coll(call->comm, st);
}

NCCL_EXPORT(ncclResult_t, ncclRedOpCreatePreMulSum,
            (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype,
             ncclScalarResidence_t residence, ncclComm_t comm)) {
  const char *what = "ncclRedOpCreatePreMulSum";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  if (op == NULL || scalar == NULL)
    return nccl_fail(comm, ncclInvalidArgument, "rank %d: %s: %s is NULL", comm->rank, what,
                     op == NULL ? "op" : "scalar");
  coll_dtype_t dtype;
  if ((r = nccl_dtype(comm, datatype, &dtype, what)) != ncclSuccess) return r;
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: unknown scalar residence %d (ncclScalarDevice %d or "
                     "ncclScalarHostImmediate %d)",
                     comm->rank, what, (int)residence, (int)ncclScalarDevice,
                     (int)ncclScalarHostImmediate);
  int index = 0;
  while (index < NCCL_MAX_PREMUL_OPS && comm->premul[index].used) index++;
  if (index == NCCL_MAX_PREMUL_OPS)
    return nccl_fail(comm, ncclInvalidUsage, "rank %d: %s: all %d operators are in use", comm->rank,
                     what, NCCL_MAX_PREMUL_OPS);
  nccl_premul_t p = {.used = true, .residence = residence, .dtype = datatype};
  if (residence == ncclScalarDevice) {
    /* NCCL reads the value when each call using the op runs: keep the pointer (valid
     * until ncclRedOpDestroy, as NCCL requires). Host memory is accepted too (this
     * library's host-buffer extension): read when the call is issued. */
    p.scalar = scalar;
  } else {
    coll_status_t st = coll_op_create_premul_sum(comm->coll, scalar, dtype, &p.coll_op);
    if (st != COLL_OK) return nccl_fail_coll(comm, st);
  }
  comm->premul[index] = p;
  *op = (ncclRedOp_t)(ncclNumOps + index);
  return ncclSuccess;
}

NCCL_EXPORT(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm)) {
  const char *what = "ncclRedOpDestroy";
  ncclResult_t r = nccl_check_comm(comm, what);
  if (r != ncclSuccess) return r;
  int index = (int)op - ncclNumOps;
  if (index < 0 || index >= NCCL_MAX_PREMUL_OPS || !comm->premul[index].used)
    return nccl_fail(comm, ncclInvalidArgument,
                     "rank %d: %s: op %d was not made by ncclRedOpCreatePreMulSum on this "
                     "communicator",
                     comm->rank, what, (int)op);
  nccl_premul_t *p = &comm->premul[index];
  coll_status_t st =
      p->residence == ncclScalarDevice ? COLL_OK : coll_op_destroy(comm->coll, p->coll_op);
  *p = (nccl_premul_t){0};
  return st == COLL_OK ? ncclSuccess : nccl_fail_coll(comm, st);
}
