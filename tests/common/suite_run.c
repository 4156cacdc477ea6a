/* The Check suite set-up and run shared by the test programs (suite_run.h). */
#include "suite_run.h"

#include <stddef.h>
#include <stdlib.h>

int suite_run_cases(const char *name, const suite_case_t *const *cases) {
  Suite *s = suite_create(name);
  for (; *cases != NULL; cases++) {
    const suite_case_t *c = *cases;
    TCase *tc = tcase_create(c->name);
    if (c->timeout_s > 0) tcase_set_timeout(tc, c->timeout_s);
    if (c->setup != NULL || c->teardown != NULL)
      tcase_add_checked_fixture(tc, c->setup, c->teardown);
    for (const TTest *const *t = c->tests; *t != NULL; t++)
      tcase_add_loop_test(tc, *t, c->loop_start, c->loop_end);
    suite_add_tcase(s, tc);
  }
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
