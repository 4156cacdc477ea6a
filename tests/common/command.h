/* Running a shell command from a Check test: its whole output, its exit status, and
 * whether a tool is installed (tests skip what needs a missing one). */
#ifndef TESTS_COMMON_COMMAND_H
#define TESTS_COMMON_COMMAND_H

#include <stdbool.h>

/* Run cmd with popen; its stdout (and stderr with 2>&1 in cmd) in a malloc'ed string,
 * and *status its exit status (-1 when it did not exit). Fails the test when it cannot
 * start. */
char *command_output(const char *cmd, int *status);

/* Whether `command -v name` finds it. */
bool command_exists(const char *name);

#endif
