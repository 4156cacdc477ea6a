/* Collectives on CUDA device buffers. Where the buffers live is found with
 * cudaPointerGetAttributes; a device call then runs one of two ways:
 *  - every rank on this host (and COLL_TRANSPORT auto or cuda_ipc): the schedule runs on
 *    a second transport set of cuda_ipc connections, connected at the first device call,
 *    with local copies and reductions as kernels on the communicator's own stream;
 *  - otherwise (tcp or ib peers, or a forced host transport): the whole INPUT is staged
 *    into pinned host memory, the host schedule runs there, and OUTPUT is copied back
 *    (sizes per collective from sched_buffer_counts; reduce copies back at the root only).
 * Stream calls (coll_*_stream) are queued at once; a host callback enqueued on the
 * caller's stream opens the call's gate when the stream reaches it and holds the stream
 * until the collective has completed, so work queued later waits for it (the NCCL
 * contract). COLL_CUDA_STREAM_MODE=sync instead waits for the stream and runs the call
 * before returning. COLL_CUDA=0 never looks for device buffers (no CUDA context). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "core/comm.h"
#include "mem/mem_cuda.h"

enum { GATE_SPIN_NS = 20000, GATE_SLEEP_NS = 10000, HOLD_GRACE_MS = 5000, MAX_RETIRED = 16 };
/* Scratch and pinned staging grow to powers of two from 1 MiB, so a run of growing calls
 * retires few buffers (see `retired`). */
#define MIN_STAGING_BYTES ((size_t)1 << 20)

struct exec_cuda {
  bool probed;     /* devices counted (once per communicator) */
  int ndevices;    /* 0: never look at pointers */
  int device;      /* GPU of the first device call; -1 before it */
  void *stream;    /* ours, non-blocking */
  bool decided;    /* transport path chosen (at the first device call) */
  bool use_ipc;
  transport_set_t *set; /* cuda_ipc connections */
  exec_peer_t *peers;
  void *scratch; /* device */
  size_t scratch_bytes;
  void *pinned; /* host staging */
  size_t pinned_bytes;
  /* Outgrown buffers, freed at destroy: cudaFree and cudaFreeHost may synchronise the
   * device, which must not happen while our host callback holds a caller's stream. */
  void *retired[MAX_RETIRED];
  bool retired_pinned[MAX_RETIRED];
  int nretired;
};

static void retire(struct exec_cuda *x, void *p, bool pinned) {
  if (p == NULL) return;
  if (x->nretired == MAX_RETIRED) {
    x->nretired--;
    if (x->retired_pinned[x->nretired]) mem_cuda_host_free(x->retired[x->nretired]);
    else mem_cuda_free(x->retired[x->nretired]);
  }
  x->retired[x->nretired] = p;
  x->retired_pinned[x->nretired] = pinned;
  x->nretired++;
}

/* One stream call, shared by the host callback and the executor. */
typedef struct {
  atomic_int gate; /* 0: stream not there yet, 1: reached, -1: cancelled */
  coll_comm_t *comm;
  coll_request_t *req;
} stream_op_t;

