/* What every Check test program here does around its tests: a test case with its own
 * timeout added to the suite, and main's exit status from running the suite. */
#ifndef TESTS_COMMON_SUITE_RUN_H
#define TESTS_COMMON_SUITE_RUN_H

#include <check.h>

/* A new test case named name, already added to s; timeout_s > 0 replaces the default
 * (CK_DEFAULT_TIMEOUT) for its tests. */
TCase *suite_case(Suite *s, const char *name, double timeout_s);

/* Run every test of s (output as CK_VERBOSITY says, normal when unset; forked as CK_FORK
 * says, forked when unset), free the runner and return EXIT_SUCCESS when none failed,
 * EXIT_FAILURE otherwise. */
int suite_run(Suite *s);

#endif
