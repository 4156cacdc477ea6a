/* The job's event loop: one epoll set holds every rank's stdout and stderr pipe and a
 * signalfd for SIGCHLD, SIGINT and SIGTERM, so collrun sleeps until something happens and
 * never polls on a timer, except for its two deadlines (--timeout, and SIGKILL after the
 * grace period).
 *
 * Stopping: the first rank that fails (or a signal, or the deadline) moves the job to
 * "stopping": SIGTERM to the process group of every rank still running, SIGKILL to those
 * left after the grace period, and after that at most KILL_WAIT_MS for them to be reaped.
 * With several nodes the failure is also told to the other nodes' collruns (nodes.c), and
 * a failure they tell stops this node the same way.
 *
 * Elastic jobs (--elastic, --replace): a rank that dies is reported and the others go on
 * (they survive it through libcoll's agreement and shrink); its process group is killed so
 * nothing it started lingers. With replacements left and no rank finished yet, a new
 * process is started in its slot (same local rank, COLL_ELASTIC_JOIN=1) after
 * --replace-delay-ms. Once a rank has exited 0 the job is ending: a later failure fails
 * the job, and replacements still running JOIN_LINGER_MS after every other process ended
 * (never taken in) are stopped without counting as failed. */
#include "job.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/segment_name.h"
#include "output.h"

enum {
  KILL_WAIT_MS = 5000,   /* SIGKILLed ranks not reaped by then are given up on */
  JOIN_LINGER_MS = 5000, /* a replacement alone after the others finished: stopped then */
  MAX_EVENTS = 64,
  TAIL_TEXT_MAX = OUTPUT_TAIL_LINES * (OUTPUT_TAIL_WIDTH + 3) + 16,
  WHY_MAX = TAIL_TEXT_MAX + 256,
};

typedef enum {
  STOP_NONE,
  STOP_RANK_FAILED,
  STOP_SIGNAL,
  STOP_TIMEOUT,
  STOP_LAUNCH_FAILED,
  STOP_OTHER_NODE, /* another node's collrun reported a failure */
} stop_reason_t;

typedef struct {
  int rank;           /* global */
  pid_t pid;          /* also the id of its process group */
  bool running;       /* not reaped yet: while so, its pid and group id cannot be reused */
  bool replacement;   /* started by --replace (COLL_ELASTIC_JOIN=1) */
  bool abandoned;     /* a replacement collrun stopped after the others finished */
  int64_t respawn_ns; /* start its replacement then; INT64_MAX: none due */
  output_stream_t out;
  output_stream_t err;
  output_tail_t tail;
} job_rank_t;

typedef struct {
  const job_options_t *options;
  job_rank_t *ranks;
  int nranks; /* started so far */
  int live;   /* started and not reaped */
  output_sink_t sink;
  int epfd;
  int sigfd;
  stop_reason_t stop;
  int exit_code;
  int64_t job_deadline_ns;  /* --timeout; INT64_MAX: none */
  int64_t kill_deadline_ns; /* SIGKILL time while stopping; INT64_MAX: not stopping yet */
  int64_t give_up_ns;       /* after SIGKILL; INT64_MAX: not killed yet */
  int64_t next_watch_ns;    /* next look for other nodes' failures; INT64_MAX: none */
  char why[WHY_MAX];        /* a rank's failure, as printed at the end (without "collrun: ") */
  /* Elastic jobs only. */
  const spawn_plan_t *plan;
  int replacements_left;
  int respawns_due;      /* slots with a respawn_ns set */
  int succeeded;         /* processes that exited 0 */
  int last_failure_code; /* exit code of the last process that failed; 0: none */
  bool failed_after_success;
  int64_t abandon_ns; /* stop the lingering replacements then; INT64_MAX: not due */
} job_t;

static sigset_t job_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

bool job_block_signals(void) {
  sigset_t set = job_signals();
  if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return false;
  /* A reader of collrun's output that goes away must not kill collrun (and orphan the
   * ranks' output handling); writes then fail with EPIPE instead. */
  return signal(SIGPIPE, SIG_IGN) != SIG_ERR;
}

static const char *signal_name(int sig) {
  const char *abbrev = sigabbrev_np(sig);
  return abbrev != NULL ? abbrev : "?";
}