static coll_status_t state(coll_comm_t *comm, struct exec_cuda **out) {
  if (comm->cuda == NULL) {
    comm->cuda = calloc(1, sizeof *comm->cuda);
    if (comm->cuda == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory (CUDA state)");
    comm->cuda->device = -1;
  }
  *out = comm->cuda;
  return COLL_OK;
}

/* The state, with the devices counted once (none when COLL_CUDA=0). */
static coll_status_t probed_state(coll_comm_t *comm, struct exec_cuda **out) {
  coll_status_t st = state(comm, out);
  if (st != COLL_OK || (*out)->probed) return st;
  int64_t enabled = 1;
  st = coll_env_int("COLL_CUDA", 0, 1, 1, &enabled);
  if (st != COLL_OK) return st;
  (*out)->ndevices = enabled ? mem_cuda_device_count() : 0;
  (*out)->probed = true;
  return COLL_OK;
}

/* Point-to-point transfers stay on host memory: the cuda_ipc connections are made by
 * every rank together at its first device collective, which a send between two ranks
 * cannot start, and the host path would read device memory as host memory. */
coll_status_t exec_cuda_refuse_device(coll_comm_t *comm, const char *what, const void *buf) {
  struct exec_cuda *x = NULL;
  coll_status_t st = probed_state(comm, &x);
  if (st != COLL_OK || x->ndevices == 0 || buf == NULL) return st;
  int dev = -1;
  st = mem_cuda_ptr_device(buf, &dev);
  if (st != COLL_OK || dev < 0) return st;
  return coll_error(COLL_ERR_UNSUPPORTED,
                    "%s: buf is GPU %d memory; point-to-point calls take host buffers only "
                    "(copy through host memory, or use a collective such as all_to_all)",
                    what, dev);
}

coll_status_t exec_cuda_classify(coll_comm_t *comm, const char *what, exec_call_t *call) {
  call->on_device = false;
  call->device = -1;
  if (call->count == 0) return COLL_OK;
  struct exec_cuda *x = NULL;
  coll_status_t st = probed_state(comm, &x);
  if (st != COLL_OK) return st;
  if (x->ndevices == 0) return COLL_OK;
  int sdev = -1, rdev = -1;
  st = mem_cuda_ptr_device(call->sendbuf, &sdev);
  /* reduce ignores recvbuf away from the root (it may be NULL or anywhere): the call
   * runs where sendbuf lives. */
  bool ignores_recvbuf = call->kind == COLL_KIND_REDUCE && comm->rank != call->root;
  if (st == COLL_OK && !ignores_recvbuf) st = mem_cuda_ptr_device(call->recvbuf, &rdev);
  if (st != COLL_OK) return st;
  if (ignores_recvbuf) rdev = sdev;
  if (sdev != rdev) {
    char swhere[32] = "host", rwhere[32] = "host";
    if (sdev >= 0) snprintf(swhere, sizeof swhere, "GPU %d", sdev);
    if (rdev >= 0) snprintf(rwhere, sizeof rwhere, "GPU %d", rdev);
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: sendbuf is in %s and recvbuf in %s memory: both must be on the same "
                      "device, or both in host memory",
                      what, swhere, rwhere);
  }
  if (sdev < 0) return COLL_OK;
  if (x->device >= 0 && sdev != x->device)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: buffers on GPU %d, but this communicator works on GPU %d (the device "
                      "of its first device call)",
                      what, sdev, x->device);
  call->on_device = true;
  call->device = sdev;
  return COLL_OK;
}

/* Make `device` current on this thread, remembering the previous one. */
static coll_status_t enter_device(int device, int *previous) {
  *previous = -1;
  if (mem_cuda_get_device(previous) != COLL_OK) *previous = -1;
  return *previous == device ? COLL_OK : mem_cuda_set_device(device);
}

static void leave_device(int device, int previous) {
  if (previous >= 0 && previous != device) mem_cuda_set_device(previous);
}

/* The path of device calls, chosen alike on every rank from what they all share: the
 * rank count on this host and the transport COLL_TRANSPORT forces (agreed at init). */
static coll_status_t decide_path(coll_comm_t *comm, struct exec_cuda *x) {
  const char *forced = coll_env_str("COLL_TRANSPORT");
  bool ipc_allowed = forced == NULL || strcmp(forced, "auto") == 0 || strcmp(forced, "cuda_ipc") == 0;
  x->decided = true;
  x->use_ipc = comm->nranks > 1 && comm->local_count == comm->nranks && ipc_allowed;
  if (!x->use_ipc) {
    if (comm->nranks > 1) /* one rank only copies sendbuf to recvbuf on the device */
      coll_log(COLL_LOG_INFO, "device buffers go through pinned host memory (%s)",
               comm->local_count != comm->nranks ? "ranks on several hosts" : "transport forced");
    return COLL_OK;
  }
  x->peers = calloc((size_t)comm->nranks, sizeof *x->peers);
  const char **hosts = calloc((size_t)comm->nranks, sizeof *hosts);
  if (x->peers == NULL || hosts == NULL) {
    free(hosts);
    return coll_error(COLL_ERR_NO_MEMORY, "out of memory (cuda_ipc setup)");
  }
  for (int r = 0; r < comm->nranks; r++) hosts[r] = "this host";
  char prefix[COMM_KEY_PREFIX_MAX + 8];
  snprintf(prefix, sizeof prefix, "%sdev/", comm->key_prefix);
  transport_setup_t setup = {
      .store = comm->store,
      .key_prefix = prefix,
      .rank = comm->rank,
      .nranks = comm->nranks,
      .host_ids = hosts,
      .forced = "cuda_ipc",
      .timeout_ms = comm->timeout_ms,
      .device = true,
  };
  coll_status_t st = transport_set_connect(&setup, &x->set);
  free(hosts);
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: connecting cuda_ipc for device buffers: ", comm->rank);
  coll_log(COLL_LOG_INFO, "device buffers use cuda_ipc between the %d ranks of this host",
           comm->nranks);
  return COLL_OK;
}

