/* coll-sim --html: one self-contained page (inline CSS, JS and SVG; nothing fetched) that
 * steps through the schedule with prev/next buttons: the step's picture, the step in
 * words, and every rank's buffer as a row of cells filling up from partial to final. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "info.h"
#include "writers.h"

/* Pages past these sizes get too heavy to be useful; the user is told to shrink. */
enum { HTML_MAX_STEPS = 600, HTML_MAX_CELL_STATES = 400000, HTML_MAX_CELLS = 32 };

static void put_escaped(FILE *f, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    switch (s[i]) {
      case '<':
        fputs("&lt;", f);
        break;
      case '>':
        fputs("&gt;", f);
        break;
      case '&':
        fputs("&amp;", f);
        break;
      case '"':
        fputs("&quot;", f);
        break;
      default:
        fputc(s[i], f);
    }
  }
}

static const char page_style[] =
    "body { font-family: sans-serif; margin: 24px; color: #212529; background: #f8f9fa; }\n"
    "h1 { font-size: 24px; margin: 0 0 6px 0; }\n"
    ".rule { max-width: 70em; color: #495057; margin: 4px 0; }\n"
    ".controls { margin: 14px 0; display: flex; align-items: center; gap: 14px; }\n"
    ".controls button { font-size: 18px; padding: 6px 18px; cursor: pointer; }\n"
    ".controls button:disabled { cursor: default; opacity: 0.4; }\n"
    "#step-label { font-size: 20px; font-weight: bold; min-width: 8em; text-align: center; }\n"
    ".main { display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }\n"
    ".panel { display: none; }\n"
    ".panel.shown { display: block; }\n"
    "pre.words { display: none; margin: 0; font-size: 13px; white-space: pre-wrap; "
    "max-width: 56em; }\n"
    "pre.words.shown { display: block; }\n"
    "table.buffers { border-collapse: separate; border-spacing: 3px; margin-top: 10px; }\n"
    "table.buffers th { font-weight: normal; color: #495057; padding-right: 8px; "
    "text-align: right; }\n"
    "td.cell { width: 58px; height: 30px; text-align: center; font-size: 12px; "
    "border: 1px solid #adb5bd; border-radius: 4px; background: #e9ecef; }\n"
    "td.cell.partial { background: #ffd8a8; }\n"
    "td.cell.final { background: #8ce99a; font-weight: bold; }\n"
    "td.cell.mixed { background: #fff3bf; }\n"
    ".legend span { display: inline-block; padding: 2px 10px; margin-right: 8px; "
    "border: 1px solid #adb5bd; border-radius: 4px; font-size: 13px; }\n";

/* Step through states 0..K: state 0 is the start, state k shows step k-1 of the table
 * (the picture, the words) and the buffers after it. */
static const char page_script[] =
    "(function () {\n"
    "  var K = DATA.steps, n = DATA.nranks, cur = 0;\n"
    "  var label = document.getElementById('step-label');\n"
    "  var prev = document.getElementById('prev'), next = document.getElementById('next');\n"
    "  function cellText(code) {\n"
    "    return code.substring(2);\n"
    "  }\n"
    "  function show(k) {\n"
    "    if (k < 0) k = 0;\n"
    "    if (k > K) k = K;\n"
    "    cur = k;\n"
    "    label.textContent = 'step ' + k + ' / ' + K;\n"
    "    prev.disabled = k === 0;\n"
    "    next.disabled = k === K;\n"
    "    var panels = document.querySelectorAll('.panel, pre.words');\n"
    "    for (var i = 0; i < panels.length; i++)\n"
    "      panels[i].classList.toggle('shown', Number(panels[i].dataset.state) === k);\n"
    "    var st = DATA.states[k];\n"
    "    for (var r = 0; r < n; r++)\n"
    "      for (var c = 0; c < DATA.ncells; c++) {\n"
    "        var code = st[r][c], td = document.getElementById('cell-' + r + '-' + c);\n"
    "        var kind = {e: '', p: 'partial', f: 'final', m: 'mixed'}[code.charAt(0)];\n"
    "        td.className = 'cell' + (kind ? ' ' + kind : '');\n"
    "        td.textContent = cellText(code);\n"
    "      }\n"
    "  }\n"
    "  prev.addEventListener('click', function () { show(cur - 1); });\n"
    "  next.addEventListener('click', function () { show(cur + 1); });\n"
    "  document.addEventListener('keydown', function (e) {\n"
    "    if (e.key === 'ArrowRight') next.click();\n"
    "    if (e.key === 'ArrowLeft') prev.click();\n"
    "  });\n"
    "  show(0);\n"
    "  /* ?autostep=K or #step=K: press next K times (tests and links to one step);\n"
    "     ?clicks=nnp: press next, next, prev. */\n"
    "  var q = new URLSearchParams(location.search);\n"
    "  var h = /step=(\\d+)/.exec(location.hash);\n"
    "  var auto = q.get('autostep') !== null ? Number(q.get('autostep')) : (h ? Number(h[1]) : "
    "0);\n"
    "  for (var i = 0; i < auto && i <= K; i++) next.click();\n"
    "  var clicks = q.get('clicks') || '';\n"
    "  for (var j = 0; j < clicks.length; j++) (clicks.charAt(j) === 'p' ? prev : next).click();\n"
    "})();\n";

