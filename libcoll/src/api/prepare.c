/* The path every collective call takes (all kinds but P2P, whose calls p2p_group.c
 * builds): argument checks that know each collective's buffer sizes and in-place form,
 * where the buffers live, the algorithm choice (forced, the cost model, the arena or a
 * zero-copy window; identical on every rank) with an INFO line giving the estimates of
 * the alternatives and the execution path (chosen by core/path_choice.c, which the
 * dispatch asks too), then on to core/: blocking, through a request, recorded in an open
 * group, or queued on a CUDA stream (the _stream forms). collectives.c holds the entry
 * points. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "common/error.h"
#include "common/log.h"
#include "core/path_choice.h"
#include "mem/mem_cuda.h"

/* What the cost model needs of a call. */
static sched_params_t call_params(const coll_comm_t *comm, const coll_call_t *call) {
  return (sched_params_t){.collective = call->kind,
                          .count = call->count,
                          .dtype = call->dtype,
                          .rank = comm->base.rank,
                          .nranks = comm->base.nranks,
                          .root = call->root,
                          .segment_bytes = comm->segment_bytes,
                          .vcounts = call->vcounts,
                          .topo = base_topo(&comm->base)};
}

/* The transport towards the ring neighbour, for the INFO line. */
static const char *transport_name(const coll_comm_t *comm) {
  if (comm->base.nranks == 1 || comm->transports == NULL) return "none";
  transport_conn_t *c =
      transport_set_conn(comm->transports, (comm->base.rank + 1) % comm->base.nranks);
  return c != NULL ? c->ops->name : "none";
}

void api_log_choice(coll_comm_t *comm, const char *what, const prepared_call_t *pc) {
  const coll_call_t *call = &pc->call;
  sched_params_t params = call_params(comm, call);
  const sched_params_t *p = &params;
  bool arena_ok = path_arena_can_run(comm, pc); /* estimated only where it could run */
  char alts[256] = "";
  size_t len = 0;
  for (int a = COLL_ALGO_RING; a < COLL_ALGO_COUNT && len < sizeof alts; a++) {
    if (a == COLL_ALGO_ARENA && !arena_ok) continue;
    double t = algo_predict((coll_algo_t)a, p, &comm->cost);
    if (!isfinite(t) || t <= 0) continue;
    int n = snprintf(alts + len, sizeof alts - len, "%s%s %.1f us", len ? ", " : "",
                     coll_algo_name((coll_algo_t)a), t * 1e6);
    if (n < 0) break;
    len += (size_t)n;
  }
  /* The path and its reason from the chooser the dispatch asks too (core/path_choice.c). */
  path_choice_t choice = path_choose(comm, pc);
  char reason[224];
  path_describe(comm, pc, choice, reason, sizeof reason);
  coll_algo_t built = algo_effective(call->algo, p);
  if (built != call->algo) { /* two_level on nodes of unequal rank counts */
    size_t rlen = strlen(reason);
    snprintf(reason + rlen, sizeof reason - rlen,
             "; it needs the same number of ranks on every node, so %s runs",
             coll_algo_name(built));
  }
  bool reduces = coll_kind_reduces(call->kind);
  const char *op = !reduces ? "" : call->premul ? "premul_sum" : coll_op_name(call->op);
  size_t shown = call->count; /* all_to_allv's count is nranks: show the elements it sends */
  if (call->kind == COLL_KIND_ALL_TO_ALLV) {
    shown = 0;
    for (int q = 0; q < comm->base.nranks; q++)
      shown += sched_v(call->vcounts, comm->base.nranks, SCHED_V_SENDCOUNTS, q);
  }
  coll_log(COLL_LOG_INFO, "%s: %zu x %s%s%s, algo %s (%s), path %s, transport %s (estimates: %s)",
           what, shown, coll_dtype_name(call->dtype), reduces ? " " : "", op,
           coll_algo_name(call->algo), reason, path_name(choice.path),
           choice.path == PATH_CUDA ? cuda_path_name(comm->cuda, comm->base.nranks)
                                    : transport_name(comm),
           alts[0] ? alts : "none");
}

static bool overlaps(uintptr_t a, size_t alen, uintptr_t b, size_t blen) {
  return a < b + blen && b < a + alen;
}

/* The in-place forms allowed per collective; any other overlap is refused. who: "rank R:
 * coll_x", how the call's argument errors begin. */
