/* coll-sim: teaching tool. Runs one algorithm's schedules for N ranks in the simulator
 * and explains them as a step table, numbers, an SVG picture or an animated HTML page; or,
 * in timing mode (scale.c), predicts large jobs on a topology of nodes. */
#include <stdio.h>
#include <stdlib.h>

#include "algo/topo.h"
#include "common/error.h"
#include "options.h"
#include "scale.h"
#include "trace.h"
#include "writers.h"

/* --hosts "0,1,0,1": the node map of the request (n numbers, any ints). */
static int hosts_map(cli_t *cli, algo_topo_t *map) {
  int n = cli->req.nranks, *ids = calloc((size_t)n, sizeof *ids), got = 0;
  const char *s = cli->hosts;
  while (ids != NULL && *s != '\0' && got < n) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > 1 << 30) break;
    ids[got++] = (int)v;
    s = *end == ',' ? end + 1 : end;
  }
  int ok = ids != NULL && got == n && *s == '\0' && algo_topo_from_ids(map, n, ids) == COLL_OK;
  free(ids);
  if (!ok) {
    fprintf(stderr, "coll-sim: --hosts '%s': expected %d node numbers separated by commas\n",
            cli->hosts, n);
    return 2;
  }
  cli->req.topo = map;
  /* between nodes, tcp's constants unless given (inside: the transport's) */
  if (map->nnodes > 1 && cli->req.cost.inter_beta == 0) {
    cli->req.cost.inter_alpha = algo_cost_tcp_default.alpha;
    cli->req.cost.inter_beta = algo_cost_tcp_default.beta;
  }
  return 0;
}

int main(int argc, char **argv) {
  cli_t cli;
  int rc = cli_parse(argc, argv, &cli);
  if (rc == CLI_HELP) return 0;
  if (rc != CLI_OK) return 2;
  if (cli.scale.on) return scale_main(&cli);
  algo_topo_t map = {0};
  if (cli.hosts != NULL && hosts_map(&cli, &map) != 0) return 2;
  trace_t t;
  coll_status_t st = trace_build(&cli.req, &t);
  if (st != COLL_OK) {
    fprintf(stderr, "coll-sim: simulation failed: %s\n", coll_last_error());
    algo_topo_free(&map);
    return 1;
  }
  int failed = 0;
  if (cli.json)
    failed |= write_json(stdout, &cli, &t) != 0;
  else
    failed |= write_text(stdout, &cli, &t) != 0;
  if (cli.svg_path != NULL) failed |= write_svg(cli.svg_path, &cli, &t) != 0;
  if (cli.html_path != NULL) failed |= write_html(cli.html_path, &cli, &t) != 0;
  if (fflush(stdout) != 0) failed = 1;
  trace_free(&t);
  algo_topo_free(&map);
  return failed ? 1 : 0;
}