coll_status_t exec_cuda_prepare(coll_comm_t *comm, const exec_call_t *call) {
  struct exec_cuda *x = comm->cuda;
  int previous;
  coll_status_t st = enter_device(call->device, &previous);
  if (st == COLL_OK && x->stream == NULL) st = mem_cuda_stream_create(&x->stream);
  if (st == COLL_OK && x->device < 0) x->device = call->device;
  if (st == COLL_OK && !x->decided) st = decide_path(comm, x);
  leave_device(call->device, previous);
  return st;
}

static size_t staging_size(size_t bytes) {
  size_t size = MIN_STAGING_BYTES;
  while (size < bytes && size <= SIZE_MAX / 2) size *= 2;
  return size < bytes ? bytes : size;
}

/* Device scratch for the schedule (exec_run asks with the schedule's scratch size while
 * a cuda_ipc run has the device buffers swapped in): allocated on first need, grown,
 * never freed before destroy (freeing would synchronise the device while a caller's
 * stream may be held by our callback). */
coll_status_t exec_cuda_scratch(coll_comm_t *comm, size_t bytes) {
  struct exec_cuda *x = comm->cuda;
  if (x == NULL) return coll_error(COLL_ERR_INTERNAL, "device scratch without device state");
  if (bytes > x->scratch_bytes) {
    void *p = NULL;
    size_t size = staging_size(bytes);
    coll_status_t st = mem_cuda_alloc(&p, size);
    if (st != COLL_OK) return st;
    retire(x, x->scratch, false);
    x->scratch = p;
    x->scratch_bytes = size;
  }
  comm->exec.scratch = x->scratch;
  comm->exec.scratch_bytes = x->scratch_bytes;
  return COLL_OK;
}

static coll_status_t wait_gate(coll_comm_t *comm, const exec_call_t *call) {
  if (call->gate == NULL) return COLL_OK;
  int64_t start = coll_now_ns();
  for (;;) {
    int g = atomic_load_explicit(call->gate, memory_order_acquire);
    if (g > 0) return COLL_OK;
    if (g < 0)
      return coll_error(COLL_ERR_SYSTEM, "rank %d: the call could not be queued on its stream",
                        comm->rank);
    int64_t waited = coll_now_ns() - start;
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed))
      return coll_error(COLL_ERR_ABORTED, "rank %d: aborted while waiting for a CUDA stream",
                        comm->rank);
    if (waited > (int64_t)comm->timeout_ms * 1000000LL)
      return coll_error(COLL_ERR_TIMEOUT,
                        "rank %d: the CUDA stream of the call did not reach it within %d ms",
                        comm->rank, comm->timeout_ms);
    if (waited < GATE_SPIN_NS) {
      sched_yield();
    } else {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = GATE_SLEEP_NS};
      nanosleep(&ts, NULL);
    }
  }
}

/* Collectives whose in-place form passes one pointer twice (INPUT and OUTPUT the same
 * size): their staging is one pinned region used in place. The others (all_gather,
 * reduce_scatter, all_to_all) get INPUT and OUTPUT side by side. */
static bool stages_in_place(coll_kind_t kind) {
  return kind == COLL_KIND_ALL_REDUCE || kind == COLL_KIND_BROADCAST || kind == COLL_KIND_REDUCE;
}

/* Whole-buffer staging through pinned host memory for host transports: the device INPUT
 * is copied into pinned memory, the host schedule runs on it (AVG divides there), and
 * the OUTPUT is copied back where the collective writes one. */
