/* Running a real collrun process from a test (see harness.h). */
#include "harness.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void run_start(run_t *run, const char *collrun, const char *const *args) {
  int out_pipe[2], err_pipe[2];
  ck_assert_int_eq(pipe2(out_pipe, O_CLOEXEC), 0);
  ck_assert_int_eq(pipe2(err_pipe, O_CLOEXEC), 0);
  size_t n = 0;
  while (args[n] != NULL) n++;
  const char **argv = calloc(n + 2, sizeof *argv);
  ck_assert_ptr_nonnull(argv);
  argv[0] = collrun;
  memcpy(argv + 1, args, n * sizeof *args);
  *run = (run_t){.out = calloc(1, 1), .err = calloc(1, 1), .start_s = now_s()};
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execv(collrun, (char *const *)argv);
    _exit(99);
  }
  free(argv);
  close(out_pipe[1]);
  close(err_pipe[1]);
  run->pid = pid;
  run->out_fd = out_pipe[0];
  run->err_fd = err_pipe[0];
}

static void append(char **buf, size_t *len, const char *data, size_t n) {
  char *grown = realloc(*buf, *len + n + 1);
  ck_assert_ptr_nonnull(grown);
  memcpy(grown + *len, data, n);
  *len += n;
  grown[*len] = '\0';
  *buf = grown;
}

/* One poll round over the open pipes; false when both are at EOF or time is up. */
static bool read_some(run_t *run, double deadline) {
  struct pollfd pfds[2] = {{.fd = run->out_fd, .events = POLLIN},
                           {.fd = run->err_fd, .events = POLLIN}};
  if (run->out_fd < 0 && run->err_fd < 0) return false;
  int left_ms = (int)((deadline - now_s()) * 1000);
  if (left_ms <= 0) return false;
  int n = poll(pfds, 2, left_ms);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  char chunk[65536];
  for (int i = 0; i < 2; i++) {
    if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
    ssize_t got = read(pfds[i].fd, chunk, sizeof chunk);
    if (got > 0) {
      if (i == 0)
        append(&run->out, &run->out_len, chunk, (size_t)got);
      else
        append(&run->err, &run->err_len, chunk, (size_t)got);
    } else {
      close(pfds[i].fd);
      if (i == 0)
        run->out_fd = -1;
      else
        run->err_fd = -1;
    }
  }
  return true;
}

bool run_wait_for(run_t *run, const char *needle, int count, int timeout_ms) {
  double deadline = now_s() + timeout_ms / 1000.0;
  while (count_of(run->out, needle) < count)
    if (!read_some(run, deadline)) return false;
  return true;
}

void run_finish(run_t *run, int timeout_ms) {
  double deadline = now_s() + timeout_ms / 1000.0;
  while (read_some(run, deadline)) {
  }
  for (;;) {
    pid_t got = waitpid(run->pid, &run->status, WNOHANG);
    if (got == run->pid) break;
    if (now_s() > deadline) {
      kill(run->pid, SIGKILL);
      waitpid(run->pid, &run->status, 0);
      ck_abort_msg("collrun still running after %d ms; stdout:\n%s\nstderr:\n%s", timeout_ms,
                   run->out, run->err);
    }
    usleep(5000); /* the pipes are closed: only the exit is left to see */
  }
  run->elapsed_s = now_s() - run->start_s;
}

void run_free(run_t *run) {
  if (run->out_fd >= 0) close(run->out_fd);
  if (run->err_fd >= 0) close(run->err_fd);
  free(run->out);
  free(run->err);
}

int count_of(const char *text, const char *needle) {
  int n = 0;
  size_t len = strlen(needle);
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += len) n++;
  return n;
}

long field_long(const char *line, const char *name) {
  size_t len = strlen(name);
  for (const char *p = line; (p = strstr(p, name)) != NULL; p += len) {
    if ((p != line && p[-1] != ' ') || p[len] != '=') continue; /* RANK in LOCAL_RANK */
    char *end;
    long v = strtol(p + len + 1, &end, 10);
    return end == p + len + 1 ? -1 : v;
  }
  return -1;
}

bool process_alive(pid_t pid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return kill(pid, 0) == 0; /* no /proc: a zombie counts as alive then */
  size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char *close_paren = strrchr(stat, ')'); /* "pid (comm) S ..." */
  return close_paren == NULL || close_paren[2] != 'Z';
}

bool process_gone_within(pid_t pid, int timeout_ms) {
  double deadline = now_s() + timeout_ms / 1000.0;
  while (process_alive(pid)) {
    if (now_s() > deadline) return false;
    usleep(10000);
  }
  return true;
}
