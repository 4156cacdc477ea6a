// The Python module torch_coll: importing it registers the torch.distributed backend
// "coll" (once; importing again does nothing) and exposes which optional libcoll calls
// this build has.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_coll.hpp"
#include "torch_coll_config.h"

namespace py = pybind11;

namespace {

void register_backend(py::object create) {
  py::object backend = py::module_::import("torch.distributed").attr("Backend");
  py::dict plugins = backend.attr("_plugins");
  if (plugins.contains("COLL")) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  // 2.1 and later ask which devices the backend serves: "cpu", and "cuda" where libcoll
  // was built with its device path, so that "coll" alone, "cpu:coll" and
  // "cpu:gloo,cuda:coll" all name it.
  py::list devices;
  devices.append("cpu");
  if (TORCH_COLL_HAVE_CUDA) devices.append("cuda");
  backend.attr("register_backend")("coll", create, py::arg("devices") = devices);
#else
  backend.attr("register_backend")("coll", create);
#endif
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // torch registers the base classes and the Store type this module's signatures use.
  py::module_::import("torch.distributed");
  m.doc() =
      "torch.distributed backend \"coll\" on libcoll: import torch_coll, then "
      "torch.distributed.init_process_group(\"coll\")";

  py::class_<torch_coll::ProcessGroupColl, torch_coll::BackendBase,
             c10::intrusive_ptr<torch_coll::ProcessGroupColl>>(m, "ProcessGroupColl");

  m.def("create_process_group", &torch_coll::ProcessGroupColl::create, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "The creator torch.distributed calls for each group: joins libcoll through the store.");

  m.def(
      "features",
      [] {
        py::dict f;
        f["bitwise_ops"] = static_cast<bool>(TORCH_COLL_HAVE_BITWISE);
        f["premul_sum"] = static_cast<bool>(TORCH_COLL_HAVE_PREMUL);
        f["gather"] = static_cast<bool>(TORCH_COLL_HAVE_GATHER);
        f["scatter"] = static_cast<bool>(TORCH_COLL_HAVE_SCATTER);
        f["all_to_allv"] = static_cast<bool>(TORCH_COLL_HAVE_ALL_TO_ALLV);
        f["tagged_p2p"] = static_cast<bool>(TORCH_COLL_HAVE_TAGGED);
        f["cuda"] = static_cast<bool>(TORCH_COLL_HAVE_CUDA);
        return f;
      },
      "Which optional libcoll calls this build found in coll.h (the rest raise RuntimeError).");

  register_backend(m.attr("create_process_group"));
}
