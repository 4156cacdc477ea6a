/* Tests of the collrun launcher: real collrun processes starting real rank programs
 * (rank_helper, store_helper), checked from the outside: exit status, output, messages,
 * and which processes are left. Paths of the built programs come from meson as argv:
 * test_collrun COLLRUN RANK_HELPER STORE_HELPER. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "multiproc.h"
#include "suite_run.h"

enum { RUN_TIMEOUT_MS = 30000, MAX_RANKS = 16 };

/* Set once in main() from argv, before any test runs. */
static const char *collrun;
static const char *rank_helper;
static const char *store_helper;

static run_t run_to_end(const char *const *args) {
  run_t run;
  run_start(&run, collrun, args);
  run_finish(&run, RUN_TIMEOUT_MS);
  return run;
}

static int exit_code_of(const run_t *run) {
  ck_assert_msg(WIFEXITED(run->status), "collrun died of signal %d; stderr:\n%s",
                WTERMSIG(run->status), run->err);
  return WEXITSTATUS(run->status);
}

static void assert_exit(const run_t *run, int code) {
  ck_assert_msg(exit_code_of(run) == code, "collrun exited %d, expected %d; stderr:\n%s",
                exit_code_of(run), code, run->err);
}

static void assert_contains(const char *text, const char *needle) {
  ck_assert_msg(strstr(text, needle) != NULL, "expected \"%s\" in:\n%s", needle, text);
}

/* Calls fn on each line of text (a modifiable copy is made). */
typedef void (*line_fn)(const char *line, void *arg);
static void for_each_line(const char *text, line_fn fn, void *arg) {
  char *copy = strdup(text);
  ck_assert_ptr_nonnull(copy);
  char *save = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
    fn(line, arg);
  free(copy);
}

/* "[R] ..." -> R, and *rest points after the prefix; -1 without a prefix. */
static int prefix_rank(const char *line, const char **rest) {
  int rank, used = 0;
  if (sscanf(line, "[%d] %n", &rank, &used) != 1 || used == 0) return -1;
  *rest = line + used;
  return rank;
}

/* ---- environment and store ---- */

typedef struct {
  int seen[MAX_RANKS];
  int nlines;
  long port;
  char token[128];
  int world, nnodes, node_rank, nproc;
} env_check_t;

static void check_env_line(const char *line, void *arg) {
  env_check_t *c = arg;
  const char *rest;
  int prefix = prefix_rank(line, &rest);
  long rank = field_long(line, "RANK");
  ck_assert_msg(prefix >= 0 && prefix == rank, "prefix does not match RANK in: %s", line);
  ck_assert_int_lt(rank, MAX_RANKS);
  c->seen[rank]++;
  c->nlines++;
  ck_assert_int_eq(field_long(line, "WORLD_SIZE"), c->world);
  ck_assert_int_eq(field_long(line, "LOCAL_RANK"), rank - c->node_rank * c->nproc);
  ck_assert_int_eq(field_long(line, "LOCAL_WORLD_SIZE"), c->nproc);
  ck_assert_int_eq(field_long(line, "GROUP_RANK"), c->node_rank);
  ck_assert_int_eq(field_long(line, "GROUP_WORLD_SIZE"), c->nnodes);
  ck_assert_int_eq(field_long(line, "COLL_STORE_HOSTED"), 1);
  ck_assert_int_eq(field_long(line, "OMP_NUM_THREADS"), 1);
  ck_assert_int_eq(field_long(line, "STDIN_EOF"), 1);
  assert_contains(line, " MASTER_ADDR=127.0.0.1 ");
  long port = field_long(line, "MASTER_PORT");
  ck_assert(port > 0 && port < 65536);
  if (c->port == 0) c->port = port;
  ck_assert_int_eq(port, c->port); /* one store for all */
  char token[128] = "";
  const char *t = strstr(line, "COLL_JOB_TOKEN=");
  ck_assert_ptr_nonnull(t);
  sscanf(t, "COLL_JOB_TOKEN=%127s", token);
  if (c->token[0] == '\0') snprintf(c->token, sizeof c->token, "%s", token);
  ck_assert_str_eq(token, c->token);
}

