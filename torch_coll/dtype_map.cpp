// Reduction planning for the "coll" backend: which libcoll dtype and op reduce a torch
// tensor, with gloo's refusals (AVG is ours; bitwise ops only on integers and bool).
#include "dtype_map.hpp"

#include <c10/util/Exception.h>

namespace torch_coll {

const char *reduce_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNKNOWN";
  }
}

namespace {

bool real_dtype(at::ScalarType type, coll_dtype_t *dtype) {
  switch (type) {
    case at::kByte:
      *dtype = COLL_UINT8;
      return true;
    case at::kChar:
      *dtype = COLL_INT8;
      return true;
    case at::kInt:
      *dtype = COLL_INT32;
      return true;
    case at::kLong:
      *dtype = COLL_INT64;
      return true;
    case at::kHalf:
      *dtype = COLL_FLOAT16;
      return true;
    case at::kBFloat16:
      *dtype = COLL_BFLOAT16;
      return true;
    case at::kFloat:
      *dtype = COLL_FLOAT32;
      return true;
    case at::kDouble:
      *dtype = COLL_FLOAT64;
      return true;
    default:
      return false;
  }
}

bool complex_parts(at::ScalarType type, coll_dtype_t *dtype) {
  switch (type) {
    case at::kComplexHalf:
      *dtype = COLL_FLOAT16;
      return true;
    case at::kComplexFloat:
      *dtype = COLL_FLOAT32;
      return true;
    case at::kComplexDouble:
      *dtype = COLL_FLOAT64;
      return true;
    default:
      return false;
  }
}

bool bitwise(c10d::ReduceOp::RedOpType op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

// The tensor factor of a PREMUL_SUM (undefined for a Python float): one tensor from
// torch 2.x's PreMulSumSupplement::tensor_factor, a list of one per device before.
template <typename Supplement>
auto tensor_factor(const Supplement &s, int) -> decltype(s.tensor_factor, at::Tensor()) {
  return s.tensor_factor;
}
template <typename Supplement>
auto tensor_factor(const Supplement &s, long) -> decltype(s.tensor_factors, at::Tensor()) {
  return s.tensor_factors.empty() ? at::Tensor() : s.tensor_factors.front();
}

[[noreturn]] void refuse(int rank, const char *call, const std::string &what) {
  TORCH_CHECK(false, "coll: rank ", rank, ": ", call, ": ", what);
}

coll_op_t bitwise_op(c10d::ReduceOp::RedOpType op) {
  if (op == c10d::ReduceOp::BAND) return COLL_BAND;
  if (op == c10d::ReduceOp::BOR) return COLL_BOR;
  return COLL_BXOR;
}

coll_op_t plain_op(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::PRODUCT:
      return COLL_PROD;
    case c10d::ReduceOp::MIN:
      return COLL_MIN;
    case c10d::ReduceOp::MAX:
      return COLL_MAX;
    case c10d::ReduceOp::AVG:
      return COLL_AVG;
    default:
      return COLL_SUM;
  }
}

// Bool as uint8 0/1: or is max, and is min, xor is xor.
ReducePlan plan_bool(int rank, const char *call, c10d::ReduceOp::RedOpType op) {
  ReducePlan plan = {COLL_UINT8, COLL_MAX, 1, false, 0.0};
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::BOR:
      plan.op = COLL_MAX;
      return plan;
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::BAND:
      plan.op = COLL_MIN;
      return plan;
    case c10d::ReduceOp::BXOR:
      plan.op = COLL_BXOR;
      return plan;
    default:
      refuse(rank, call,
             std::string("cannot use ReduceOp.") + reduce_op_name(op) + " with bool tensors");
  }
}

}  // namespace

WireType wire_type(at::ScalarType type) {
  coll_dtype_t dtype = COLL_UINT8;
  if (!real_dtype(type, &dtype)) complex_parts(type, &dtype);
  return WireType{dtype, coll_dtype_size(dtype)};
}

ReducePlan plan_reduction(int rank, const char *call, at::ScalarType type,
                          const c10d::ReduceOp &op) {
  const c10d::ReduceOp::RedOpType kind = op.op_;
  if (kind == c10d::ReduceOp::UNUSED || static_cast<int>(kind) > c10d::ReduceOp::UNUSED)
    refuse(rank, call, "unknown ReduceOp");
  if (type == at::kBool) return plan_bool(rank, call, kind);

  ReducePlan plan = {COLL_FLOAT32, COLL_SUM, 1, false, 0.0};
  if (complex_parts(type, &plan.dtype)) {
    if (kind != c10d::ReduceOp::SUM && kind != c10d::ReduceOp::AVG)
      refuse(rank, call,
             std::string("complex tensors reduce only with SUM or AVG, not ReduceOp.") +
                 reduce_op_name(kind));
    plan.reals_per_element = 2;
  } else if (!real_dtype(type, &plan.dtype)) {
    refuse(rank, call, std::string("cannot reduce tensors of dtype ") + c10::toString(type));
  }
  const bool integral = at::isIntegralType(type, /*includeBool=*/false);

  if (bitwise(kind)) {
    if (!integral)
      refuse(rank, call,
             std::string("cannot use ReduceOp.") + reduce_op_name(kind) +
                 " with non-integral dtype " + c10::toString(type));
    plan.op = bitwise_op(kind);
    return plan;
  }
  if (kind == c10d::ReduceOp::PREMUL_SUM) {
    auto *factor = dynamic_cast<c10d::NCCLPreMulSumSupplement *>(op.supplement_.get());
    if (factor == nullptr) refuse(rank, call, "ReduceOp.PREMUL_SUM without its factor");
    const at::Tensor tensor = tensor_factor(*factor, 0);
    if (tensor.defined()) {
      if (tensor.numel() != 1)
        refuse(rank, call,
               "ReduceOp.PREMUL_SUM takes a factor of one element (got " +
                   std::to_string(tensor.numel()) + ")");
      plan.premul_factor = tensor.item<double>();  // a device factor: after its stream's work
    } else {
      plan.premul_factor = factor->double_factor;
    }
    plan.premul = true;
    return plan;
  }
  plan.op = plain_op(kind);
  return plan;
}

}  // namespace torch_coll
