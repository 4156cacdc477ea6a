/* Check suite 'teach': the coll-sim binary (path in $COLL_SIM) run as a user runs it.
 * Counted bytes against each algorithm's closed-form formula for 2..9 ranks (gather,
 * scatter and all_to_allv too), the ring
 * table's per-step rule, argument errors, well-formed SVG (xmllint) and the HTML page
 * stepping forward and back in headless Chromium (skipped with a message when a tool
 * is missing). */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo/algo_internal.h"
#include "command.h"
#include "suite_run.h"

/* Elements divisible by every part count used below (lcm of 1..16), so the formulas are
 * exact. */
#define EVEN_COUNT ((size_t)720720)

static const char *sim_path(void) {
  const char *p = getenv("COLL_SIM");
  ck_assert_msg(p != NULL && access(p, X_OK) == 0, "COLL_SIM must name the coll-sim binary");
  return p;
}

/* The numbers of the first JSON array after "key": [ . */
static size_t json_array(const char *json, const char *key, double *out, size_t max) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": [", key);
  const char *p = strstr(json, pat);
  ck_assert_msg(p != NULL, "no %s in the JSON output", key);
  p += strlen(pat);
  size_t n = 0;
  while (*p != ']' && n < max) {
    char *end;
    out[n++] = strtod(p, &end);
    ck_assert_msg(end != p, "bad number in %s", key);
    p = end;
    while (*p == ',' || *p == ' ') p++;
  }
  return n;
}

static long json_long(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(json, pat);
  ck_assert_msg(p != NULL, "no %s in the JSON output", key);
  return strtol(p + strlen(pat), NULL, 10);
}

/* ---- formulas, written here from the algorithm descriptions (not from coll-sim) ---- */

