/* The INFO line names the execution path that really runs each call. One chooser
 * (core/path_choice.c) serves the INFO line and the dispatch; here, over real forked
 * ranks, the path each call's INFO line names is compared with the path whose counter
 * moved while the call ran (the executor's schedule uses, the arena's rounds, the
 * small-message lines' rounds, the windows' rounds), and with the path the case expects:
 * host all-reduces over shm and tcp, the small-message lines (chosen and forced), the
 * arena, zero-copy windows (and premul_sum, which skips them), barriers, broadcasts,
 * all_to_allv, an async call, count 0 and one rank. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "coll_test_util.h"
#include "core/comm.h"
#include "multiproc.h"
#include "onehost/arena.h"
#include "suite_run.h"

/* Each path's counter as the call left it. */
typedef struct {
  uint64_t exec_uses; /* schedules taken from the executor's cache: one per executor run */
  uint32_t arena, small, window;
} counters_t;

static counters_t counters_of(const coll_comm_t *comm) {
  counters_t c = {.exec_uses = comm->exec.use_clock};
  if (comm->arena != NULL) {
    c.arena = comm->arena->round;
    c.small = comm->arena->small_round;
    c.window = comm->arena->win_round;
  }
  return c;
}

/* The path whose counter moved from b to a: "schedule" (one executor run), "all_to_allv"
 * (two: its counts, then its data), "arena", "small", "window"; "nothing shared" when no
 * counter moved (a local copy or nothing), "several" or "odd" for what no path does. */
static const char *what_ran(counters_t b, counters_t a) {
  const char *ran = "nothing shared";
  int moved = 0;
  uint64_t runs = a.exec_uses - b.exec_uses;
  if (runs == 1) ran = "schedule", moved++;
  if (runs == 2) ran = "all_to_allv", moved++;
  if (runs > 2) return "odd";
  if (a.arena != b.arena) ran = "arena", moved++;
  if (a.small - b.small == 1) ran = "small", moved++;
  if (a.window - b.window == 1) ran = "window", moved++;
  if (a.small - b.small > 1 || a.window - b.window > 1) return "odd";
  return moved > 1 ? "several" : ran;
}

/* A rank's INFO log: a file on fd 2, read from where the last look stopped. */
typedef struct {
  int fd, saved_stderr;
  off_t read_to;
  char path[64];
} info_log_t;

static int log_open(info_log_t *log, int rank) {
  snprintf(log->path, sizeof log->path, "/tmp/coll_path_test_%d_%d.txt", (int)getpid(), rank);
  log->fd = open(log->path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  if (log->fd < 0) return 1;
  log->saved_stderr = dup(2);
  dup2(log->fd, 2);
  log->read_to = 0;
  setenv("COLL_DEBUG", "INFO", 1); /* read once, at the first log line */
  return 0;
}

static void log_close(info_log_t *log) {
  dup2(log->saved_stderr, 2);
  close(log->saved_stderr);
  close(log->fd);
  unlink(log->path);
}

/* The path named by the last "<what>: ..., path P, transport ..." line written since the
 * last look, into out ("" when there is none). */
static void logged_path(info_log_t *log, const char *what, char *out, size_t cap) {
  static char text[1 << 16];
  ssize_t n = pread(log->fd, text, sizeof text - 1, log->read_to);
  text[n > 0 ? n : 0] = '\0';
  if (n > 0) log->read_to += n;
  out[0] = '\0';
  char head[64];
  snprintf(head, sizeof head, "INFO %s: ", what);
  for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char *at = strstr(line, head), *path = at ? strstr(at, ", path ") : NULL;
    char *end = path ? strstr(path, ", transport ") : NULL;
    if (end == NULL) continue;
    path += strlen(", path ");
    snprintf(out, cap, "%.*s", (int)(end - path), path);
  }
}

/* After one call (status st, counters `before`): its INFO line names `expect`, and what
 * ran is that path. Prints what differs; returns 1 then. */
static int check_path(info_log_t *log, coll_comm_t *comm, counters_t before, coll_status_t st,
                      const char *what, const char *label, const char *expect) {
  int rank = comm->base.rank;
  if (st != COLL_OK) {
    dprintf(log->saved_stderr, "rank %d: %s: %s: %s\n", rank, label, coll_status_name(st),
            coll_last_error());
    return 1;
  }
  char named[64];
  logged_path(log, what, named, sizeof named);
  const char *ran = what_ran(before, counters_of(comm));
  bool quiet_path = strcmp(named, "local copy") == 0 || strcmp(named, "none") == 0;
  bool agree = strcmp(ran, named) == 0 || (quiet_path && strcmp(ran, "nothing shared") == 0);
  if (strcmp(named, expect) != 0 || !agree) {
    dprintf(log->saved_stderr,
            "rank %d: %s: the INFO line names path '%s', '%s' ran, expected '%s'\n", rank, label,
            named, ran, expect);
    return 1;
  }
  return 0;
}

