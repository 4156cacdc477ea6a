/* Fork-and-wait helpers shared by the multi-process test suites. */
#include "multiproc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mp_run(int nranks, int timeout_ms, mp_rank_fn fn, void *arg) {
  pid_t *pids = calloc((size_t)nranks, sizeof *pids);
  int *done = calloc((size_t)nranks, sizeof *done);
  int failures = 0;
  if (pids == NULL || done == NULL) {
    free(pids);
    free(done);
    return nranks;
  }
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      int rc = fn(r, nranks, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(rc & 0xff);
    }
    if (pid < 0) {
      fprintf(stderr, "mp_run: fork of rank %d failed: %s\n", r, strerror(errno));
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      for (int k = 0; k < r; k++) waitpid(pids[k], NULL, 0);
      free(pids);
      free(done);
      return nranks;
    }
    pids[r] = pid;
  }
  int64_t deadline = now_ms() + timeout_ms;
  int remaining = nranks;
  while (remaining > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < nranks; r++) {
        if (pids[r] != pid || done[r]) continue;
        done[r] = 1;
        remaining--;
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
          fprintf(stderr, "mp_run: rank %d exited with %d\n", r, WEXITSTATUS(status));
          failures++;
        } else if (WIFSIGNALED(status)) {
          fprintf(stderr, "mp_run: rank %d died from signal %d\n", r, WTERMSIG(status));
          failures++;
        }
      }
      continue;
    }
    if (now_ms() > deadline) {
      for (int r = 0; r < nranks; r++) {
        if (done[r]) continue;
        fprintf(stderr, "mp_run: rank %d still running after %d ms: killed\n", r, timeout_ms);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
        done[r] = 1;
        failures++;
        remaining--;
      }
      break;
    }
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  free(pids);
  free(done);
  return failures;
}

uint16_t mp_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}
