// How a tensor's dtype and a c10d::ReduceOp become libcoll's dtype, op and element count:
// bool as uint8 (sum = or, prod = and), complex as pairs of reals, and the refusals gloo
// gives for the same arguments.
#pragma once

#include <ATen/ATen.h>
#include <coll.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace torch_coll {

struct ReducePlan {
  coll_dtype_t dtype;
  coll_op_t op;
  int64_t reals_per_element;  // 2 for a complex tensor reduced as (real, imag) pairs
  bool premul;                // PREMUL_SUM: libcoll's op is made per call from the factor
  double premul_factor;
};

// The plan for reducing `type` with `op` in call `call` on `rank`; throws RuntimeError
// ("coll: rank 1: all_reduce: ...") for a dtype or an op that gloo refuses too or libcoll
// cannot do.
ReducePlan plan_reduction(int rank, const char *call, at::ScalarType type,
                          const c10d::ReduceOp &op);

// How a call that only moves data sends a tensor: as its own libcoll dtype where there is
// one (complex as its parts), so that libcoll's mismatch messages name the real type;
// otherwise (bool, int16, ...) as bytes. count(bytes) is the element count to pass.
struct WireType {
  coll_dtype_t dtype;
  size_t element_bytes;
  size_t count(size_t bytes) const { return bytes / element_bytes; }
};
WireType wire_type(at::ScalarType type);

// "SUM", "BAND", ... as Python's ReduceOp names them.
const char *reduce_op_name(c10d::ReduceOp::RedOpType op);

}  // namespace torch_coll
