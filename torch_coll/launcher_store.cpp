// LauncherStore (launcher_store.hpp): c10d's Store calls made through the table
// coll_store_connect returns, libcoll's message thrown as DistStoreError on failure; and
// torch.distributed's env:// rendezvous made to return it under collrun, where rank 0
// cannot start a TCPStore on MASTER_PORT (collrun's store listens there) and, since
// collrun's store outlives every rank, rank 0 may die like any other.
#include "launcher_store.hpp"

#if TORCH_COLL_ON_C10D_STORE

#include <c10/util/Exception.h>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace py = pybind11;

namespace torch_coll {

namespace {

constexpr int kLongestMs = INT32_MAX / 2;  // what COLL_TIMEOUT_MS allows; c10d's 0 ("none")

int to_ms(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  return ms <= 0 || ms > kLongestMs ? kLongestMs : static_cast<int>(ms);
}

[[noreturn]] void fail(const std::string &where, const char *call, coll_status_t status) {
  const char *detail = coll_last_error();
  C10_THROW_ERROR(DistStoreError,
                  std::string("torch_coll: ") + call + " on " + where +
                      " failed: " + coll_status_name(status) +
                      (detail != nullptr && detail[0] != '\0' ? std::string(": ") + detail : ""));
}

std::vector<uint8_t> take_bytes(void *value, size_t len) {
  const auto *p = static_cast<const uint8_t *>(value);
  std::vector<uint8_t> bytes(p, p + len);
  std::free(value);
  return bytes;
}

// A pointer for a value that may be empty (a vector's data() may then be null).
const void *data_of(const std::vector<uint8_t> &bytes) {
  static const uint8_t nothing = 0;
  return bytes.empty() ? &nothing : bytes.data();
}

}  // namespace

c10::intrusive_ptr<LauncherStore> LauncherStore::connect(const std::optional<std::string> &host,
                                                         int port,
                                                         const std::optional<std::string> &token,
                                                         std::chrono::milliseconds timeout) {
  const coll_store_ops_t *ops = nullptr;
  void *handle = nullptr;
  coll_status_t st =
      coll_store_connect(host ? host->c_str() : nullptr, port, token ? token->c_str() : nullptr,
                         to_ms(timeout), &ops, &handle);
  if (st != COLL_OK) fail("libcoll's store", "connect", st);
  return c10::make_intrusive<LauncherStore>(ops, handle, timeout);
}

LauncherStore::LauncherStore(const coll_store_ops_t *ops, void *handle,
                             std::chrono::milliseconds timeout)
    : c10d::Store(timeout),
      ops_(ops),
      handle_(handle),
      name_(std::string("libcoll's store at ") + ops->describe(handle)) {}

LauncherStore::~LauncherStore() { ops_->release(handle_); }

c10::intrusive_ptr<c10d::Store> LauncherStore::clone() {
  std::lock_guard<std::mutex> lock(mu_);
  void *copy = nullptr;
  coll_status_t st = ops_->clone(handle_, to_ms(timeout_), &copy);
  if (st != COLL_OK) fail(name_, "clone", st);
  return c10::make_intrusive<LauncherStore>(ops_, copy, timeout_);
}

void LauncherStore::set(const std::string &key, const std::vector<uint8_t> &value) {
  std::lock_guard<std::mutex> lock(mu_);
  coll_status_t st = ops_->set(handle_, key.c_str(), data_of(value), value.size(), to_ms(timeout_));
  if (st != COLL_OK) fail(name_, "set", st);
}

// c10d's compareSet: an empty expected value means "absent" (then set); an absent key not
// set answers with the expected value, a present one with what it holds now.
std::vector<uint8_t> LauncherStore::compareSet(const std::string &key,
                                               const std::vector<uint8_t> &expected,
                                               const std::vector<uint8_t> &desired) {
  std::lock_guard<std::mutex> lock(mu_);
  void *now = nullptr;
  size_t len = 0;
  coll_status_t st = ops_->compare_set(
      handle_, key.c_str(), expected.empty() ? nullptr : expected.data(), expected.size(),
      data_of(desired), desired.size(), &now, &len, to_ms(timeout_));
  // A present but empty value also matches an empty expected value, as in TCPStore.
  if (st == COLL_OK && expected.empty() && now != nullptr && len == 0 && !desired.empty()) {
    std::free(now);
    now = nullptr;
    st = ops_->compare_set(handle_, key.c_str(), data_of(expected), 0, data_of(desired),
                           desired.size(), &now, &len, to_ms(timeout_));
  }
  if (st != COLL_OK) fail(name_, "compareSet", st);
  if (now == nullptr) return expected;
  return take_bytes(now, len);
}

std::vector<uint8_t> LauncherStore::get(const std::string &key) {
  std::lock_guard<std::mutex> lock(mu_);
  void *value = nullptr;
  size_t len = 0;
  coll_status_t st = ops_->get(handle_, key.c_str(), &value, &len, to_ms(timeout_));
  if (st != COLL_OK) fail(name_, "get", st);
  return take_bytes(value, len);
}

int64_t LauncherStore::add(const std::string &key, int64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = 0;
  coll_status_t st = ops_->add(handle_, key.c_str(), value, &now, to_ms(timeout_));
  if (st != COLL_OK) fail(name_, "add", st);
  return now;
}

bool LauncherStore::deleteKey(const std::string &key) {
  std::lock_guard<std::mutex> lock(mu_);
  int deleted = 0;
  coll_status_t st = ops_->delete_key(handle_, key.c_str(), &deleted, to_ms(timeout_));
  if (st != COLL_OK) fail(name_, "deleteKey", st);
  return deleted != 0;
}

namespace {
std::vector<const char *> c_keys(const std::vector<std::string> &keys) {
  std::vector<const char *> out;
  out.reserve(keys.size());
  for (const auto &k : keys) out.push_back(k.c_str());
  return out;
}
}  // namespace

bool LauncherStore::check(const std::vector<std::string> &keys) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<const char *> names = c_keys(keys);
  int all = 0;
  coll_status_t st = ops_->check(handle_, names.data(), names.size(), &all, to_ms(timeout_));
  if (st != COLL_OK) fail(name_, "check", st);
  return all != 0;
}

