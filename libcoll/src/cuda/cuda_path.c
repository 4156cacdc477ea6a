/* Collectives on CUDA device buffers. Where the buffers live is found with
 * cudaPointerGetAttributes; a device call then runs one of two ways:
 *  - every rank on this host (and COLL_TRANSPORT auto or cuda_ipc): the schedule runs on
 *    a second transport set of cuda_ipc connections, connected at the first device call,
 *    with local copies and reductions as kernels on the communicator's own stream;
 *  - otherwise (tcp or ib peers, or a forced host transport): the whole INPUT is staged
 *    into pinned host memory, the host schedule runs there, and OUTPUT is copied back
 *    (sizes per collective from sched_buffer_counts; reduce copies back at the root only).
 * A stream call (core/stream_calls.c queues it) first waits here for its gate: the
 * caller's stream has reached it. A premul_sum call is scaled here, after the gate (its
 * input is then what the stream's earlier work left): staged, in the pinned copy; on
 * cuda_ipc and at one rank, through pinned memory into a device input of the path's own.
 * COLL_CUDA=0 never looks for device buffers (no CUDA context). The path owns its links (the
 * cuda_ipc transports, their counters, device scratch) and hands them to the executor; it never
 * changes the communicator's. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "cuda/cuda_path.h"
#include "mem/mem_cuda.h"
#include "mem/memops.h"

enum { GATE_SPIN_NS = 20000, GATE_SLEEP_NS = 10000, MAX_RETIRED = 16 };
/* Scratch and pinned staging grow to powers of two from 1 MiB, so a run of growing calls
 * retires few buffers (see `retired`). */
#define MIN_STAGING_BYTES ((size_t)1 << 20)

struct cuda_path {
  bool probed;  /* devices counted (once per communicator) */
  int ndevices; /* 0: never look at pointers */
  int device;   /* GPU of the first device call; -1 before it */
  void *stream; /* ours, non-blocking */
  bool decided; /* transport path chosen (at the first device call) */
  bool use_ipc;
  exec_links_t links; /* the cuda_ipc connections, their counters, device scratch */
  void *pinned;       /* host staging */
  size_t pinned_bytes;
  void *premul_in; /* device: a premul_sum call's scaled input (cuda_ipc path) */
  size_t premul_in_bytes;
  /* Outgrown buffers, freed at destroy: cudaFree and cudaFreeHost may synchronise the
   * device, which must not happen while our host callback holds a caller's stream. */
  void *retired[MAX_RETIRED];
  bool retired_pinned[MAX_RETIRED];
  int nretired;
};

static void retire(cuda_path_t *path, void *p, bool pinned) {
  if (p == NULL) return;
  if (path->nretired == MAX_RETIRED) {
    path->nretired--;
    if (path->retired_pinned[path->nretired])
      mem_cuda_host_free(path->retired[path->nretired]);
    else
      mem_cuda_free(path->retired[path->nretired]);
  }
  path->retired[path->nretired] = p;
  path->retired_pinned[path->nretired] = pinned;
  path->nretired++;
}