/* Runs one call and checks it: `call` is an expression giving its status. */
#define EXPECT_PATH(what, label, expect, call)                              \
  do {                                                                      \
    counters_t before_ = counters_of(comm);                                 \
    coll_status_t st_ = (call);                                             \
    bad |= check_path(&log, comm, before_, st_, (what), (label), (expect)); \
  } while (0)

static int all_to_allv_of_3(coll_comm_t *comm, int nranks, const float *in, float *out) {
  size_t counts[8], displs[8];
  for (int p = 0; p < nranks; p++) {
    counts[p] = 3;
    displs[p] = (size_t)p * 3;
  }
  return coll_all_to_allv(in, counts, displs, out, counts, displs, COLL_FLOAT32, comm);
}

/* An async all-reduce, waited for: its INFO line is written at submission, it runs later. */
static coll_status_t all_reduce_and_wait(coll_comm_t *comm, const float *in, float *out,
                                         size_t count) {
  coll_request_t *req = NULL;
  coll_status_t st = coll_all_reduce_async(in, out, count, COLL_FLOAT32, COLL_SUM, comm, &req);
  return st != COLL_OK ? st : coll_request_wait(&req);
}

/* Two ranks over shm: the arena, its small-message lines and windows. */
static int rank_shm(int rank, int nranks, void *arg) {
  info_log_t log;
  if (log_open(&log, rank) != 0) return 1;
  coll_comm_t *comm;
  int bad = ct_init(arg, rank, nranks, &comm);
  if (bad) return 1;
  if (comm->arena == NULL) {
    dprintf(log.saved_stderr, "rank %d: no arena over shm\n", rank);
    return 1;
  }
  static float x[1 << 16], y[1 << 16];
  const char *ar = "coll_all_reduce";
  EXPECT_PATH(ar, "8 B", "small", coll_all_reduce(x, y, 2, COLL_FLOAT32, COLL_SUM, comm));
  EXPECT_PATH(ar, "64 KiB", "schedule",
              coll_all_reduce(x, y, 1 << 14, COLL_FLOAT32, COLL_SUM, comm));
  EXPECT_PATH(ar, "count 0", "none", coll_all_reduce(x, y, 0, COLL_FLOAT32, COLL_SUM, comm));
  EXPECT_PATH("coll_all_reduce_async", "64 KiB async", "schedule",
              all_reduce_and_wait(comm, x, y, 1 << 14));
  EXPECT_PATH("coll_barrier", "barrier", "small", coll_barrier(comm));
  EXPECT_PATH("coll_broadcast", "16 B broadcast", "small",
              coll_broadcast(x, 4, COLL_FLOAT32, 0, comm));
  EXPECT_PATH("coll_broadcast", "256 KiB broadcast", "schedule",
              coll_broadcast(x, 1 << 16, COLL_FLOAT32, 0, comm));
  EXPECT_PATH("coll_all_to_allv", "all_to_allv", "all_to_allv",
              all_to_allv_of_3(comm, nranks, x, y));
  /* Forced: the arena (its small lines where the message fits), then the ring. */
  coll_comm_set_algo(comm, COLL_ALGO_ARENA);
  EXPECT_PATH(ar, "256 KiB, arena forced", "arena",
              coll_all_reduce(x, y, 1 << 16, COLL_FLOAT32, COLL_SUM, comm));
  EXPECT_PATH(ar, "8 B, arena forced", "small",
              coll_all_reduce(x, y, 2, COLL_FLOAT32, COLL_SUM, comm));
  coll_comm_set_algo(comm, COLL_ALGO_RING);
  EXPECT_PATH(ar, "8 B, ring forced", "schedule",
              coll_all_reduce(x, y, 2, COLL_FLOAT32, COLL_SUM, comm));
  coll_comm_set_algo(comm, COLL_ALGO_AUTO);
  /* Shared windows: the zero-copy path before the small lines; premul_sum skips it. */
  float *win = NULL;
  bad |= ct_ok(rank, "mem_alloc", coll_mem_alloc(comm, 2 << 16, (void **)&win));
  if (!bad) {
    EXPECT_PATH(ar, "8 B in windows", "window",
                coll_all_reduce(win, win + 8192, 2, COLL_FLOAT32, COLL_SUM, comm));
    EXPECT_PATH(ar, "64 KiB in windows", "window",
                coll_all_reduce(win, win, 1 << 14, COLL_FLOAT32, COLL_SUM, comm));
    float scalar = 0.5f;
    coll_op_t premul;
    bad |=
        ct_ok(rank, "premul op", coll_op_create_premul_sum(comm, &scalar, COLL_FLOAT32, &premul));
    EXPECT_PATH(ar, "64 KiB premul_sum in windows", "schedule",
                coll_all_reduce(win, win, 1 << 14, COLL_FLOAT32, premul, comm));
    EXPECT_PATH(ar, "8 B premul_sum in windows", "small",
                coll_all_reduce(win, win, 2, COLL_FLOAT32, premul, comm));
  }
  if (win != NULL && coll_mem_free(comm, win) != COLL_OK) bad = 1;
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  log_close(&log);
  return bad;
}

