// The c10d::Store behind libcoll's store table (c10d_store.hpp). Each function makes the
// c10d calls and maps what they throw to a status: a wait that ran out of time (TCPStore
// throws DistStoreError "wait timeout after N ms", FileStore a plain c10::Error "Wait
// timeout", a socket c10d::TimeoutError) is COLL_ERR_TIMEOUT, anything else
// COLL_ERR_REMOTE; the text goes into describe(), which libcoll's message then quotes.
//
// Waiting for keys: c10d's own waits do not suit libcoll's short ones (the failure
// watcher's 100 ms get, once a lease period). FileStore's wait counts whole seconds (a
// 100 ms wait lasts over a second, longer than a lease may stand still) and TCPStore logs
// two warnings on every wait that times out. So a wait first checks, then polls check()
// with a growing pause (1 ms doubling to 25 ms); only on a TCPStore, and only a wait longer
// than kServerWaitMs (a rendezvous), is left to the server after the first check. An idle
// rank's failure watcher so makes one lease renewal and about seven checks every lease
// period (100 ms): store_requests() counts them. libcoll's own store under a
// LauncherStore (launcher_store.hpp) parks every wait in its server without a word, so
// there every wait is the server's.
#include "c10d_store.hpp"

#if TORCH_COLL_ON_C10D_STORE

#include "launcher_store.hpp"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace torch_coll {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFirstPause = std::chrono::milliseconds(1);
constexpr auto kLongestPause = std::chrono::milliseconds(25);

std::atomic<int64_t> requests{0};  // c10d calls made through the table, this process
constexpr int kServerWaitMs = 1000;

C10dStoreHandle *handle_of(void *store) { return static_cast<C10dStoreHandle *>(store); }

// The store under any PrefixStores.
c10::intrusive_ptr<c10d::Store> innermost(const c10::intrusive_ptr<c10d::Store> &store) {
  auto *prefixed = dynamic_cast<c10d::PrefixStore *>(store.get());
  return prefixed != nullptr ? prefixed->getUnderlyingNonPrefixStore() : store;
}

std::string store_name(const c10::intrusive_ptr<c10d::Store> &store) {
  c10::intrusive_ptr<c10d::Store> inner = innermost(store);
  if (auto *launcher = dynamic_cast<LauncherStore *>(inner.get())) return launcher->name();
  if (auto *tcp = dynamic_cast<c10d::TCPStore *>(inner.get()))
    return "PyTorch's TCPStore at " + tcp->getHost() + ":" + std::to_string(tcp->getPort());
  if (dynamic_cast<c10d::FileStore *>(inner.get()) != nullptr) return "PyTorch's FileStore";
  return "PyTorch's c10d store";
}

bool is_timeout_text(const char *what) {
  return std::strstr(what, "timeout") != nullptr || std::strstr(what, "Timeout") != nullptr ||
         std::strstr(what, "timed out") != nullptr;
}

// Runs fn, mapping what it throws; keeps the text for describe().
template <typename Fn>
coll_status_t guarded(C10dStoreHandle *h, Fn &&fn) {
  requests.fetch_add(1, std::memory_order_relaxed);
  h->described = h->name;
  try {
    return fn();
  } catch (const c10d::TimeoutError &e) {
    h->described = h->name + " (" + e.what_without_backtrace() + ")";
    return COLL_ERR_TIMEOUT;
  } catch (const c10::Error &e) {  // DistStoreError, DistNetworkError, FileStore's checks
    const char *what = e.what_without_backtrace();
    h->described = h->name + " (" + what + ")";
    if (dynamic_cast<const c10::DistNetworkError *>(&e) != nullptr) return COLL_ERR_REMOTE;
    if (dynamic_cast<const c10::NotImplementedError *>(&e) != nullptr) return COLL_ERR_UNSUPPORTED;
    return is_timeout_text(what) ? COLL_ERR_TIMEOUT : COLL_ERR_REMOTE;
  } catch (const std::bad_alloc &) {
    return COLL_ERR_NO_MEMORY;
  } catch (const std::exception &e) {
    h->described = h->name + " (" + e.what() + ")";
    return COLL_ERR_REMOTE;
  } catch (...) {
    h->described = h->name + " (an unknown exception)";
    return COLL_ERR_REMOTE;
  }
}

// A malloc'd copy of bytes (libcoll frees it); a zero-length value gets one byte.
coll_status_t copy_out(const std::vector<uint8_t> &bytes, void **value, size_t *len) {
  void *buffer = std::malloc(bytes.empty() ? 1 : bytes.size());
  if (buffer == nullptr) return COLL_ERR_NO_MEMORY;
  if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  *value = buffer;
  *len = bytes.size();
  return COLL_OK;
}

std::vector<uint8_t> bytes_of(const void *data, size_t len) {
  const auto *p = static_cast<const uint8_t *>(data);
  return std::vector<uint8_t>(p, p + len);
}

// Until every key exists or timeout_ms passed (see the top of this file).
coll_status_t wait_for(C10dStoreHandle *h, const std::vector<std::string> &keys, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  if (h->store->check(keys)) return COLL_OK;
  if (timeout_ms > h->server_waits_over_ms) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    h->store->wait(keys, std::max(left, std::chrono::milliseconds(1)));
    return COLL_OK;
  }
  auto pause = kFirstPause;
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) {
      h->described = h->name + " (" + keys[0] + " did not appear within " +
                     std::to_string(timeout_ms) + " ms)";
      return COLL_ERR_TIMEOUT;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    requests.fetch_add(1, std::memory_order_relaxed);
    if (h->store->check(keys)) return COLL_OK;
    pause = std::min(pause * 2, kLongestPause);
  }
}

