/* The Check suite set-up and run shared by the test programs (suite_run.h). */
#include "suite_run.h"

#include <stdlib.h>

TCase *suite_case(Suite *s, const char *name, double timeout_s) {
  TCase *tc = tcase_create(name);
  if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
  suite_add_tcase(s, tc);
  return tc;
}

int suite_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
