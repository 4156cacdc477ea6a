/* The public side of COLL_TRACE: user spans (coll_trace_span_begin/end) and whether
 * tracing is on; the trace itself is trace/trace.c. */
#include "api/api.h"
#include "common/error.h"
#include "trace/trace.h"

static coll_status_t span(coll_comm_t *comm, const char *name, bool begin, const char *what) {
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  /* Rule 6 of coll.h: refused after an abort; a failed communicator still records. */
  if (base_aborted(&comm->base)) return base_check_usable(&comm->base, what);
  if (name == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: name is NULL", comm->base.rank,
                      what);
  trace_span(comm->base.trace, name, begin);
  coll_error_clear();
  return COLL_OK;
}

coll_status_t coll_trace_span_begin(coll_comm_t *comm, const char *name) {
  return span(comm, name, true, "coll_trace_span_begin");
}

coll_status_t coll_trace_span_end(coll_comm_t *comm, const char *name) {
  return span(comm, name, false, "coll_trace_span_end");
}

int coll_trace_enabled(const coll_comm_t *comm) {
  return comm != NULL && comm->magic == COMM_MAGIC && comm->base.trace != NULL;
}