static int pow2_below(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

static void allreduce_formula(const char *algo, int n, double S, double *want) {
  int pw = pow2_below(n), rem = n - pw;
  for (int r = 0; r < n; r++) {
    if (strcmp(algo, "ring") == 0) {
      want[r] = 2.0 * (n - 1) / n * S;
    } else if (strcmp(algo, "master") == 0) {
      want[r] = r == 0 ? (n - 1) * S : S;
    } else if (strcmp(algo, "hd") == 0) {
      double hd = 2.0 * (pw - 1) / pw * S;
      want[r] = r < 2 * rem ? (r % 2 == 0 ? S : hd + S) : hd;
    } else { /* tree: S/2 over every link of each of the two trees */
      want[r] = 0;
      for (int t = 0; t < 2; t++) {
        algo_tree_node_t node;
        algo_dbtree_node(n, t, r, &node);
        want[r] += S / 2 * ((node.parent >= 0) + (node.child[0] >= 0) + (node.child[1] >= 0));
      }
    }
  }
}

static void broadcast_formula(const char *algo, int n, int root, double S, double *want) {
  for (int r = 0; r < n; r++) {
    int v = (r - root + n) % n;
    if (strcmp(algo, "chain") == 0) {
      want[r] = v < n - 1 ? S : 0;
    } else if (strcmp(algo, "direct") == 0) {
      want[r] = v == 0 ? (n - 1) * S : 0;
    } else { /* binomial: S to each child v + 2^k, for 2^k > v */
      want[r] = 0;
      for (int m = 1; m < n; m *= 2)
        if (v < m && v + m < n) want[r] += S;
    }
  }
}

static const char *const allreduce_algos[] = {"ring", "tree", "hd", "master"};
static const char *const broadcast_algos[] = {"chain", "binomial", "direct"};

/* Loop: 4 all-reduce algorithms x ranks 2..9. */
START_TEST(allreduce_bytes_per_rank_equal_the_formula_for_2_to_9_ranks) {
  const char *algo = allreduce_algos[_i / 8];
  int n = 2 + _i % 8;
  double S = (double)EVEN_COUNT * 4;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s -n %d --bytes %zu --json", sim_path(), algo, n, EVEN_COUNT * 4);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0, "%s exited %d: %s", cmd, st, out);
  double got[16], want[16], sum = 0;
  ck_assert_int_eq(json_array(out, "bytes_sent", got, 16), n);
  allreduce_formula(algo, n, S, want);
  /* coll-sim's own formula (what --explain prints) must agree too. */
  const char *formula = strstr(out, "\"formula\"");
  ck_assert_ptr_nonnull(formula);
  double own[16];
  ck_assert_int_eq(json_array(formula, "bytes_sent", own, 16), n);
  for (int r = 0; r < n; r++) {
    ck_assert_msg(own[r] == want[r], "%s n=%d rank %d: coll-sim's formula %.0f, ours %.0f", algo, n,
                  r, own[r], want[r]);
    ck_assert_msg(got[r] == want[r], "%s n=%d rank %d: counted %.0f bytes, formula %.0f", algo, n,
                  r, got[r], want[r]);
    sum += got[r];
  }
  /* Totals that hold whatever the shape: ring and tree move 2 (n-1) S in all, master too. */
  if (strcmp(algo, "hd") != 0)
    ck_assert_msg(sum == 2.0 * (n - 1) * S, "%s n=%d: %.0f bytes in all", algo, n, sum);
  /* Steps, where the formula is exact (nseg: ring's chunk or master's buffer in 512K). */
  long steps = json_long(out, "steps");
  long seg = 512 * 1024 / 4;
  if (strcmp(algo, "ring") == 0)
    ck_assert_int_eq(steps, 2L * (n - 1) * (((long)EVEN_COUNT / n + seg - 1) / seg));
  if (strcmp(algo, "master") == 0)
    ck_assert_int_eq(steps, (long)n * (((long)EVEN_COUNT + seg - 1) / seg));
  if (strcmp(algo, "hd") == 0) {
    long lg = 0;
    while ((1 << lg) < pow2_below(n)) lg++;
    ck_assert_int_eq(steps, 2 * lg + (pow2_below(n) != n ? 2 : 0));
  }
  free(out);
}
END_TEST

/* Loop: 3 broadcast algorithms x ranks 2..9; the root is the middle rank. */
START_TEST(broadcast_bytes_per_rank_equal_the_formula_for_2_to_9_ranks) {
  const char *algo = broadcast_algos[_i / 8];
  int n = 2 + _i % 8, root = n / 2;
  double S = (double)EVEN_COUNT * 4;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s -c broadcast -r %d -n %d --bytes %zu --json", sim_path(), algo,
           root, n, EVEN_COUNT * 4);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0, "%s exited %d: %s", cmd, st, out);
  double got[16], want[16];
  ck_assert_int_eq(json_array(out, "bytes_sent", got, 16), n);
  broadcast_formula(algo, n, root, S, want);
  for (int r = 0; r < n; r++)
    ck_assert_msg(got[r] == want[r], "%s n=%d root %d rank %d: counted %.0f, formula %.0f", algo, n,
                  root, r, got[r], want[r]);
  free(out);
}
END_TEST

/* Blocks in rank v's subtree of the binomial tree (v counted from the root). */
static int subtree_blocks(int n, int v) {
  if (v == 0) return n;
  int low = v & -v;
  return low < n - v ? low : n - v;
}

/* What gather.c and alltoallv.c promise each rank sends (coll-sim's all_to_allv layout:
 * rank r sends rank p ((r + 2p) mod 3) x count/2 elements). */
static double new_kind_formula(const char *collective, const char *algo, int n, int root, int r,
                               size_t count, double esize) {
  double S = (double)count * esize;
  int v = (r - root + n) % n;
  if (strcmp(collective, "all_to_allv") == 0) {
    double sent = 0;
    for (int p = 0; p < n; p++)
      if (p != r) sent += (double)((r + 2 * p) % 3) * (double)(count / 2) * esize;
    return sent;
  }
  bool gather = strcmp(collective, "gather") == 0, direct = strcmp(algo, "direct") == 0;
  if (direct) return gather ? (v == 0 ? 0 : S) : (v == 0 ? (n - 1) * S : 0);
  return gather ? (v == 0 ? 0 : subtree_blocks(n, v) * S) : (subtree_blocks(n, v) - 1) * S;
}

static const char *const new_kind_runs[][2] = {{"gather", "direct"},
                                               {"gather", "binomial"},
                                               {"scatter", "direct"},
                                               {"scatter", "binomial"},
                                               {"all_to_allv", "pairwise"}};

