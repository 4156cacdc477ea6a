/* coll-sim --svg: one panel per step, ranks on a circle (or laid out as tree 0 for the
 * double binary tree), an arrow per message labelled with the part it carries; sized for
 * a lecture slide, with the middle steps left out (and said so) past --max-panels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "info.h"
#include "writers.h"

#define PI 3.14159265358979323846

void svg_defs(FILE *f) {
  fputs(
      "<defs>\n"
      "<marker id=\"ah-reduce\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
      "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
      "fill=\"#d9480f\"/></marker>\n"
      "<marker id=\"ah-copy\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
      "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
      "fill=\"#1971c2\"/></marker>\n"
      "</defs>\n"
      "<style>\n"
      ".cs-panel { fill: #ffffff; stroke: #ced4da; }\n"
      ".cs-title { font: bold 18px sans-serif; fill: #212529; }\n"
      ".cs-sub { font: 13px sans-serif; fill: #495057; }\n"
      ".cs-node { fill: #f1f3f5; stroke: #343a40; stroke-width: 2; }\n"
      ".cs-rank { font-family: sans-serif; font-weight: bold; fill: #212529; "
      "text-anchor: middle; dominant-baseline: central; }\n"
      ".cs-reduce { stroke: #d9480f; stroke-width: 2.5; fill: none; "
      "marker-end: url(#ah-reduce); }\n"
      ".cs-copy { stroke: #1971c2; stroke-width: 2.5; fill: none; marker-end: url(#ah-copy); }\n"
      ".cs-second { stroke-dasharray: 7 4; }\n"
      ".cs-label { font-family: sans-serif; text-anchor: middle; dominant-baseline: central; "
      "paint-order: stroke; stroke: #ffffff; stroke-width: 4px; }\n"
      ".cs-label-reduce { fill: #d9480f; }\n"
      ".cs-label-copy { fill: #1971c2; }\n"
      ".cs-edge { stroke: #dee2e6; stroke-width: 1.5; }\n"
      "</style>\n",
      f);
}

/* Where rank r sits in a panel of the given size. */
static void position(const trace_t *t, int r, double size, double *x, double *y) {
  int n = t->req.nranks;
  const algo_info_t *info = info_get(t->req.collective, t->req.algo);
  if (info != NULL && info->layout == LAYOUT_TREE && n > 1) {
    /* Tree 0 is ordered like a search tree (tree.c): x = rank, y = depth. */
    algo_tree_node_t node;
    algo_dbtree_node(n, 0, r, &node);
    int D = algo_dbtree_depth(n);
    *x = size * (0.08 + 0.84 * (r + 0.5) / n);
    *y = size * (0.3 + 0.6 * (D > 0 ? (double)node.depth / D : 0.0));
    return;
  }
  double a = -PI / 2 + 2 * PI * r / (n > 0 ? n : 1);
  *x = size / 2 + size * 0.33 * cos(a);
  *y = size * 0.57 + size * 0.33 * sin(a);
}

static double node_radius(const trace_t *t, double size) {
  int n = t->req.nranks;
  double r = size * 0.34 * sin(PI / (n > 1 ? n : 2)) * 0.7;
  const algo_info_t *info = info_get(t->req.collective, t->req.algo);
  if (info != NULL && info->layout == LAYOUT_TREE) r = size * 0.84 / (n > 0 ? n : 1) * 0.38;
  if (r > size * 0.06) r = size * 0.06;
  if (r < 5) r = 5;
  return r;
}

/* Messages of one step merged per (src, dst, kind, tree half) where their ranges follow
 * each other, so a segmented exchange draws as one arrow. */
typedef struct {
  int src, dst, reduce, second;
  size_t offset, count;
} arrow_t;

static size_t collect(const trace_t *t, const tstep_t *s, arrow_t *out) {
  size_t na = 0;
  size_t half = algo_part_start(t->req.count, 2, 1);
  int is_tree = t->req.collective == COLL_KIND_ALL_REDUCE && t->req.algo == COLL_ALGO_TREE;
  for (size_t i = 0; i < s->nxfers; i++) {
    const xfer_t *x = &t->xfers[s->first_xfer + i];
    int second = is_tree && x->dst_offset >= half;
    size_t j = 0;
    for (; j < na; j++) {
      arrow_t *a = &out[j];
      if (a->src == x->src && a->dst == x->dst && a->reduce == x->reduce && a->second == second &&
          a->offset + a->count == x->dst_offset) {
        a->count += x->count;
        break;
      }
    }
    if (j == na)
      out[na++] = (arrow_t){.src = x->src,
                            .dst = x->dst,
                            .reduce = x->reduce,
                            .second = second,
                            .offset = x->dst_offset,
                            .count = x->count};
  }
  return na;
}

