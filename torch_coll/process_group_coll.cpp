// ProcessGroupColl's joining and its all-reduce family: broadcast, all_reduce (and the
// coalesced form), reduce, barrier and monitored_barrier, each one libcoll call. From
// PyTorch 2.10 a group's communicator lives on the c10d store PyTorch hands the backend
// (c10d_store.hpp); on 1.13 rank 0 makes a libcoll unique id, whose store its process hosts.
#include "process_group_coll.hpp"

#include <Python.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <climits>
#include <cstring>

#include "dtype_map.hpp"
#include "tensor_args.hpp"

namespace torch_coll {

namespace {

int clamp_ms(std::chrono::milliseconds timeout) {
  int64_t ms = timeout.count();
  if (ms <= 0) return 0;  // libcoll's default (COLL_TIMEOUT_MS)
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

#if !TORCH_COLL_ON_C10D_STORE
// Keys in the group's PrefixStore: every joining rank adds 1 to the first, so that a
// group made again over the same store (destroy_process_group, then init_process_group
// under torchrun's one store) finds its own generation's unique id, not the last one's.
// (On the c10d store libcoll numbers the communicators made there itself, per rank.)
constexpr const char *kJoinCountKey = "torch_coll/joined";
constexpr const char *kUniqueIdKey = "torch_coll/unique_id/";

coll_comm_t *join_group(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                        std::chrono::milliseconds timeout) {
  TORCH_CHECK(store, "coll: rank ", rank, ": init: no store");
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "coll: rank ", rank, ": init: invalid rank ",
              rank, " for group size ", size);
  const int64_t joined = store->add(kJoinCountKey, 1);  // 1 .. size for the first group
  const std::string id_key = kUniqueIdKey + std::to_string((joined - 1) / size);
  coll_unique_id_t id;
  if (rank == 0) {
    coll_status_t status = coll_get_unique_id(&id);
    TORCH_CHECK(status == COLL_OK, coll_failure_text(rank, "init (coll_get_unique_id)", status));
    store->set(id_key, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    try {
      store->wait({id_key}, timeout);
    } catch (const std::exception &e) {
      TORCH_CHECK(false, "coll: rank ", rank, ": init: rank 0's unique id did not arrive in the ",
                  "store within ", timeout.count(), " ms: ", e.what());
    }
    std::vector<uint8_t> bytes = store->get(id_key);
    TORCH_CHECK(bytes.size() == sizeof id.internal, "coll: rank ", rank,
                ": init: the unique id in the store has ", bytes.size(), " bytes, expected ",
                sizeof id.internal);
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  coll_comm_t *comm = nullptr;
  coll_status_t status = coll_comm_init_rank(&comm, size, id, rank, clamp_ms(timeout));
  TORCH_CHECK(status == COLL_OK, coll_failure_text(rank, "init (coll_comm_init_rank)", status));
  return comm;
}
#endif

// The PREMUL_SUM factor in the reduced dtype, as coll_op_create_premul_sum reads it.
struct Scalar {
  unsigned char bytes[8];
};
Scalar scalar_in(coll_dtype_t dtype, double value) {
  Scalar s;
  std::memset(s.bytes, 0, sizeof s.bytes);
  auto put = [&s](auto v) { std::memcpy(s.bytes, &v, sizeof v); };
  switch (dtype) {
    case COLL_FLOAT16:
      put(c10::Half(static_cast<float>(value)));
      break;
    case COLL_BFLOAT16:
      put(c10::BFloat16(static_cast<float>(value)));
      break;
    case COLL_FLOAT32:
      put(static_cast<float>(value));
      break;
    case COLL_FLOAT64:
      put(value);
      break;
    case COLL_INT8:
      put(static_cast<int8_t>(value));
      break;
    case COLL_UINT8:
      put(static_cast<uint8_t>(value));
      break;
    case COLL_INT32:
      put(static_cast<int32_t>(value));
      break;
    default:
      put(static_cast<int64_t>(value));
      break;
  }
  return s;
}

}  // namespace

ProcessGroupColl::ProcessGroupColl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                                   std::chrono::milliseconds timeout, bool reconfigurable)
    : BackendBase(rank, size), timeout_ms_(timeout.count()), reconfigurable_(reconfigurable) {
#if TORCH_COLL_ON_C10D_STORE
  store_ = store;
  if (reconfigurable) return;  // no communicator before reconfigure()
  std::shared_ptr<C10dStoreHandle> handle = c10d_store_handle(store);
  worker_ = make_worker(join_on_store(handle, rank, size, timeout), rank, handle);
#else
  TORCH_CHECK(!reconfigurable, "coll: enable_reconfigure needs PyTorch 2.14 or later");
  worker_ = make_worker(join_group(store, rank, size, timeout), rank, nullptr);
#endif
}

ProcessGroupColl::ProcessGroupColl(coll_comm_t *comm, int rank, int size,
                                   std::chrono::milliseconds timeout,
                                   std::shared_ptr<CommWorker> parent,
                                   c10::intrusive_ptr<c10d::Store> store, bool reconfigurable)
    : BackendBase(rank, size),
      timeout_ms_(timeout.count()),
      store_(std::move(store)),
      reconfigurable_(reconfigurable),
      parent_(std::move(parent)) {
  worker_ = make_worker(comm, rank, parent_ ? parent_->store_keep() : nullptr);
}

std::shared_ptr<CommWorker> ProcessGroupColl::make_worker(coll_comm_t *comm, int rank,
                                                          std::shared_ptr<void> store_keep) {
  const uint64_t generation = failures_->next_generation();
  std::shared_ptr<GroupFailures> failures = failures_;
  FailureFn report = [failures, generation](coll_status_t status, const std::string &message) {
    failures->call_failed(generation, status, message);
  };
  auto worker =
      std::make_shared<CommWorker>(comm, rank, timeout(), std::move(store_keep), std::move(report));
  // Members of a reconfigurable group come and go on their own: no destroy barrier.
  if (reconfigurable_) worker->leave_alone();
  return worker;
}

std::shared_ptr<CommWorker> ProcessGroupColl::worker_or_null() const {
  std::lock_guard<std::mutex> lock(worker_mutex_);
  return worker_;
}

std::shared_ptr<CommWorker> ProcessGroupColl::worker() const {
  std::shared_ptr<CommWorker> worker = worker_or_null();
  TORCH_CHECK(worker, "coll: rank ", getRank(),
              ": the group has no communicator: it was made with enable_reconfigure=True and "
              "waits for reconfigure(), or its last reconfigure() failed");
  return worker;
}

void ProcessGroupColl::refuse_after_failure(const char *call) {
  if (!reconfigurable_ || failures_->kind() == GroupFailures::Kind::kNone) return;
  TORCH_CHECK(false, "coll: rank ", getRank(), ": ", call,
              ": the group's communicator failed; it takes no calls until reconfigure(): ",
              failures_->message());
}

// The worker may drop the last reference to a tensor that Python still knows, and freeing it
// takes the GIL: joining the worker while this thread holds the GIL (Python's
// destroy_process_group, or the group's last reference going away) would wait forever.
// This group's communicator goes before the parent's (which may host the store).
// (No lock: nobody else holds this group any more.)
ProcessGroupColl::~ProcessGroupColl() {
  if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) {
    PyThreadState *saved = PyEval_SaveThread();
    release_worker(std::move(worker_));
    release_worker(std::move(parent_));
    PyEval_RestoreThread(saved);
    return;
  }
  release_worker(std::move(worker_));
  release_worker(std::move(parent_));
}

c10::intrusive_ptr<BackendBase> ProcessGroupColl::create(
    const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
    const std::chrono::duration<float> &timeout, bool reconfigurable) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<ProcessGroupColl>(store, rank, size, ms, reconfigurable);
}