/* Loop: 5 (collective, algorithm) pairs x ranks 2..9; roots the middle rank. */
START_TEST(gather_scatter_and_all_to_allv_bytes_per_rank_equal_the_formula_for_2_to_9_ranks) {
  const char *collective = new_kind_runs[_i / 8][0], *algo = new_kind_runs[_i / 8][1];
  int n = 2 + _i % 8, root = strcmp(collective, "all_to_allv") == 0 ? 0 : n / 2;
  size_t count = 6000;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s -c %s -r %d -n %d --bytes %zu --segment 4096 --json", sim_path(),
           algo, collective, root, n, count * 4);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0, "%s exited %d: %s", cmd, st, out);
  double got[16];
  ck_assert_int_eq(json_array(out, "bytes_sent", got, 16), n);
  for (int r = 0; r < n; r++) {
    double want = new_kind_formula(collective, algo, n, root, r, count, 4);
    ck_assert_msg(got[r] == want, "%s %s n=%d root %d rank %d: counted %.0f, formula %.0f", algo,
                  collective, n, root, r, got[r], want);
  }
  free(out);
  /* --explain agrees with the same formulas, steps included. */
  snprintf(cmd, sizeof cmd, "%s %s -c %s -r %d -n %d --bytes %zu --segment 4096 --explain",
           sim_path(), algo, collective, root, n, count * 4);
  out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  ck_assert_msg(strstr(out, "every rank's counted bytes equal the formula") != NULL, "%s", out);
  long formula = -1, counted = -2;
  const char *f = strstr(out, "formula: "), *c = strstr(out, "counted: ");
  ck_assert_msg(f != NULL && c != NULL && sscanf(f, "formula: %ld", &formula) == 1 &&
                    sscanf(c, "counted: %ld", &counted) == 1 && formula == counted,
                "steps: %s", out);
  free(out);
}
END_TEST

START_TEST(gather_table_shows_the_root_receiving_every_block_at_its_rank) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s direct -c gather -n 3 -r 1 --bytes 16 -d int32", sim_path());
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  ck_assert_msg(strstr(out,
                       "rank 1 copies locally elements 4..7; receives elements 0..3 from "
                       "rank 0; receives elements 8..11 from rank 2") != NULL,
                "%s", out);
  ck_assert_msg(strstr(out, "rank 2 sends elements 0..3 to rank 1") != NULL, "%s", out);
  free(out);
}
END_TEST

START_TEST(link_matrix_rows_add_up_to_the_bytes_each_rank_sends) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s tree -n 7 --bytes 1000 --json", sim_path());
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  double sent[8], links[64];
  ck_assert_int_eq(json_array(out, "bytes_sent", sent, 8), 7);
  const char *m = strstr(out, "\"link_bytes\": [");
  ck_assert_ptr_nonnull(m);
  m = strchr(m, '['); /* the outer bracket; each row's follows */
  for (int a = 0; a < 7; a++) {
    m = strchr(m + 1, '[');
    ck_assert_ptr_nonnull(m);
    double row = 0;
    const char *p = m + 1;
    for (int b = 0; b < 7; b++) {
      char *end;
      links[a * 7 + b] = strtod(p, &end);
      row += links[a * 7 + b];
      p = end + 1;
    }
    ck_assert_msg(row == sent[a], "rank %d: links %.0f, sent %.0f", a, row, sent[a]);
    ck_assert_msg(links[a * 7 + a] == 0, "rank %d sends to itself", a);
  }
  free(out);
}
END_TEST

/* In reduce-scatter step i rank j sends chunk j-i to j+1 and reduces chunk j-i-1 from
 * j-1; in all-gather step i (table step n-1+i) it sends chunk j+1-i, receives chunk j-i. */