coll_status_t op_set(void *store, const char *key, const void *value, size_t len, int) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    h->store->set(key, bytes_of(value, len));
    return COLL_OK;
  });
}

coll_status_t op_get(void *store, const char *key, void **value, size_t *len, int timeout_ms) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    coll_status_t st = wait_for(h, {key}, timeout_ms);
    if (st != COLL_OK) return st;
    // There now; a get on a key deleted meanwhile waits no longer than the call may.
    h->store->setTimeout(std::chrono::milliseconds(std::max(timeout_ms, 1)));
    return copy_out(h->store->get(key), value, len);
  });
}

coll_status_t op_add(void *store, const char *key, int64_t delta, int64_t *new_value, int) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    *new_value = h->store->add(key, delta);
    return COLL_OK;
  });
}

// libcoll calls it with expected NULL ("set if absent"): c10d's compareSet with an empty
// expected value, which sets an absent key and returns the value stored either way.
coll_status_t op_compare_set(void *store, const char *key, const void *expected,
                             size_t expected_len, const void *desired, size_t desired_len,
                             void **current, size_t *current_len, int) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    const std::vector<uint8_t> want = bytes_of(desired, desired_len);
    const std::vector<uint8_t> expect =
        expected != nullptr ? bytes_of(expected, expected_len) : std::vector<uint8_t>{};
    std::vector<uint8_t> now = h->store->compareSet(key, expect, want);
    // c10d answers an absent key with the expected value itself: say "absent" then.
    if (now != want && expected != nullptr && now == expect && !h->store->check({key}))
      return COLL_OK;
    return copy_out(now, current, current_len);
  });
}

coll_status_t op_check(void *store, const char *const *keys, size_t nkeys, int *all_exist, int) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    *all_exist = h->store->check(std::vector<std::string>(keys, keys + nkeys)) ? 1 : 0;
    return COLL_OK;
  });
}

coll_status_t op_delete(void *store, const char *key, int *deleted, int) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    const bool gone = h->store->deleteKey(key);
    if (deleted != nullptr) *deleted = gone ? 1 : 0;
    return COLL_OK;
  });
}

coll_status_t op_clone(void *store, int, void **copy) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(h, [&] {
    auto fresh = std::make_unique<C10dStoreHandle>(
        C10dStoreHandle{h->store->clone(), h->name, h->server_waits_over_ms, h->name});
    *copy = fresh.release();
    return COLL_OK;
  });
}

void op_release(void *store) { delete handle_of(store); }

const char *op_describe(void *store) { return handle_of(store)->described.c_str(); }

coll_status_t op_wait(void *store, const char *const *keys, size_t nkeys, int timeout_ms) {
  C10dStoreHandle *h = handle_of(store);
  return guarded(
      h, [&] { return wait_for(h, std::vector<std::string>(keys, keys + nkeys), timeout_ms); });
}

const coll_store_ops_t kOps = {
    COLL_STORE_OPS_VERSION,
    op_set,
    op_get,
    op_add,
    op_compare_set,
    op_check,
    op_delete,
    op_clone,
    op_release,
    nullptr,  // set_owned: c10d stores keep no key for a connection (libcoll leases instead)
    nullptr,  // interrupt: none (libcoll's own calls then wait in short slices)
    op_describe,
    op_wait,
    nullptr,  // num_keys: libcoll never asks; a c10d store's getNumKeys may not be served
};

}  // namespace

const coll_store_ops_t *c10d_store_ops() { return &kOps; }

int64_t c10d_store_requests() { return requests.load(std::memory_order_relaxed); }

std::shared_ptr<C10dStoreHandle> c10d_store_handle(const c10::intrusive_ptr<c10d::Store> &store) {
  TORCH_CHECK(store, "coll: no c10d store to make a communicator on");
  std::string name = store_name(store);
  c10d::Store *inner = innermost(store).get();
  const int server_waits_over_ms = dynamic_cast<LauncherStore *>(inner) != nullptr ? 0
                                   : dynamic_cast<c10d::TCPStore *>(inner) != nullptr
                                       ? kServerWaitMs
                                       : INT_MAX;
  return std::make_shared<C10dStoreHandle>(
      C10dStoreHandle{store, name, server_waits_over_ms, name});
}

coll_comm_t *join_on_store(const std::shared_ptr<C10dStoreHandle> &handle, int rank, int size,
                           std::chrono::milliseconds timeout) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "coll: rank ", rank, ": init: invalid rank ",
              rank, " for group size ", size);
  coll_config_t cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.rank = rank;
  cfg.size = size;
  cfg.local_rank = -1;
  const int64_t ms = timeout.count();
  cfg.timeout_ms = ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, INT_MAX));
  cfg.store_ops = c10d_store_ops();
  cfg.store = handle.get();
  coll_comm_t *comm = nullptr;
  coll_status_t status = coll_comm_init_config(&cfg, &comm);
  if (status != COLL_OK) {
    const char *detail = coll_last_error();
    TORCH_CHECK(false, "coll: rank ", rank, ": init (coll_comm_init_config on ", handle->name,
                ") failed: ", coll_status_name(status), " (", coll_status_string(status), ")",
                detail != nullptr && detail[0] != '\0' ? std::string(": ") + detail : "");
  }
  return comm;
}

}  // namespace torch_coll

#endif
