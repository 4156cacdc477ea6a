/* Tests of collrun --elastic and --replace: a rank that dies does not stop the job, is
 * reported, is replaced (same environment plus COLL_ELASTIC_JOIN=1) while replacements
 * are left, and the exit status says whether the job as a whole succeeded. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "suite_run.h"

enum { RUN_TIMEOUT_MS = 30000 };

static const char *collrun;
static const char *rank_helper;

static run_t run_to_end(const char *const *args) {
  run_t run;
  run_start(&run, collrun, args);
  run_finish(&run, RUN_TIMEOUT_MS);
  return run;
}

static void assert_exit(const run_t *run, int code) {
  ck_assert_msg(WIFEXITED(run->status) && WEXITSTATUS(run->status) == code,
                "collrun ended with status %#x, expected exit %d; stderr:\n%s", run->status, code,
                run->err);
}

static void assert_contains(const char *text, const char *needle) {
  ck_assert_msg(strstr(text, needle) != NULL, "expected \"%s\" in:\n%s", needle, text);
}

START_TEST(an_elastic_job_goes_on_without_a_killed_rank_and_exits_0) {
  const char *args[] = {"--elastic", "-n", "3", rank_helper, "elastic", "1", "kill", "300", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  ck_assert_int_eq(count_of(run.out, "DONE"), 2);
  assert_contains(run.err, "collrun: rank 1 (pid ");
  assert_contains(run.err, ") was killed by SIGKILL; the job goes on with the others");
  ck_assert_int_eq(count_of(run.out, "JOINER"), 0); /* --elastic alone replaces nobody */
  run_free(&run);
}
END_TEST

START_TEST(replace_starts_the_dead_rank_again_with_its_environment_and_join_set) {
  const char *args[] = {"--replace", "1", "-n",   "3",   rank_helper,
                        "elastic",   "2", "kill", "500", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  ck_assert_int_eq(count_of(run.out, "DONE"), 2);
  assert_contains(run.out, "[2] JOINER RANK=2 COLL_ELASTIC_JOIN=1 WORLD_SIZE=3 LOCAL_RANK=2");
  assert_contains(run.err, "collrun: started a replacement for rank 2 (pid ");
  run_free(&run);
}
END_TEST

START_TEST(replacements_stop_when_the_count_given_is_used_up) {
  /* Ranks 1, 2 and 3 are killed; one replacement in all. */
  const char *args[] = {"--replace", "1",  "-n",   "4",   rank_helper,
                        "elastic",   "-2", "kill", "500", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0); /* the failures all came before rank 0 finished */
  ck_assert_int_eq(count_of(run.out, "JOINER"), 1);
  ck_assert_int_eq(count_of(run.out, "DONE"), 1);
  ck_assert_int_eq(count_of(run.err, "the job goes on with the others"), 3);
  run_free(&run);
}
END_TEST

START_TEST(an_elastic_job_where_no_rank_finishes_fails_with_the_last_code) {
  const char *args[] = {"--elastic", "-n", "2", rank_helper, "elastic", "-1", "exit3", "0", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 3);
  assert_contains(run.err, "collrun: elastic job failed: no rank finished");
  run_free(&run);
}
END_TEST

START_TEST(a_failure_after_a_rank_finished_fails_the_elastic_job) {
  const char *args[] = {"--elastic", "-n", "2", rank_helper, "elastic", "0", "late5", "200", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 5);
  assert_contains(run.err, "a rank failed after the first finished");
  run_free(&run);
}
END_TEST

START_TEST(replace_and_its_delay_are_checked_and_documented) {
  const char *bad[] = {"--replace", "x", "-n", "2", rank_helper, "env", NULL};
  run_t run = run_to_end(bad);
  assert_exit(&run, 2);
  run_free(&run);
  const char *help[] = {"--help", NULL};
  run = run_to_end(help);
  assert_exit(&run, 0);
  assert_contains(run.out, "--replace N");
  assert_contains(run.out, "--replace-delay-ms");
  assert_contains(run.out, "COLL_ELASTIC_JOIN");
  run_free(&run);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s COLLRUN RANK_HELPER\n", argv[0]);
    return 2;
  }
  collrun = argv[1];
  rank_helper = argv[2];
  return suite_main(
      "collrun elastic",
      suite_tests("elastic", 60, an_elastic_job_goes_on_without_a_killed_rank_and_exits_0,
                  replace_starts_the_dead_rank_again_with_its_environment_and_join_set,
                  replacements_stop_when_the_count_given_is_used_up,
                  an_elastic_job_where_no_rank_finishes_fails_with_the_last_code,
                  a_failure_after_a_rank_finished_fails_the_elastic_job,
                  replace_and_its_delay_are_checked_and_documented));
}
