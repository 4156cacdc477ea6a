/* coll-sim's outputs: the text report, JSON, the SVG picture and the HTML page. Each
 * returns 0, or -1 after printing why to stderr. */
#ifndef COLL_SIM_WRITERS_H
#define COLL_SIM_WRITERS_H

#include <stdio.h>

#include "options.h"
#include "trace.h"

int write_text(FILE *out, const cli_t *cli, const trace_t *t);
int write_json(FILE *out, const cli_t *cli, const trace_t *t);
int write_svg(const char *path, const cli_t *cli, const trace_t *t);
int write_html(const char *path, const cli_t *cli, const trace_t *t);

/* Shared by the writers. */
/* The cost model's prediction for the trace's request (libcoll's algo_predict). */
double report_predict(const trace_t *t, coll_algo_t algo);
/* Step k of the table ("step k" and one line per busy rank). */
int report_step(FILE *out, const trace_t *t, size_t k);
/* "1.50 us", "2.31 ms" */
void report_time(double seconds, char *buf, size_t len);
/* "512 B", "1.5 KiB", "3.0 MiB" */
void report_bytes(double bytes, char *buf, size_t len);

/* One SVG panel for step k (ranks laid out per the algorithm, arrows for the step's
 * transfers) drawn at (x, y) with the given size, for svg.c and html.c; k >= nsteps
 * draws the ranks only. */
void svg_panel(FILE *f, const trace_t *t, size_t k, double x, double y, double size,
               int with_title);
/* Styles and markers the panels use; once per <svg>. */
void svg_defs(FILE *f);

#endif
