/* coll-sim --plot: the sweep as one SVG with two panels, one line per algorithm: the
 * predicted time of the smallest swept size against ranks (log-log: a ring's latency is a
 * line of slope 1, a tree's grows with log of the ranks), and the bus bandwidth of the
 * largest size against ranks (flat for a bandwidth-optimal algorithm). */
#include <math.h>
#include <stdio.h>

#include "options.h"
#include "scale.h"
#include "writers.h"

#define W 1030.0
#define H 460.0
#define PW 400.0 /* panel plot area */
#define PH 300.0

static const char *const colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                                     "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

typedef struct {
  double x0, y0; /* top-left of the plot area */
  double xmin, xmax, ymin, ymax;
  double ystep; /* linear axis: between ticks */
  int ylog;
} panel_t;

static double px(const panel_t *p, double ranks) {
  return p->x0 + PW * (log(ranks) - log(p->xmin)) / (log(p->xmax) - log(p->xmin));
}

static double py(const panel_t *p, double v) {
  double f = p->ylog ? (log10(v) - log10(p->ymin)) / (log10(p->ymax) - log10(p->ymin))
                     : (v - p->ymin) / (p->ymax - p->ymin);
  return p->y0 + PH * (1 - f);
}

static void axes(FILE *f, const panel_t *p, const cli_t *cli, const char *title,
                 const char *ylabel) {
  fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' class='frame'/>\n", p->x0, p->y0,
          PW, PH);
  fprintf(f, "<text x='%.1f' y='%.1f' class='title'>%s</text>\n", p->x0, p->y0 - 14, title);
  for (size_t i = 0; i < cli->scale.nranks; i++) {
    double x = px(p, cli->scale.ranks[i]);
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' class='grid'/>\n", x, p->y0, x,
            p->y0 + PH);
    fprintf(f, "<text x='%.1f' y='%.1f' class='tick' text-anchor='middle'>%d</text>\n", x,
            p->y0 + PH + 16, cli->scale.ranks[i]);
  }
  fprintf(f,
          "<text x='%.1f' y='%.1f' class='label' text-anchor='middle'>ranks (log scale)</text>\n",
          p->x0 + PW / 2, p->y0 + PH + 36);
  if (p->ylog) {
    for (double d = pow(10, floor(log10(p->ymin))); d <= p->ymax * 1.0001; d *= 10) {
      if (d < p->ymin * 0.9999) continue;
      double y = py(p, d);
      char lab[32];
      if (d < 0.99e-3)
        snprintf(lab, sizeof lab, "%g us", d * 1e6);
      else if (d < 0.99)
        snprintf(lab, sizeof lab, "%g ms", d * 1e3);
      else
        snprintf(lab, sizeof lab, "%g s", d);
      fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' class='grid'/>\n", p->x0, y,
              p->x0 + PW, y);
      fprintf(f, "<text x='%.1f' y='%.1f' class='tick' text-anchor='end'>%s</text>\n", p->x0 - 4,
              y + 4, lab);
    }
  } else {
    double step = p->ystep;
    for (double v = p->ymin; v <= p->ymax * 1.0001; v += step) {
      double y = py(p, v);
      fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' class='grid'/>\n", p->x0, y,
              p->x0 + PW, y);
      fprintf(f, "<text x='%.1f' y='%.1f' class='tick' text-anchor='end'>%.3g</text>\n", p->x0 - 4,
              y + 4, v / 1e9);
    }
  }
  fprintf(f,
          "<text x='%.1f' y='%.1f' class='label' text-anchor='middle' "
          "transform='rotate(-90 %.1f %.1f)'>%s</text>\n",
          p->x0 - 62, p->y0 + PH / 2, p->x0 - 62, p->y0 + PH / 2, ylabel);
}

/* One line per algorithm through the rows of size `bytes`; value: time or busbw. */
static void lines(FILE *f, const panel_t *p, const cli_t *cli, const scale_row_t *rows,
                  size_t nrows, size_t bytes, int busbw) {
  for (size_t a = 0; a < cli->scale.nalgos; a++) {
    const char *color = colors[a % (sizeof colors / sizeof colors[0])];
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2.5' points='", color);
    for (size_t i = 0; i < nrows; i++)
      if (rows[i].algo == cli->scale.algos[a] && rows[i].bytes == bytes)
        fprintf(f, "%.1f,%.1f ", px(p, rows[i].nranks),
                py(p, busbw ? rows[i].busbw : rows[i].time_s));
    fputs("'/>\n", f);
    for (size_t i = 0; i < nrows; i++)
      if (rows[i].algo == cli->scale.algos[a] && rows[i].bytes == bytes)
        fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s'/>\n", px(p, rows[i].nranks),
                py(p, busbw ? rows[i].busbw : rows[i].time_s), color);
  }
}