static void cell_code(FILE *f, const trace_t *t, const replay_t *rp, const cell_state_t *cs) {
  int n = t->req.nranks;
  int bcast = t->req.collective == COLL_KIND_BROADCAST;
  if (!cs->uniform) {
    fprintf(f, "\"m:%u%%\"", (unsigned)(cs->final_permille / 10));
    return;
  }
  if (cs->mask == 0) {
    fputs("\"e:\"", f);
    return;
  }
  if (cs->mask == rp->final_mask) {
    fprintf(f, bcast ? "\"f:data\"" : "\"f:all %d\"", n);
    return;
  }
  /* Partial sum: name the ranks summed in when few, else count them. */
  int bits = 0;
  for (int r = 0; r < n; r++) bits += (int)((cs->mask >> r) & 1);
  if (n <= 6) {
    fputs("\"p:", f);
    int first = 1;
    for (int r = 0; r < n; r++)
      if ((cs->mask >> r) & 1) {
        fprintf(f, "%s%d", first ? "" : "+", r);
        first = 0;
      }
    fputc('"', f);
  } else {
    fprintf(f, "\"p:%d/%d\"", bits, n);
  }
}

static void write_data(FILE *f, const trace_t *t, const replay_t *rp) {
  int n = t->req.nranks;
  fprintf(f, "var DATA = {steps: %zu, nranks: %d, ncells: %zu, states: [\n", t->nsteps, n,
          rp->ncells);
  for (size_t k = 0; k < rp->nstates; k++) {
    fputs(k ? ",\n[" : "[", f);
    for (int r = 0; r < n; r++) {
      fputs(r ? ",[" : "[", f);
      for (size_t c = 0; c < rp->ncells; c++) {
        if (c) fputc(',', f);
        cell_code(f, t, rp, replay_cell(rp, n, k, r, c));
      }
      fputc(']', f);
    }
    fputc(']', f);
  }
  fputs("]};\n", f);
}

static int write_words(FILE *f, const trace_t *t, size_t k) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (mem == NULL) return -1;
  int rc = report_step(mem, t, k);
  if (fclose(mem) != 0) rc = -1;
  if (rc == 0) {
    fprintf(f, "<pre class=\"words\" data-state=\"%zu\">", k + 1);
    put_escaped(f, text, len);
    fputs("</pre>\n", f);
  }
  free(text);
  return rc;
}