static void signal_running(job_t *job, int sig) {
  for (int i = 0; i < job->nranks; i++)
    if (job->ranks[i].running) kill(-job->ranks[i].pid, sig);
}

static void kill_now(job_t *job) {
  signal_running(job, SIGKILL);
  job->kill_deadline_ns = INT64_MAX;
  job->give_up_ns = coll_deadline_ns(KILL_WAIT_MS);
}

/* Enter "stopping" (once): send sig now and SIGKILL after the grace period; tell the
 * other nodes why (unless they told us). */
static void begin_stop(job_t *job, stop_reason_t reason, int exit_code, int sig, const char *why) {
  job->stop = reason;
  job->exit_code = exit_code;
  job->next_watch_ns = INT64_MAX;
  signal_running(job, sig);
  if (sig == SIGKILL)
    kill_now(job);
  else
    job->kill_deadline_ns = coll_deadline_ns(job->options->grace_ms);
  if (job->options->nodes != NULL && reason != STOP_OTHER_NODE)
    nodes_report_failure(job->options->nodes, exit_code, why);
}

static bool status_failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

static int status_exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* "rank 2 (pid 1234) exited with code 3; last output: ..." */
static void describe_failure(const job_rank_t *r, int status, char *dst, size_t cap) {
  char tail[TAIL_TEXT_MAX];
  output_tail_format(&r->tail, tail, sizeof tail);
  if (WIFEXITED(status))
    snprintf(dst, cap, "rank %d (pid %d) exited with code %d; last output: %s", r->rank,
             (int)r->pid, WEXITSTATUS(status), tail);
  else
    snprintf(dst, cap, "rank %d (pid %d) was killed by signal %d (SIG%s); last output: %s", r->rank,
             (int)r->pid, WTERMSIG(status), signal_name(WTERMSIG(status)), tail);
}

static void drain_rank(job_t *job, job_rank_t *r) {
  output_stream_drain(&r->out, &job->sink, &r->tail);
  output_stream_drain(&r->err, &job->sink, &r->tail);
}

static bool start_rank(job_t *job, int local_rank, bool replacement);

static const char *death_text(int status, char *buf, size_t cap) {
  if (WIFEXITED(status))
    snprintf(buf, cap, "exited with code %d", WEXITSTATUS(status));
  else
    snprintf(buf, cap, "was killed by SIG%s", signal_name(WTERMSIG(status)));
  return buf;
}

/* Every process still running is a replacement, and some rank has finished: the job is
 * over for everyone but joiners nobody took in. */
static bool only_replacements_left(const job_t *job) {
  if (job->succeeded == 0 || job->live == 0) return false;
  for (int i = 0; i < job->nranks; i++)
    if (job->ranks[i].running && !job->ranks[i].replacement) return false;
  return true;
}

/* An elastic job's process ended (it is reaped and drained). */
static void elastic_ended(job_t *job, job_rank_t *r, int status) {
  if (!status_failed(status)) {
    job->succeeded++;
  } else if (r->abandoned) {
    fprintf(stderr,
            "collrun: the replacement for rank %d (pid %d) was stopped: it was never "
            "taken in\n",
            r->rank, (int)r->pid);
  } else if (job->stop == STOP_NONE) {
    char what[64], tail[TAIL_TEXT_MAX];
    output_tail_format(&r->tail, tail, sizeof tail);
    fprintf(stderr,
            "collrun: rank %d (pid %d) %s; the job goes on with the others (%d running)\n"
            "collrun: rank %d's last output: %s\n",
            r->rank, (int)r->pid, death_text(status, what, sizeof what), job->live, r->rank, tail);
    job->last_failure_code = status_exit_code(status);
    if (job->succeeded > 0) job->failed_after_success = true;
    kill(-r->pid, SIGKILL); /* what it started must not outlive it */
    if (job->replacements_left > 0 && job->succeeded == 0 && job->live > 0) {
      job->replacements_left--;
      r->respawn_ns = coll_deadline_ns(job->options->replace_delay_ms);
      job->respawns_due++;
    }
  }
  if (only_replacements_left(job) && job->abandon_ns == INT64_MAX)
    job->abandon_ns = coll_deadline_ns(JOIN_LINGER_MS);
}