int64_t LauncherStore::getNumKeys() {
  if (ops_->num_keys == nullptr)
    C10_THROW_ERROR(NotImplementedError, "torch_coll: getNumKeys is not supported by " + name_);
  std::lock_guard<std::mutex> lock(mu_);
  int64_t count = 0;
  coll_status_t st = ops_->num_keys(handle_, &count, to_ms(timeout_));
  if (st != COLL_OK) fail(name_, "getNumKeys", st);
  return count;
}

void LauncherStore::wait(const std::vector<std::string> &keys) { wait(keys, timeout_); }

void LauncherStore::wait(const std::vector<std::string> &keys,
                         const std::chrono::milliseconds &timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<const char *> names = c_keys(keys);
  coll_status_t st = ops_->wait(handle_, names.data(), names.size(), to_ms(timeout));
  if (st != COLL_OK) fail(name_, "wait", st);
}

namespace {

bool launcher_hosts_store() {
  const char *hosted = std::getenv("COLL_STORE_HOSTED");
  return hosted != nullptr && std::strcmp(hosted, "1") == 0;
}

// rank or world_size as torch's env:// handler reads it: the URL's query, else the
// environment variable.
int rendezvous_number(const py::dict &query, const char *field, const char *variable) {
  if (query.contains(field)) return py::int_(query[field]).cast<int>();
  const char *text = std::getenv(variable);
  if (text == nullptr || text[0] == '\0')
    throw py::value_error(std::string("env:// rendezvous: environment variable ") + variable +
                          " expected, but not set");
  return py::int_(py::str(text)).cast<int>();
}

// The env:// handler under collrun: (the launcher's store, rank, world size), once.
py::object env_rendezvous(const py::object &torch_handler, const py::str &url,
                          const py::kwargs &kwargs) {
  if (!launcher_hosts_store()) return torch_handler(url, **kwargs);
  py::object parsed = py::module_::import("urllib.parse").attr("urlparse")(url);
  py::dict query = py::module_::import("torch.distributed.rendezvous")
                       .attr("_query_to_dict")(parsed.attr("query"));
  const int rank = rendezvous_number(query, "rank", "RANK");
  const int world_size = rendezvous_number(query, "world_size", "WORLD_SIZE");
  py::object timeout = py::none();
  if (kwargs.contains("timeout")) timeout = kwargs["timeout"];
  if (timeout.is_none())
    timeout = py::module_::import("torch.distributed.constants").attr("default_pg_timeout");
  const auto ms = timeout.cast<std::chrono::milliseconds>();
  c10::intrusive_ptr<LauncherStore> store;
  {
    py::gil_scoped_release released;
    store = LauncherStore::connect(std::nullopt, 0, std::nullopt, ms);
  }
  py::list once;
  once.append(py::make_tuple(store, rank, world_size));
  return once.attr("__iter__")();
}

void wrap_env_rendezvous() {
  static bool wrapped = false;  // once per process (importing again does nothing)
  if (wrapped || !launcher_hosts_store()) return;
  py::dict handlers =
      py::module_::import("torch.distributed.rendezvous").attr("_rendezvous_handlers");
  if (!handlers.contains("env")) return;
  py::object torch_handler = handlers["env"];
  handlers["env"] = py::cpp_function(
      [torch_handler](const py::str &url, const py::kwargs &kwargs) {
        return env_rendezvous(torch_handler, url, kwargs);
      },
      py::name("torch_coll_env_rendezvous"));
  wrapped = true;
}

}  // namespace

void bind_launcher_store(py::module_ &m) {
  py::class_<LauncherStore, c10d::Store, c10::intrusive_ptr<LauncherStore>>(
      m, "LauncherStore",
      "libcoll's own store (the one collrun hosts) as a torch.distributed Store: one "
      "connection; clone() opens another.")
      .def_property_readonly("name", &LauncherStore::name);

  m.def(
      "launcher_store",
      [](std::optional<std::string> host, int port, std::optional<std::string> token,
         std::chrono::milliseconds timeout) {
        return LauncherStore::connect(host, port, token, timeout);
      },
      py::arg("host") = py::none(), py::arg("port") = 0, py::arg("token") = py::none(),
      py::arg("timeout") = std::chrono::milliseconds(c10d::Store::kDefaultTimeout),
      py::call_guard<py::gil_scoped_release>(),
      "A torch.distributed Store on libcoll's own store (coll_store_connect): by default the "
      "launcher's (collrun: MASTER_ADDR, MASTER_PORT, COLL_JOB_TOKEN), else host:port with "
      "token (None: COLL_JOB_TOKEN). timeout: how long to keep trying to connect, and every "
      "call's deadline (a get waits that long for its key). Under collrun, which hosts that "
      "store outside every rank, importing torch_coll makes the env:// rendezvous return it.");

  wrap_env_rendezvous();
}

}  // namespace torch_coll

#endif
