/* coll-sim: teaching tool. Runs one algorithm's schedules for N ranks in the simulator
 * and explains them as a step table, numbers, an SVG picture or an animated HTML page; or,
 * in timing mode (scale.c), predicts large jobs on a topology of nodes. */
#include <stdio.h>

#include "common/error.h"
#include "options.h"
#include "scale.h"
#include "trace.h"
#include "writers.h"

int main(int argc, char **argv) {
  cli_t cli;
  int rc = cli_parse(argc, argv, &cli);
  if (rc == CLI_HELP) return 0;
  if (rc != CLI_OK) return 2;
  if (cli.scale.on) return scale_main(&cli);
  trace_t t;
  coll_status_t st = trace_build(&cli.req, &t);
  if (st != COLL_OK) {
    fprintf(stderr, "coll-sim: simulation failed: %s\n", coll_last_error());
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
  return failed ? 1 : 0;
}
