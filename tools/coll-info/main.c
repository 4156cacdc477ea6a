/* coll-info: what this libcoll build supports (features, transports) and, with --ib, every
 * RDMA device, port and GID with the one the ib transport would pick: the first thing to
 * run when a job does not use the transport you expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_config.h"
#include "info.h"

extern char **environ;

static void usage(FILE *out) {
  fprintf(out,
          "usage: coll-info [--ib] [--help]\n"
          "  (no option)  build features, transports and the COLL_* settings in effect\n"
          "  --ib         RDMA devices, ports (state, link layer, MTU, LID), GIDs (type,\n"
          "               address) and the device/port/GID the ib transport would pick;\n"
          "               exit status 1 when there is no usable port\n");
}

static void summary(void) {
  printf("libcoll %s\n", COLL_VERSION);
  printf("Build features:\n");
  printf("  CUDA:    %s\n", COLL_HAVE_CUDA ? "yes" : "no");
  printf("  ibverbs: %s\n", COLL_HAVE_IBVERBS ? "yes" : "no");
  printf("Transports, in the order each pair of ranks tries them (COLL_TRANSPORT forces one):\n");
  printf("  shm  ranks on one host\n");
  if (COLL_HAVE_IBVERBS) printf("  ib   RDMA verbs, when both ranks have an active port\n");
  printf("  tcp  any two ranks\n");
  printf("All-reduce algorithms (COLL_ALGO forces one; auto: the cost model):\n");
  printf("  ring tree hd master  schedules over the transports (coll-sim runs them)\n");
  printf("  arena                single-host shared memory: when every rank is on one host and\n"
         "                       shm serves the pairs, one segment with a slot per rank, no\n"
         "                       messages (COLL_ARENA=0: off); coll-sim does not model it\n");
  printf("RDMA:\n");
  info_ib(stdout, false);
  printf("COLL_* settings in the environment:\n");
  int shown = 0;
  for (char **e = environ; *e != NULL; e++) {
    if (strncmp(*e, "COLL_", 5) != 0) continue;
    printf("  %s\n", *e);
    shown++;
  }
  if (shown == 0) printf("  none (all defaults)\n");
}

int main(int argc, char **argv) {
  if (argc == 1) {
    summary();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--ib") == 0) return info_ib(stdout, true);
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "coll-info: unknown arguments\n");
  usage(stderr);
  return 2;
}
