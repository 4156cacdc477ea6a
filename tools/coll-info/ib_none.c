/* coll-info without libibverbs: the ib transport was not built. */
#include "info.h"

int info_ib(FILE *out, bool full) {
  fprintf(out,
          "%sib: not built (meson did not find libibverbs; install libibverbs-dev and "
          "reconfigure with -Dibverbs=enabled)\n",
          full ? "" : "  ");
  return 1;
}