/* Respawns whose time came; a slot whose job has no process left is not refilled. */
static void elastic_respawn(job_t *job, int64_t now) {
  for (int i = 0; i < job->nranks && job->respawns_due > 0; i++) {
    job_rank_t *r = &job->ranks[i];
    if (r->respawn_ns > now) continue;
    r->respawn_ns = INT64_MAX;
    job->respawns_due--;
    if (job->live == 0 || job->succeeded > 0 || job->stop != STOP_NONE) {
      fprintf(stderr, "collrun: not replacing rank %d: %s\n", r->rank,
              job->live == 0 ? "no process is left to take it in" : "the job is ending");
      continue;
    }
    if (!start_rank(job, i, true)) {
      fprintf(stderr, "collrun: could not start a replacement for rank %d\n", r->rank);
      continue;
    }
    fprintf(stderr,
            "collrun: started a replacement for rank %d (pid %d, COLL_ELASTIC_JOIN=1; %d "
            "replacements left)\n",
            r->rank, (int)r->pid, job->replacements_left);
  }
}

static void elastic_abandon(job_t *job) {
  job->abandon_ns = INT64_MAX;
  for (int i = 0; i < job->nranks; i++) {
    job_rank_t *r = &job->ranks[i];
    if (!r->running || !r->replacement) continue;
    r->abandoned = true;
    kill(-r->pid, SIGKILL);
  }
}

/* A rank that died while making a communicator (a replacement killed in its join) can
 * leave a shared-memory segment whose name nobody else would ever unlink: remove what
 * its pid left in /dev/shm (common/segment_name.h). Its pid is not reused before this
 * reaping, and the segments of a rank that ended normally were unlinked already. */
static void reclaim_segments(const job_rank_t *r) {
  uint64_t bytes = 0;
  int removed = coll_segments_reclaim(r->pid, &bytes);
  if (removed > 0)
    fprintf(stderr,
            "collrun: removed %d shared-memory segment(s) of %.1f MB that rank %d (pid %d) "
            "left in /dev/shm\n",
            removed, (double)bytes / 1e6, r->rank, (int)r->pid);
}

static void reap_children(job_t *job) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return; /* 0: none exited; -1 ECHILD: no children left */
    for (int i = 0; i < job->nranks; i++) {
      job_rank_t *r = &job->ranks[i];
      if (r->pid != pid || !r->running) continue;
      r->running = false;
      job->live--;
      /* What it wrote before exiting is in the pipes now: read it before reporting, so
       * that its last lines are really its last lines. */
      drain_rank(job, r);
      if (job->options->elastic) {
        elastic_ended(job, r, status);
      } else if (status_failed(status) && job->stop == STOP_NONE) {
        describe_failure(r, status, job->why, sizeof job->why);
        begin_stop(job, STOP_RANK_FAILED, status_exit_code(status), SIGTERM, job->why);
      }
      reclaim_segments(r);
      break;
    }
  }
}

static void on_signal(job_t *job, int sig) {
  if (job->stop != STOP_NONE) { /* a second signal: no more patience */
    if (sig != SIGCHLD && job->give_up_ns == INT64_MAX) {
      fprintf(stderr, "collrun: got SIG%s again; sending SIGKILL to %d running ranks\n",
              signal_name(sig), job->live);
      kill_now(job);
    }
    return;
  }
  fprintf(stderr, "collrun: got SIG%s; forwarding it to %d running ranks (SIGKILL in %d ms)\n",
          signal_name(sig), job->live, job->options->grace_ms);
  char why[64];
  snprintf(why, sizeof why, "collrun got SIG%s", signal_name(sig));
  begin_stop(job, STOP_SIGNAL, 128 + sig, sig, why);
}

static void read_signals(job_t *job) {
  struct signalfd_siginfo info;
  bool child = false;
  while (read(job->sigfd, &info, sizeof info) == (ssize_t)sizeof info) {
    if (info.ssi_signo == SIGCHLD)
      child = true; /* several exits may share one SIGCHLD: reap them all below */
    else
      on_signal(job, (int)info.ssi_signo);
  }
  if (child) reap_children(job);
}

