/* collrun adds the hang report to its exit message: collrun runs hang_helper on 3
 * ranks (rank 1 stops itself; the others time out after 1 s) and its stderr must carry
 * the report naming rank 1 as silent. argv: collrun, hang_helper. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suite_run.h"

static const char *collrun_path, *helper_path;

START_TEST(collrun_exit_message_carries_the_hang_report) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    dup2(fds[1], 1);
    close(fds[0]);
    unsetenv("COLL_HANG_REPORT");
    execl(collrun_path, collrun_path, "-n", "3", "--timeout", "60", helper_path, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  static char out[1 << 16];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof out - 1 && (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
    len += (size_t)n;
  out[len] = '\0';
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "collrun should fail:\n%s", out);
  ck_assert_msg(strstr(out, "collrun: hang report (3 ranks): rank 1 is behind") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "rank 1: NO REPORT") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "rank 2: all_reduce(float32, 1) #2") != NULL, "%s", out);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s COLLRUN HANG_HELPER\n", argv[0]);
    return 2;
  }
  collrun_path = argv[1];
  helper_path = argv[2];
  return suite_main("coll collrun",
                    suite_tests("hang report", 60, collrun_exit_message_carries_the_hang_report));
}
