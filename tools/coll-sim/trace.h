/* coll-sim's view of one simulated collective: the simulator's events regrouped into
 * steps of transfers (a send matched with its receive), per-rank counters, the "unit"
 * partition used to name ranges (chunk 3, block 1, half 0, segment 5) and a replay that
 * tracks which ranks' data each element holds after every step. */
#ifndef COLL_SIM_TRACE_H
#define COLL_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "algo/schedule.h"
#include "sim/sim.h"

/* What the user asked for (options.c fills it). */
typedef struct {
  coll_algo_t algo;
  coll_kind_t collective;
  int nranks;
  size_t bytes;
  size_t count; /* bytes / element size */
  coll_dtype_t dtype;
  int root;
  size_t segment_bytes; /* 0: the algorithm's default */
  algo_cost_t cost;
  const char *transport; /* "shm", "tcp" or "custom" */
  const algo_topo_t *topo; /* --hosts: the node of each rank; NULL: one node */
} sim_request_t;

/* A matched message: src sent [src_offset, +count) of src_buf, dst received it into
 * [dst_offset, +count) of dst_buf, copying or reducing. */
typedef struct {
  int src, dst;
  uint8_t src_buf, dst_buf; /* sched_buf_t */
  int reduce;
  uint8_t red_buf; /* reduce: dst = red_buf[red_offset..] op received */
  size_t src_offset, dst_offset, red_offset, count;
} xfer_t;

/* A local op (copy or reduce inside one rank). */
typedef struct {
  int rank;
  sched_op_t op;
} local_t;

typedef struct {
  size_t first_xfer, nxfers;
  size_t first_local, nlocals;
} tstep_t;

/* How ranges are named: the buffer cut into `nparts` units called `name` ("chunk");
 * nparts 0: plain element ranges (gather, scatter, all_to_allv). */
typedef struct {
  const char *name;
  size_t nparts;
  size_t seg_elems; /* 0: nearly equal parts (algo_part_start); else fixed-size segments */
  size_t nsub;      /* > 1: each unit pipelined as nsub nearly equal segments (ring, tree) */
} unit_t;

typedef struct {
  sim_request_t req;
  size_t esize;
  unit_t unit;
  sim_result_t res;
  xfer_t *xfers;
  size_t nxfers;
  local_t *locals;
  size_t nlocals;
  tstep_t *steps; /* [nsteps]; nsteps == res.nrounds */
  size_t nsteps;
  size_t *bytes_reduced; /* [nranks]: bytes each rank folded in (RECV_REDUCE, LOCAL_REDUCE) */
  double estimate_s;     /* counted estimate, see trace_estimate() */
} trace_t;

/* Run the simulation (dry run, events recorded) and regroup its events. On failure
 * returns the status; coll_last_error() says why. */
coll_status_t trace_build(const sim_request_t *req, trace_t *t);
void trace_free(trace_t *t);

/* Start of unit i (trace's unit partition), i in 0..nparts. */
size_t trace_unit_start(const trace_t *t, size_t i);
/* A readable name of the element range [off, off+count): "chunk 2 (elements 500..749)",
 * "chunks 0-1 (elements 0..499)", "segment 1 of chunk 2 (elements 625..749)", "part of
 * chunk 2 (elements 500..599)" or "elements 10..19". Written into buf (always
 * terminated). */
void trace_range_name(const trace_t *t, size_t off, size_t count, char *buf, size_t len);
/* Short label for diagrams: "c2", "c0-1", "c2.1" (segment 1 of chunk 2), "c2'" (part
 * of), or "10..19". */
void trace_range_short(const trace_t *t, size_t off, size_t count, char *buf, size_t len);

/* Cells for buffer pictures, at most max_cells: the algorithm's units (cut into their
 * pipelined segments when those fit too), else equal parts. Returns the number of cells
 * and, with cell_start, writes their starts and the end ([ncells + 1]). */
size_t trace_cells(const trace_t *t, size_t max_cells, size_t *cell_start);

/* The buffer a rank shows (OUTPUT; the broadcast root's INPUT) after each step, cut into
 * trace_cells(t, max_cells) cells: for each state k (0 = before step 0, k = after step k-1), rank
 * and cell, the set of ranks whose data the cell holds if all its elements agree (mask), whether
 * they agree, and the share of elements that hold their final value (permille). Needs nranks <= 64.
 */
typedef struct {
  uint64_t mask;
  uint8_t uniform;
  uint16_t final_permille;
} cell_state_t;

typedef struct {
  size_t ncells;
  size_t *cell_start;  /* [ncells + 1] elements */
  size_t nstates;      /* nsteps + 1 */
  cell_state_t *cells; /* [nstates][nranks][ncells] */
  uint64_t final_mask; /* what a finished element holds */
} replay_t;

/* Replay the trace on per-element rank sets. Refuses (COLL_ERR_INVALID_ARGUMENT with a
 * message) above 64 ranks or 2^24 elements x ranks. */
coll_status_t trace_replay(const trace_t *t, size_t max_cells, replay_t *rp);
void replay_free(replay_t *rp);
static inline const cell_state_t *replay_cell(const replay_t *rp, int nranks, size_t k, int r,
                                              size_t c) {
  return &rp->cells[(k * (size_t)nranks + (size_t)r) * rp->ncells + c];
}

/* "ring", "chain", ... as used on the command line and in file names. */
const char *trace_algo_name(coll_kind_t kind, coll_algo_t algo);
const char *trace_collective_name(coll_kind_t kind);
/* all_to_allv's demonstration layout: elements rank `from` sends rank `to`,
 * ((from + 2 to) mod 3) x count/2 (count: the largest block). */
size_t trace_alltoallv_count(const sim_request_t *q, int from, int to);
/* Rank r's layout of those blocks (schedule.h's SCHED_V_*; v holds 4 * nranks): in peer
 * order, without gaps. */
void trace_alltoallv_layout(const sim_request_t *q, int r, size_t *v);
const char *trace_dtype_name(coll_dtype_t dtype);

#endif