static coll_status_t state(cuda_path_t **slot, cuda_path_t **out) {
  if (*slot == NULL) {
    *slot = calloc(1, sizeof **slot);
    if (*slot == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory (CUDA state)");
    (*slot)->device = -1;
  }
  *out = *slot;
  return COLL_OK;
}

/* The state, with the devices counted once (none when COLL_CUDA=0). */
static coll_status_t probed_state(cuda_path_t **slot, cuda_path_t **out) {
  coll_status_t st = state(slot, out);
  if (st != COLL_OK || (*out)->probed) return st;
  int64_t enabled = 1;
  st = coll_env_int("COLL_CUDA", 0, 1, 1, &enabled);
  if (st != COLL_OK) return st;
  (*out)->ndevices = enabled ? mem_cuda_device_count() : 0;
  (*out)->probed = true;
  return COLL_OK;
}

coll_status_t cuda_probe(cuda_path_t **slot) {
  cuda_path_t *path = NULL;
  return probed_state(slot, &path);
}

/* Point-to-point transfers stay on host memory: the cuda_ipc connections are made by
 * every rank together at its first device collective, which a send between two ranks
 * cannot start, and the host path would read device memory as host memory. */
coll_status_t cuda_refuse_device(cuda_path_t **slot, const char *what, const void *buf) {
  cuda_path_t *path = NULL;
  coll_status_t st = probed_state(slot, &path);
  if (st != COLL_OK || path->ndevices == 0 || buf == NULL) return st;
  int dev = -1;
  st = mem_cuda_ptr_device(buf, &dev);
  if (st != COLL_OK || dev < 0) return st;
  return coll_error(COLL_ERR_UNSUPPORTED,
                    "%s: buf is GPU %d memory; point-to-point calls take host buffers only "
                    "(copy through host memory, or use a collective such as all_to_all)",
                    what, dev);
}

coll_status_t cuda_classify(cuda_path_t **slot, const coll_base_t *base, const char *what,
                            const coll_call_t *call, cuda_where_t *where) {
  *where = (cuda_where_t){.device = -1};
  if (call->count == 0) return COLL_OK;
  cuda_path_t *path = NULL;
  coll_status_t st = probed_state(slot, &path);
  if (st != COLL_OK) return st;
  if (path->ndevices == 0) return COLL_OK;
  int sdev = -1, rdev = -1;
  st = mem_cuda_ptr_device(call->sendbuf, &sdev);
  /* reduce ignores recvbuf away from the root (it may be NULL or anywhere): the call
   * runs where sendbuf lives. */
  bool ignores_recvbuf = call->kind == COLL_KIND_REDUCE && base->rank != call->root;
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
  if (path->device >= 0 && sdev != path->device)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "%s: buffers on GPU %d, but this communicator works on GPU %d (the device "
                      "of its first device call)",
                      what, sdev, path->device);
  where->on_device = true;
  where->device = sdev;
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
static coll_status_t decide_path(const coll_base_t *base, cuda_path_t *path) {
  const char *forced = coll_env_str("COLL_TRANSPORT");
  bool ipc_allowed =
      forced == NULL || strcmp(forced, "auto") == 0 || strcmp(forced, "cuda_ipc") == 0;
  path->decided = true;
  path->use_ipc = base->nranks > 1 && base->local_count == base->nranks && ipc_allowed;
  if (!path->use_ipc) {
    if (base->nranks > 1) /* one rank only copies sendbuf to recvbuf on the device */
      coll_log(COLL_LOG_INFO, "device buffers go through pinned host memory (%s)",
               base->local_count != base->nranks ? "ranks on several hosts" : "transport forced");
    return COLL_OK;
  }
  const char **hosts = calloc((size_t)base->nranks, sizeof *hosts);
  if (hosts == NULL) return coll_error(COLL_ERR_NO_MEMORY, "out of memory (cuda_ipc setup)");
  for (int r = 0; r < base->nranks; r++) hosts[r] = "this host";
  char prefix[BASE_KEY_PREFIX_MAX + 8];
  snprintf(prefix, sizeof prefix, "%sdev/", base->key_prefix);
  transport_setup_t setup = {
      .store = base->store,
      .key_prefix = prefix,
      .rank = base->rank,
      .nranks = base->nranks,
      .host_ids = hosts,
      .forced = "cuda_ipc",
      .timeout_ms = base->timeout_ms,
      .device = true,
  };
  transport_set_t *set = NULL;
  coll_status_t st = transport_set_connect(&setup, &set);
  free(hosts);
  if (st == COLL_OK) st = exec_links_init(&path->links, set, base->nranks);
  if (st == COLL_OK) {
    path->links.device = true;
    path->links.stream = path->stream;
  } else {
    transport_set_close(set);
  }
  if (st != COLL_OK)
    return coll_error_prefix(st, "rank %d: connecting cuda_ipc for device buffers: ", base->rank);
  coll_log(COLL_LOG_INFO, "device buffers use cuda_ipc between the %d ranks of this host",
           base->nranks);
  return COLL_OK;
}

coll_status_t cuda_prepare(cuda_path_t *path, const coll_base_t *base, const cuda_where_t *where) {
  int previous;
  coll_status_t st = enter_device(where->device, &previous);
  if (st == COLL_OK && path->stream == NULL) st = mem_cuda_stream_create(&path->stream);
  if (st == COLL_OK && path->device < 0) path->device = where->device;
  if (st == COLL_OK && !path->decided) st = decide_path(base, path);
  leave_device(where->device, previous);
  return st;
}

static size_t staging_size(size_t bytes) {
  size_t size = MIN_STAGING_BYTES;
  while (size < bytes && size <= SIZE_MAX / 2) size *= 2;
  return size < bytes ? bytes : size;
}

/* Device scratch for the schedule: allocated on first need, grown, never freed before
 * destroy (freeing would synchronise the device while a caller's stream may be held by
 * the stream call's host callback). */
static coll_status_t ensure_device_scratch(cuda_path_t *path, size_t bytes) {
  if (bytes <= path->links.scratch_bytes) return COLL_OK;
  void *p = NULL;
  size_t size = staging_size(bytes);
  coll_status_t st = mem_cuda_alloc(&p, size);
  if (st != COLL_OK) return st;
  retire(path, path->links.scratch, false);
  path->links.scratch = p;
  path->links.scratch_bytes = size;
  return COLL_OK;
}

/* Pinned staging, grown like the scratch (the old buffer retired). */
static coll_status_t ensure_pinned(cuda_path_t *path, size_t bytes) {
  if (bytes <= path->pinned_bytes) return COLL_OK;
  retire(path, path->pinned, true);
  path->pinned = NULL;
  path->pinned_bytes = 0;
  size_t size = staging_size(bytes);
  coll_status_t st = mem_cuda_host_alloc(&path->pinned, size);
  if (st == COLL_OK) path->pinned_bytes = size;
  return st;
}

static coll_status_t ensure_premul_input(cuda_path_t *path, size_t bytes) {
  if (bytes <= path->premul_in_bytes) return COLL_OK;
  void *p = NULL;
  size_t size = staging_size(bytes);
  coll_status_t st = mem_cuda_alloc(&p, size);
  if (st != COLL_OK) return st;
  retire(path, path->premul_in, false);
  path->premul_in = p;
  path->premul_in_bytes = size;
  return COLL_OK;
}

/* premul_sum's first step where the schedule reads device memory: the call's INPUT
 * (in_count elements) is copied to pinned memory, scaled there by the call's scalar,
 * and copied to dst on the device (there is no scaling kernel). */
static coll_status_t scale_through_host(cuda_path_t *path, const coll_base_t *base,
                                        const coll_call_t *call, size_t in_count, void *dst) {
  size_t bytes = in_count * coll_dtype_size(call->dtype);
  coll_status_t st = ensure_pinned(path, bytes);
  if (st == COLL_OK) st = mem_cuda_copy_async(path->pinned, call->sendbuf, bytes, path->stream);
  if (st == COLL_OK) st = mem_cuda_stream_wait(path->stream, base->timeout_ms);
  if (st != COLL_OK) return st;
  mem_host_scale(path->pinned, path->pinned, in_count, call->dtype, call->premul_scalar);
  st = mem_cuda_copy_async(dst, path->pinned, bytes, path->stream);
  /* Waited for: the pinned copy is reused by the next call. */
  return st == COLL_OK ? mem_cuda_stream_wait(path->stream, base->timeout_ms) : st;
}

static coll_status_t wait_gate(coll_base_t *base, const cuda_where_t *where) {
  if (where->gate == NULL) return COLL_OK;
  int64_t start = coll_now_ns();
  for (;;) {
    int g = atomic_load_explicit(where->gate, memory_order_acquire);
    if (g > 0) return COLL_OK;
    if (g < 0)
      return coll_error(COLL_ERR_SYSTEM, "rank %d: the call could not be queued on its stream",
                        base->rank);
    int64_t waited = coll_now_ns() - start;
    if (base_aborted(base))
      return coll_error(COLL_ERR_ABORTED, "rank %d: aborted while waiting for a CUDA stream",
                        base->rank);
    if (waited > (int64_t)base->timeout_ms * 1000000LL)
      return coll_error(COLL_ERR_TIMEOUT,
                        "rank %d: the CUDA stream of the call did not reach it within %d ms",
                        base->rank, base->timeout_ms);
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
 * is copied into pinned memory (and scaled there in place for premul_sum, which then
 * runs as the SUM it is), the host schedule runs on it (AVG divides there), and the
 * OUTPUT is copied back where the collective writes one. */
static coll_status_t run_staged(cuda_path_t *path, exec_t *exec, exec_links_t *host_links,
                                const coll_call_t *call) {
  const coll_base_t *base = exec->base;
  size_t esz = coll_dtype_size(call->dtype), in_count, out_count;
  sched_buffer_counts(call->kind, call->count, base->nranks, &in_count, &out_count);
  size_t in_bytes = in_count * esz, out_bytes = out_count * esz;
  bool one_region = stages_in_place(call->kind);
  size_t need = one_region ? (in_bytes > out_bytes ? in_bytes : out_bytes) : in_bytes + out_bytes;
  coll_status_t st = ensure_pinned(path, need);
  if (st != COLL_OK) return st;
  char *host_in = path->pinned, *host_out = one_region ? host_in : host_in + in_bytes;
  bool needs_input = call->kind != COLL_KIND_BROADCAST || base->rank == call->root;
  bool writes_output = call->kind != COLL_KIND_REDUCE || base->rank == call->root;
  if (needs_input) st = mem_cuda_copy_async(host_in, call->sendbuf, in_bytes, path->stream);
  if (st == COLL_OK) st = mem_cuda_stream_wait(path->stream, base->timeout_ms);
  if (st != COLL_OK) return st;
  if (call->premul && needs_input)
    mem_host_scale(host_in, host_in, in_count, call->dtype, call->premul_scalar);
  coll_call_t host = *call;
  host.sendbuf = host_in;
  host.recvbuf = host_out;
  st = exec_run(exec, host_links, &host);
  if (st != COLL_OK || !writes_output) return st;
  st = mem_cuda_copy_async(call->recvbuf, host_out, out_bytes, path->stream);
  return st == COLL_OK ? mem_cuda_stream_wait(path->stream, base->timeout_ms) : st;
}

/* On cuda_ipc: the executor runs the schedule over this path's links (device scratch
 * sized first). AVG sums, then divides OUTPUT on the device where the host path would
 * (all_reduce, reduce_scatter, reduce at the root). premul_sum runs as a SUM with the
 * scaled copy of INPUT (premul_in) as its sendbuf. */
static coll_status_t run_ipc(cuda_path_t *path, exec_t *exec, const coll_call_t *call) {
  const coll_base_t *base = exec->base;
  coll_call_t inner = *call;
  if (inner.op == COLL_AVG) inner.op = COLL_SUM;
  coll_status_t st = COLL_OK;
  if (call->premul) {
    size_t in_count, out_count;
    sched_buffer_counts(call->kind, call->count, base->nranks, &in_count, &out_count);
    st = ensure_premul_input(path, in_count * coll_dtype_size(call->dtype));
    if (st == COLL_OK) st = scale_through_host(path, base, call, in_count, path->premul_in);
    if (st != COLL_OK) return st;
    inner.sendbuf = path->premul_in;
  }
  size_t scratch = 0;
  st = exec_scratch_needed(exec, &inner, &scratch);
  if (st == COLL_OK) st = ensure_device_scratch(path, scratch);
  if (st == COLL_OK) st = exec_run(exec, &path->links, &inner);
  if (st == COLL_OK && call->op == COLL_AVG &&
      coll_kind_output_averaged(call->kind, call->root, base->rank)) {
    st = mem_cuda_finish_avg_async(call->recvbuf, call->count, call->dtype, base->nranks,
                                   path->stream);
    if (st == COLL_OK) st = mem_cuda_stream_wait(path->stream, base->timeout_ms);
  }
  return st;
}

static coll_status_t run_on_device(cuda_path_t *path, exec_t *exec, exec_links_t *host_links,
                                   const coll_call_t *call, const cuda_where_t *where) {
  coll_base_t *base = exec->base;
  coll_status_t st = wait_gate(base, where);
  if (st != COLL_OK) return st;
  if (base->nranks == 1) {
    /* Every collective copies its one block (INPUT and OUTPUT both hold count elements;
     * in place the copy is skipped). */
    /* premul_sum: the scaled input is the result, written straight to recvbuf. */
    if (call->premul) return scale_through_host(path, base, call, call->count, call->recvbuf);
    size_t bytes = call->count * coll_dtype_size(call->dtype);
    st = mem_cuda_copy_async(call->recvbuf, call->sendbuf, bytes, path->stream);
    return st == COLL_OK ? mem_cuda_stream_wait(path->stream, base->timeout_ms) : st;
  }
  return path->use_ipc ? run_ipc(path, exec, call) : run_staged(path, exec, host_links, call);
}

coll_status_t cuda_run(cuda_path_t *path, exec_t *exec, exec_links_t *host_links,
                       const coll_call_t *call, const cuda_where_t *where) {
  if (path == NULL || path->stream == NULL || !path->decided)
    return coll_error(COLL_ERR_INTERNAL, "device call reached the CUDA path unprepared");
  int previous;
  coll_status_t st = enter_device(where->device, &previous);
  if (st == COLL_OK) st = run_on_device(path, exec, host_links, call, where);
  leave_device(where->device, previous);
  /* A stream call has no waiter to hand the error to: the communicator carries it. */
  if (st != COLL_OK && where->gate != NULL) base_mark_failed(exec->base, st);
  return st;
}

coll_status_t cuda_wait_default_stream(const coll_base_t *base) {
  return mem_cuda_stream_wait(NULL, base->timeout_ms);
}

size_t cuda_path_device_bytes(const cuda_path_t *x) {
  return x == NULL ? 0 : x->links.scratch_bytes + x->premul_in_bytes;
}

void cuda_free(cuda_path_t **slot) {
  cuda_path_t *path = *slot;
  if (path == NULL) return;
  int previous = -1;
  if (path->device >= 0) enter_device(path->device, &previous);
  transport_set_close(path->links.transports);
  mem_cuda_free(path->links.scratch);
  path->links.scratch = NULL;
  exec_links_free(&path->links);
  mem_cuda_host_free(path->pinned);
  mem_cuda_free(path->premul_in);
  for (int i = 0; i < path->nretired; i++) {
    if (path->retired_pinned[i])
      mem_cuda_host_free(path->retired[i]);
    else
      mem_cuda_free(path->retired[i]);
  }
  mem_cuda_stream_destroy(path->stream);
  if (path->device >= 0) leave_device(path->device, previous);
  free(path);
  *slot = NULL;
}

const char *cuda_path_name(const cuda_path_t *path, int nranks) {
  if (nranks == 1) return "device copy";
  if (path == NULL || !path->decided) return "device (not set up)";
  return path->use_ipc ? "cuda_ipc" : "pinned staging";
}
