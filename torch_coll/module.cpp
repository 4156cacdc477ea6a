// The Python module torch_coll: importing it registers the torch.distributed backend
// "coll" (once; importing again does nothing), exposes what this build serves (features(): the
// CUDA device path, the c10d store, reconfigure), shrink() (a group rebuilt from the
// survivors of a lost rank), agree() (coll_comm_agree) and the backend class, which a
// program that makes its own ProcessGroup (torchft's reconfigurable groups) constructs as
// it does ProcessGroupGloo.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "coll_config.h"
#include "launcher_store.hpp"
#include "process_group_coll.hpp"

namespace py = pybind11;

namespace {

#if TORCH_COLL_HAS_RECONFIGURE
// The creator PyTorch calls for each group when registered with extended_api (2.14+): its
// _DistributedBackendOptions carry the store, rank, size and timeout, and
// enable_reconfigure (no communicator until reconfigure()); the user's pg_options are not
// used.
c10::intrusive_ptr<torch_coll::BackendBase> create_extended(const py::object &opts,
                                                            const py::object &) {
  auto store = opts.attr("store").cast<c10::intrusive_ptr<c10d::Store>>();
  const int rank = opts.attr("group_rank").cast<int>();
  const int size = opts.attr("group_size").cast<int>();
  const auto timeout = opts.attr("timeout").cast<std::chrono::milliseconds>();
  const bool reconfigurable =
      py::hasattr(opts, "enable_reconfigure") && opts.attr("enable_reconfigure").cast<bool>();
  py::gil_scoped_release released;
  return torch_coll::ProcessGroupColl::create(store, rank, size, timeout, reconfigurable);
}
#endif

// extended_api: `create` takes PyTorch's _DistributedBackendOptions (create_extended).
void register_backend(py::object create, bool extended_api) {
  py::object backend = py::module_::import("torch.distributed").attr("Backend");
  py::dict plugins = backend.attr("_plugins");
  if (plugins.contains("COLL")) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  // 2.1 and later ask which devices the backend serves: "cpu", and "cuda" where libcoll
  // was built with its device path, so that "coll" alone, "cpu:coll" and
  // "cpu:gloo,cuda:coll" all name it.
  py::list devices;
  devices.append("cpu");
  if (COLL_HAVE_CUDA) devices.append("cuda");
  backend.attr("register_backend")("coll", create, py::arg("extended_api") = extended_api,
                                   py::arg("devices") = devices);
#else
  (void)extended_api;  // 1.x: never
  backend.attr("register_backend")("coll", create);
#endif
}

// The coll backend of a group (2.x: its CPU backend; 1.x: the group itself), or TypeError.
torch_coll::ProcessGroupColl *coll_backend_of(const py::object &group) {
  py::object backend = group;
#if TORCH_VERSION_MAJOR >= 2
  py::object cpu = py::module_::import("torch").attr("device")("cpu");
  backend = group.attr("_get_backend")(cpu);
#endif
  if (!py::isinstance<torch_coll::ProcessGroupColl>(backend))
    throw py::type_error("torch_coll: the group's backend is not \"coll\"");
  return backend.cast<torch_coll::ProcessGroupColl *>();
}

#if TORCH_VERSION_MAJOR < 2
// 1.x has no shrink_group: the new group takes the old one's place in torch.distributed's
// tables (the default group's too), ranked as coll_comm_shrink ranks it.
py::object register_shrunk(const py::object &group, const py::object &fresh,
                           const std::vector<int64_t> &exclude) {
  py::module_ c10d = py::module_::import("torch.distributed.distributed_c10d");
  py::dict pg_map = c10d.attr("_pg_map"), names = c10d.attr("_pg_names");
  py::dict group_ranks = c10d.attr("_pg_group_ranks");
  py::dict ranks;
  for (auto item : py::dict(group_ranks[group])) {
    const int64_t r = item.second.cast<int64_t>();
    if (std::find(exclude.begin(), exclude.end(), r) != exclude.end()) continue;
    ranks[item.first] =
        r - std::count_if(exclude.begin(), exclude.end(), [r](int64_t x) { return x < r; });
  }
  const bool world = group.is(c10d.attr("GroupMember").attr("WORLD"));
  pg_map[fresh] = pg_map[group];
  names[fresh] = py::str(std::string(py::str(names[group])) + ":shrunk");
  group_ranks[fresh] = ranks;
  for (py::dict table : {pg_map, names, group_ranks}) table.attr("pop")(group);
  if (world) c10d.attr("_update_default_pg")(fresh);
  return fresh;
}
#endif

// torch_coll.shrink: see the docstring below.
py::object shrink(py::object group, py::object exclude_ranks, int shrink_flags) {
  if (group.is_none())
    group = py::module_::import("torch.distributed.distributed_c10d").attr("_get_default_group")();
  torch_coll::ProcessGroupColl *backend = coll_backend_of(group);
  std::vector<int64_t> exclude = exclude_ranks.is_none()
                                     ? backend->agree_failed()
                                     : exclude_ranks.cast<std::vector<int64_t>>();
  if (exclude.empty()) return group;  // nobody failed: the group goes on
#if TORCH_VERSION_MAJOR >= 2
  py::module_ dist = py::module_::import("torch.distributed");
  if (!py::hasattr(dist, "shrink_group"))
    throw std::runtime_error(
        "torch_coll.shrink: this PyTorch has no torch.distributed.shrink_group (2.15 has)");
  py::list ranks;
  for (int64_t r : exclude) ranks.append(r);
  return dist.attr("shrink_group")(ranks, py::arg("group") = group,
                                   py::arg("shrink_flags") = shrink_flags);
#else
  auto fresh = backend->shrink_to(exclude, shrink_flags == 1, backend->timeout());
  return register_shrunk(group, py::cast(fresh), exclude);
#endif
}

// torch_coll.agree: see the docstring below.
py::tuple agree(py::object group, uint32_t flag) {
  if (group.is_none())
    group = py::module_::import("torch.distributed.distributed_c10d").attr("_get_default_group")();
  const coll_agreement_t agreement = coll_backend_of(group)->agree(flag);
  py::list failed;
  for (int i = 0; i < agreement.nfailed; i++) failed.append(agreement.failed[i]);
  return py::make_tuple(agreement.flag, failed, agreement.joiners);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // torch registers the base classes and the Store type this module's signatures use.
  py::module_::import("torch.distributed");
  m.doc() =
      "torch.distributed backend \"coll\" on libcoll: import torch_coll, then "
      "torch.distributed.init_process_group(\"coll\")";

  py::class_<torch_coll::ProcessGroupColl, torch_coll::BackendBase,
             c10::intrusive_ptr<torch_coll::ProcessGroupColl>>(m, "ProcessGroupColl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                       std::chrono::milliseconds timeout, bool enable_reconfigure) {
             return c10::make_intrusive<torch_coll::ProcessGroupColl>(store, rank, size, timeout,
                                                                      enable_reconfigure);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("enable_reconfigure") = false, py::call_guard<py::gil_scoped_release>(),
           "The backend of one group, made as create_process_group makes it: collective "
           "over the group's ranks (with enable_reconfigure, no communicator until "
           "reconfigure()). For a program that builds its own ProcessGroup "
           "(ProcessGroup(store, rank, size), then _register_backend).");

  m.def("create_process_group", &torch_coll::ProcessGroupColl::create, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("enable_reconfigure") = false,
        py::call_guard<py::gil_scoped_release>(),
        "The creator torch.distributed calls for each group: joins libcoll through the store.");

  m.def("shrink", &shrink, py::arg("group") = py::none(), py::arg("exclude_ranks") = py::none(),
        py::arg("shrink_flags") = 0,
        "A new group of `group`'s survivors (default: the default group), made without a new "
        "store: exclude_ranks=None asks libcoll which ranks failed (coll_comm_agree: every "
        "live rank calls, and gets the same answer), then every survivor shrinks them away "
        "(coll_comm_shrink). Returns the new group (the old one is destroyed; a shrunk default "
        "group becomes the default), or `group` itself when nobody failed. shrink_flags=1 "
        "(SHRINK_ABORT) makes the old group's running calls fail first. On 2.x this is "
        "torch.distributed.shrink_group with the agreed ranks. From PyTorch 2.10 the group "
        "lives on torch's own store, and any rank may be lost as long as that store outlives "
        "it (torchrun's agent store does); on 1.13 rank 0 of the group hosts libcoll's store "
        "and must be among the survivors.");

  m.def("agree", &agree, py::arg("group") = py::none(), py::arg("flag") = 0xFFFFFFFFu,
        "Fault-tolerant agreement over `group`'s current communicator (default: the default "
        "group), libcoll's coll_comm_agree: every live member calls it (the same number of "
        "times), also after a failed call, and every one gets the same (flag, failed, "
        "joiners): the bitwise AND of the members' 32-bit flags, the group ranks declared "
        "failed (ascending), and how many processes wait in coll_comm_join for this "
        "communicator's lineage (0 when a rank failed). A member that arrives after it was "
        "declared failed raises. One per training step answers \"did every rank succeed?\" "
        "(examples/elastic_ddp.py).");

#if TORCH_COLL_ON_C10D_STORE
  m.def("store_requests", &torch_coll::c10d_store_requests,
        "How many requests this process's communicators have made to torch's c10d stores "
        "(rendezvous, liveness leases, agreement): what keeping a group on torch's store "
        "costs it.");
  torch_coll::bind_launcher_store(m);  // launcher_store(); env:// on collrun's store
#endif

  m.def(
      "features",
      [] {
        py::dict f;
        for (const char *call : {"bitwise_ops", "premul_sum", "gather", "scatter", "all_to_allv",
                                 "tagged_p2p", "elastic"})
          f[call] = true;
        f["cuda"] = static_cast<bool>(COLL_HAVE_CUDA);
        f["c10d_store"] = static_cast<bool>(TORCH_COLL_ON_C10D_STORE);
        f["reconfigure"] = static_cast<bool>(TORCH_COLL_HAS_RECONFIGURE);
        f["abort_hooks"] = static_cast<bool>(TORCH_COLL_HAS_ABORT_HOOKS);
        return f;
      },
      "What this build serves: \"cuda\" says whether libcoll was built with its device path; "
      "\"c10d_store\" whether groups live on torch's own store (PyTorch 2.10+; else a store "
      "rank 0's process hosts), \"reconfigure\" and \"abort_hooks\" whether PyTorch's "
      "fault-tolerance API is served (2.14+); the other keys name libcoll calls that "
      "torch_coll maps, all in coll.h (always True).");

#if TORCH_COLL_HAS_RECONFIGURE
  // With the extended options, which say enable_reconfigure.
  register_backend(py::cpp_function(&create_extended), true);
#else
  register_backend(m.attr("create_process_group"), false);
#endif
}
