// The torch.distributed class the "coll" backend derives from, chosen by PyTorch's version:
// c10d::ProcessGroup in 1.x (Python calls the subclass directly), c10d::Backend in 2.x
// (Python wraps it in a ProcessGroup).
#pragma once

#include <torch/version.h>

// Whether this torch is at least major.minor (torch/version.h).
#define TORCH_COLL_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace torch_coll {
using BackendBase = c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace torch_coll {
using BackendBase = c10d::ProcessGroup;
}
#endif