static void check_deadlines(job_t *job) {
  int64_t now = coll_now_ns();
  if (job->respawns_due > 0) elastic_respawn(job, now);
  if (now >= job->abandon_ns) {
    if (only_replacements_left(job)) {
      fprintf(stderr,
              "collrun: %d replacements still running %d ms after the other ranks "
              "finished; stopping them\n",
              job->live, JOIN_LINGER_MS);
      elastic_abandon(job);
    } else {
      job->abandon_ns = INT64_MAX;
    }
  }
  if (job->stop == STOP_NONE && now >= job->job_deadline_ns) {
    fprintf(stderr, "collrun: job timed out after %g s (--timeout); stopping %d running ranks\n",
            job->options->timeout_s, job->live);
    begin_stop(job, STOP_TIMEOUT, JOB_EXIT_TIMEOUT, SIGTERM, "timed out (--timeout)");
  }
  if (now >= job->next_watch_ns) {
    job->next_watch_ns = now + (int64_t)NODES_WATCH_MS * 1000000;
    int code;
    char why[WHY_MAX];
    if (nodes_check_failure(job->options->nodes, &code, why, sizeof why)) {
      fprintf(stderr, "collrun: another node failed (%s); stopping %d running ranks\n", why,
              job->live);
      begin_stop(job, STOP_OTHER_NODE, code, SIGTERM, NULL);
    }
  }
  if (now >= job->kill_deadline_ns && job->live > 0) {
    fprintf(stderr, "collrun: %d ranks still running %d ms after SIGTERM; sending SIGKILL\n",
            job->live, job->options->grace_ms);
    kill_now(job);
  }
}

static int next_wait_ms(const job_t *job) {
  int64_t deadline = job->stop == STOP_NONE ? job->job_deadline_ns : INT64_MAX;
  if (job->kill_deadline_ns < deadline) deadline = job->kill_deadline_ns;
  if (job->give_up_ns < deadline) deadline = job->give_up_ns;
  if (job->next_watch_ns < deadline) deadline = job->next_watch_ns;
  if (job->abandon_ns < deadline) deadline = job->abandon_ns;
  for (int i = 0; i < job->nranks && job->respawns_due > 0; i++)
    if (job->ranks[i].respawn_ns < deadline) deadline = job->ranks[i].respawn_ns;
  return coll_ms_left(deadline);
}

static void on_output(job_t *job, uint64_t tag) {
  job_rank_t *r = &job->ranks[(tag - 1) / 2];
  output_stream_t *stream = (tag - 1) % 2 == 0 ? &r->out : &r->err;
  if (output_stream_read(stream, &job->sink, &r->tail) == OUTPUT_EOF) {
    /* Remove before closing: a rank being forked may hold a copy of this read end for a
     * moment, and then close() alone would leave it in the set. */
    epoll_ctl(job->epfd, EPOLL_CTL_DEL, stream->fd, NULL);
    output_stream_close(stream, &job->sink, &r->tail);
  }
}