START_TEST(ring_table_for_4_ranks_shows_rank_j_sending_chunk_j_minus_i_in_step_i) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s ring -n 4 --bytes 1K --explain", sim_path());
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  int n = 4;
  for (int step = 0; step < 2 * (n - 1); step++) {
    char head[32];
    snprintf(head, sizeof head, "\nstep %d\n", step);
    const char *block = strstr(out, head);
    ck_assert_msg(block != NULL, "no step %d in the table:\n%s", step, out);
    for (int j = 0; j < n; j++) {
      int rs = step < n - 1, i = rs ? step : step - (n - 1);
      int send = ((rs ? j - i : j + 1 - i) % n + n) % n;
      int recv = ((rs ? j - i - 1 : j - i) % n + n) % n;
      int elems = 256 / n;
      char line[256];
      snprintf(line, sizeof line,
               "  rank %d sends chunk %d (elements %d..%d) to rank %d; receives%s chunk %d "
               "(elements %d..%d) from rank %d\n",
               j, send, send * elems, send * elems + elems - 1, (j + 1) % n,
               rs ? " and reduces" : "", recv, recv * elems, recv * elems + elems - 1,
               (j + n - 1) % n);
      const char *hit = strstr(block, line);
      const char *next = strstr(block + 1, "\nstep ");
      ck_assert_msg(hit != NULL && (next == NULL || hit < next), "step %d lacks:\n%s\nin:\n%s",
                    step, line, out);
    }
  }
  ck_assert_msg(strstr(out, "rank j sends chunk j-i to rank j+1") != NULL,
                "--explain does not state the rule:\n%s", out);
  ck_assert_msg(strstr(out, "formula: 6   counted: 6") != NULL, "steps formula line:\n%s", out);
  ck_assert_msg(strstr(out, "every rank's counted bytes equal the formula") != NULL, "%s", out);
  free(out);
}
END_TEST

START_TEST(bad_arguments_exit_2_with_a_message_naming_the_problem) {
  static const struct {
    const char *args;
    const char *says;
  } cases[] = {
      {"", "ALGO is missing"},
      {"ring --bytes 1K", "-n N"},
      {"ring -n 4", "--bytes"},
      {"ring -n 0 --bytes 1K", "--nranks"},
      {"ring -n 4 --bytes 1x", "--bytes"},
      {"ring -n 4 --bytes 6", "multiple"},
      {"warp -n 4 --bytes 1K", "unknown ALGO"},
      {"chain -n 4 --bytes 1K", "--collective broadcast"},
      {"ring -n 4 --bytes 1K -c allgather", "--collective"},
      {"ring -n 4 --bytes 1K -c gather", "not a gather algorithm"},
      {"pairwise -n 4 --bytes 1K", "--collective all_to_allv"},
      {"pairwise -c all_to_allv -n 4 -r 1 --bytes 1K", "--root"},
      {"direct -c scatter -n 4 --bytes 1K --svg x.svg", "--svg and --html"},
      {"chain -c broadcast -n 4 -r 4 --bytes 1K", "--root"},
      {"ring -n 4 --bytes 1K --transport ib", "--transport"},
      {"ring -n 4 --bytes 1K --alpha -1", "--alpha"},
      {"ring -n 4 --bytes 1K --frobnicate", "unknown option"},
      {"ring -n 4 --bytes 1K --svg", "needs a value"},
      {"ring -n 4 --bytes 1K --dtype quad", "--dtype"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", sim_path(), cases[i].args);
    int st;
    char *out = command_output(cmd, &st);
    ck_assert_msg(st == 2, "'%s' exited %d:\n%s", cases[i].args, st, out);
    ck_assert_msg(strstr(out, cases[i].says) != NULL, "'%s' said:\n%s", cases[i].args, out);
    free(out);
  }
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s --help", sim_path());
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  static const char *const documented[] = {
      "--nranks",    "--bytes", "--collective", "--root",      "--dtype",    "--segment",
      "--transport", "--alpha", "--beta",       "--gamma",     "--explain",  "--json",
      "--svg",       "--html",  "--max-panels", "--max-steps", "exit status"};
  for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
    ck_assert_msg(strstr(out, documented[i]) != NULL, "--help lacks %s", documented[i]);
  free(out);
}
END_TEST

START_TEST(json_output_parses_for_every_algorithm) {
  if (!command_exists("python3")) {
    fprintf(stderr, "teach: python3 missing: JSON syntax check skipped\n");
    return;
  }
  static const char *const runs[] = {"ring -n 5 --bytes 3000 --segment 512",
                                     "tree -n 7 --bytes 1K",
                                     "hd -n 6 --bytes 96",
                                     "master -n 3 --bytes 64",
                                     "chain -c broadcast -n 4 -r 1 --bytes 2K --segment 512",
                                     "binomial -c broadcast -n 6 --bytes 64",
                                     "direct -c broadcast -n 3 --bytes 64",
                                     "ring -n 1 --bytes 16",
                                     "direct -c gather -n 4 -r 3 --bytes 64",
                                     "binomial -c scatter -n 7 -r 2 --bytes 1K --segment 64",
                                     "pairwise -c all_to_allv -n 5 --bytes 256"};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s --json | python3 -m json.tool >/dev/null 2>&1", sim_path(),
             runs[i]);
    ck_assert_msg(system(cmd) == 0, "'%s --json' is not valid JSON", runs[i]);
  }
}
END_TEST