int scale_write_svg(const char *path, const cli_t *cli, const scale_row_t *rows, size_t nrows) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  const scale_opts_t *sc = &cli->scale;
  size_t small = sc->sizes[0], large = sc->sizes[0];
  for (size_t i = 0; i < sc->nsizes; i++) {
    if (sc->sizes[i] < small) small = sc->sizes[i];
    if (sc->sizes[i] > large) large = sc->sizes[i];
  }
  panel_t lat = {.x0 = 90, .y0 = 80, .ylog = 1, .ymin = INFINITY, .ymax = 0};
  panel_t bw = {.x0 = 590, .y0 = 80, .ymin = 0, .ymax = 0};
  lat.xmin = bw.xmin = INFINITY, lat.xmax = bw.xmax = 0;
  for (size_t i = 0; i < nrows; i++) {
    double r = rows[i].nranks;
    if (r < lat.xmin) lat.xmin = bw.xmin = r;
    if (r > lat.xmax) lat.xmax = bw.xmax = r;
    if (rows[i].bytes == small && rows[i].time_s > 0) {
      if (rows[i].time_s < lat.ymin) lat.ymin = rows[i].time_s;
      if (rows[i].time_s > lat.ymax) lat.ymax = rows[i].time_s;
    }
    if (rows[i].bytes == large && rows[i].busbw > bw.ymax) bw.ymax = rows[i].busbw;
  }
  if (!(lat.xmax > lat.xmin)) lat.xmax = bw.xmax = lat.xmin * 2;
  if (!(lat.ymax > 0)) lat.ymin = 1e-6, lat.ymax = 1e-3;
  lat.ymin = pow(10, floor(log10(lat.ymin)));
  lat.ymax = pow(10, ceil(log10(lat.ymax)));
  if (lat.ymax <= lat.ymin) lat.ymax = lat.ymin * 10;
  /* A round step (1, 2 or 5 x 10^k bytes/s) that gives at most 6 ticks. */
  if (!(bw.ymax > 0)) bw.ymax = 1e9;
  double mag = pow(10, floor(log10(bw.ymax / 6)));
  bw.ystep = mag;
  while (bw.ymax / bw.ystep > 6)
    bw.ystep = bw.ystep == mag ? 2 * mag : bw.ystep == 2 * mag ? 5 * mag : 10 * mag;
  bw.ymax = ceil(bw.ymax / bw.ystep) * bw.ystep;
  fprintf(f,
          "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
          "viewBox='0 0 %.0f %.0f' font-family='Liberation Sans, Arial, sans-serif'>\n",
          W, H, W, H);
  fputs(
      "<style>.frame{fill:#fff;stroke:#333}.grid{stroke:#ddd}.tick{font-size:11px}"
      ".label{font-size:12px}.title{font-size:14px;font-weight:bold}"
      ".head{font-size:15px}</style>\n",
      f);
  fprintf(f, "<rect width='%.0f' height='%.0f' fill='#fff'/>\n", W, H);
  const sim_topo_t *t = &sc->topo;
  char nodes[64];
  if (t->ranks_per_node > 0)
    snprintf(nodes, sizeof nodes, "nodes of %d ranks", t->ranks_per_node);
  else
    snprintf(nodes, sizeof nodes, "one node");
  fprintf(f,
          "<text x='20' y='28' class='head'>coll-sim timing mode: %s, %s; uplink %.4g GB/s "
          "%s, %.3g us; intra %.4g GB/s, %.3g us; %.3g us per message</text>\n",
          trace_collective_name(cli->req.collective), nodes, t->uplink_bw / 1e9,
          t->no_sharing ? "(not shared)" : "(shared)", t->uplink_latency_s * 1e6, t->intra_bw / 1e9,
          t->intra_latency_s * 1e6, t->message_latency_s * 1e6);
  char sb[32], lb[32], title[96];
  report_bytes((double)small, sb, sizeof sb);
  report_bytes((double)large, lb, sizeof lb);
  snprintf(title, sizeof title, "predicted time, %s (latency)", sb);
  axes(f, &lat, cli, title, "predicted time (log scale)");
  snprintf(title, sizeof title, "bus bandwidth, %s", lb);
  axes(f, &bw, cli, title, "bus bandwidth, GB/s");
  lines(f, &lat, cli, rows, nrows, small, 0);
  lines(f, &bw, cli, rows, nrows, large, 1);
  for (size_t a = 0; a < sc->nalgos; a++) {
    double x = 90 + 130.0 * (double)a, y = H - 22;
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' stroke-width='3'/>\n", x,
            y - 4, x + 24, y - 4, colors[a % (sizeof colors / sizeof colors[0])]);
    fprintf(f, "<text x='%.1f' y='%.1f' class='label'>%s</text>\n", x + 30, y,
            coll_algo_name((coll_algo_t)sc->algos[a]));
  }
  fputs("</svg>\n", f);
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}