static coll_status_t check_buffers(coll_comm_t *comm, const char *who, const coll_call_t *c,
                                   size_t esz) {
  size_t in_count, out_count;
  sched_buffer_counts(c->kind, c->count, comm->base.nranks, &in_count, &out_count);
  /* Away from the root: reduce and gather do not touch recvbuf, scatter not sendbuf. */
  bool off_root = comm->base.rank != c->root;
  bool rooted_out = (c->kind == COLL_KIND_REDUCE || c->kind == COLL_KIND_GATHER) && off_root;
  bool rooted_in = c->kind == COLL_KIND_SCATTER && off_root;
  if ((c->sendbuf == NULL && !rooted_in) || (c->recvbuf == NULL && !rooted_out))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: %s is NULL with count %zu", who,
                      c->sendbuf == NULL ? "sendbuf" : "recvbuf", c->count);
  /* Multiplied, not divided: two 64-bit divisions were a twentieth of an 8-byte call. */
  size_t total;
  if (__builtin_mul_overflow(c->count, esz * (size_t)comm->base.nranks, &total) ||
      total > SIZE_MAX / 4)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: count %zu of %s overflows the size", who,
                      c->count, coll_dtype_name(c->dtype));
  if (c->recvbuf == NULL || c->sendbuf == NULL) return COLL_OK;
  if ((c->kind == COLL_KIND_GATHER || c->kind == COLL_KIND_SCATTER) && off_root) return COLL_OK;
  uintptr_t s = (uintptr_t)c->sendbuf, r = (uintptr_t)c->recvbuf;
  size_t block = c->count * esz, rank_off = (size_t)comm->base.rank * block;
  bool in_place = false;
  switch (c->kind) {
    case COLL_KIND_ALL_GATHER:
    case COLL_KIND_GATHER: /* at the root: rank_off is the root's block */
      in_place = s == r + rank_off;
      break;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_SCATTER:
      in_place = r == s + rank_off;
      break;
    case COLL_KIND_ALL_TO_ALL:
      break;
    default:
      in_place = s == r;
  }
  if (!in_place && overlaps(s, in_count * esz, r, out_count * esz))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: sendbuf and recvbuf overlap (%s)", who,
                      c->kind == COLL_KIND_ALL_GATHER ? "in-place is sendbuf == recvbuf + rank * "
                                                        "sendcount"
                      : c->kind == COLL_KIND_REDUCE_SCATTER
                          ? "in-place is recvbuf == sendbuf + rank "
                            "* recvcount"
                      : c->kind == COLL_KIND_ALL_TO_ALL ? "all_to_all has no in-place form"
                      : c->kind == COLL_KIND_GATHER
                          ? "in-place at the root is sendbuf == recvbuf + root * sendcount"
                      : c->kind == COLL_KIND_SCATTER
                          ? "in-place at the root is recvbuf == sendbuf + root * recvcount"
                          : "in-place passes the same pointer twice");
  return COLL_OK;
}

/* gather, scatter and all_to_allv take host buffers only (the CUDA path stages and
 * classifies by the other collectives' buffer rules): device buffers are refused. The
 * buffer a rank does not use (NULL allowed) is classified as the one it uses. */
static coll_status_t refuse_device_buffers(coll_comm_t *comm, const char *who,
                                           const coll_call_t *call) {
  if (call->kind != COLL_KIND_GATHER && call->kind != COLL_KIND_SCATTER &&
      call->kind != COLL_KIND_ALL_TO_ALLV)
    return COLL_OK;
  coll_call_t probe = *call;
  bool off_root = comm->base.rank != call->root;
  if (probe.recvbuf == NULL || (call->kind == COLL_KIND_GATHER && off_root))
    probe.recvbuf = (void *)(uintptr_t)probe.sendbuf;
  if (probe.sendbuf == NULL || (call->kind == COLL_KIND_SCATTER && off_root))
    probe.sendbuf = probe.recvbuf;
  cuda_where_t where;
  coll_status_t st = cuda_classify(&comm->cuda, &comm->base, who, &probe, &where);
  if (st == COLL_OK && where.on_device)
    st = coll_error(COLL_ERR_UNSUPPORTED,
                    "%s: device buffers (GPU %d) are not supported by %s; use host buffers", who,
                    where.device, sched_kind_name(call->kind));
  return st;
}