START_TEST(long_tables_and_big_pages_say_what_they_leave_out) {
  char cmd[512];
  int st;
  /* 2 (n-1) = 30 steps, 10 shown: the first and last 5 and one line for the rest. */
  snprintf(cmd, sizeof cmd, "%s ring -n 16 --bytes 64K --max-steps 10", sim_path());
  char *out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  ck_assert_msg(strstr(out, "... steps 5..24 left out (20 steps") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "\nstep 4\n") != NULL && strstr(out, "\nstep 25\n") != NULL &&
                    strstr(out, "\nstep 5\n") == NULL,
                "wrong steps shown:\n%s", out);
  free(out);
  /* Over 64 ranks the page cannot show sets of ranks: a message and exit 1, no crash. */
  snprintf(cmd, sizeof cmd, "%s ring -n 70 --bytes 70K --no-table --html /dev/null 2>&1",
           sim_path());
  out = command_output(cmd, &st);
  ck_assert_msg(st == 1 && strstr(out, "coll-sim: --html:") != NULL, "exit %d: %s", st, out);
  free(out);
}
END_TEST

/* A fresh temporary directory for output files; removed by rm_tree. */
static void temp_dir(char *buf, size_t len) {
  snprintf(buf, len, "%s/coll-sim-test.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(buf));
}

static void rm_tree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

START_TEST(svg_pictures_are_well_formed_xml) {
  if (!command_exists("xmllint")) {
    fprintf(stderr, "teach: xmllint missing (Debian libxml2-utils): SVG check skipped\n");
    return;
  }
  static const char *const runs[] = {
      "ring -n 4 --bytes 1K",
      "tree -n 9 --bytes 4K",
      "hd -n 6 --bytes 96",
      "master -n 5 --bytes 64K",
      "chain -c broadcast -n 5 -r 2 --bytes 2M",
      "ring -n 40 --bytes 160K",
      "binomial -c broadcast -n 8 --bytes 64",
  };
  char dir[256];
  temp_dir(dir, sizeof dir);
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s %s --no-table --svg %s/p%zu.svg >/dev/null && xmllint --noout "
             "%s/p%zu.svg 2>&1",
             sim_path(), runs[i], dir, i, dir, i);
    int st;
    char *out = command_output(cmd, &st);
    ck_assert_msg(st == 0, "'%s': %s", runs[i], out);
    free(out);
  }
  /* 40 ranks make 78 steps: the picture says which ones it left out. */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "grep -c 'left out' %s/p5.svg", dir);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0 && atoi(out) >= 1, "capped SVG does not say what it left out");
  free(out);
  rm_tree(dir);
}
END_TEST

/* The page's DOM after Chromium ran its script with the given URL suffix. */
static char *dump_dom(const char *dir, const char *page, const char *suffix) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "timeout 60 chromium --headless --no-sandbox --disable-gpu "
           "--disable-background-networking --disable-component-update --disable-sync "
           "--no-first-run --user-data-dir=%s/profile --dump-dom 'file://%s/%s%s' 2>/dev/null",
           dir, dir, page, suffix);
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0, "chromium exited %d", st);
  return out;
}

