/* Debug log controlled by COLL_DEBUG=WARN|INFO|TRACE (default: silent). One line per
 * event on stderr, prefixed with "[coll rank R host H]". */
#ifndef COLL_COMMON_LOG_H
#define COLL_COMMON_LOG_H

typedef enum { COLL_LOG_NONE = 0, COLL_LOG_WARN, COLL_LOG_INFO, COLL_LOG_TRACE } coll_log_level_t;

/* Current level, read once from COLL_DEBUG. */
coll_log_level_t coll_log_level(void);
/* Rank shown in the prefix of this thread's lines (-1: not known yet). Set by the
 * communicator on its threads. */
void coll_log_set_rank(int rank);
void coll_log(coll_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define COLL_LOG_ENABLED(level) (coll_log_level() >= (level))

#endif