static void write_body(FILE *f, const trace_t *t, const replay_t *rp) {
  const algo_info_t *info = info_get(t->req.collective, t->req.algo);
  int n = t->req.nranks;
  char sb[32];
  report_bytes((double)t->req.bytes, sb, sizeof sb);
  fprintf(f, "<h1>%s %s: %d ranks, %s</h1>\n", trace_algo_name(t->req.collective, t->req.algo),
          trace_collective_name(t->req.collective), n, sb);
  if (info != NULL) {
    fputs("<p class=\"rule\"><b>rule:</b> ", f);
    put_escaped(f, info->rule, strlen(info->rule));
    fprintf(f, "</p>\n<p class=\"rule\"><b>steps:</b> %s; <b>bytes:</b> %s; code: %s</p>\n",
            info->steps_formula, info->bytes_formula, info->file);
  }
  fprintf(f,
          "<div class=\"controls\"><button id=\"prev\" type=\"button\">&#8592; prev</button>"
          "<span id=\"step-label\">step 0 / %zu</span>"
          "<button id=\"next\" type=\"button\">next &#8594;</button>"
          "<span class=\"rule\">(keys: left / right; step k / K counts steps done, the "
          "picture and the table number them from 0)</span></div>\n",
          t->nsteps);
  double size = n <= 8 ? 380 : 480;
  /* Styles and arrow heads once, for every panel below. */
  fputs(
      "<svg width=\"0\" height=\"0\" style=\"position:absolute\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      f);
  svg_defs(f);
  fputs("</svg>\n<div class=\"main\"><div>\n", f);
  for (size_t k = 0; k <= t->nsteps; k++) {
    fprintf(f,
            "<div class=\"panel%s\" data-state=\"%zu\"><svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\">\n",
            k == 0 ? " shown" : "", k, size, size);
    svg_panel(f, t, k == 0 ? t->nsteps : k - 1, 0, 0, size, 1);
    fputs("</svg></div>\n", f);
  }
  fputs(
      "</div>\n<div>\n<pre class=\"words shown\" data-state=\"0\">start: every rank holds its "
      "own input; nothing sent yet.\nThe cells below are each rank's result buffer",
      f);
  if (t->req.collective == COLL_KIND_BROADCAST)
    fprintf(f, " (the root, rank %d, shows its input)", t->req.root);
  fputs(".</pre>\n", f);
  for (size_t k = 0; k < t->nsteps; k++) write_words(f, t, k);
  fputs("<table class=\"buffers\">\n<tr><th></th>", f);
  for (size_t c = 0; c < rp->ncells; c++)
    fprintf(f, "<th style=\"text-align:center\">%zu..%zu</th>", rp->cell_start[c],
            rp->cell_start[c + 1] - 1);
  fputs("</tr>\n", f);
  for (int r = 0; r < n; r++) {
    fprintf(f, "<tr><th>rank %d</th>", r);
    for (size_t c = 0; c < rp->ncells; c++)
      fprintf(f, "<td class=\"cell\" id=\"cell-%d-%zu\"></td>", r, c);
    fputs("</tr>\n", f);
  }
  fputs(
      "</table>\n<p class=\"legend\"><span style=\"background:#e9ecef\">empty</span>"
      "<span style=\"background:#ffd8a8\">partial (ranks summed in)</span>"
      "<span style=\"background:#8ce99a\">final</span>"
      "<span style=\"background:#fff3bf\">mixed: % of elements final</span></p>\n"
      "<p class=\"rule\">Columns are element ranges; arrows: orange = receive and reduce, "
      "blue = receive (copy).</p>\n</div></div>\n",
      f);
}

int write_html(const char *path, const cli_t *cli, const trace_t *t) {
  (void)cli;
  if (t->nsteps > HTML_MAX_STEPS) {
    fprintf(stderr,
            "coll-sim: --html: %zu steps is more than a page can animate usefully (%d); "
            "use a larger --segment or a smaller --bytes\n",
            t->nsteps, HTML_MAX_STEPS);
    return -1;
  }
  size_t ncells = trace_cells(t, HTML_MAX_CELLS, NULL);
  if ((t->nsteps + 1) * (size_t)t->req.nranks * ncells > HTML_MAX_CELL_STATES) {
    fprintf(stderr,
            "coll-sim: --html: %zu steps x %d ranks x %zu cells is too many; use fewer "
            "ranks or steps\n",
            t->nsteps, t->req.nranks, ncells);
    return -1;
  }
  replay_t rp;
  coll_status_t st = trace_replay(t, HTML_MAX_CELLS, &rp);
  if (st != COLL_OK) {
    fprintf(stderr, "coll-sim: --html: %s\n", coll_last_error());
    return -1;
  }
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    replay_free(&rp);
    return -1;
  }
  fprintf(f,
          "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>coll-sim: %s %s, %d ranks</title>\n<style>\n%s</style>\n</head>\n<body>\n",
          trace_algo_name(t->req.collective, t->req.algo), trace_collective_name(t->req.collective),
          t->req.nranks, page_style);
  write_body(f, t, &rp);
  fputs("<script>\n", f);
  write_data(f, t, &rp);
  fputs(page_script, f);
  fputs("</script>\n</body>\n</html>\n", f);
  replay_free(&rp);
  if (ferror(f) | (fclose(f) != 0)) {
    perror(path);
    return -1;
  }
  return 0;
}
