/* Which samples a step and a shard of an elastic run take (trainer_elastic.h gives the
 * rule), and the per-sample log of committed steps (--sample-log). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "trainer_elastic.h"

uint64_t elastic_steps_per_epoch(size_t samples, size_t batch, int shards) {
  size_t per_step = batch * (size_t)shards;
  return (samples + per_step - 1) / per_step;
}

void elastic_step_range(size_t samples, size_t batch, int shards, uint64_t step_in_epoch,
                        size_t *first, size_t *count) {
  size_t per_step = batch * (size_t)shards;
  *first = (size_t)step_in_epoch * per_step;
  *count = *first >= samples ? 0 : samples - *first < per_step ? samples - *first : per_step;
}

void elastic_shard_range(size_t step_first, size_t step_count, size_t batch, int shard,
                         size_t *first, size_t *count) {
  size_t off = (size_t)shard * batch;
  *first = step_first + off;
  *count = off >= step_count ? 0 : step_count - off < batch ? step_count - off : batch;
}

train_status_t elastic_log_open(const char *path, FILE **log) {
  *log = NULL;
  if (path == NULL) return TRAIN_OK;
  char name[4096];
  snprintf(name, sizeof name, "%s.%d", path, (int)getpid());
  *log = fopen(name, "a");
  if (*log == NULL)
    return train_error(TRAIN_ERR_IO, "--sample-log: cannot open %s: %s", name, strerror(errno));
  return TRAIN_OK;
}

train_status_t elastic_log_step(FILE *log, uint64_t global_step, uint64_t epoch,
                                uint64_t step_in_epoch, const uint32_t *indices, size_t n) {
  if (log == NULL) return TRAIN_OK;
  /* The whole line in one buffer and one write: a kill cuts no line in two. */
  size_t cap = 96 + n * 11;
  char *line = malloc(cap);
  if (line == NULL) return train_error(TRAIN_ERR_NO_MEMORY, "--sample-log: line of %zu", n);
  int len =
      snprintf(line, cap, "step %llu epoch %llu k %llu n %zu:", (unsigned long long)global_step,
               (unsigned long long)epoch, (unsigned long long)step_in_epoch, n);
  for (size_t i = 0; i < n; i++) len += snprintf(line + len, cap - (size_t)len, " %u", indices[i]);
  len += snprintf(line + len, cap - (size_t)len, " end\n");
  bool ok = write(fileno(log), line, (size_t)len) == (ssize_t)len;
  free(line);
  return ok ? TRAIN_OK
            : train_error(TRAIN_ERR_IO, "--sample-log: write failed: %s", strerror(errno));
}
