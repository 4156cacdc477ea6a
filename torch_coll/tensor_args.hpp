// Argument checks and staging shared by the "coll" backend's calls: one tensor per call,
// CPU (or CUDA) tensors, contiguous buffers for non-contiguous tensors and the copy back,
// and raw bytes for the calls that move data without reducing it.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <vector>

namespace torch_coll {

// Throws "coll: rank R: CALL: WHAT" (a RuntimeError in Python) unless cond holds.
#define TORCH_COLL_CHECK(cond, rank, call, ...) \
  TORCH_CHECK((cond), "coll: rank ", (rank), ": ", (call), ": ", __VA_ARGS__)

// The single tensor of a one-tensor call, checked for device and layout.
const at::Tensor &single_tensor(int rank, const char *call, const std::vector<at::Tensor> &tensors);
// Every tensor on the CPU (or CUDA, with libcoll's device path), strided.
void check_tensor(int rank, const char *call, const at::Tensor &tensor);
// Same dtype and number of elements as `like`.
void check_same_shape(int rank, const char *call, const at::Tensor &tensor, const at::Tensor &like,
                      const char *what);
void check_root(int rank, int size, const char *call, int64_t root);
void check_peer(int rank, int size, const char *call, int64_t peer);

// A contiguous buffer for `tensor`: the tensor itself, or a contiguous copy whose result
// copy_back() writes into the tensor.
struct Staged {
  at::Tensor user;
  at::Tensor buffer;
  explicit Staged(const at::Tensor &tensor)
      : user(tensor), buffer(tensor.is_contiguous() ? tensor : tensor.contiguous()) {}
  void copy_back() const {
    if (!buffer.is_same(user)) user.copy_(buffer);
  }
  void *data() const { return buffer.data_ptr(); }
};

inline size_t byte_count(const at::Tensor &t) {
  return static_cast<size_t>(t.numel()) * static_cast<size_t>(t.element_size());
}

// A contiguous buffer of `bytes` bytes on the device of `like`.
at::Tensor byte_buffer(const at::Tensor &like, size_t bytes);
// Packed byte buffers (all_gather_coalesced, the list all_to_all): each tensor's slot
// starts at a multiple of 16 bytes, any dtype's alignment, so it can be read in place.
size_t slot_bytes(const at::Tensor &t);
// `like`'s dtype and shape over the bytes of `bytes` from `offset` (same device).
at::Tensor typed_view(const at::Tensor &bytes, size_t offset, const at::Tensor &like);

}  // namespace torch_coll