static coll_status_t run_staged(coll_comm_t *comm, struct exec_cuda *x, const exec_call_t *call) {
  size_t esz = coll_dtype_size(call->dtype), in_count, out_count;
  sched_buffer_counts(call->kind, call->count, comm->nranks, &in_count, &out_count);
  size_t in_bytes = in_count * esz, out_bytes = out_count * esz;
  bool one_region = stages_in_place(call->kind);
  size_t need = one_region ? (in_bytes > out_bytes ? in_bytes : out_bytes) : in_bytes + out_bytes;
  coll_status_t st = COLL_OK;
  if (need > x->pinned_bytes) {
    retire(x, x->pinned, true);
    x->pinned = NULL;
    x->pinned_bytes = 0;
    size_t size = staging_size(need);
    st = mem_cuda_host_alloc(&x->pinned, size);
    if (st != COLL_OK) return st;
    x->pinned_bytes = size;
  }
  char *host_in = x->pinned, *host_out = one_region ? host_in : host_in + in_bytes;
  bool needs_input = call->kind != COLL_KIND_BROADCAST || comm->rank == call->root;
  bool writes_output = call->kind != COLL_KIND_REDUCE || comm->rank == call->root;
  if (needs_input) st = mem_cuda_copy_async(host_in, call->sendbuf, in_bytes, x->stream);
  if (st == COLL_OK) st = mem_cuda_stream_wait(x->stream, comm->timeout_ms);
  if (st != COLL_OK) return st;
  exec_call_t host = *call;
  host.sendbuf = host_in;
  host.recvbuf = host_out;
  host.on_device = false;
  host.device_ready = false;
  host.device = -1;
  host.gate = NULL;
  st = exec_run(comm, &host);
  if (st != COLL_OK || !writes_output) return st;
  st = mem_cuda_copy_async(call->recvbuf, host_out, out_bytes, x->stream);
  return st == COLL_OK ? mem_cuda_stream_wait(x->stream, comm->timeout_ms) : st;
}

/* On cuda_ipc: the executor runs the schedule as usual, with the communicator's
 * transports, per-peer counters and scratch swapped for the device ones for the run
 * (only the executing thread touches them; exec_run sizes the device scratch through
 * exec_cuda_scratch). AVG sums, then divides OUTPUT on the device where the host path
 * would (exec_run: all_reduce, reduce_scatter, reduce at the root). */
static coll_status_t run_ipc(coll_comm_t *comm, struct exec_cuda *x, const exec_call_t *call) {
  exec_call_t inner = *call;
  inner.device_ready = true;
  if (inner.op == COLL_AVG) inner.op = COLL_SUM;
  transport_set_t *host_set = comm->transports;
  exec_peer_t *host_peers = comm->exec.peers;
  void *host_scratch = comm->exec.scratch;
  size_t host_scratch_bytes = comm->exec.scratch_bytes;
  comm->transports = x->set;
  comm->exec.peers = x->peers;
  comm->exec.scratch = x->scratch;
  comm->exec.scratch_bytes = x->scratch_bytes;
  coll_status_t st = exec_run(comm, &inner);
  comm->transports = host_set;
  comm->exec.peers = host_peers;
  comm->exec.scratch = host_scratch;
  comm->exec.scratch_bytes = host_scratch_bytes;
  if (st == COLL_OK && call->op == COLL_AVG &&
      coll_kind_output_averaged(call->kind, call->root, comm->rank)) {
    st = mem_cuda_finish_avg_async(call->recvbuf, call->count, call->dtype, comm->nranks,
                                   x->stream);
    if (st == COLL_OK) st = mem_cuda_stream_wait(x->stream, comm->timeout_ms);
  }
  return st;
}

static coll_status_t run_on_device(coll_comm_t *comm, const exec_call_t *call) {
  struct exec_cuda *x = comm->cuda;
  coll_status_t st = wait_gate(comm, call);
  if (st != COLL_OK) return st;
  if (comm->nranks == 1) {
    /* Every collective copies its one block (INPUT and OUTPUT both hold count elements;
     * in place the copy is skipped). */
    size_t bytes = call->count * coll_dtype_size(call->dtype);
    st = mem_cuda_copy_async(call->recvbuf, call->sendbuf, bytes, x->stream);
    return st == COLL_OK ? mem_cuda_stream_wait(x->stream, comm->timeout_ms) : st;
  }
  return x->use_ipc ? run_ipc(comm, x, call) : run_staged(comm, x, call);
}

coll_status_t exec_cuda_local(coll_comm_t *comm, const exec_call_t *call, void *dst,
                              const void *src, size_t count, bool reduce) {
  struct exec_cuda *x = comm->cuda;
  coll_op_t op = call->kind == COLL_KIND_BROADCAST ? COLL_SUM : call->op;
  coll_status_t st =
      reduce ? mem_cuda_reduce_async(dst, dst, src, count, call->dtype, op, x->stream)
             : mem_cuda_copy_async(dst, src, count * coll_dtype_size(call->dtype), x->stream);
  return st == COLL_OK ? mem_cuda_stream_wait(x->stream, comm->timeout_ms) : st;
}

