// ProcessGroupColl's calls that span several tensors or calls, and the group's life:
// coalescing (startCoalescing/endCoalescing: one Work for batch_isend_irecv and the
// coalescing manager), all-gather and reduce-scatter of several tensors in one libcoll
// call each (what FSDP2 and functional collectives call, even for one tensor), split_group,
// shrinking away lost ranks, abort and shutdown.
#include <c10/util/Exception.h>

#include <algorithm>

#include "dtype_map.hpp"
#include "process_group_coll.hpp"
#include "tensor_args.hpp"
#include "without_gil.hpp"

namespace torch_coll {

#if TORCH_VERSION_MAJOR >= 2
void ProcessGroupColl::abort() {
  {
    // The abort hooks first, without the GIL: PyTorch's own (its flight recorder's dump)
    // symbolizes stack traces on a thread of its own, which may need it.
    WithoutGil released;
    failures_->aborting();
  }
  std::shared_ptr<CommWorker> worker = worker_or_null();
  if (!worker) return;
  if (reconfigurable_)
    worker->revoke();
  else
    worker->abort();
}

void ProcessGroupColl::shutdown() {
  std::shared_ptr<CommWorker> worker = worker_or_null();
  if (worker) worker->shutdown();
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupColl::getBackendOptions() {
  // A new object each time: split_group writes the child's name and timeout into it.
  return c10::make_intrusive<Options>("coll", timeout());
}
#endif

#if TORCH_COLL_HAS_COALESCING
void ProcessGroupColl::startCoalescing() {
  std::lock_guard<std::mutex> lock(coalescing_mutex_);
  TORCH_COLL_CHECK(!coalescing_, getRank(), "startCoalescing",
                   "the group is coalescing already (startCoalescing twice)");
  coalescing_ = c10::make_intrusive<WorkColl>(getRank(), c10d::OpType::COALESCED,
                                              std::vector<at::Tensor>{}, worker(), seq_.load());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::endCoalescing() {
  c10::intrusive_ptr<WorkColl> work;
  {
    std::lock_guard<std::mutex> lock(coalescing_mutex_);
    TORCH_COLL_CHECK(coalescing_, getRank(), "endCoalescing", "without startCoalescing");
    work = std::move(coalescing_);
    coalescing_.reset();
  }
  work->close();
  return work;
}

namespace {

// The tensors of a coalesced call: same count on both sides, one device, and for a
// reduction one dtype. `per_input`: how many output elements each input element makes
// (the group size for an all-gather), or the other way round (`per_output`).
void check_coalesced(int rank, const char *call, const std::vector<at::Tensor> &outputs,
                     const std::vector<at::Tensor> &inputs, int64_t per_input, int64_t per_output) {
  TORCH_COLL_CHECK(!inputs.empty(), rank, call, "needs at least one tensor");
  TORCH_COLL_CHECK(outputs.size() == inputs.size(), rank, call, "has ", inputs.size(),
                   " inputs and ", outputs.size(), " outputs; they must pair up");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(rank, call, inputs[i]);
    check_tensor(rank, call, outputs[i]);
    TORCH_COLL_CHECK(
        inputs[i].device() == inputs[0].device() && outputs[i].device() == inputs[0].device(), rank,
        call, "all tensors must be on ", inputs[0].device());
    TORCH_COLL_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), rank, call, "output ", i,
                     " has dtype ", outputs[i].scalar_type(), ", its input ",
                     inputs[i].scalar_type());
    TORCH_COLL_CHECK(outputs[i].numel() * per_output == inputs[i].numel() * per_input, rank, call,
                     "output ", i, " has ", outputs[i].numel(), " elements, expected ",
                     inputs[i].numel() * per_input / per_output);
  }
}

}  // namespace

// Every rank's inputs packed into one slot each (16-byte aligned tensor by tensor), one
// all-gather of the packs, then each output's rows picked out of every rank's pack.
c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allgather_into_tensor_coalesced(
    std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &) {
  const char *call = "all_gather_into_tensor_coalesced";
  const int64_t size = getSize();
  check_coalesced(getRank(), call, outputs, inputs, size, 1);
  size_t packed = 0;
  for (const at::Tensor &t : inputs) packed += slot_bytes(t);
  at::Tensor send = byte_buffer(inputs[0], packed);
  size_t offset = 0;
  for (const at::Tensor &t : inputs) {
    typed_view(send, offset, t).copy_(t);
    offset += slot_bytes(t);
  }
  at::Tensor recv = byte_buffer(inputs[0], packed * static_cast<size_t>(size));
  StartFn start = [send, recv, packed](coll_comm_t *comm, coll_request_t **request, int *) {
    return coll_all_gather_async(send.data_ptr(), recv.data_ptr(), packed, COLL_UINT8, comm,
                                 request);
  };
  std::vector<at::Tensor> outs = outputs;
  std::vector<at::Tensor> ins = inputs;
  auto finish = [recv, outs, ins, packed, size] {
    size_t at_byte = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t n = ins[i].numel();
      at::Tensor flat = outs[i].view({-1});  // contiguous outputs write in place
      at::Tensor dest = outs[i].is_contiguous() ? flat : at::empty({n * size}, outs[i].options());
      for (int64_t r = 0; r < size; ++r)
        dest.narrow(0, r * n, n)
            .copy_(typed_view(recv, static_cast<size_t>(r) * packed + at_byte, ins[i]).view({-1}));
      if (!outs[i].is_contiguous()) outs[i].copy_(dest.view(outs[i].sizes()));
      at_byte += slot_bytes(ins[i]);
    }
  };
  return enqueue(c10d::OpType::COALESCED, call, outputs, std::move(start), finish);
}

