/* coll-sim's timing mode for large jobs: the library's schedules timed on a topology of
 * nodes (libcoll/src/sim/sim_time.h) without moving data, one run or a sweep over rank
 * counts, sizes and algorithms, written as text, JSON and an SVG plot. */
#ifndef COLL_SIM_SCALE_H
#define COLL_SIM_SCALE_H

#include <stddef.h>

#include "sim/sim_time.h"

#define SCALE_MAX_LIST 32

typedef struct {
  int on;          /* timing mode (--timing, a topology option, a sweep, or -n > 1024) */
  sim_topo_t topo; /* node_of: NULL (blocks) unless round_robin */
  int round_robin; /* rank r on node r % nodes */
  int sweep;       /* a sweep was asked for */
  int ranks[SCALE_MAX_LIST];
  size_t nranks;
  size_t sizes[SCALE_MAX_LIST];
  size_t nsizes;
  int algos[SCALE_MAX_LIST]; /* coll_algo_t */
  size_t nalgos;
  const char *plot_path; /* sweep: SVG of time and bus bandwidth against ranks */
} scale_opts_t;

struct cli;
/* Run what cli asks for in timing mode and write its outputs; the exit status. */
int scale_main(const struct cli *cli);

/* The sweep's plot (scale_svg.c): rows of (ranks, algo, bytes, seconds). */
typedef struct {
  int nranks;
  int algo;
  size_t bytes;
  double time_s;
  double busbw; /* bytes per second (nccl-tests' bus bandwidth) */
  unsigned long long busiest_bytes;
  double wall_s;
} scale_row_t;
int scale_write_svg(const char *path, const struct cli *cli, const scale_row_t *rows, size_t nrows);

#endif