/* Two ranks over tcp: no arena, every call on the executor. */
static int rank_tcp(int rank, int nranks, void *arg) {
  info_log_t log;
  if (log_open(&log, rank) != 0) return 1;
  coll_comm_t *comm;
  int bad = ct_init(arg, rank, nranks, &comm);
  if (bad) return 1;
  static float x[1 << 14], y[1 << 14];
  EXPECT_PATH("coll_all_reduce", "8 B", "schedule",
              coll_all_reduce(x, y, 2, COLL_FLOAT32, COLL_SUM, comm));
  EXPECT_PATH("coll_all_reduce", "64 KiB", "schedule",
              coll_all_reduce(x, y, 1 << 14, COLL_FLOAT32, COLL_SUM, comm));
  EXPECT_PATH("coll_barrier", "barrier", "schedule", coll_barrier(comm));
  EXPECT_PATH("coll_all_to_allv", "all_to_allv", "all_to_allv",
              all_to_allv_of_3(comm, nranks, x, y));
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  log_close(&log);
  return bad;
}

/* One rank: a local copy (which the output shows), nothing for count 0. */
static int rank_alone(int rank, int nranks, void *arg) {
  (void)nranks;
  (void)arg;
  info_log_t log;
  if (log_open(&log, rank) != 0) return 1;
  ct_clean_env();
  coll_config_t cfg = {.size = 1, .local_rank = -1, .master_port = 29500, .host_store = -1};
  coll_comm_t *comm = NULL;
  int bad = ct_ok(rank, "init", coll_comm_init_config(&cfg, &comm));
  if (bad) return 1;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {0};
  EXPECT_PATH("coll_all_reduce", "one rank", "local copy",
              coll_all_reduce(x, y, 8, COLL_FLOAT32, COLL_SUM, comm));
  if (memcmp(x, y, sizeof x) != 0) {
    dprintf(log.saved_stderr, "one rank: the local copy did not copy\n");
    bad = 1;
  }
  EXPECT_PATH("coll_all_to_allv", "one rank all_to_allv", "local copy",
              all_to_allv_of_3(comm, 1, x, y));
  EXPECT_PATH("coll_all_reduce", "one rank, count 0", "none",
              coll_all_reduce(x, y, 0, COLL_FLOAT32, COLL_SUM, comm));
  if (coll_comm_destroy(comm) != COLL_OK) bad = 1;
  log_close(&log);
  return bad;
}

START_TEST(the_info_line_names_the_path_that_runs_over_shm) {
  ct_job_t job = {.port = mp_free_port(), .transport = "shm"};
  ck_assert_int_eq(mp_run(2, 60000, rank_shm, &job), 0);
}
END_TEST

START_TEST(the_info_line_names_the_path_that_runs_over_tcp) {
  ct_job_t job = {.port = mp_free_port(), .transport = "tcp"};
  ck_assert_int_eq(mp_run(2, 60000, rank_tcp, &job), 0);
}
END_TEST

START_TEST(the_info_line_names_the_path_that_runs_on_one_rank) {
  ck_assert_int_eq(mp_run(1, 30000, rank_alone, NULL), 0);
}
END_TEST

SUITE_MAIN("path", suite_tests("choice", 120, the_info_line_names_the_path_that_runs_over_shm,
                                the_info_line_names_the_path_that_runs_over_tcp,
                                the_info_line_names_the_path_that_runs_on_one_rank))