/* An arrow's quadratic curve from src's edge to dst's edge: start, control point, end,
 * and the unit normal it bends toward. */
typedef struct {
  double sx, sy, cx, cy, ex, ey, px, py;
} curve_t;

static int arrow_curve(const trace_t *t, const arrow_t *a, double size, double rn, curve_t *c) {
  double ax, ay, bx, by;
  position(t, a->src, size, &ax, &ay);
  position(t, a->dst, size, &bx, &by);
  double dx = bx - ax, dy = by - ay, len = sqrt(dx * dx + dy * dy);
  if (len < 1e-6) return 0;
  double ux = dx / len, uy = dy / len;
  c->px = -uy;
  c->py = ux;
  /* Shift sideways so that a -> b and b -> a are two arrows, and curve a little. */
  double off = rn * 0.45, bend = len * 0.12;
  c->sx = ax + ux * rn + c->px * off;
  c->sy = ay + uy * rn + c->py * off;
  c->ex = bx - ux * (rn + 2) + c->px * off;
  c->ey = by - uy * (rn + 2) + c->py * off;
  c->cx = (c->sx + c->ex) / 2 + c->px * bend;
  c->cy = (c->sy + c->ey) / 2 + c->py * bend;
  return 1;
}

void svg_panel(FILE *f, const trace_t *t, size_t k, double x0, double y0, double size,
               int with_title) {
  int n = t->req.nranks;
  double rn = node_radius(t, size);
  static const tstep_t none = {0};
  const tstep_t *s = k < t->nsteps ? &t->steps[k] : &none;
  size_t nreduce = 0;
  for (size_t i = 0; i < s->nxfers; i++) nreduce += t->xfers[s->first_xfer + i].reduce;
  fprintf(f, "<g transform=\"translate(%.1f,%.1f)\">\n", x0, y0);
  fprintf(f, "<rect class=\"cs-panel\" x=\"2\" y=\"2\" width=\"%.1f\" height=\"%.1f\" rx=\"8\"/>\n",
          size - 4, size - 4);
  if (with_title && k >= t->nsteps) {
    fputs("<text class=\"cs-title\" x=\"14\" y=\"28\">start</text>\n", f);
  } else if (with_title) {
    fprintf(f, "<text class=\"cs-title\" x=\"14\" y=\"28\">step %zu</text>\n", k);
    fprintf(f, "<text class=\"cs-sub\" x=\"14\" y=\"48\">%zu message%s, %zu reduce%s</text>\n",
            s->nxfers, s->nxfers == 1 ? "" : "s", nreduce, nreduce == 1 ? "" : "s");
  }
  /* Tree layout: draw both trees' edges faintly (tree 1 dashed) so the shapes read. */
  const algo_info_t *info = info_get(t->req.collective, t->req.algo);
  if (info != NULL && info->layout == LAYOUT_TREE && n > 1)
    for (int tree = 0; tree < 2; tree++)
      for (int r = 0; r < n; r++) {
        algo_tree_node_t node;
        algo_dbtree_node(n, tree, r, &node);
        if (node.parent < 0) continue;
        double ax, ay, bx, by;
        position(t, r, size, &ax, &ay);
        position(t, node.parent, size, &bx, &by);
        fprintf(f, "<line class=\"cs-edge%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                tree ? " cs-second" : "", ax, ay, bx, by);
      }
  arrow_t *arrows = calloc(s->nxfers ? s->nxfers : 1, sizeof *arrows);
  size_t na = arrows ? collect(t, s, arrows) : 0;
  double font = rn * 0.9 < 12 ? 12 : (rn * 0.9 > 16 ? 16 : rn * 0.9);
  /* Arrows, then the ranks over them, then the labels over both, so no label hides. */
  for (int layer = 0; layer < 3; layer++) {
    for (size_t i = 0; layer != 1 && i < na; i++) {
      const arrow_t *a = &arrows[i];
      curve_t c;
      if (!arrow_curve(t, a, size, rn, &c)) continue;
      const char *cls = a->reduce ? "reduce" : "copy";
      if (layer == 0) {
        fprintf(f, "<path class=\"cs-%s%s\" d=\"M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f\"/>\n", cls,
                a->second ? " cs-second" : "", c.sx, c.sy, c.cx, c.cy, c.ex, c.ey);
      } else if (n <= 16) {
        char label[64];
        trace_range_short(t, a->offset, a->count, label, sizeof label);
        /* The curve's midpoint is halfway between the chord's middle and the control
         * point; the label sits just outside it. */
        double lx = (c.sx + c.ex) / 4 + c.cx / 2, ly = (c.sy + c.ey) / 4 + c.cy / 2;
        fprintf(f,
                "<text class=\"cs-label cs-label-%s\" x=\"%.1f\" y=\"%.1f\" "
                "font-size=\"%.0f\">%s</text>\n",
                cls, lx + c.px * font * 0.6, ly + c.py * font * 0.6, font, label);
      }
    }
    for (int r = 0; layer == 1 && r < n; r++) {
      double x, y;
      position(t, r, size, &x, &y);
      fprintf(f, "<circle class=\"cs-node\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\"/>\n", x, y, rn);
      if (rn >= 8)
        fprintf(f, "<text class=\"cs-rank\" x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\">%d</text>\n",
                x, y, rn, r);
    }
  }
  free(arrows);
  fputs("</g>\n", f);
}

/* The panel standing for the steps left out. */
static void gap_panel(FILE *f, double x0, double y0, double size, size_t from, size_t to) {
  fprintf(f, "<g transform=\"translate(%.1f,%.1f)\">\n", x0, y0);
  fprintf(f,
          "<rect class=\"cs-panel\" x=\"2\" y=\"2\" width=\"%.1f\" height=\"%.1f\" rx=\"8\" "
          "stroke-dasharray=\"6 4\"/>\n",
          size - 4, size - 4);
  fprintf(f,
          "<text class=\"cs-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">steps %zu..%zu"
          "</text>\n",
          size / 2, size / 2 - 12, from, to);
  fprintf(f,
          "<text class=\"cs-sub\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">left out (%zu "
          "steps; see --max-panels)</text>\n",
          size / 2, size / 2 + 14, to - from + 1);
  fputs("</g>\n", f);
}

int write_svg(const char *path, const cli_t *cli, const trace_t *t) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t K = t->nsteps, keep = cli->max_panels;
  int capped = K > keep;
  size_t first = capped ? keep / 2 : K, last = capped ? keep - keep / 2 : 0;
  size_t panels = capped ? first + 1 + last : K;
  if (panels == 0) panels = 1;
  int n = t->req.nranks;
  double size = n <= 8 ? 320 : (n <= 16 ? 400 : 480);
  size_t cols = panels < 4 ? panels : 4, rows = (panels + cols - 1) / cols;
  double head = 86, width = (double)cols * size, height = head + (double)rows * size;
  if (width < 640) width = 640;
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\">\n",
          width, height, width, height);
  svg_defs(f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#f8f9fa\"/>\n", width,
          height);
  char sb[32];
  report_bytes((double)t->req.bytes, sb, sizeof sb);
  fprintf(f, "<text class=\"cs-title\" x=\"12\" y=\"28\">%s %s, %d ranks, %s: %zu steps</text>\n",
          trace_algo_name(t->req.collective, t->req.algo), trace_collective_name(t->req.collective),
          n, sb, K);
  fprintf(f,
          "<text class=\"cs-sub\" x=\"12\" y=\"50\">orange: receive and reduce, blue: receive "
          "(copy)%s; labels: %c2 = %s 2, %c2.1 = its segment 1, %c2' = part of it</text>\n",
          t->req.algo == COLL_ALGO_TREE && t->req.collective == COLL_KIND_ALL_REDUCE
              ? ", dashed: tree 1 (second half)"
              : "",
          t->unit.name[0], t->unit.name, t->unit.name[0], t->unit.name[0]);
  if (capped || n > 16)
    fprintf(f, "<text class=\"cs-sub\" x=\"12\" y=\"70\">%s%s</text>\n",
            capped ? "middle steps left out (see the dashed panel). " : "",
            n > 16 ? "arrow labels left out above 16 ranks." : "");
  size_t slot = 0;
  for (size_t k = 0; k < K; k++, slot++) {
    double x = (double)(slot % cols) * size, y = head + (double)(slot / cols) * size;
    if (capped && k == first) {
      gap_panel(f, x, y, size, first, K - last - 1);
      k = K - last - 1;
      continue;
    }
    svg_panel(f, t, k, x, y, size, 1);
  }
  fputs("</svg>\n", f);
  if (ferror(f) | (fclose(f) != 0)) {
    perror(path);
    return -1;
  }
  return 0;
}