static bool watch(job_t *job, int fd, uint64_t tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  if (epoll_ctl(job->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) return true;
  fprintf(stderr, "collrun: epoll_ctl: %s\n", strerror(errno));
  return false;
}

/* Start local rank `local_rank` in its slot: the first time, or (replacement) again after
 * its process died, the old process's pipes closed first. */
static bool start_rank(job_t *job, int local_rank, bool replacement) {
  const spawn_plan_t *plan = job->plan;
  job_rank_t *r = &job->ranks[local_rank];
  if (replacement) {
    for (int k = 0; k < 2; k++) {
      output_stream_t *s = k == 0 ? &r->out : &r->err;
      if (s->fd >= 0) epoll_ctl(job->epfd, EPOLL_CTL_DEL, s->fd, NULL);
      output_stream_close(s, &job->sink, &r->tail);
    }
  }
  spawn_child_t child;
  if (!spawn_rank(plan, local_rank, replacement, &child)) return false;
  r->rank = plan->node_rank * plan->nproc + local_rank;
  r->pid = child.pid;
  r->running = true;
  r->replacement = replacement;
  r->respawn_ns = INT64_MAX;
  if (!replacement) job->nranks++;
  job->live++;
  /* Both always: each takes its fd, so cleanup closes both. */
  bool out_ok = output_stream_init(&r->out, child.out_fd, STDOUT_FILENO, r->rank);
  bool err_ok = output_stream_init(&r->err, child.err_fd, STDERR_FILENO, r->rank);
  bool ok = out_ok && err_ok;
  if (!ok) fprintf(stderr, "collrun: out of memory\n");
  uint64_t tag = (uint64_t)local_rank * 2 + 1; /* 0 is the signalfd */
  return ok && watch(job, child.out_fd, tag) && watch(job, child.err_fd, tag + 1);
}

static void event_loop(job_t *job) {
  struct epoll_event events[MAX_EVENTS];
  while (job->live > 0 || job->respawns_due > 0) {
    if (coll_now_ns() >= job->give_up_ns) {
      for (int i = 0; i < job->nranks; i++)
        if (job->ranks[i].running)
          fprintf(stderr, "collrun: rank %d (pid %d) did not exit after SIGKILL; giving up\n",
                  job->ranks[i].rank, (int)job->ranks[i].pid);
      return;
    }
    int n = epoll_wait(job->epfd, events, MAX_EVENTS, next_wait_ms(job));
    if (n < 0 && errno != EINTR) {
      fprintf(stderr, "collrun: epoll_wait: %s; killing the ranks\n", strerror(errno));
      if (job->stop == STOP_NONE) {
        job->stop = STOP_LAUNCH_FAILED;
        job->exit_code = JOB_EXIT_LAUNCH_FAILED;
      }
      kill_now(job); /* they die without us; their exit statuses are not needed then */
      return;
    }
    for (int i = 0; i < n; i++) {
      if (events[i].data.u64 == 0)
        read_signals(job);
      else
        on_output(job, events[i].data.u64);
    }
    check_deadlines(job);
  }
}

int job_run(const spawn_plan_t *plan, const job_options_t *options) {
  job_t job = {
      .options = options,
      .ranks = calloc((size_t)plan->nproc, sizeof(job_rank_t)),
      .epfd = epoll_create1(EPOLL_CLOEXEC),
      .sigfd = -1,
      .job_deadline_ns = INT64_MAX,
      .kill_deadline_ns = INT64_MAX,
      .give_up_ns = INT64_MAX,
      .next_watch_ns = options->nodes != NULL ? 0 : INT64_MAX,
      .plan = plan,
      .replacements_left = options->elastic ? options->replace : 0,
      .abandon_ns = INT64_MAX,
  };
  sigset_t set = job_signals();
  job.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  bool sink_ok = output_sink_init(&job.sink, options->prefix);
  if (job.ranks == NULL || job.epfd < 0 || job.sigfd < 0 || !sink_ok ||
      !watch(&job, job.sigfd, 0)) {
    fprintf(stderr, "collrun: cannot set up the event loop: %s\n", strerror(errno));
    job.exit_code = JOB_EXIT_LAUNCH_FAILED;
    goto cleanup;
  }
  if (options->timeout_s > 0)
    job.job_deadline_ns = coll_now_ns() + (int64_t)(options->timeout_s * 1e9);
  for (int i = 0; i < plan->nproc; i++) {
    if (!start_rank(&job, i, false)) {
      fprintf(stderr, "collrun: could not start local rank %d; killing the %d started\n", i,
              job.live);
      begin_stop(&job, STOP_LAUNCH_FAILED, JOB_EXIT_LAUNCH_FAILED, SIGKILL,
                 "collrun could not start its ranks");
      break;
    }
  }
  event_loop(&job);
  for (int i = 0; i < job.nranks; i++) { /* flush unfinished last lines */
    output_stream_close(&job.ranks[i].out, &job.sink, &job.ranks[i].tail);
    output_stream_close(&job.ranks[i].err, &job.sink, &job.ranks[i].tail);
  }
  /* Last, after every output line: the failing rank (other reasons were told as they came). */
  if (job.stop == STOP_RANK_FAILED) fprintf(stderr, "collrun: %s\n", job.why);
  if (options->elastic && job.stop == STOP_NONE) {
    job.exit_code = job.succeeded > 0 && !job.failed_after_success ? 0
                    : job.last_failure_code != 0                   ? job.last_failure_code
                                                                   : JOB_EXIT_LAUNCH_FAILED;
    if (job.exit_code != 0)
      fprintf(stderr, "collrun: elastic job failed: %s (exit %d)\n",
              job.succeeded == 0 ? "no rank finished" : "a rank failed after the first finished",
              job.exit_code);
  }
cleanup:
  if (job.sigfd >= 0) close(job.sigfd);
  if (job.epfd >= 0) close(job.epfd);
  output_sink_free(&job.sink);
  free(job.ranks);
  return job.exit_code;
}
