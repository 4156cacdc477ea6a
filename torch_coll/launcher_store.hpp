// The store collrun hosts (libcoll's own, coll_store_connect) as a torch.distributed Store:
// under collrun (COLL_STORE_HOSTED=1) torch.distributed's env:// rendezvous returns it
// instead of starting a TCPStore on rank 0 at the port collrun's store already holds. The
// opposite direction of c10d_store.hpp. PyTorch 2.10+ (as c10d_store.hpp).
#pragma once

#include "c10d_store.hpp"

#if TORCH_COLL_ON_C10D_STORE

#include <pybind11/pybind11.h>

#include <mutex>
#include <optional>
#include <string>

namespace torch_coll {

// One connection to libcoll's store through its table (coll.h, coll_store_ops_t). Every
// call is bounded by the store's timeout (getTimeout); a get waits for its key that long,
// as c10d stores do. Calls from several threads take turns (one connection).
class LauncherStore : public c10d::Store {
 public:
  // host nullopt: the launcher's MASTER_ADDR/MASTER_PORT/COLL_JOB_TOKEN; token nullopt:
  // COLL_JOB_TOKEN. Throws DistStoreError with libcoll's message when it cannot connect.
  static c10::intrusive_ptr<LauncherStore> connect(const std::optional<std::string> &host, int port,
                                                   const std::optional<std::string> &token,
                                                   std::chrono::milliseconds timeout);
  LauncherStore(const coll_store_ops_t *ops, void *handle, std::chrono::milliseconds timeout);
  ~LauncherStore() override;
  LauncherStore(const LauncherStore &) = delete;
  LauncherStore &operator=(const LauncherStore &) = delete;

  c10::intrusive_ptr<c10d::Store> clone() override;  // a new connection
  void set(const std::string &key, const std::vector<uint8_t> &value) override;
  std::vector<uint8_t> compareSet(const std::string &key, const std::vector<uint8_t> &expected,
                                  const std::vector<uint8_t> &desired) override;
  std::vector<uint8_t> get(const std::string &key) override;
  int64_t add(const std::string &key, int64_t value) override;
  bool deleteKey(const std::string &key) override;
  bool check(const std::vector<std::string> &keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

  // "libcoll's store at 127.0.0.1:29500"
  const std::string &name() const { return name_; }

 private:
  const coll_store_ops_t *ops_;
  void *handle_;
  std::string name_;
  std::mutex mu_;  // the handle serves one call at a time
};

// torch_coll.launcher_store and the LauncherStore type; and, when COLL_STORE_HOSTED=1, the
// env:// rendezvous handler that returns the launcher's store (other schemes untouched).
void bind_launcher_store(pybind11::module_ &m);

}  // namespace torch_coll

#endif