/* "rank R: what" into who. Formatting it took 5 % of an 8-byte all-reduce, so the texts
 * are kept per thread for the last few (rank, what) pairs (a program alternates a few
 * calls: the bench a blocking and an _async all-reduce): `what` is the API function's
 * name, a string literal, so its address names it. */
enum { WHO_CACHE = 4 };
static void format_who(char who[API_WHO_MAX], int rank, const char *what) {
  static _Thread_local struct {
    int rank;
    const char *what;
    size_t len;
    char text[API_WHO_MAX];
  } cache[WHO_CACHE];
  static _Thread_local unsigned next;
  for (int i = 0; i < WHO_CACHE; i++)
    if (cache[i].what == what && cache[i].rank == rank) {
      memcpy(who, cache[i].text, cache[i].len + 1);
      return;
    }
  unsigned k = next++ % WHO_CACHE;
  int n = snprintf(cache[k].text, sizeof cache[k].text, "rank %d: %s", rank, what);
  cache[k].len = n < 0                              ? 0
                 : (size_t)n < sizeof cache[k].text ? (size_t)n
                                                    : sizeof cache[k].text - 1;
  cache[k].text[cache[k].len] = '\0';
  cache[k].what = what;
  cache[k].rank = rank;
  memcpy(who, cache[k].text, cache[k].len + 1);
}

coll_status_t api_prepare(coll_comm_t *comm, const char *what, prepared_call_t *pc) {
  coll_call_t *call = &pc->call;
  pc->where = (cuda_where_t){.device = -1};
  pc->windows = (window_pair_t){0};
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  st = base_check_usable(&comm->base, what);
  if (st != COLL_OK) return st;
  /* Argument errors name the rank and the call (docs/usage.md), like every later error. */
  char who[API_WHO_MAX];
  format_who(who, comm->base.rank, what);
  size_t esz = coll_dtype_size(call->dtype);
  if (esz == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", who, (int)call->dtype);
  st = api_resolve_op(comm, who, call); /* a premul_sum op becomes a SUM here (ops.c) */
  if (st != COLL_OK) return st;
  if (coll_kind_rooted(call->kind) && (call->root < 0 || call->root >= comm->base.nranks))
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "%s: root %d is outside [0, %d)", who, call->root,
                      comm->base.nranks);
  if (call->count > 0) {
    /* all_to_allv's buffers were checked with its counts (all_to_allv.c). */
    st = call->kind == COLL_KIND_ALL_TO_ALLV ? COLL_OK : check_buffers(comm, who, call, esz);
    if (st == COLL_OK) st = refuse_device_buffers(comm, who, call);
    if (st != COLL_OK) return st;
    /* Device buffers (cuda/): the cuda_ipc connections are made at the first device
     * call, which every rank makes alike. */
    st = cuda_classify(&comm->cuda, &comm->base, who, call, &pc->where);
    if (st == COLL_OK && pc->where.on_device)
      st = cuda_prepare(comm->cuda, &comm->base, &pc->where);
    if (st != COLL_OK) return st;
  }
  if (comm->algo_check_pending) {
    st = rdv_check_algo(comm);
    if (st != COLL_OK) return st;
    comm->algo_check_pending = false;
  }
  call->algo = comm->algo;
  call->segment_bytes = comm->segment_bytes;
  /* Forced where the arena cannot run, the cost model chooses instead. The facts are the
   * same on every rank, so is the choice. */
  bool arena_ok = path_arena_can_run(comm, pc);
  if (call->algo == COLL_ALGO_ARENA && !arena_ok) {
    if (call->kind == COLL_KIND_ALL_REDUCE)
      coll_log(COLL_LOG_INFO,
               "%s: algo arena is forced but cannot run here (%s); the cost model chooses", what,
               pc->where.on_device      ? "device buffers"
               : comm->base.nranks == 1 ? "one rank"
                                        : "ranks on several hosts, or a transport other than shm");
    call->algo = COLL_ALGO_AUTO;
  }
  /* The arena's small-message lines hold the messages up to the cost model's threshold
   * (algo_small_max_bytes, or COLL_SMALL_BYTES on rank 0): all-reduces the arena would
   * serve, and barriers and small broadcasts of host buffers unless an algorithm is
   * forced. Asked before the cost model, as the cheaper question (its predictions were
   * 5 % of an 8-byte call). */
  if (call->algo == COLL_ALGO_AUTO) {
    bool small = comm->arena != NULL && !pc->where.on_device && call->count > 0 &&
                 (call->kind == COLL_KIND_ALL_REDUCE ? arena_ok : comm->algo == COLL_ALGO_AUTO) &&
                 small_fits(comm->arena, call);
    if (small) {
      call->algo = COLL_ALGO_ARENA;
    } else if (comm->base.nranks > 1 && call->count > 0) {
      sched_params_t p = call_params(comm, call);
      call->algo = arena_ok && algo_arena_preferred(&p, &comm->cost) ? COLL_ALGO_ARENA
                                                                     : algo_select(&p, &comm->cost);
    } else {
      call->algo = COLL_ALGO_RING;
    }
  }
  /* Buffers in shared windows (coll_mem_alloc): the zero-copy all-reduce, unless
   * another algorithm is forced or the input is scaled first (premul_sum). */
  if (arena_ok && call->count > 0 && !call->premul &&
      (comm->algo == COLL_ALGO_AUTO || comm->algo == COLL_ALGO_ARENA))
    window_prepare_call(comm->windows, comm->arena, call, &pc->windows);
  if (COLL_LOG_ENABLED(COLL_LOG_INFO)) api_log_choice(comm, what, pc);
  return COLL_OK;
}

