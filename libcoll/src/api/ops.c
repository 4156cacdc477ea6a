/* The reduction ops a call may name: the built-in ones (the bitwise ones on integer types
 * only) and the premul_sum ops a communicator made (coll_op_create_premul_sum), which a
 * call carries as a SUM with its rank's scalar (base/call.h's premul). */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/error.h"

/* Handles come from one counter for the whole process, so that no two communicators
 * (nor one, after a destroy) ever hand out the same value: an op used on the wrong
 * communicator, or after its destroy, is then never mistaken for a live one. */
static atomic_uint handles_made;

static coll_op_t new_handle(void) {
  unsigned n = atomic_fetch_add(&handles_made, 1); /* wraps after 2^31 ops (best effort) */
  return (coll_op_t)(COLL_OP_COUNT + (int)(n % (unsigned)(INT_MAX - COLL_OP_COUNT)));
}

static bool is_bitwise(coll_op_t op) {
  return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR;
}

static bool is_integer(coll_dtype_t dtype) {
  return dtype == COLL_INT8 || dtype == COLL_UINT8 || dtype == COLL_INT32 || dtype == COLL_UINT32 ||
         dtype == COLL_INT64 || dtype == COLL_UINT64;
}

static comm_premul_op_t *find(coll_comm_t *comm, coll_op_t op) {
  for (size_t i = 0; i < comm->premul_n; i++)
    if (comm->premul_ops[i].op == op) return &comm->premul_ops[i];
  return NULL;
}

coll_status_t coll_op_create_premul_sum(coll_comm_t *comm, const void *scalar, coll_dtype_t dtype,
                                        coll_op_t *op) {
  const char *what = "coll_op_create_premul_sum";
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  int rank = comm->base.rank;
  if (op == NULL || scalar == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: %s is NULL", rank, what,
                      op == NULL ? "op" : "scalar");
  size_t esz = coll_dtype_size(dtype);
  if (esz == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: unknown dtype %d", rank, what,
                      (int)dtype);
  if (comm->premul_n == comm->premul_cap) {
    size_t cap = comm->premul_cap ? comm->premul_cap * 2 : 4;
    comm_premul_op_t *grown = realloc(comm->premul_ops, cap * sizeof *grown);
    if (grown == NULL)
      return coll_error(COLL_ERR_NO_MEMORY, "rank %d: %s: out of memory", rank, what);
    comm->premul_ops = grown;
    comm->premul_cap = cap;
  }
  comm_premul_op_t *e = &comm->premul_ops[comm->premul_n++];
  *e = (comm_premul_op_t){.op = new_handle(), .dtype = dtype};
  memcpy(e->scalar, scalar, esz);
  *op = e->op;
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_op_destroy(coll_comm_t *comm, coll_op_t op) {
  const char *what = "coll_op_destroy";
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  comm_premul_op_t *e = find(comm, op);
  if (e == NULL) {
    const char *name = coll_op_name(op);
    if (name != NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "rank %d: %s: op %s is built in (only ops made by "
                        "coll_op_create_premul_sum are destroyed)",
                        comm->base.rank, what, name);
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: op %d is not a live op of this communicator (already "
                      "destroyed, made by another communicator, or never made)",
                      comm->base.rank, what, (int)op);
  }
  *e = comm->premul_ops[--comm->premul_n];
  coll_error_clear();
  return COLL_OK;
}

coll_status_t api_resolve_op(coll_comm_t *comm, const char *who, coll_call_t *call) {
  if (!coll_kind_reduces(call->kind)) return COLL_OK;
  const char *name = coll_op_name(call->op);
  if (name != NULL) {
    if (is_bitwise(call->op) && !is_integer(call->dtype))
      return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: op %s needs an integer type, not %s", who,
                        name, coll_dtype_name(call->dtype));
    return COLL_OK;
  }
  const comm_premul_op_t *e = find(comm, call->op);
  if (e == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: unknown op %d (not a built-in op nor a live premul_sum op of this "
                      "communicator: destroyed, made by another communicator, or never made)",
                      who, (int)call->op);
  if (e->dtype != call->dtype)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: op %d is a premul_sum of %s, but the call's dtype is %s", who,
                      (int)call->op, coll_dtype_name(e->dtype), coll_dtype_name(call->dtype));
  call->op = COLL_SUM;
  call->premul = true;
  memcpy(call->premul_scalar, e->scalar, sizeof call->premul_scalar);
  return COLL_OK;
}
