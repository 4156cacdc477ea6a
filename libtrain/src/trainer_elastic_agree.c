/* What the elastic trainer's agreements carry and how their answers are told: the flag of
 * a step (did it go well here, and if not on which rank did it fail) and the lists of
 * ranks that the answer names. */
#include <stdio.h>

#include "trainer_elastic.h"

enum { FLAG_OK = 1u, RANK_BITS = 31 };

uint32_t elastic_step_flag(int rank, bool ok) {
  return ok ? ~0u : ~(FLAG_OK | 1u << (1 + rank % RANK_BITS));
}

bool elastic_step_ok(uint32_t flag) { return (flag & FLAG_OK) != 0; }

void elastic_list_failed(const coll_agreement_t *a, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < a->nfailed && i < COLL_AGREE_MAX_FAILED && len < size; i++)
    len += (size_t)snprintf(out + len, size - len, "%s%d", i ? "," : "", a->failed[i]);
}

int elastic_list_flagged(uint32_t flag, int world, char *out, size_t size) {
  size_t len = 0;
  int n = 0;
  out[0] = '\0';
  for (int r = 0; r < world && len < size; r++) {
    if (flag & 1u << (1 + r % RANK_BITS)) continue;
    len += (size_t)snprintf(out + len, size - len, "%s%d", n ? "," : "", r);
    n++;
  }
  return n;
}
