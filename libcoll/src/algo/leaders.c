/* The leader form of the node-aware all-reduce (COLL_ALGO_LEADERS, "leaders"): each node
 * reduces to its leader (its lowest rank, local index 0), the leaders all-reduce among
 * themselves, and each leader broadcasts the result inside its node. Nodes may hold
 * different numbers of ranks.
 *
 *     node 0: r0 <- r2         1. reduce to the leader, inside each node
 *     node 1: r1 <- r3         2. all-reduce among the leaders r0, r1 (across nodes)
 *                              3. broadcast from the leader, inside each node
 *
 * Each phase is one of the flat schedules, built for the sub-group and embedded with its
 * ranks renamed (sub-rank i -> the group's i-th rank):
 *   S <  LEADERS_TREE_MIN_BYTES: binomial reduce, halving-doubling (recursive doubling
 *        up to 8 KiB: log2 N exchanges), binomial broadcast: the fewest steps, for small
 *        messages: ceil(log2 k) + log2 N (+2) + ceil(log2 k) of them, one message across
 *        nodes per leader and step
 *   S >= LEADERS_TREE_MIN_BYTES: pipelined chain reduce, double binary tree among the
 *        leaders, pipelined chain broadcast: NCCL's tree shape (chains inside the nodes,
 *        a double binary tree between them), each phase pipelined on its own but the
 *        phases one after the other
 * Where a phase reads the leader's partial result rather than the caller's input, its
 * INPUT is renamed OUTPUT: every flat schedule is correct in place (schedule.h, rule 3).
 *
 * bytes: across nodes only the leaders send (the all-reduce's bytes of N ranks on S);
 * inside a node the reduce's and the broadcast's (binomial: S per message; chain: S per
 * rank but the tail's and the leader's). Every element's final value is computed once
 * per leader by the all-reduce among them, which gives every leader the same bits. */
#include <stdlib.h>

#include "algo/algo_internal.h"
#include "common/error.h"

bool algo_leaders_tree_form(const sched_params_t *p) {
  return (double)p->count * (double)algo_elem_size(p->dtype) >= (double)ALGO_LEADERS_TREE_MIN_BYTES;
}

/* Append sub's steps to s, its rank i renamed ranks[i], INPUT renamed OUTPUT when
 * in_is_out. */
static coll_status_t embed(sched_t *s, const sched_t *sub, const int *ranks, bool in_is_out) {
  coll_status_t st = COLL_OK;
  for (size_t k = 0; k < sub->nsteps && st == COLL_OK; k++) {
    const sched_step_t *step = &sub->steps[k];
    st = sched_begin_step(s);
    for (uint32_t i = 0; i < step->nops && st == COLL_OK; i++) {
      sched_op_t op = sub->ops[step->first_op + i];
      sched_buf_t buf = (sched_buf_t)op.buf, src = (sched_buf_t)op.src_buf;
      if (in_is_out && buf == SCHED_BUF_INPUT) buf = SCHED_BUF_OUTPUT;
      if (in_is_out && src == SCHED_BUF_INPUT) src = SCHED_BUF_OUTPUT;
      int peer = op.peer >= 0 ? ranks[op.peer] : -1;
      switch ((sched_op_kind_t)op.kind) {
        case SCHED_SEND:
          st = sched_send(s, peer, buf, op.offset, op.count);
          break;
        case SCHED_RECV_COPY:
          st = sched_recv_copy(s, peer, buf, op.offset, op.count);
          break;
        case SCHED_RECV_REDUCE:
          st = sched_recv_reduce(s, peer, buf, op.offset, src, op.src_offset, op.count);
          break;
        case SCHED_LOCAL_COPY:
          st = sched_local_copy(s, buf, op.offset, src, op.src_offset, op.count);
          break;
        case SCHED_LOCAL_REDUCE:
          st = sched_local_reduce(s, buf, op.offset, src, op.src_offset, op.count);
          break;
      }
    }
  }
  if (sub->scratch_count > s->scratch_count) s->scratch_count = sub->scratch_count;
  return st;
}

/* One phase: `build` for collective `kind` over the group ranks[0..n-1], this rank at
 * position pos (root 0), embedded into s. */
static coll_status_t phase(const sched_params_t *p, sched_t *s, coll_kind_t kind,
                           coll_status_t (*build)(const sched_params_t *, sched_t *),
                           const int *ranks, int n, int pos, bool in_is_out) {
  if (n < 2) return COLL_OK;
  sched_params_t q = *p;
  q.collective = kind;
  q.rank = pos;
  q.nranks = n;
  q.root = 0;
  q.topo = NULL;
  sched_t sub;
  sched_init(&sub, &q, s->algo);
  coll_status_t st = build(&q, &sub);
  if (st == COLL_OK) {
    sched_finish(&sub);
    st = embed(s, &sub, ranks, in_is_out);
  }
  sched_free(&sub);
  return st;
}

coll_status_t algo_leaders_allreduce(const sched_params_t *p, sched_t *s) {
  const algo_topo_t *t = p->topo;
  bool tree = algo_leaders_tree_form(p);
  if (t == NULL) { /* one node: reduce to rank 0 and broadcast */
    int *all = malloc((size_t)p->nranks * sizeof *all);
    if (all == NULL) return coll_error(COLL_ERR_NO_MEMORY, "leaders: out of memory");
    for (int r = 0; r < p->nranks; r++) all[r] = r;
    coll_status_t st =
        phase(p, s, COLL_KIND_REDUCE, tree ? algo_chain_reduce : algo_binomial_reduce, all,
              p->nranks, p->rank, false);
    if (st == COLL_OK)
      st = phase(p, s, COLL_KIND_BROADCAST, tree ? algo_chain_broadcast : algo_binomial_broadcast,
                 all, p->nranks, p->rank, true);
    free(all);
    return st;
  }
  int r = p->rank, m = t->node_of[r], l = t->local_of[r], k = algo_topo_local_count(t, m);
  const int *local = &t->node_ranks[t->node_start[m]];
  coll_status_t st = phase(p, s, COLL_KIND_REDUCE, tree ? algo_chain_reduce : algo_binomial_reduce,
                           local, k, l, false);
  if (st == COLL_OK && l == 0 && t->nnodes > 1) {
    int *leaders = malloc((size_t)t->nnodes * sizeof *leaders);
    if (leaders == NULL) return coll_error(COLL_ERR_NO_MEMORY, "leaders: out of memory");
    for (int i = 0; i < t->nnodes; i++) leaders[i] = algo_topo_rank(t, i, 0);
    st = phase(p, s, COLL_KIND_ALL_REDUCE,
               tree ? algo_tree_allreduce : algo_halving_doubling_allreduce, leaders, t->nnodes, m,
               k > 1);
    free(leaders);
  }
  if (st == COLL_OK)
    st = phase(p, s, COLL_KIND_BROADCAST, tree ? algo_chain_broadcast : algo_binomial_broadcast,
               local, k, l, true);
  return st;
}
