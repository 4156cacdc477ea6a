/* Tests of collrun's binding of ranks to cores (--bind, COLLRUN_BIND): real collrun
 * processes start rank_helper, which prints the Cpus_allowed_list the kernel gives it.
 * Paths of the built programs come from meson: test_collrun_binding COLLRUN RANK_HELPER. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "suite_run.h"

enum { RUN_TIMEOUT_MS = 30000, MAX_RANKS = 16 };

static const char *collrun;
static const char *rank_helper;

/* "0-2,5" -> the set; false when malformed. */
static bool parse_cpu_list(const char *text, cpu_set_t *set) {
  CPU_ZERO(set);
  const char *p = text;
  while (*p != '\0' && *p != '\n') {
    char *end;
    long first = strtol(p, &end, 10);
    if (end == p) return false;
    long last = first;
    if (*end == '-') {
      p = end + 1;
      last = strtol(p, &end, 10);
      if (end == p) return false;
    }
    if (first < 0 || last < first || last >= CPU_SETSIZE) return false;
    for (long cpu = first; cpu <= last; cpu++) CPU_SET((int)cpu, set);
    p = end;
    if (*p == ',') p++;
  }
  return CPU_COUNT(set) > 0;
}

typedef struct {
  cpu_set_t cpus[MAX_RANKS];
  int seen[MAX_RANKS];
} rank_cpus_t;

/* Runs collrun with args (NULL-terminated) and rank_helper cpus; collects each rank's set. */
static void run_and_collect(const char *const *args, int nranks, rank_cpus_t *out) {
  const char *argv[24];
  size_t n = 0;
  for (; args[n] != NULL && n < 20; n++) argv[n] = args[n];
  argv[n++] = rank_helper;
  argv[n++] = "cpus";
  argv[n] = NULL;
  run_t run;
  run_start(&run, collrun, argv);
  run_finish(&run, RUN_TIMEOUT_MS);
  ck_assert_msg(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0,
                "collrun failed (status %d); stderr:\n%s", run.status, run.err);
  memset(out, 0, sizeof *out);
  char *save = NULL;
  for (char *line = strtok_r(run.out, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    const char *cpus = strstr(line, "CPUS=");
    long rank = field_long(line, "RANK");
    ck_assert_msg(cpus != NULL && rank >= 0 && rank < nranks, "unexpected line: %s", line);
    ck_assert_msg(parse_cpu_list(cpus + 5, &out->cpus[rank]), "bad CPU list: %s", line);
    out->seen[rank]++;
  }
  for (int r = 0; r < nranks; r++)
    ck_assert_msg(out->seen[r] == 1, "rank %d reported %d times:\n%s", r, out->seen[r], run.err);
  run_free(&run);
}

/* The CPUs this test may use, lowest first; returns how many. */
static int allowed_cpus(int *list, int cap) {
  cpu_set_t set;
  ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
  int n = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && n < cap; cpu++)
    if (CPU_ISSET(cpu, &set)) list[n++] = cpu;
  ck_assert_int_gt(n, 0);
  return n;
}

/* Narrow this test process's mask (each test runs in a forked process of its own). */
static void restrict_to(const int *cpus, int n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < n; i++) CPU_SET(cpus[i], &set);
  ck_assert_int_eq(sched_setaffinity(0, sizeof set, &set), 0);
}

static void assert_only(const cpu_set_t *set, const int *cpus, int n, int rank) {
  cpu_set_t want;
  CPU_ZERO(&want);
  for (int i = 0; i < n; i++) CPU_SET(cpus[i], &want);
  ck_assert_msg(CPU_EQUAL(set, &want), "rank %d: %d CPUs, expected %d starting at %d", rank,
                CPU_COUNT(set), n, cpus[0]);
}

static const char *itoa_static(int v, char *buf, size_t cap) {
  snprintf(buf, cap, "%d", v);
  return buf;
}

START_TEST(by_default_each_rank_runs_on_its_own_cpu) {
  int cpus[MAX_RANKS];
  int m = allowed_cpus(cpus, MAX_RANKS);
  char n_text[16];
  const char *args[] = {"-n", itoa_static(m, n_text, sizeof n_text), NULL};
  rank_cpus_t got;
  run_and_collect(args, m, &got);
  for (int r = 0; r < m; r++) assert_only(&got.cpus[r], &cpus[r], 1, r);
}
END_TEST

START_TEST(bind_core_spelled_out_binds_as_the_default_does) {
  int cpus[MAX_RANKS];
  int m = allowed_cpus(cpus, 2);
  setenv("COLLRUN_BIND", "none", 1); /* the option wins over the variable */
  char n_text[16];
  const char *args[] = {"--bind", "core", "-n", itoa_static(m, n_text, sizeof n_text), NULL};
  rank_cpus_t got;
  run_and_collect(args, m, &got);
  for (int r = 0; r < m; r++) assert_only(&got.cpus[r], &cpus[r], 1, r);
}
END_TEST