coll_status_t exec_cuda_run(coll_comm_t *comm, const exec_call_t *call) {
  if (comm->cuda == NULL || comm->cuda->stream == NULL || !comm->cuda->decided)
    return coll_error(COLL_ERR_INTERNAL, "device call reached the executor unprepared");
  int previous;
  coll_status_t st = enter_device(call->device, &previous);
  if (st == COLL_OK) st = run_on_device(comm, call);
  leave_device(call->device, previous);
  /* A stream call has no waiter to hand the error to: the communicator carries it. */
  if (st != COLL_OK && call->gate != NULL) comm_mark_failed(comm, st);
  return st;
}

/* CUDA's host-callback thread: the stream has reached the call. Open the gate, then hold
 * the stream until the collective completes (bounded, so a stuck peer cannot wedge the
 * stream forever: the communicator then reports the failure). No CUDA calls here. */
static void stream_reached(void *arg) {
  stream_op_t *op = arg;
  coll_comm_t *comm = op->comm;
  atomic_store_explicit(&op->gate, 1, memory_order_release);
  int64_t limit = coll_now_ns() + ((int64_t)comm->timeout_ms + HOLD_GRACE_MS) * 1000000LL;
  bool done = false;
  pthread_mutex_lock(&comm->mu);
  while (!(done = atomic_load_explicit(&op->req->done, memory_order_acquire))) {
    if (coll_now_ns() > limit) break;
    struct timespec ts = coll_timespec_in_ms(20);
    pthread_cond_timedwait(&comm->done_cv, &comm->mu, &ts);
  }
  pthread_mutex_unlock(&comm->mu);
  if (!done) return; /* the executor still owns both: leak them rather than race */
  free(op->req);
  free(op);
}

coll_status_t exec_cuda_submit_stream(coll_comm_t *comm, exec_call_t *call) {
  const char *mode = coll_env_str("COLL_CUDA_STREAM_MODE");
  if (mode != NULL && strcmp(mode, "sync") == 0) {
    coll_status_t st = mem_cuda_stream_wait(call->stream, comm->timeout_ms);
    return st == COLL_OK ? progress_run_blocking(comm, call) : st;
  }
  if (mode != NULL && strcmp(mode, "hostfn") != 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "COLL_CUDA_STREAM_MODE='%s': use hostfn or sync",
                      mode);
  stream_op_t *op = calloc(1, sizeof *op);
  if (op == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory for a stream call");
  atomic_init(&op->gate, 0);
  op->comm = comm;
  call->gate = &op->gate;
  coll_status_t st = progress_submit(comm, call, &op->req);
  if (st != COLL_OK) {
    free(op);
    return st;
  }
  st = mem_cuda_stream_callback(call->stream, stream_reached, op);
  if (st != COLL_OK) {
    /* Cancel: the executor fails the call at its gate; then nobody else holds op. */
    char message[COMM_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s", coll_last_error());
    atomic_store_explicit(&op->gate, -1, memory_order_release);
    coll_request_wait(&op->req);
    free(op);
    return coll_error(st, "%s", message);
  }
  return COLL_OK;
}

coll_status_t exec_cuda_wait_default_stream(coll_comm_t *comm) {
  return mem_cuda_stream_wait(NULL, comm->timeout_ms);
}

void exec_cuda_free(coll_comm_t *comm) {
  struct exec_cuda *x = comm->cuda;
  if (x == NULL) return;
  int previous = -1;
  if (x->device >= 0) enter_device(x->device, &previous);
  transport_set_close(x->set);
  free(x->peers);
  mem_cuda_free(x->scratch);
  mem_cuda_host_free(x->pinned);
  for (int i = 0; i < x->nretired; i++) {
    if (x->retired_pinned[i]) mem_cuda_host_free(x->retired[i]);
    else mem_cuda_free(x->retired[i]);
  }
  mem_cuda_stream_destroy(x->stream);
  if (x->device >= 0) leave_device(x->device, previous);
  free(x);
  comm->cuda = NULL;
}

const char *exec_cuda_path_name(const coll_comm_t *comm) {
  const struct exec_cuda *x = comm->cuda;
  if (comm->nranks == 1) return "device copy";
  if (x == NULL || !x->decided) return "device (not set up)";
  return x->use_ipc ? "cuda_ipc" : "pinned staging";
}

size_t exec_cuda_staging_bytes(const coll_comm_t *comm) {
  const struct exec_cuda *x = comm->cuda;
  if (x == NULL) return 0;
  return x->scratch_bytes + x->pinned_bytes + (x->set ? transport_set_staging_bytes(x->set) : 0);
}
