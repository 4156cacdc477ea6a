/* What the API files share: a call's way from its entry point (collectives.c,
 * p2p_group.c) through preparation (prepare.c: argument checks, algorithm choice, the
 * INFO line) to the request queue or the dispatch (core/). */
#ifndef COLL_API_API_H
#define COLL_API_API_H

#include "core/comm.h"

/* ---- prepare.c ---- */
/* Argument checks, where the buffers live, algorithm choice and the INFO line for a
 * collective call (all kinds but P2P; pc->call filled by the entry point); on success
 * *pc is ready for the dispatch. */
coll_status_t api_prepare(coll_comm_t *comm, const char *what, prepared_call_t *pc);
/* The INFO line of a call: algorithm, execution path (path_choose, as the dispatch runs
 * it) and transport, and why (the cost model's estimate of every algorithm that
 * implements the collective). */
void api_log_choice(coll_comm_t *comm, const char *what, const prepared_call_t *pc);
/* Run a prepared call: recorded inside a group, else blocking or through *request. */
coll_status_t api_submit(coll_comm_t *comm, const char *what, const prepared_call_t *pc,
                         coll_request_t **request);
/* A collective call from its entry point: prepared, then submitted (async: through
 * *request, which must not be NULL). Plain and async calls on device buffers first wait
 * for the legacy default stream. */
coll_status_t api_run(coll_comm_t *comm, const char *what, coll_call_t call,
                      coll_request_t **request, bool async);
/* A _stream call: device buffers are queued on `stream` (core/stream_calls.c); host
 * buffers wait for it, then run like the blocking call. Refused inside a group. */
coll_status_t api_run_stream(coll_comm_t *comm, const char *what, coll_call_t call, void *stream);

/* ---- ops.c ---- */
/* The call's op checked against its dtype (bitwise ops: integer types only); a
 * premul_sum op of comm becomes COLL_SUM with call->premul and this rank's scalar. Not a
 * reducing call: nothing to do. who: "rank R: coll_x", how the errors begin. */
coll_status_t api_resolve_op(coll_comm_t *comm, const char *who, coll_call_t *call);

/* ---- p2p_group.c ---- */
/* Record a prepared call in the open group. */
coll_status_t group_record(coll_comm_t *comm, const prepared_call_t *pc);

/* Room for "rank 12345: coll_reduce_scatter_stream", how argument errors begin. */
enum { API_WHO_MAX = 96 };
/* The checks every point-to-point call (untagged and tagged) makes: the communicator, the
 * request of an _async form, the type, the peer (COLL_ANY_SOURCE too when any_source),
 * the buffer, its size and that it is host memory. On COLL_OK, who holds "rank R: what"
 * and *bytes the message's size. */
coll_status_t api_check_p2p(coll_comm_t *comm, const char *what, const void *buf, size_t count,
                            coll_dtype_t dtype, int peer, bool any_source, coll_request_t **request,
                            bool async, char who[API_WHO_MAX], size_t *bytes);

#endif
