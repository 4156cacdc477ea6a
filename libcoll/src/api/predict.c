/* coll_comm_predict: the cost model's time for a call on a communicator, without running
 * it (what ncclGroupSimulateEnd reports). The same functions as the executor's choice
 * (algo_select) and coll-sim's "predicted time" (algo_predict), with the constants the
 * ranks agreed at init. */
#include <math.h>

#include "common/error.h"
#include "core/comm.h"

_Static_assert((int)COLL_PREDICT_ALL_REDUCE == (int)COLL_KIND_ALL_REDUCE &&
                   (int)COLL_PREDICT_BROADCAST == (int)COLL_KIND_BROADCAST &&
                   (int)COLL_PREDICT_REDUCE == (int)COLL_KIND_REDUCE &&
                   (int)COLL_PREDICT_ALL_GATHER == (int)COLL_KIND_ALL_GATHER &&
                   (int)COLL_PREDICT_REDUCE_SCATTER == (int)COLL_KIND_REDUCE_SCATTER &&
                   (int)COLL_PREDICT_ALL_TO_ALL == (int)COLL_KIND_ALL_TO_ALL &&
                   (int)COLL_PREDICT_BARRIER == (int)COLL_KIND_BARRIER &&
                   (int)COLL_PREDICT_SEND == (int)COLL_KIND_P2P &&
                   (int)COLL_PREDICT_GATHER == (int)COLL_KIND_GATHER &&
                   (int)COLL_PREDICT_SCATTER == (int)COLL_KIND_SCATTER,
               "coll_predict_t follows coll_kind_t");

coll_status_t coll_comm_predict(const coll_comm_t *comm, coll_predict_t collective, size_t count,
                                coll_dtype_t dtype, double *seconds, coll_algo_t *algo) {
  const char *what = "coll_comm_predict";
  coll_status_t st = comm_check(comm, what);
  if (st != COLL_OK) return st;
  int rank = comm->base.rank;
  if (seconds == NULL)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: seconds is NULL", rank, what);
  if ((unsigned)collective >= COLL_PREDICT_COUNT)
    return coll_error(COLL_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: collective %d is not a "
                      "coll_predict_t",
                      rank, what, (int)collective);
  size_t elem = coll_dtype_size(dtype);
  if (elem == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "rank %d: %s: dtype %d is not a coll_dtype_t",
                      rank, what, (int)dtype);
  const algo_cost_t *c = &comm->cost;
  if (collective == COLL_PREDICT_SEND) {
    /* One message: a step and its bytes through the link. */
    /* on several hosts, as between them (the link the peer is behind is not known) */
    double alpha = c->inter_alpha > 0 ? c->inter_alpha : c->alpha;
    double beta = c->inter_beta > 0 ? c->inter_beta : c->beta;
    *seconds = count == 0 ? 0.0 : alpha + (double)count * (double)elem * beta;
    if (algo != NULL) *algo = COLL_ALGO_RING;
    coll_error_clear();
    return COLL_OK;
  }
  sched_params_t p = {.collective = (coll_kind_t)collective,
                      .count = collective == COLL_PREDICT_BARRIER ? 1 : count,
                      .dtype = collective == COLL_PREDICT_BARRIER ? COLL_UINT8 : dtype,
                      .rank = rank,
                      .nranks = comm->base.nranks,
                      .segment_bytes = comm->segment_bytes,
                      .topo = base_topo(&comm->base)};
  /* A forced algorithm the collective has (the arena is all-reduce only and has no
   * schedule to predict: its collective's cheapest schedule stands in). */
  coll_algo_t chosen = comm->algo;
  if (chosen == COLL_ALGO_AUTO || chosen == COLL_ALGO_ARENA) chosen = algo_select(&p, c);
  double t = algo_predict(chosen, &p, c);
  if (!isfinite(t))
    return coll_error(COLL_ERR_UNSUPPORTED,
                      "rank %d: %s: the cost model has no time for %s "
                      "of %zu %s",
                      rank, what, coll_algo_name(chosen), count, coll_dtype_name(dtype));
  *seconds = t;
  if (algo != NULL) *algo = chosen;
  coll_error_clear();
  return COLL_OK;
}
