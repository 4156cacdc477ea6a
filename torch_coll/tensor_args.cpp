// Tensor argument checks and staging for the "coll" backend (see tensor_args.hpp).
#include "tensor_args.hpp"

namespace torch_coll {

void check_tensor(int rank, const char *call, const at::Tensor &tensor) {
  TORCH_COLL_CHECK(tensor.defined(), rank, call, "undefined tensor");
  TORCH_COLL_CHECK(tensor.layout() == at::kStrided, rank, call, "only dense tensors (got ",
                   tensor.layout(), ")");
  TORCH_COLL_CHECK(tensor.device().is_cpu() || tensor.device().is_cuda(), rank, call,
                   "only CPU and CUDA tensors (got ", tensor.device(), ")");
}

const at::Tensor &single_tensor(int rank, const char *call,
                                const std::vector<at::Tensor> &tensors) {
  TORCH_COLL_CHECK(tensors.size() == 1, rank, call, "takes one tensor per call (got ",
                   tensors.size(), ")");
  check_tensor(rank, call, tensors[0]);
  return tensors[0];
}

void check_same_shape(int rank, const char *call, const at::Tensor &tensor, const at::Tensor &like,
                      const char *what) {
  check_tensor(rank, call, tensor);
  TORCH_COLL_CHECK(tensor.scalar_type() == like.scalar_type(), rank, call, what, " has dtype ",
                   tensor.scalar_type(), ", expected ", like.scalar_type());
  TORCH_COLL_CHECK(tensor.numel() == like.numel(), rank, call, what, " has ", tensor.numel(),
                   " elements, expected ", like.numel());
  TORCH_COLL_CHECK(tensor.device() == like.device(), rank, call, what, " is on ", tensor.device(),
                   ", expected ", like.device());
}

void check_root(int rank, int size, const char *call, int64_t root) {
  TORCH_COLL_CHECK(root >= 0 && root < size, rank, call, "invalid root rank ", root,
                   " (group size ", size, ")");
}

void check_peer(int rank, int size, const char *call, int64_t peer) {
  TORCH_COLL_CHECK(peer >= 0 && peer < size, rank, call, "invalid peer rank ", peer,
                   " (group size ", size, ")");
  TORCH_COLL_CHECK(peer != rank, rank, call, "peer ", peer, " is this rank");
}

at::Tensor byte_buffer(const at::Tensor &like, size_t bytes) {
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}

size_t slot_bytes(const at::Tensor &t) {
  constexpr size_t kSlotAlign = 16;
  return (byte_count(t) + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}

at::Tensor typed_view(const at::Tensor &bytes, size_t offset, const at::Tensor &like) {
  auto *base = static_cast<unsigned char *>(bytes.data_ptr()) + offset;
  return at::from_blob(base, like.sizes(), bytes.options().dtype(like.scalar_type()));
}

}  // namespace torch_coll
