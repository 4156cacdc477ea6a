/* Shell commands for the tests (see command.h). */
#include "command.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

char *command_output(const char *cmd, int *status) {
  FILE *p = popen(cmd, "r");
  ck_assert_msg(p != NULL, "popen %s", cmd);
  size_t cap = 1 << 16, len = 0, got;
  char *out = malloc(cap);
  ck_assert_ptr_nonnull(out);
  while ((got = fread(out + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 4096) {
      cap *= 2;
      out = realloc(out, cap);
      ck_assert_ptr_nonnull(out);
    }
  }
  out[len] = '\0';
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

bool command_exists(const char *name) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
  return system(cmd) == 0;
}
