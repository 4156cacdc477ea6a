/* coll-sim: what each algorithm promises, in words and formulas (rule, steps, bytes per
 * rank), to print next to what the simulation counted. */
#ifndef COLL_SIM_INFO_H
#define COLL_SIM_INFO_H

#include "trace.h"

typedef enum { LAYOUT_CIRCLE = 0, LAYOUT_TREE } layout_t;

typedef struct {
  const char *title;         /* "ring all-reduce" */
  const char *rule;          /* the one-line per-step rule */
  const char *steps_formula; /* "2 (n-1) x nseg" */
  const char *bytes_formula; /* "every rank: 2 (n-1)/n x S" */
  const char *file;          /* the file that implements it */
  layout_t layout;
} algo_info_t;

/* NULL for a combination no builder implements. */
const algo_info_t *info_get(coll_kind_t kind, coll_algo_t algo);

/* The formula's bytes sent by each rank (out[nranks]); exact when S divides evenly into
 * the algorithm's parts, otherwise within a few elements. */
void info_expected_bytes(const trace_t *t, double *out);
/* The formula's number of steps; -1 where the formula is only approximate (tree). */
long info_expected_steps(const trace_t *t);
/* Segments per pipelined piece (nseg in the formulas). */
size_t info_nseg(const trace_t *t);

#endif