c10::intrusive_ptr<WorkColl> ProcessGroupColl::enqueue(c10d::OpType type, const char *call,
                                                       std::vector<at::Tensor> outputs,
                                                       StartFn start, std::function<void()> finish,
                                                       bool blocking,
                                                       std::function<void(coll_comm_t *)> cleanup) {
  refuse_after_failure(call);
  std::shared_ptr<CommWorker> worker = this->worker();
  auto job = std::make_unique<Job>();
  job->call = call;
  job->work = c10::make_intrusive<WorkColl>(getRank(), type, std::move(outputs), worker, ++seq_);
  job->start = std::move(start);
  job->finish = std::move(finish);
  job->blocking = blocking;
  job->cleanup = std::move(cleanup);
  c10::intrusive_ptr<WorkColl> work = job->work;
  {
    std::lock_guard<std::mutex> lock(coalescing_mutex_);
    if (coalescing_) coalescing_->add_member(work);
  }
  worker->submit(std::move(job));
  return work;
}

c10::intrusive_ptr<WorkColl> ProcessGroupColl::enqueue_reduction(
    c10d::OpType type, const char *call, const ReducePlan &plan, ReduceStart start,
    std::vector<at::Tensor> outputs, std::function<void()> finish) {
  if (!plan.premul) {
    const coll_op_t op = plan.op;
    StartFn run = [start = std::move(start), op](coll_comm_t *comm, coll_request_t **request,
                                                 int *) { return start(comm, op, request); };
    return enqueue(type, call, std::move(outputs), std::move(run), std::move(finish));
  }
  // The op libcoll makes for this call, released after it.
  auto made = std::make_shared<std::pair<bool, coll_op_t>>(false, plan.op);
  StartFn run = [start = std::move(start), plan, made](coll_comm_t *comm, coll_request_t **request,
                                                       int *) {
    Scalar factor = scalar_in(plan.dtype, plan.premul_factor);
    coll_op_t op = plan.op;
    coll_status_t status = coll_op_create_premul_sum(comm, factor.bytes, plan.dtype, &op);
    if (status != COLL_OK) return status;
    *made = {true, op};
    return start(comm, op, request);
  };
  auto cleanup = [made](coll_comm_t *comm) {
    if (made->first) coll_op_destroy(comm, made->second);
  };
  return enqueue(type, call, std::move(outputs), std::move(run), std::move(finish), false,
                 std::move(cleanup));
}

