/* coll-sim's command line: parsed into a request for the simulator plus output choices. */
#ifndef COLL_SIM_OPTIONS_H
#define COLL_SIM_OPTIONS_H

#include <stddef.h>

#include "scale.h"
#include "trace.h"

typedef struct cli {
  sim_request_t req;
  int explain;
  int json;
  const char *svg_path;
  const char *html_path;
  size_t max_panels; /* SVG panels before the middle steps are left out */
  size_t max_steps;  /* text table steps before the middle ones are left out; 0: all */
  int table;         /* print the step table */
  scale_opts_t scale; /* timing mode for large jobs (scale.c) */
  const char *hosts;  /* --hosts: node of each rank, "0,1,0,1" (main.c builds the map) */
} cli_t;

enum { CLI_OK = 0, CLI_HELP = 1, CLI_ERROR = 2 };

/* Parse argv into cli. CLI_ERROR: a message was printed to stderr. CLI_HELP: the help
 * text was printed to stdout. */
int cli_parse(int argc, char **argv, cli_t *cli);

#endif
