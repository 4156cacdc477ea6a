// libcoll's store interface (coll.h, coll_store_ops_t) over PyTorch's c10d::Store: with it a
// communicator keeps its rendezvous, liveness and agreement on the store PyTorch hands the
// backend (torchrun's agent store, a TCPStore, a FileStore), which outlives every rank, so
// that any rank, rank 0 included, may die. Built from PyTorch 2.10 (c10d::Store::clone,
// which libcoll needs for its threads); 1.13 keeps the unique-id path (process_group_coll.cpp).
#pragma once

#include "backend_base.hpp"

#define TORCH_COLL_ON_C10D_STORE TORCH_COLL_AT_LEAST(2, 10)

#if TORCH_COLL_ON_C10D_STORE

#include <coll.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace torch_coll {

// One handle libcoll calls through: a c10d store object (each clone a connection of its
// own) and its name for libcoll's messages. A handle serves one thread at a time.
struct C10dStoreHandle {
  c10::intrusive_ptr<c10d::Store> store;
  std::string name;       // "PyTorch's TCPStore at 127.0.0.1:29500"
  int server_waits_over_ms;  // waits longer than this are the server's (c10d_store.cpp)
  std::string described;  // name, and the last failure's text (describe())
};

// The table libcoll calls (coll_config_t.store_ops).
const coll_store_ops_t *c10d_store_ops();
// How many requests this process's communicators made to c10d stores so far (each call
// through the table, and each check of a polled wait): what liveness on a store costs.
int64_t c10d_store_requests();

// The handle a communicator is made on (coll_config_t.store): libcoll clones it whenever it
// needs a connection (its threads, a shrink's new communicator), so it must live as long as
// any communicator made from it; whoever holds a communicator holds this too.
std::shared_ptr<C10dStoreHandle> c10d_store_handle(const c10::intrusive_ptr<c10d::Store> &store);

// A new communicator of `size` ranks on `store` (coll_comm_init_config with the caller's
// store), this process being `rank`; timeout: the rendezvous's deadline and the
// communicator's. Collective over the ranks. Throws with libcoll's message on failure.
coll_comm_t *join_on_store(const std::shared_ptr<C10dStoreHandle> &handle, int rank, int size,
                           std::chrono::milliseconds timeout);

}  // namespace torch_coll

#endif