// root < 0: all-reduce; otherwise reduce to root.
c10::intrusive_ptr<WorkColl> ProcessGroupColl::reduce_buffer(c10d::OpType type, const char *call,
                                                             at::Tensor buffer,
                                                             const c10d::ReduceOp &op, int root,
                                                             std::vector<at::Tensor> outputs,
                                                             std::function<void()> finish) {
  const ReducePlan plan = plan_reduction(getRank(), call, buffer.scalar_type(), op);
  const size_t count = static_cast<size_t>(buffer.numel() * plan.reals_per_element);
  ReduceStart start = [buffer, count, plan, root](coll_comm_t *comm, coll_op_t op,
                                                  coll_request_t **request) {
    void *data = buffer.data_ptr();
    if (root < 0) return coll_all_reduce_async(data, data, count, plan.dtype, op, comm, request);
    return coll_reduce_async(data, data, count, plan.dtype, op, root, comm, request);
  };
  return enqueue_reduction(type, call, plan, std::move(start), std::move(outputs),
                           std::move(finish));
}

c10::intrusive_ptr<WorkColl> ProcessGroupColl::reduce_scatter_buffers(
    c10d::OpType type, const char *call, at::Tensor input, at::Tensor output,
    const c10d::ReduceOp &op, std::vector<at::Tensor> outputs, std::function<void()> finish) {
  const ReducePlan plan = plan_reduction(getRank(), call, output.scalar_type(), op);
  const size_t count = static_cast<size_t>(output.numel() * plan.reals_per_element);
  ReduceStart start = [input, output, count, plan](coll_comm_t *comm, coll_op_t op,
                                                   coll_request_t **request) {
    return coll_reduce_scatter_async(input.data_ptr(), output.data_ptr(), count, plan.dtype, op,
                                     comm, request);
  };
  return enqueue_reduction(type, call, plan, std::move(start), std::move(outputs),
                           std::move(finish));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts) {
  const at::Tensor &tensor = single_tensor(getRank(), "all_reduce", tensors);
  Staged staged(tensor);
  return reduce_buffer(c10d::OpType::ALLREDUCE, "all_reduce", staged.buffer, opts.reduceOp, -1,
                       tensors, [staged] { staged.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::allreduce_coalesced(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) {
  const char *call = "all_reduce_coalesced";
  TORCH_COLL_CHECK(!tensors.empty(), getRank(), call, "needs at least one tensor");
  for (const at::Tensor &t : tensors) {
    check_tensor(getRank(), call, t);
    TORCH_COLL_CHECK(t.scalar_type() == tensors[0].scalar_type(), getRank(), call,
                     "all tensors must have the same dtype (", t.scalar_type(), " and ",
                     tensors[0].scalar_type(), ")");
    TORCH_COLL_CHECK(t.device() == tensors[0].device(), getRank(), call,
                     "all tensors must be on the same device");
  }
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor &t : tensors) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  std::vector<at::Tensor> outputs = tensors;
  auto finish = [flat, outputs] {
    int64_t offset = 0;
    for (const at::Tensor &t : outputs) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  };
  return reduce_buffer(c10d::OpType::ALLREDUCE_COALESCED, call, flat, opts.reduceOp, -1, outputs,
                       finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts) {
  const at::Tensor &tensor = single_tensor(getRank(), "reduce", tensors);
  check_root(getRank(), getSize(), "reduce", opts.rootRank);
  TORCH_COLL_CHECK(opts.rootTensor == 0, getRank(), "reduce", "invalid root tensor ",
                   opts.rootTensor);
  Staged staged(tensor);
  return reduce_buffer(c10d::OpType::REDUCE, "reduce", staged.buffer, opts.reduceOp,
                       static_cast<int>(opts.rootRank), tensors, [staged] { staged.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts) {
  const at::Tensor &tensor = single_tensor(getRank(), "broadcast", tensors);
  check_root(getRank(), getSize(), "broadcast", opts.rootRank);
  TORCH_COLL_CHECK(opts.rootTensor == 0, getRank(), "broadcast", "invalid root tensor ",
                   opts.rootTensor);
  Staged staged(tensor);
  const int root = static_cast<int>(opts.rootRank);
  const WireType wire = wire_type(tensor.scalar_type());
  const size_t count = wire.count(byte_count(tensor));
  at::Tensor buffer = staged.buffer;
  StartFn start = [buffer, count, wire, root](coll_comm_t *comm, coll_request_t **request, int *) {
    return coll_broadcast_async(buffer.data_ptr(), count, wire.dtype, root, comm, request);
  };
  return enqueue(c10d::OpType::BROADCAST, "broadcast", tensors, std::move(start),
                 [staged] { staged.copy_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupColl::barrier(const c10d::BarrierOptions &) {
  StartFn start = [](coll_comm_t *comm, coll_request_t **request, int *) {
    return coll_barrier_async(comm, request);
  };
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, std::move(start), nullptr);
}

// A barrier under the given deadline: a rank that does not arrive fails it on every rank
// with libcoll's message naming the awaited peer. Like any libcoll timeout, that failure
// ends the group (later calls raise it too).
void ProcessGroupColl::monitoredBarrier(const c10d::BarrierOptions &opts, bool) {
  const int group_ms = clamp_ms(timeout());
  // No timeout given (c10d's kUnsetTimeout, -1): the group's; 0 ms: as short as libcoll
  // allows (its 0 means "the default"), as gloo fails at once.
  const int barrier_ms = opts.timeout.count() < 0    ? group_ms
                         : opts.timeout.count() == 0 ? 1
                                                     : clamp_ms(opts.timeout);
  StartFn start = [group_ms, barrier_ms](coll_comm_t *comm, coll_request_t **, int *) {
    coll_status_t status = coll_comm_set_timeout(comm, barrier_ms);
    if (status != COLL_OK) return status;
    status = coll_barrier(comm);
    if (status == COLL_OK) status = coll_comm_set_timeout(comm, group_ms);
    return status;
  };
  c10::intrusive_ptr<WorkColl> work =
      enqueue(c10d::OpType::BARRIER, "monitored_barrier", {}, std::move(start), nullptr, true);
  work->wait();
}

}  // namespace torch_coll