// One reduce-scatter over the inputs laid out rank block by rank block: rank r's block
// holds every input's r-th chunk, in order, so that each rank receives its chunk of every
// input, one after another. One dtype (and one op) for all.
c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::ReduceScatterOptions &opts) {
  const char *call = "reduce_scatter_tensor_coalesced";
  const int64_t size = getSize();
  check_coalesced(getRank(), call, outputs, inputs, 1, size);
  for (const at::Tensor &t : inputs)
    TORCH_COLL_CHECK(t.scalar_type() == inputs[0].scalar_type(), getRank(), call,
                     "all tensors must have one dtype (", t.scalar_type(), " and ",
                     inputs[0].scalar_type(), ")");
  int64_t chunk = 0;  // elements each rank receives
  for (const at::Tensor &t : outputs) chunk += t.numel();
  at::Tensor flat = at::empty({chunk * size}, inputs[0].options());
  int64_t offset = 0;
  for (const at::Tensor &t : inputs) {
    const int64_t n = t.numel() / size;
    at::Tensor rows = t.reshape({size, n});
    flat.view({size, chunk}).narrow(1, offset, n).copy_(rows);
    offset += n;
  }
  at::Tensor received = at::empty({chunk}, inputs[0].options());
  std::vector<at::Tensor> outs = outputs;
  auto finish = [received, outs] {
    int64_t at = 0;
    for (const at::Tensor &t : outs) {
      t.copy_(received.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
  };
  return reduce_scatter_buffers(c10d::OpType::COALESCED, call, flat, received, opts.reduceOp,
                                outputs, finish);
}
#endif

#if TORCH_COLL_AT_LEAST(2, 10)
// c10d gives every rank of this group the ranks (of this group) of the new group it is in,
// in the new group's order, or of one it is not in, and a store of the new group's own.
// The members join a new communicator through that store, as a new group does; the others
// return at once. Not coll_comm_split: it needs every rank of the parent once per split,
// and c10d calls a backend that serves two device types twice on a rank that is not a
// member but once on a member.
c10::intrusive_ptr<c10d::Backend> ProcessGroupColl::split(
    const c10::intrusive_ptr<c10d::Store> &store, const std::vector<int> &ranks,
    const c10::intrusive_ptr<Options> &opts) {
  const char *call = "split_group";
  TORCH_COLL_CHECK(!ranks.empty(), getRank(), call, "no ranks");
  for (int r : ranks) check_root(getRank(), getSize(), call, r);
  const auto mine = std::find(ranks.begin(), ranks.end(), getRank());
  if (mine == ranks.end()) return nullptr;
  const std::chrono::milliseconds timeout = opts ? opts->timeout : this->timeout();
  return c10::make_intrusive<ProcessGroupColl>(store, static_cast<int>(mine - ranks.begin()),
                                               static_cast<int>(ranks.size()), timeout);
}
#endif

coll_agreement_t ProcessGroupColl::agree(uint32_t flag) {
  WithoutGil released;
  coll_agreement_t agreement{};
  agreement.flag = flag;
  std::string error;
  coll_status_t status = worker()->exclusive(
      [&](coll_comm_t *comm) {
        coll_status_t st = coll_comm_agree(comm, &agreement);
        if (st != COLL_OK) error = coll_failure_text(getRank(), "agree (coll_comm_agree)", st);
        return st;
      },
      false);
  TORCH_CHECK(status == COLL_OK, error);
  return agreement;
}

std::vector<int64_t> ProcessGroupColl::agree_failed() {
  const coll_agreement_t agreement = agree(UINT32_MAX);
  return std::vector<int64_t>(agreement.failed, agreement.failed + agreement.nfailed);
}

c10::intrusive_ptr<ProcessGroupColl> ProcessGroupColl::shrink_to(
    const std::vector<int64_t> &exclude, bool revoke, std::chrono::milliseconds timeout) {
  const char *call = "shrink";
  std::vector<int> ranks;
  for (int64_t r : exclude) {
    check_root(getRank(), getSize(), call, r);
    ranks.push_back(static_cast<int>(r));
  }
  std::shared_ptr<CommWorker> parent = worker();
  WithoutGil released;
  coll_comm_t *fresh = nullptr;
  std::string error;
  coll_status_t status = parent->exclusive(
      [&](coll_comm_t *comm) {
        coll_status_t st =
            coll_comm_shrink(comm, ranks.data(), static_cast<int>(ranks.size()), &fresh);
        if (st != COLL_OK) error = coll_failure_text(getRank(), "shrink (coll_comm_shrink)", st);
        return st;
      },
      revoke);
  if (status != COLL_OK && error.empty())
    error = coll_failure_text(getRank(), "shrink (coll_comm_revoke)", status);
  TORCH_CHECK(status == COLL_OK, error);
  int rank = 0, size = 0;
  coll_comm_rank(fresh, &rank);
  coll_comm_size(fresh, &size);
  if (timeout.count() > 0)
    coll_comm_set_timeout(fresh, static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX)));
  return c10::make_intrusive<ProcessGroupColl>(fresh, rank, size, timeout, parent, store_,
                                               reconfigurable_);
}

#if TORCH_COLL_AT_LEAST(2, 15)
c10::intrusive_ptr<c10d::Backend> ProcessGroupColl::shrink(
    const std::vector<int64_t> &ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<Options> &opts_override) {
  TORCH_COLL_CHECK(shrink_flags == 0 || shrink_flags == 1, getRank(), "shrink", "shrink_flags ",
                   shrink_flags, " is neither SHRINK_DEFAULT (0) nor SHRINK_ABORT (1)");
  return shrink_to(ranks_to_exclude, shrink_flags == 1,
                   opts_override ? opts_override->timeout : timeout());
}
#endif

}  // namespace torch_coll
