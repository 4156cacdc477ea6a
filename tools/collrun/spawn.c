/* Starting one rank. The environment and every string the child needs are built before
 * fork(): the store's thread is running, so between fork and exec the child only makes
 * async-signal-safe calls. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* Variables collrun sets for ranks: inherited values of these are dropped. */
static const char *const rank_vars[] = {
    "RANK",           "WORLD_SIZE",        "LOCAL_RANK",        "LOCAL_WORLD_SIZE",
    "GROUP_RANK",     "GROUP_WORLD_SIZE",  "MASTER_ADDR",       "MASTER_PORT",
    "COLL_JOB_TOKEN", "COLL_STORE_HOSTED", "COLL_ELASTIC_JOIN",
};
enum { RANK_VAR_COUNT = sizeof rank_vars / sizeof rank_vars[0], ENV_EXTRA = RANK_VAR_COUNT + 1 };

static bool is_rank_var(const char *entry) {
  for (size_t i = 0; i < RANK_VAR_COUNT; i++) {
    size_t n = strlen(rank_vars[i]);
    if (strncmp(entry, rank_vars[i], n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

static bool is_executable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *spawn_resolve_program(const char *prog) {
  if (strchr(prog, '/') != NULL) {
    if (is_executable_file(prog)) return strdup(prog);
    fprintf(stderr, "collrun: cannot run '%s': %s\n", prog,
            access(prog, F_OK) == 0 ? "not an executable file" : strerror(errno));
    return NULL;
  }
  const char *path = getenv("PATH");
  if (path == NULL || *path == '\0') path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *dir = path; dir != NULL;) {
    const char *colon = strchr(dir, ':');
    int dlen = colon != NULL ? (int)(colon - dir) : (int)strlen(dir);
    char *candidate = NULL;
    /* An empty PATH element means the current directory. */
    if (asprintf(&candidate, "%.*s/%s", dlen == 0 ? 1 : dlen, dlen == 0 ? "." : dir, prog) < 0)
      return NULL;
    if (is_executable_file(candidate)) return candidate;
    free(candidate);
    dir = colon != NULL ? colon + 1 : NULL;
  }
  fprintf(stderr, "collrun: cannot find '%s' in PATH\n", prog);
  return NULL;
}

static void free_env(char **env, size_t first_own) {
  if (env == NULL) return;
  for (size_t i = first_own; env[i] != NULL; i++) free(env[i]);
  free(env);
}

static char *format_var(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *format_var(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *text = NULL;
  if (vasprintf(&text, fmt, ap) < 0) text = NULL; /* its pointer is undefined on failure */
  va_end(ap);
  return text;
}

/* environ minus rank_vars, then this rank's variables. Entries from first_own on are
 * malloc'ed. */
static char **build_env(const spawn_plan_t *plan, int local_rank, bool replacement,
                        size_t *first_own) {
  size_t n = 0;
  while (environ[n] != NULL) n++;
  char **env = calloc(n + ENV_EXTRA + 2, sizeof *env);
  if (env == NULL) return NULL;
  size_t k = 0;
  bool has_omp = false;
  for (size_t i = 0; i < n; i++) {
    if (is_rank_var(environ[i])) continue;
    if (strncmp(environ[i], "OMP_NUM_THREADS=", 16) == 0) has_omp = true;
    env[k++] = environ[i];
  }
  *first_own = k;
  long long rank = (long long)plan->node_rank * plan->nproc + local_rank;
  long long world = (long long)plan->nnodes * plan->nproc;
  char *own[ENV_EXTRA + 1] = {
      format_var("RANK=%lld", rank),
      format_var("WORLD_SIZE=%lld", world),
      format_var("LOCAL_RANK=%d", local_rank),
      format_var("LOCAL_WORLD_SIZE=%d", plan->nproc),
      format_var("GROUP_RANK=%d", plan->node_rank),
      format_var("GROUP_WORLD_SIZE=%d", plan->nnodes),
      format_var("MASTER_ADDR=%s", plan->master_addr),
      format_var("MASTER_PORT=%d", plan->master_port),
      format_var("COLL_STORE_HOSTED=1"),
  };
  size_t nown = 9;
  if (plan->token != NULL) own[nown++] = format_var("COLL_JOB_TOKEN=%s", plan->token);
  if (!has_omp && plan->nproc > 1) own[nown++] = format_var("OMP_NUM_THREADS=1");
  if (replacement) own[nown++] = format_var("COLL_ELASTIC_JOIN=1");
  bool complete = true;
  for (size_t i = 0; i < nown; i++) complete = complete && own[i] != NULL;
  if (!complete) {
    for (size_t i = 0; i < nown; i++) free(own[i]);
    free(env);
    return NULL;
  }
  memcpy(env + k, own, nown * sizeof *own);
  return env;
}

/* In the child, between fork and exec: async-signal-safe calls only. */
static _Noreturn void exec_child(const spawn_plan_t *plan, int local_rank, char **env,
                                 pid_t launcher, int out_w, int err_w) {
  /* Own process group: signals for this rank reach what it started too, and the
   * terminal's Ctrl-C reaches only collrun, which forwards it once. */
  setpgid(0, 0);
  /* If collrun dies (even by SIGKILL) its ranks must not live on. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(126); /* collrun died before prctl took effect */
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0 || dup2(out_w, STDOUT_FILENO) < 0 ||
      dup2(err_w, STDERR_FILENO) < 0)
    _exit(126);
  close_range(3, ~0u, 0); /* the store's sockets, other ranks' pipes, epoll, signalfd */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL); /* collrun blocks its signals for signalfd */
  signal(SIGPIPE, SIG_DFL); /* collrun ignores it; an ignored disposition survives exec */
  binding_apply(plan->binding, local_rank); /* before exec: the program's threads inherit it */
  execve(plan->path, plan->argv, env);
  static const char msg[] = "collrun: exec of the program failed: ";
  const char *why = strerror(errno);
  if (write(STDERR_FILENO, msg, sizeof msg - 1) > 0 && write(STDERR_FILENO, why, strlen(why)) > 0)
    (void)!write(STDERR_FILENO, "\n", 1);
  _exit(127);
}

bool spawn_rank(const spawn_plan_t *plan, int local_rank, bool replacement, spawn_child_t *child) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  size_t first_own = 0;
  bool ok = false;
  char **env = build_env(plan, local_rank, replacement, &first_own);
  if (env == NULL) {
    fprintf(stderr, "collrun: out of memory building the environment of local rank %d\n",
            local_rank);
    return false;
  }
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    fprintf(stderr, "collrun: pipe for local rank %d: %s\n", local_rank, strerror(errno));
    goto cleanup;
  }
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "collrun: fork of local rank %d: %s\n", local_rank, strerror(errno));
    goto cleanup;
  }
  if (pid == 0) exec_child(plan, local_rank, env, launcher, out_pipe[1], err_pipe[1]);
  /* Also here, so that the group exists before collrun may signal it (no race with the
   * child's own call; EACCES after its exec is fine, it did it itself by then). */
  setpgid(pid, pid);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  *child = (spawn_child_t){.pid = pid, .out_fd = out_pipe[0], .err_fd = err_pipe[0]};
  out_pipe[0] = err_pipe[0] = -1;
  ok = true;
cleanup:
  for (int i = 0; i < 2; i++) {
    if (out_pipe[i] >= 0) close(out_pipe[i]);
    if (err_pipe[i] >= 0) close(err_pipe[i]);
  }
  free_env(env, first_own);
  return ok;
}
