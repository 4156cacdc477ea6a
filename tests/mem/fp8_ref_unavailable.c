/* Stands in for test_fp8_ref where it cannot be built: prints why (argv[2]) and fails, or
 * skips (exit 77, meson's skip) when argv[1] is "skip". */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *why = argc > 2 ? argv[2] : "fp8_reference cannot run here";
  bool skip = argc > 1 && strcmp(argv[1], "skip") == 0;
  printf("%s\n", why);
  fprintf(stderr, "%s\n", why);
  return skip ? 77 : 1;
}