coll_status_t api_submit(coll_comm_t *comm, const char *what, const prepared_call_t *pc,
                         coll_request_t **request) {
  coll_status_t st;
  if (comm->group_depth > 0) {
    if (request != NULL)
      return coll_error(COLL_ERR_INVALID_ARGUMENT,
                        "rank %d: %s: asynchronous calls are not allowed inside a group",
                        comm->base.rank, what);
    st = group_record(comm, pc);
  } else if (request != NULL) {
    st = progress_submit(comm, pc, true, request);
  } else {
    st = progress_run_blocking(comm, pc);
  }
  if (st == COLL_OK) coll_error_clear();
  return st;
}

coll_status_t api_run(coll_comm_t *comm, const char *what, coll_call_t call,
                      coll_request_t **request, bool async) {
  /* The communicator first: after an abort every call returns COLL_ERR_ABORTED, whatever
   * its arguments (rule 6 of coll.h). */
  if (async && request != NULL) *request = NULL;
  coll_status_t st = comm_check(comm, what);
  if (st == COLL_OK) st = base_check_usable(&comm->base, what);
  if (st != COLL_OK) return st;
  if (async && request == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: request is NULL", comm->base.rank,
                      what);
  prepared_call_t pc = {.call = call};
  st = api_prepare(comm, what, &pc);
  if (st != COLL_OK) return st;
  /* Device buffers of a plain or _async call: what the legacy default stream holds (the
   * caller's last writes, as cudaMemcpy leaves them) comes first. */
  if (pc.where.on_device && comm->group_depth == 0) st = cuda_wait_default_stream(&comm->base);
  if (st != COLL_OK) return st;
  return api_submit(comm, what, &pc, async ? request : NULL);
}

/* The _stream forms: device buffers are queued on the caller's stream (stream_calls.c);
 * host buffers wait for the stream, then run like the blocking call. Not inside a group:
 * a recorded call would run at coll_group_end, out of the stream's order. */
coll_status_t api_run_stream(coll_comm_t *comm, const char *what, coll_call_t call, void *stream) {
  coll_status_t st = comm_check(comm, what);
  if (st == COLL_OK) st = base_check_usable(&comm->base, what);
  if (st != COLL_OK) return st;
  if (comm->group_depth > 0)
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "rank %d: %s: stream calls are not allowed inside a group (use the blocking "
                      "form)",
                      comm->base.rank, what);
  prepared_call_t pc = {.call = call};
  st = api_prepare(comm, what, &pc);
  if (st != COLL_OK) return st;
  if (pc.where.on_device) {
    pc.where.stream = stream;
    st = stream_call_submit(comm, &pc);
  } else {
    if (stream != NULL) st = mem_cuda_stream_wait(stream, comm->base.timeout_ms);
    if (st == COLL_OK) st = progress_run_blocking(comm, &pc);
  }
  if (st == COLL_OK) coll_error_clear();
  return st;
}
