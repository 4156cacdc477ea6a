/* How every Check test program here declares and runs its suite:
 *   SUITE_MAIN("suite", suite_tests("case", timeout_s, test, test, ...), ...)
 * (or main returning suite_main(...) where it has more to do) with one entry per test
 * case (or per run of loop tests with one range), in the order the tests run; Check's own
 * calls stay inside suite_run.c. */
#ifndef TESTS_COMMON_SUITE_RUN_H
#define TESTS_COMMON_SUITE_RUN_H

#include <check.h>

/* A test case: its name, a timeout (> 0 replaces CK_DEFAULT_TIMEOUT), the range of _i
 * its tests run with (start to end - 1), a checked fixture (or NULL) and its tests. */
typedef struct {
  const char *name;
  double timeout_s;
  int loop_start, loop_end;
  SFun setup, teardown;
  const TTest *const *tests; /* NULL-terminated */
} suite_case_t;

/* A case of plain tests (named as in START_TEST), each run once. */
#define suite_tests(name, timeout_s, ...) suite_loop_tests(name, timeout_s, 0, 1, __VA_ARGS__)

/* A case of loop tests, each run with _i from start to end - 1. */
#define suite_loop_tests(name, timeout_s, start, end, ...)                \
  (&(const suite_case_t){(name), (timeout_s), (start), (end), NULL, NULL, \
                         (const TTest *const[]){__VA_ARGS__, NULL}})

/* A case of plain tests with a checked fixture: setup and teardown around each test. */
#define suite_fixture_tests(name, timeout_s, setup, teardown, ...)       \
  (&(const suite_case_t){(name), (timeout_s), 0, 1, (setup), (teardown), \
                         (const TTest *const[]){__VA_ARGS__, NULL}})

/* The suite named name with the cases given, run: main's exit status. */
#define suite_main(name, ...) \
  suite_run_cases((name), (const suite_case_t *const[]){__VA_ARGS__, NULL})

/* The program's main, for a program that only runs its suite. */
#define SUITE_MAIN(name, ...) \
  int main(void) { return suite_main(name, __VA_ARGS__); }

/* Build the suite from the NULL-terminated cases, run every test (output as CK_VERBOSITY
 * says, normal when unset; forked unless CK_FORK=no), free the runner and return
 * EXIT_SUCCESS when none failed, EXIT_FAILURE otherwise. */
int suite_run_cases(const char *name, const suite_case_t *const *cases);

#endif