static void expect_label(const char *dom, const char *label) {
  char want[96];
  snprintf(want, sizeof want, "id=\"step-label\">%s<", label);
  ck_assert_msg(strstr(dom, want) != NULL, "step label is not '%s'", label);
}

static size_t occurrences(const char *s, const char *what) {
  size_t n = 0;
  for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what)) n++;
  return n;
}

START_TEST(html_page_steps_forward_and_back_in_headless_chromium) {
  if (!command_exists("chromium")) {
    fprintf(stderr, "teach: chromium missing (Debian chromium): HTML check skipped\n");
    return;
  }
  char dir[256], cmd[1024];
  temp_dir(dir, sizeof dir);
  snprintf(cmd, sizeof cmd, "%s ring -n 4 --bytes 1K --no-table --html %s/ring.html >/dev/null",
           sim_path(), dir);
  ck_assert_int_eq(system(cmd), 0);
  /* Self-contained: no external script or style, and no URL but the SVG namespace. */
  int st;
  snprintf(cmd, sizeof cmd, "grep -c -E '<script[^>]* src=|<link ' %s/ring.html", dir);
  char *out = command_output(cmd, &st);
  ck_assert_msg(atoi(out) == 0, "page loads outside files");
  free(out);
  snprintf(cmd, sizeof cmd,
           "grep -o 'https\\?://[^\"]*' %s/ring.html | grep -v -c "
           "'^http://www.w3.org/2000/svg$'",
           dir);
  out = command_output(cmd, &st);
  ck_assert_msg(atoi(out) == 0, "page refers to %s URLs besides the SVG namespace", out);
  free(out);

  /* Three clicks on next: step 3 of 6; the buffers are partial sums, not final. */
  char *dom = dump_dom(dir, "ring.html", "?autostep=3");
  expect_label(dom, "step 3 / 6");
  ck_assert_uint_eq(occurrences(dom, "class=\"panel"), 7); /* start + 6 steps */
  ck_assert_uint_eq(occurrences(dom, "class=\"panel shown\""), 1);
  ck_assert_msg(strstr(dom, "class=\"panel shown\" data-state=\"3\"") != NULL, "wrong panel");
  ck_assert_uint_eq(occurrences(dom, "class=\"cell final\""), 4); /* one chunk each */
  free(dom);
  /* Past the end and back: 7 nexts stop at 6, then prev twice: 4; after the reduce-scatter
   * (3 steps) and one all-gather step every rank holds 2 final chunks. */
  dom = dump_dom(dir, "ring.html", "?clicks=nnnnnnnpp");
  expect_label(dom, "step 4 / 6");
  ck_assert_uint_eq(occurrences(dom, "class=\"cell final\""), 8);
  free(dom);
  dom = dump_dom(dir, "ring.html", "#step=6");
  expect_label(dom, "step 6 / 6");
  ck_assert_uint_eq(occurrences(dom, "class=\"cell final\""), 16);
  ck_assert_msg(strstr(dom, "id=\"next\" type=\"button\" disabled") != NULL,
                "next is not disabled at the last step");
  free(dom);
  rm_tree(dir);
}
END_TEST

SUITE_MAIN("teach",
           suite_loop_tests("coll-sim", 120, 0, 32,
                            allreduce_bytes_per_rank_equal_the_formula_for_2_to_9_ranks),
           suite_loop_tests("coll-sim", 120, 0, 24,
                            broadcast_bytes_per_rank_equal_the_formula_for_2_to_9_ranks),
           suite_loop_tests(
               "coll-sim", 120, 0, 40,
               gather_scatter_and_all_to_allv_bytes_per_rank_equal_the_formula_for_2_to_9_ranks),
           suite_tests("coll-sim", 120,
                       gather_table_shows_the_root_receiving_every_block_at_its_rank,
                       link_matrix_rows_add_up_to_the_bytes_each_rank_sends,
                       ring_table_for_4_ranks_shows_rank_j_sending_chunk_j_minus_i_in_step_i,
                       bad_arguments_exit_2_with_a_message_naming_the_problem,
                       json_output_parses_for_every_algorithm,
                       long_tables_and_big_pages_say_what_they_leave_out,
                       svg_pictures_are_well_formed_xml,
                       html_page_steps_forward_and_back_in_headless_chromium))
