/* Check suite 'algo' (coll-sim's timing mode as a user runs it, COLL_SIM names the tool):
 * the JSON of one run holds every node's uplink bytes and they add up, the sweep's JSON
 * has its rows and crossovers, the plot is well-formed SVG, --help documents the options
 * and misuse exits 2 naming the problem. JSON and SVG checks skip without python3 and
 * xmllint. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"
#include "suite_run.h"

static const char *sim(void) {
  const char *p = getenv("COLL_SIM");
  return p != NULL ? p : "tools/coll-sim";
}

START_TEST(one_run_json_lists_every_nodes_uplink_bytes_and_they_add_up) {
  if (!command_exists("python3")) {
    fprintf(stderr, "sim-scale-cli: python3 missing: JSON checks skipped\n");
    return;
  }
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s ring -n 2048 --ranks-per-node 8 --bytes 1M --json | python3 -c '"
           "import json, sys\n"
           "j = json.load(sys.stdin)\n"
           "assert j[\"mode\"] == \"timing\" and j[\"nnodes\"] == 256, j[\"nnodes\"]\n"
           "assert len(j[\"uplink_egress\"]) == 256 and len(j[\"uplink_ingress\"]) == 256\n"
           "assert sum(j[\"uplink_egress\"]) == j[\"bytes_uplink\"] == sum(j[\"uplink_ingress\"])\n"
           "assert j[\"bytes_intra\"] + j[\"bytes_uplink\"] == j[\"bytes_total\"]\n"
           "assert all(e == 2 * 2047 * 1048576 // 2048 for e in j[\"uplink_egress\"])\n"
           "assert j[\"busiest_link\"][\"kind\"].startswith(\"uplink\")\n"
           "assert j[\"predicted_s\"] > 0 and j[\"rounds\"] == 2 * 2047\n"
           "' 2>&1",
           sim());
  int st;
  char *out = command_output(cmd, &st);
  ck_assert_msg(st == 0, "%s", out);
  free(out);
}
END_TEST

START_TEST(sweep_json_has_rows_and_crossovers_and_the_plot_is_svg) {
  char svg[] = "/tmp/sim_scale_cli_XXXXXX";
  int fd = mkstemp(svg);
  ck_assert_int_ge(fd, 0);
  close(fd);
  char cmd[1024];
  int st;
  snprintf(cmd, sizeof cmd,
           "%s ring --ranks-per-node 4 --sweep-ranks 8,64 --sweep-sizes 8,4M "
           "--sweep-algos ring,tree --plot %s --json > %s.json 2>&1",
           sim(), svg, svg);
  ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
  if (command_exists("python3")) {
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys\n"
             "j = json.load(open(sys.argv[1]))\n"
             "assert j[\"mode\"] == \"sweep\" and len(j[\"rows\"]) == 8, len(j[\"rows\"])\n"
             "assert {r[\"algo\"] for r in j[\"rows\"]} == {\"ring\", \"tree\"}\n"
             "assert isinstance(j[\"crossovers\"], list)\n"
             "' %s.json 2>&1",
             svg);
    char *out = command_output(cmd, &st);
    ck_assert_msg(st == 0, "%s", out);
    free(out);
  }
  if (command_exists("xmllint")) {
    snprintf(cmd, sizeof cmd, "xmllint --noout %s 2>&1", svg);
    char *out = command_output(cmd, &st);
    ck_assert_msg(st == 0, "%s", out);
    free(out);
  }
  snprintf(cmd, sizeof cmd, "%s.json", svg);
  unlink(cmd);
  unlink(svg);
}
END_TEST

START_TEST(help_documents_timing_mode_and_misuse_exits_2) {
  char cmd[512];
  int st;
  snprintf(cmd, sizeof cmd, "%s --help", sim());
  char *out = command_output(cmd, &st);
  ck_assert_int_eq(st, 0);
  static const char *const documented[] = {
      "--timing",      "--ranks-per-node", "--round-robin", "--intra-bw",   "--intra-lat",
      "--uplink-bw",   "--uplink-lat",     "--msg-lat",     "--no-sharing", "--sweep-ranks",
      "--sweep-sizes", "--sweep-algos",    "--plot",        "65536"};
  for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
    ck_assert_msg(strstr(out, documented[i]) != NULL, "--help lacks %s", documented[i]);
  free(out);
  static const struct {
    const char *args, *says;
  } cases[] = {
      {"ring -n 70000 --bytes 1K", "--nranks"},
      {"ring -n 64 --ranks-per-node 0 --bytes 1K", "--ranks-per-node"},
      {"ring -n 64 --ranks-per-node 8 --uplink-bw 0 --bytes 1K", "--uplink-bw"},
      {"ring -n 64 --ranks-per-node 8 --msg-lat -1 --bytes 1K", "--msg-lat"},
      {"ring -n 64 --ranks-per-node 8 --bytes 1K --hosts 0,1", "--hosts"},
      {"ring -n 64 --ranks-per-node 8 --bytes 1K --svg x.svg", "--svg"},
      {"ring --sweep-ranks 8,x --bytes 1K", "--sweep-ranks"},
      {"ring --sweep-ranks 8 --sweep-algos ring,warp", "warp"},
      {"pairwise -c all_to_allv -n 2048 --bytes 1K", "all_to_allv"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", sim(), cases[i].args);
    out = command_output(cmd, &st);
    ck_assert_msg(st == 2, "'%s' exited %d:\n%s", cases[i].args, st, out);
    ck_assert_msg(strstr(out, cases[i].says) != NULL, "'%s' said:\n%s", cases[i].args, out);
    free(out);
  }
}
END_TEST

SUITE_MAIN("algo-sim-scale-cli",
           suite_tests("coll-sim timing mode", 120,
                       one_run_json_lists_every_nodes_uplink_bytes_and_they_add_up,
                       sweep_json_has_rows_and_crossovers_and_the_plot_is_svg,
                       help_documents_timing_mode_and_misuse_exits_2))