START_TEST(each_rank_gets_a_distinct_rank_and_the_torchrun_environment) {
  setenv("RANK", "99", 1); /* inherited values must not leak through */
  setenv("COLL_STORE_HOSTED", "0", 1);
  const char *args[] = {"-n", "4", rank_helper, "env", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  env_check_t c = {.world = 4, .nnodes = 1, .node_rank = 0, .nproc = 4};
  for_each_line(run.out, check_env_line, &c);
  ck_assert_int_eq(c.nlines, 4);
  for (int r = 0; r < 4; r++) ck_assert_msg(c.seen[r] == 1, "rank %d seen %d times", r, c.seen[r]);
  /* A fresh random token: 16 bytes in hex. */
  ck_assert_uint_eq(strlen(c.token), 32);
  ck_assert_uint_eq(strspn(c.token, "0123456789abcdef"), 32);
  run_free(&run);
}
END_TEST

START_TEST(ranks_meet_in_the_store_collrun_hosts_and_a_wrong_token_is_refused) {
  const char *args[] = {"-n", "3", store_helper, NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  ck_assert_int_eq(count_of(run.out, "STORE_OK"), 3);
  ck_assert_int_eq(count_of(run.out, "WRONG_TOKEN_REFUSED"), 3);
  run_free(&run);
}
END_TEST

/* ---- failures ---- */

typedef struct {
  pid_t pids[2 * MAX_RANKS];
  int n;
} pid_list_t;

static void collect_pids(const char *line, void *arg) {
  pid_list_t *list = arg;
  long pid = field_long(line, "PID");
  if (pid <= 0) pid = field_long(line, "CHILD");
  if (pid > 0 && list->n < 2 * MAX_RANKS) list->pids[list->n++] = (pid_t)pid;
}

static void assert_all_gone(const run_t *run, int expected) {
  pid_list_t list = {.n = 0};
  for_each_line(run->out, collect_pids, &list);
  ck_assert_int_ge(list.n, expected);
  for (int i = 0; i < list.n; i++)
    ck_assert_msg(process_gone_within(list.pids[i], 3000), "pid %d is still alive",
                  (int)list.pids[i]);
}

/* The failure line: "collrun: rank ..." up to its newline. */
static const char *failure_line(const run_t *run, char *buf, size_t cap) {
  const char *start = strstr(run->err, "collrun: rank ");
  ck_assert_msg(start != NULL, "no failure line in:\n%s", run->err);
  size_t len = strcspn(start, "\n");
  snprintf(buf, cap, "%.*s", (int)len, start);
  return buf;
}

/* ---- several nodes ---- */

typedef struct {
  int node_rank;
  int seen[MAX_RANKS];
} node_check_t;

static void check_node_line(const char *line, void *arg) {
  node_check_t *c = arg;
  const char *rest;
  int prefix = prefix_rank(line, &rest);
  ck_assert_msg(prefix >= 0, "no prefix: %s", line);
  if (strncmp(rest, "RANK=", 5) != 0) return;
  long rank = field_long(line, "RANK");
  ck_assert_int_eq(prefix, rank);
  ck_assert_int_eq(rank / 2, c->node_rank); /* global = node_rank * N + local */
  ck_assert_int_eq(field_long(line, "LOCAL_RANK"), rank % 2);
  ck_assert_int_eq(field_long(line, "WORLD_SIZE"), 4);
  ck_assert_int_eq(field_long(line, "GROUP_RANK"), c->node_rank);
  c->seen[rank]++;
}

/* Two collruns of 2 ranks each on 127.0.0.1, node 1 started first: it must wait for node
 * 0's store. prog_args: the rank program and its arguments, NULL-terminated. */
static void run_two_nodes(run_t node[2], const char *const *prog_args) {
  char port[16];
  snprintf(port, sizeof port, "%u", (unsigned)mp_free_port());
  for (int k = 1; k >= 0; k--) {
    const char *args[24] = {"-n",
                            "2",
                            "--nnodes",
                            "2",
                            "--node-rank",
                            k == 0 ? "0" : "1",
                            "--master-addr",
                            "127.0.0.1",
                            "--master-port",
                            port,
                            "--token",
                            "shared-secret",
                            "--grace-ms",
                            "2000"};
    size_t n = 14;
    for (size_t i = 0; prog_args[i] != NULL && n < 23; i++) args[n++] = prog_args[i];
    run_start(&node[k], collrun, args);
    if (k == 1) usleep(200 * 1000);
  }
  for (int k = 0; k < 2; k++) run_finish(&node[k], RUN_TIMEOUT_MS);
}

START_TEST(two_nodes_on_one_host_make_one_job_with_global_ranks) {
  run_t node[2];
  const char *prog[] = {store_helper, NULL};
  run_two_nodes(node, prog);
  for (int k = 0; k < 2; k++) {
    assert_exit(&node[k], 0);
    node_check_t c = {.node_rank = k};
    for_each_line(node[k].out, check_node_line, &c);
    for (int r = 2 * k; r < 2 * k + 2; r++) ck_assert_int_eq(c.seen[r], 1);
    ck_assert_int_eq(count_of(node[k].out, "STORE_OK"), 2);
    ck_assert_int_eq(count_of(node[k].out, "WRONG_TOKEN_REFUSED"), 2);
    /* Node 1's ranks used the store after node 0's ranks had exited. */
    ck_assert_int_eq(count_of(node[k].out, "LATE_OK"), k == 1 ? 2 : 0);
    run_free(&node[k]);
  }
}
END_TEST

START_TEST(a_rank_failing_on_one_node_stops_the_ranks_of_every_node) {
  run_t node[2];
  const char *prog[] = {rank_helper, "exit", "3", "4", NULL}; /* rank 3 is on node 1 */
  run_two_nodes(node, prog);
  assert_exit(&node[1], 4);
  char line[4096];
  assert_contains(failure_line(&node[1], line, sizeof line), "collrun: rank 3 (pid ");
  assert_exit(&node[0], 4);
  assert_contains(node[0].err, "collrun: another node failed (node 1: rank 3 (pid ");
  /* Seen within about a second; the sleeping ranks end at SIGTERM. */
  ck_assert_msg(node[0].elapsed_s < 8, "node 0 took %.2f s", node[0].elapsed_s);
  for (int k = 0; k < 2; k++) {
    assert_all_gone(&node[k], 0);
    run_free(&node[k]);
  }
}
END_TEST

START_TEST(a_rank_exiting_3_stops_the_job_and_is_named_with_its_code) {
  const char *args[] = {"-n", "3", "--grace-ms", "10000", rank_helper, "exit", "2", "3", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 3);
  char line[4096];
  failure_line(&run, line, sizeof line);
  assert_contains(line, "collrun: rank 2 (pid ");
  assert_contains(line, ") exited with code 3; last output: ");
  assert_contains(line, "rank 2 line 7");
  ck_assert_int_eq(count_of(line, " | "), 4); /* the last five lines */
  /* The others were sleeping for a minute: SIGTERM ended them, no SIGKILL was needed (that
   * would have come 10 s later, and collrun would have said so). */
  ck_assert_msg(strstr(run.err, "sending SIGKILL") == NULL, "SIGKILL was needed:\n%s", run.err);
  ck_assert_msg(run.elapsed_s < 8, "took %.2f s", run.elapsed_s);
  assert_all_gone(&run, 0);
  run_free(&run);
}
END_TEST

START_TEST(a_rank_killed_by_sigkill_is_named_and_collrun_exits_137) {
  const char *args[] = {"-n", "3", rank_helper, "kill", "1", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 128 + SIGKILL);
  char line[4096];
  failure_line(&run, line, sizeof line);
  assert_contains(line, "collrun: rank 1 (pid ");
  assert_contains(line, "was killed by signal 9 (SIGKILL); last output: rank 1 about to die");
  assert_all_gone(&run, 0);
  run_free(&run);
}
END_TEST

START_TEST(ranks_ignoring_sigterm_get_sigkill_after_the_grace_period) {
  const char *args[] = {"-n",   "3", "--grace-ms", "300",         rank_helper,
                        "exit", "0", "5",          "ignore-term", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 5);
  assert_contains(run.err, "300 ms after SIGTERM; sending SIGKILL");
  assert_contains(run.err, "collrun: rank 0 (pid ");
  ck_assert_msg(run.elapsed_s >= 0.3 + 0.5 && run.elapsed_s < 5, "took %.2f s", run.elapsed_s);
  assert_all_gone(&run, 2);
  run_free(&run);
}
END_TEST

static void signal_collrun_and_check(int sig, const char *mode_arg) {
  const char *args[] = {"-n", "3", rank_helper, "sleep", mode_arg, NULL};
  run_t run;
  run_start(&run, collrun, args);
  ck_assert_msg(run_wait_for(&run, "PID=", 3, RUN_TIMEOUT_MS), "ranks did not start:\n%s\n%s",
                run.out, run.err);
  kill(run.pid, sig);
  run_finish(&run, RUN_TIMEOUT_MS);
  assert_exit(&run, 128 + sig);
  char expected[64];
  snprintf(expected, sizeof expected, "collrun: got %s; forwarding it to 3 running ranks",
           sig == SIGINT ? "SIGINT" : "SIGTERM");
  assert_contains(run.err, expected);
  ck_assert_msg(run.elapsed_s < 10, "took %.2f s", run.elapsed_s);
  assert_all_gone(&run, strcmp(mode_arg, "grandchild") == 0 ? 6 : 3);
  run_free(&run);
}

START_TEST(sigterm_to_collrun_ends_every_rank_and_what_they_started) {
  signal_collrun_and_check(SIGTERM, "grandchild");
}
END_TEST

START_TEST(sigint_to_collrun_is_forwarded_and_collrun_exits_130) {
  signal_collrun_and_check(SIGINT, "alone");
}
END_TEST

START_TEST(timeout_stops_the_job_with_exit_124) {
  const char *args[] = {"--timeout", "0.5", "-n", "2", rank_helper, "sleep", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 124);
  assert_contains(run.err,
                  "collrun: job timed out after 0.5 s (--timeout); stopping 2 running ranks");
  ck_assert_msg(run.elapsed_s >= 0.5 && run.elapsed_s < 5, "took %.2f s", run.elapsed_s);
  assert_all_gone(&run, 2);
  run_free(&run);
}
END_TEST

/* ---- output ---- */

enum { LINES = 300, WIDTH = 3000, NRANKS_LINES = 3 };

typedef struct {
  char tag;  /* 'r' for stdout lines, 'e' for stderr lines */
  int every; /* stdout: every line; stderr: every 10th */
  int next[NRANKS_LINES];
  int ends[NRANKS_LINES];
} lines_check_t;

static void check_output_line(const char *line, void *arg) {
  lines_check_t *c = arg;
  const char *rest;
  int rank = prefix_rank(line, &rest);
  ck_assert_msg(rank >= 0 && rank < NRANKS_LINES, "bad prefix: %.80s", line);
  char head[32];
  snprintf(head, sizeof head, "%c%d ", c->tag, rank);
  ck_assert_msg(strncmp(rest, head, strlen(head)) == 0, "line of rank %d: %.80s", rank, line);
  rest += strlen(head);
  if (strcmp(rest, "end") == 0) {
    c->ends[rank]++;
    return;
  }
  int index, used = 0;
  ck_assert_int_eq(sscanf(rest, "i%d %n", &index, &used), 1);
  ck_assert_int_eq(index, c->next[rank]); /* in order, none lost */
  c->next[rank] += c->every;
  rest += used;
  ck_assert_uint_eq(strlen(rest), WIDTH); /* intact: no other rank's bytes inside */
  ck_assert_uint_eq(strspn(rest, (char[]){(char)('a' + rank), 0}), WIDTH);
}

START_TEST(output_lines_carry_their_rank_prefix_and_stay_whole) {
  char count[16], width[16];
  snprintf(count, sizeof count, "%d", LINES);
  snprintf(width, sizeof width, "%d", WIDTH);
  const char *args[] = {"-n", "3", rank_helper, "lines", count, width, NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  lines_check_t out = {.tag = 'r', .every = 1};
  for_each_line(run.out, check_output_line, &out);
  lines_check_t err = {.tag = 'e', .every = 10};
  for_each_line(run.err, check_output_line, &err);
  for (int r = 0; r < NRANKS_LINES; r++) {
    ck_assert_int_eq(out.next[r], LINES);
    ck_assert_int_eq(out.ends[r], 1); /* the unfinished last line, made whole */
    ck_assert_int_eq(err.next[r], LINES);
  }
  run_free(&run);
}
END_TEST

START_TEST(no_prefix_leaves_lines_as_the_ranks_wrote_them) {
  const char *args[] = {"--no-prefix", "-n", "2", rank_helper, "lines", "20", "10", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  ck_assert_int_eq(count_of(run.out, "["), 0);
  ck_assert_int_eq(count_of(run.out, "\nr"), 2 * 21 - 1);
  ck_assert_int_eq(run.out[0], 'r');
  run_free(&run);
}
END_TEST

/* ---- command line ---- */

typedef struct {
  const char *args[12];
  int exit_code;
  const char *message;
} usage_case_t;

START_TEST(bad_command_lines_exit_with_a_message) {
  static const char *H = "/bin/true";
  const usage_case_t cases[] = {
      {.args = {"-n", "2", NULL}, .exit_code = 2, .message = "missing PROG"},
      {.args = {"-n", "0", H, NULL}, .exit_code = 2, .message = "-n '0' must be an integer"},
      {.args = {"-n", "x", H, NULL}, .exit_code = 2, .message = "-n 'x' must be an integer"},
      {.args = {H, NULL}, .exit_code = 2, .message = "-n N (ranks on this node) is required"},
      {.args = {"-n", "2", "--nnodes", "2", H, NULL},
       .exit_code = 2,
       .message = "--master-port is required"},
      {.args = {"-n", "2", "--nnodes", "2", "--node-rank", "2", "--master-port", "1", H, NULL},
       .exit_code = 2,
       .message = "--node-rank 2 must be below --nnodes (2)"},
      {.args = {"-n", "2", "--bogus", H, NULL},
       .exit_code = 2,
       .message = "unknown option '--bogus'"},
      {.args = {"-n", "2", "--timeout", "-1", H, NULL},
       .exit_code = 2,
       .message = "--timeout '-1'"},
      {.args = {"-n", "2", "--grace-ms", NULL}, .exit_code = 2, .message = "needs a value"},
      {.args = {"-n", "2", "/nonexistent/prog", NULL},
       .exit_code = 127,
       .message = "cannot run '/nonexistent/prog'"},
      {.args = {"-n", "2", "no-such-program-for-collrun", NULL},
       .exit_code = 127,
       .message = "cannot find 'no-such-program-for-collrun' in PATH"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_t run = run_to_end(cases[i].args);
    assert_exit(&run, cases[i].exit_code);
    assert_contains(run.err, cases[i].message);
    ck_assert_str_eq(run.out, "");
    run_free(&run);
  }
}
END_TEST

START_TEST(a_busy_master_port_is_a_clear_launch_error) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  ck_assert_int_eq(listen(fd, 1), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
  char port[16];
  snprintf(port, sizeof port, "%u", (unsigned)ntohs(addr.sin_port));
  const char *args[] = {"-n", "2", "--master-port", port, rank_helper, "env", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 1);
  assert_contains(run.err, "collrun: cannot start the store on 127.0.0.1:");
  ck_assert_str_eq(run.out, ""); /* no rank started */
  close(fd);
  run_free(&run);
}
END_TEST

START_TEST(help_documents_options_and_every_rank_variable) {
  const char *args[] = {"--help", NULL};
  run_t run = run_to_end(args);
  assert_exit(&run, 0);
  static const char *const words[] = {
      "--nproc-per-node", "--nnodes",       "--node-rank",       "--master-addr",
      "--master-port",    "--token",        "--no-prefix",       "--grace-ms",
      "--timeout",        "RANK",           "WORLD_SIZE",        "LOCAL_RANK",
      "LOCAL_WORLD_SIZE", "GROUP_RANK",     "GROUP_WORLD_SIZE",  "MASTER_ADDR",
      "MASTER_PORT",      "COLL_JOB_TOKEN", "COLL_STORE_HOSTED", "OMP_NUM_THREADS",
      "exit status",
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) assert_contains(run.out, words[i]);
  run_free(&run);
}
END_TEST

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s COLLRUN RANK_HELPER STORE_HELPER\n", argv[0]);
    return 2;
  }
  collrun = argv[1];
  rank_helper = argv[2];
  store_helper = argv[3];
  /* The environment tests expect what collrun sets by default. */
  unsetenv("OMP_NUM_THREADS");
  unsetenv("COLL_JOB_TOKEN");
  return suite_main(
      "collrun",
      suite_tests("environment", 0, each_rank_gets_a_distinct_rank_and_the_torchrun_environment,
                  ranks_meet_in_the_store_collrun_hosts_and_a_wrong_token_is_refused),
      suite_tests("nodes", 0, two_nodes_on_one_host_make_one_job_with_global_ranks,
                  a_rank_failing_on_one_node_stops_the_ranks_of_every_node),
      suite_tests("failures", 0, a_rank_exiting_3_stops_the_job_and_is_named_with_its_code,
                  a_rank_killed_by_sigkill_is_named_and_collrun_exits_137,
                  ranks_ignoring_sigterm_get_sigkill_after_the_grace_period,
                  sigterm_to_collrun_ends_every_rank_and_what_they_started,
                  sigint_to_collrun_is_forwarded_and_collrun_exits_130,
                  timeout_stops_the_job_with_exit_124),
      suite_tests("output", 0, output_lines_carry_their_rank_prefix_and_stay_whole,
                  no_prefix_leaves_lines_as_the_ranks_wrote_them),
      suite_tests("command_line", 0, bad_command_lines_exit_with_a_message,
                  a_busy_master_port_is_a_clear_launch_error,
                  help_documents_options_and_every_rank_variable));
}
