/* The COLL_DEBUG logger: level parsed once, lines written with one write() each so
 * lines from several threads and processes do not interleave. */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static coll_log_level_t level_value;
static _Thread_local int log_rank = -1;

static void read_level(void) {
  const char *v = getenv("COLL_DEBUG");
  level_value = COLL_LOG_NONE;
  if (v == NULL) return;
  if (strcasecmp(v, "WARN") == 0) level_value = COLL_LOG_WARN;
  else if (strcasecmp(v, "INFO") == 0) level_value = COLL_LOG_INFO;
  else if (strcasecmp(v, "TRACE") == 0) level_value = COLL_LOG_TRACE;
}

coll_log_level_t coll_log_level(void) {
  pthread_once(&level_once, read_level);
  return level_value;
}

void coll_log_set_rank(int rank) { log_rank = rank; }

void coll_log(coll_log_level_t level, const char *fmt, ...) {
  static const char *names[] = {"", "WARN", "INFO", "TRACE"};
  if (coll_log_level() < level || level == COLL_LOG_NONE) return;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  char line[1536];
  int n;
  if (log_rank >= 0)
    n = snprintf(line, sizeof line, "[coll rank %d %s] %s ", log_rank, host, names[level]);
  else
    n = snprintf(line, sizeof line, "[coll pid %d %s] %s ", (int)getpid(), host, names[level]);
  if (n < 0 || (size_t)n >= sizeof line) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = strlen(line);
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}