START_TEST(bind_none_leaves_every_rank_the_launchers_mask) {
  int cpus[MAX_RANKS];
  int m = allowed_cpus(cpus, MAX_RANKS);
  const char *args[] = {"--bind", "none", "-n", "3", NULL};
  rank_cpus_t got;
  run_and_collect(args, 3, &got);
  for (int r = 0; r < 3; r++) assert_only(&got.cpus[r], cpus, m, r);
}
END_TEST

START_TEST(collrun_bind_none_in_the_environment_turns_binding_off) {
  int cpus[MAX_RANKS];
  int m = allowed_cpus(cpus, MAX_RANKS);
  setenv("COLLRUN_BIND", "none", 1);
  const char *args[] = {"-n", "2", NULL};
  rank_cpus_t got;
  run_and_collect(args, 2, &got);
  for (int r = 0; r < 2; r++) assert_only(&got.cpus[r], cpus, m, r);
}
END_TEST

/* Two CPUs c0 < c1 (the first two this test may use): 4 ranks share them in pairs, 3 ranks
 * split the middle one's share across both. One CPU only: everyone on it. */
START_TEST(more_ranks_than_cpus_share_them_in_contiguous_slices) {
  int cpus[MAX_RANKS];
  int m = allowed_cpus(cpus, 2);
  restrict_to(cpus, m);
  rank_cpus_t got;
  const char *four[] = {"-n", "4", NULL};
  run_and_collect(four, 4, &got);
  for (int r = 0; r < 4; r++) assert_only(&got.cpus[r], &cpus[m == 2 ? r / 2 : 0], 1, r);
  const char *three[] = {"-n", "3", NULL};
  run_and_collect(three, 3, &got);
  assert_only(&got.cpus[0], &cpus[0], 1, 0);
  assert_only(&got.cpus[1], cpus, m, 1);
  assert_only(&got.cpus[2], &cpus[m - 1], 1, 2);
}
END_TEST

/* A parent narrowed to its last CPU (taskset, a cgroup): ranks stay inside it, and rank 0
 * gets the first CPU of the narrowed mask, not CPU 0 of the machine. */
START_TEST(a_narrower_parent_mask_is_respected) {
  int cpus[MAX_RANKS];
  int m = allowed_cpus(cpus, MAX_RANKS);
  int last = cpus[m - 1];
  restrict_to(&last, 1);
  rank_cpus_t got;
  const char *one[] = {"-n", "1", NULL};
  run_and_collect(one, 1, &got);
  assert_only(&got.cpus[0], &last, 1, 0);
  const char *two[] = {"-n", "2", NULL};
  run_and_collect(two, 2, &got);
  for (int r = 0; r < 2; r++) assert_only(&got.cpus[r], &last, 1, r);
  const char *unbound[] = {"--bind", "none", "-n", "2", NULL};
  run_and_collect(unbound, 2, &got);
  for (int r = 0; r < 2; r++) assert_only(&got.cpus[r], &last, 1, r);
}
END_TEST

START_TEST(a_bad_bind_value_is_a_usage_error) {
  const char *args[] = {"--bind", "socket", "-n", "2", "/bin/true", NULL};
  run_t run;
  run_start(&run, collrun, args);
  run_finish(&run, RUN_TIMEOUT_MS);
  ck_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 2);
  ck_assert_msg(strstr(run.err, "--bind 'socket' must be core or none") != NULL, "%s", run.err);
  run_free(&run);
  setenv("COLLRUN_BIND", "cores", 1);
  const char *env_args[] = {"-n", "2", "/bin/true", NULL};
  run_start(&run, collrun, env_args);
  run_finish(&run, RUN_TIMEOUT_MS);
  ck_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 2);
  ck_assert_msg(strstr(run.err, "COLLRUN_BIND 'cores' must be core or none") != NULL, "%s",
                run.err);
  run_free(&run);
}
END_TEST

START_TEST(help_documents_the_binding) {
  const char *args[] = {"--help", NULL};
  run_t run;
  run_start(&run, collrun, args);
  run_finish(&run, RUN_TIMEOUT_MS);
  ck_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0);
  ck_assert(strstr(run.out, "--bind core|none") != NULL);
  ck_assert(strstr(run.out, "COLLRUN_BIND") != NULL);
  run_free(&run);
}
END_TEST

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s COLLRUN RANK_HELPER\n", argv[0]);
    return 2;
  }
  collrun = argv[1];
  rank_helper = argv[2];
  unsetenv("COLLRUN_BIND"); /* tests that want it set it in their own (forked) process */
  setenv("CK_FORK", "yes", 1); /* a test's affinity and environment stay its own */
  return suite_main("collrun_binding",
                    suite_tests("binding", 60, by_default_each_rank_runs_on_its_own_cpu,
                                bind_core_spelled_out_binds_as_the_default_does,
                                bind_none_leaves_every_rank_the_launchers_mask,
                                collrun_bind_none_in_the_environment_turns_binding_off,
                                more_ranks_than_cpus_share_them_in_contiguous_slices,
                                a_narrower_parent_mask_is_respected,
                                a_bad_bind_value_is_a_usage_error, help_documents_the_binding));
}
