/* Timing-only simulator (see sim_time.h): builds every rank's schedule, keeps of it only
 * its messages (peer relative to the rank, bytes, send or receive) step by step, merges
 * identical ones (a ring's 16,384 schedules are one), then replays sim.c's rounds with
 * work proportional to the messages, not to ranks x rounds, and prices each round on the
 * topology (sim_topo.c).
 *
 * Why it scales where sim.c does not: sim.c keeps nranks^2 counters (pairs, links) and
 * visits every rank in every round; a ring of 16,384 ranks has 32,766 rounds. Here a
 * message finds its partner through the partner schedule's table "k-th message with
 * relative peer d -> step" (binary search over the few peers a schedule talks to), and
 * only ranks that enter a step in a round are visited: a rank that enters a step checks
 * whether each partner already waits in the matching step; the one of the two that
 * arrives second matches the message, so every message is looked at twice. */
#include "sim/sim_time.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo_internal.h"
#include "common/error.h"
#include "sim/sim_links.h"

/* Threads that build schedules (at most; fewer on fewer CPUs or ranks). */
#define SIM_TIME_MAX_THREADS 8

/* A message op of a compact schedule. */
typedef struct {
  int32_t rel; /* peer - rank, mod nranks */
  uint32_t is_send;
  uint64_t bytes;
} cop_t;

/* Where the k-th message with one relative peer is: step and op index. */
typedef struct {
  uint32_t step;
  uint32_t op;
} where_t;

/* One direction's table: peers sorted, peer i's messages at where[start[i] ..
 * start[i+1]) in op order (the k-th is where[start[i] + k]). */
typedef struct {
  int32_t *rel;
  uint32_t *start;
  where_t *where;
  uint32_t npeers;
} table_t;

typedef struct {
  uint32_t nsteps;
  uint32_t *step_first; /* [nsteps + 1] into ops */
  cop_t *ops;
  uint32_t nops;
  uint32_t *k; /* [nops]: k for this op's (direction, peer) */
  table_t sends, recvs;
  uint64_t hash;
} shape_t;

typedef struct {
  int n;
  shape_t *shapes;
  size_t nshapes, shapes_cap;
  uint32_t *slot; /* open-addressing table of shape indices + 1; 0 = empty */
  size_t nslots;
  uint32_t *shape_of; /* [n] */
} book_t;

/* ---- compacting and merging ---- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

/* Scratch of one rank's compact schedule. */
typedef struct {
  uint32_t *step_first;
  size_t steps_cap;
  cop_t *ops;
  size_t ops_cap;
  uint32_t nsteps, nops;
} scratch_t;

static coll_status_t compact(const sched_t *s, int n, size_t esize, scratch_t *sc) {
  if (s->nsteps + 1 > sc->steps_cap) {
    size_t cap = s->nsteps + 1;
    uint32_t *p = realloc(sc->step_first, cap * sizeof *p);
    if (p == NULL) return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
    sc->step_first = p, sc->steps_cap = cap;
  }
  if (s->nops > sc->ops_cap) {
    cop_t *p = realloc(sc->ops, s->nops * sizeof *p);
    if (p == NULL) return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
    sc->ops = p, sc->ops_cap = s->nops;
  }
  if (s->nsteps >= UINT32_MAX || s->nops >= UINT32_MAX)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_time: a schedule of more than 2^32 ops");
  uint32_t k = 0;
  for (size_t st = 0; st < s->nsteps; st++) {
    sc->step_first[st] = k;
    const sched_step_t *step = &s->steps[st];
    for (uint32_t i = 0; i < step->nops; i++) {
      const sched_op_t *op = &s->ops[step->first_op + i];
      if (op->kind == SCHED_LOCAL_COPY || op->kind == SCHED_LOCAL_REDUCE) continue;
      if (op->peer < 0 || op->peer >= n || op->peer == s->rank)
        return coll_error(COLL_ERR_INTERNAL, "sim_time: rank %d step %zu: bad peer %d", s->rank, st,
                          op->peer);
      cop_t c = {.rel = (op->peer - s->rank + n) % n,
                 .is_send = op->kind == SCHED_SEND,
                 .bytes = (uint64_t)op->count * esize};
      sc->ops[k++] = c;
    }
  }
  sc->step_first[s->nsteps] = k;
  sc->nsteps = (uint32_t)s->nsteps;
  sc->nops = k;
  return COLL_OK;
}

static uint64_t hash_of(const scratch_t *sc) {
  uint64_t h = mix(0, sc->nsteps);
  for (uint32_t i = 0; i <= sc->nsteps; i++) h = mix(h, sc->step_first[i]);
  for (uint32_t i = 0; i < sc->nops; i++)
    h = mix(h, ((uint64_t)(uint32_t)sc->ops[i].rel << 1 | sc->ops[i].is_send) ^
                   sc->ops[i].bytes << 32 ^ sc->ops[i].bytes);
  return h;
}

static bool same_scratch(const scratch_t *a, const scratch_t *b) {
  return a->nsteps == b->nsteps && a->nops == b->nops &&
         memcmp(a->step_first, b->step_first, (b->nsteps + 1) * sizeof *b->step_first) == 0 &&
         memcmp(a->ops, b->ops, b->nops * sizeof *b->ops) == 0;
}

static bool same(const shape_t *a, const scratch_t *b, uint64_t hash) {
  return a->hash == hash && a->nsteps == b->nsteps && a->nops == b->nops &&
         memcmp(a->step_first, b->step_first, (b->nsteps + 1) * sizeof *b->step_first) == 0 &&
         memcmp(a->ops, b->ops, b->nops * sizeof *b->ops) == 0;
}

typedef struct {
  uint32_t is_send;
  int32_t rel;
  uint32_t op;
} sortkey_t;

static int by_key(const void *x, const void *y) {
  const sortkey_t *a = x, *b = y;
  if (a->is_send != b->is_send) return a->is_send < b->is_send ? -1 : 1;
  if (a->rel != b->rel) return a->rel < b->rel ? -1 : 1;
  return a->op < b->op ? -1 : a->op > b->op;
}

/* The shape's two tables and every op's k, from its ops sorted by (direction, peer, op). */
static coll_status_t index_shape(shape_t *sh) {
  sortkey_t *keys = malloc((sh->nops ? sh->nops : 1) * sizeof *keys);
  sh->k = malloc((sh->nops ? sh->nops : 1) * sizeof *sh->k);
  uint32_t *step_of = malloc((sh->nops ? sh->nops : 1) * sizeof *step_of);
  coll_status_t st = COLL_OK;
  if (keys == NULL || sh->k == NULL || step_of == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
    goto out;
  }
  for (uint32_t s = 0; s < sh->nsteps; s++)
    for (uint32_t i = sh->step_first[s]; i < sh->step_first[s + 1]; i++) step_of[i] = s;
  for (uint32_t i = 0; i < sh->nops; i++)
    keys[i] = (sortkey_t){.is_send = sh->ops[i].is_send, .rel = sh->ops[i].rel, .op = i};
  qsort(keys, sh->nops, sizeof *keys, by_key);
  uint32_t nrecv = 0;
  while (nrecv < sh->nops && !keys[nrecv].is_send) nrecv++;
  for (int dir = 0; dir < 2 && st == COLL_OK; dir++) {
    table_t *t = dir ? &sh->sends : &sh->recvs;
    const sortkey_t *kk = dir ? keys + nrecv : keys;
    uint32_t m = dir ? sh->nops - nrecv : nrecv;
    uint32_t npeers = 0;
    for (uint32_t i = 0; i < m; i++)
      if (i == 0 || kk[i].rel != kk[i - 1].rel) npeers++;
    t->rel = malloc((npeers ? npeers : 1) * sizeof *t->rel);
    t->start = malloc((npeers + 1) * sizeof *t->start);
    t->where = malloc((m ? m : 1) * sizeof *t->where);
    if (t->rel == NULL || t->start == NULL || t->where == NULL) {
      st = coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
      break;
    }
    uint32_t p = 0, kth = 0;
    for (uint32_t i = 0; i < m; i++) {
      if (i == 0 || kk[i].rel != kk[i - 1].rel) t->rel[p] = kk[i].rel, t->start[p++] = i, kth = 0;
      sh->k[kk[i].op] = kth++;
      t->where[i] = (where_t){.step = step_of[kk[i].op], .op = kk[i].op};
    }
    t->start[npeers] = m;
    t->npeers = npeers;
  }
out:
  free(keys);
  free(step_of);
  return st;
}

static void shape_free(shape_t *sh) {
  free(sh->step_first);
  free(sh->ops);
  free(sh->k);
  table_t *ts[2] = {&sh->sends, &sh->recvs};
  for (int i = 0; i < 2; i++) free(ts[i]->rel), free(ts[i]->start), free(ts[i]->where);
}

/* The index of the shape equal to sc, added if new. */
static coll_status_t intern(book_t *b, const scratch_t *sc, uint64_t hash, uint32_t *id) {
  size_t mask = b->nslots - 1;
  size_t i = (size_t)hash & mask;
  for (; b->slot[i] != 0; i = (i + 1) & mask)
    if (same(&b->shapes[b->slot[i] - 1], sc, hash)) {
      *id = b->slot[i] - 1;
      return COLL_OK;
    }
  if (b->nshapes == b->shapes_cap) {
    size_t cap = b->shapes_cap ? 2 * b->shapes_cap : 16;
    shape_t *p = realloc(b->shapes, cap * sizeof *p);
    if (p == NULL) return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
    b->shapes = p, b->shapes_cap = cap;
  }
  shape_t *sh = &b->shapes[b->nshapes];
  memset(sh, 0, sizeof *sh);
  sh->nsteps = sc->nsteps;
  sh->nops = sc->nops;
  sh->hash = hash;
  sh->step_first = malloc((sc->nsteps + 1) * sizeof *sh->step_first);
  sh->ops = malloc((sc->nops ? sc->nops : 1) * sizeof *sh->ops);
  if (sh->step_first == NULL || sh->ops == NULL) {
    shape_free(sh);
    return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
  }
  memcpy(sh->step_first, sc->step_first, (sc->nsteps + 1) * sizeof *sh->step_first);
  memcpy(sh->ops, sc->ops, sc->nops * sizeof *sh->ops);
  coll_status_t st = index_shape(sh);
  if (st != COLL_OK) {
    shape_free(sh);
    return st;
  }
  *id = (uint32_t)b->nshapes++;
  b->slot[i] = *id + 1;
  return COLL_OK;
}

/* Building and compacting the schedules is most of the work (a 16,384-rank ring is a
 * billion ops), and every rank's is independent: worker threads take every T-th rank and
 * merge under a lock (the order of merging changes only the shapes' numbering). */
typedef struct {
  coll_algo_t algo;
  const sched_params_t *p;
  book_t *b;
  pthread_mutex_t *lock;
  int first, stride;
  coll_status_t st;
  char msg[256];
} worker_t;

static void *build_some(void *arg) {
  worker_t *w = arg;
  int n = w->p->nranks;
  size_t esize = algo_elem_size(w->p->dtype);
  /* sc: this rank's; prev: the one this thread built before (neighbours' schedules are
   * often the same, which a memcmp finds without hashing or locking). */
  scratch_t sc = {0}, prev = {0};
  uint32_t prev_id = 0;
  int have_prev = 0;
  coll_status_t st = COLL_OK;
  for (int r = w->first; r < n && st == COLL_OK; r += w->stride) {
    sched_params_t q = *w->p;
    q.rank = r;
    sched_t s;
    st = algo_build(w->algo, &q, &s);
    if (st == COLL_OK) st = compact(&s, n, esize, &sc);
    sched_free(&s);
    if (st != COLL_OK) break;
    if (have_prev && same_scratch(&prev, &sc)) {
      w->b->shape_of[r] = prev_id;
      continue;
    }
    uint64_t hash = hash_of(&sc);
    pthread_mutex_lock(w->lock);
    st = intern(w->b, &sc, hash, &w->b->shape_of[r]);
    pthread_mutex_unlock(w->lock);
    prev_id = w->b->shape_of[r];
    have_prev = 1;
    scratch_t t = prev;
    prev = sc, sc = t;
  }
  if (st != COLL_OK) snprintf(w->msg, sizeof w->msg, "%s", coll_last_error());
  w->st = st;
  free(sc.step_first);
  free(sc.ops);
  free(prev.step_first);
  free(prev.ops);
  return NULL;
}

static coll_status_t build_all(coll_algo_t algo, const sched_params_t *p, book_t *b) {
  int n = p->nranks;
  b->n = n;
  b->nslots = 64;
  while (b->nslots < 2 * (size_t)n) b->nslots *= 2;
  b->slot = calloc(b->nslots, sizeof *b->slot);
  b->shape_of = malloc((size_t)n * sizeof *b->shape_of);
  if (b->slot == NULL || b->shape_of == NULL)
    return coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = cpus < 1 ? 1 : cpus > SIM_TIME_MAX_THREADS ? SIM_TIME_MAX_THREADS : (int)cpus;
  if (nthreads > n / 64 + 1) nthreads = n / 64 + 1;
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  worker_t w[SIM_TIME_MAX_THREADS];
  pthread_t tid[SIM_TIME_MAX_THREADS];
  int started = 1;
  for (int i = 0; i < nthreads; i++)
    w[i] = (worker_t){.algo = algo, .p = p, .b = b, .lock = &lock, .first = i, .stride = nthreads};
  for (int i = 1; i < nthreads && pthread_create(&tid[i], NULL, build_some, &w[i]) == 0; i++)
    started++;
  /* This thread is worker 0, and does the share of any worker that could not start. */
  build_some(&w[0]);
  for (int i = started; i < nthreads; i++) build_some(&w[i]);
  for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
  pthread_mutex_destroy(&lock);
  for (int i = 0; i < nthreads; i++)
    if (w[i].st != COLL_OK) return coll_error(w[i].st, "%s", w[i].msg);
  return COLL_OK;
}

static void book_free(book_t *b) {
  for (size_t i = 0; i < b->nshapes; i++) shape_free(&b->shapes[i]);
  free(b->shapes);
  free(b->slot);
  free(b->shape_of);
  memset(b, 0, sizeof *b);
}

/* ---- the rounds ---- */

/* Where the k-th message of direction t with relative peer rel is; NULL if there is none. */
static const where_t *lookup(const table_t *t, int32_t rel, uint32_t k) {
  uint32_t lo = 0, hi = t->npeers;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (t->rel[mid] < rel)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == t->npeers || t->rel[lo] != rel || t->start[lo] + k >= t->start[lo + 1]) return NULL;
  return &t->where[t->start[lo] + k];
}

typedef struct {
  const book_t *b;
  sim_links_t *links;
  uint32_t *cur;     /* [n] current step; UINT32_MAX before step 0 */
  uint32_t *pending; /* [n] unmatched messages of the current step */
  int *now, *next;   /* ranks entering a step in this round, in the next */
  size_t nnow, nnext;
  int finished;
} run_t;

static coll_status_t mismatch(int a, int b, int is_send, uint32_t k) {
  return coll_error(COLL_ERR_MISMATCH,
                    "sim_time: rank %d's message %u %s rank %d has no partner there (the "
                    "schedules do not pair; sim.c's sim_run names the step)",
                    a, k, is_send ? "to" : "from", b);
}

/* Rank r enters its next step in the current round. */
static coll_status_t enter(run_t *x, int r) {
  const book_t *b = x->b;
  int n = b->n;
  const shape_t *sh = &b->shapes[b->shape_of[r]];
  uint32_t s = x->cur[r] == UINT32_MAX ? 0 : x->cur[r] + 1;
  x->cur[r] = s;
  if (s >= sh->nsteps) {
    x->finished++;
    return COLL_OK;
  }
  uint32_t first = sh->step_first[s], last = sh->step_first[s + 1];
  x->pending[r] = last - first;
  for (uint32_t i = first; i < last; i++) {
    const cop_t *op = &sh->ops[i];
    int peer = r + op->rel < n ? r + op->rel : r + op->rel - n;
    const shape_t *ps = &b->shapes[b->shape_of[peer]];
    const where_t *w = lookup(op->is_send ? &ps->recvs : &ps->sends, n - op->rel, sh->k[i]);
    if (w == NULL) return mismatch(r, peer, (int)op->is_send, sh->k[i]);
    if (x->cur[peer] != w->step) continue; /* the partner is not there yet: it will match */
    if (ps->ops[w->op].bytes != op->bytes)
      return coll_error(COLL_ERR_MISMATCH,
                        "sim_time: message %u between ranks %d and %d: %llu bytes sent, %llu "
                        "received",
                        sh->k[i], op->is_send ? r : peer, op->is_send ? peer : r,
                        (unsigned long long)(op->is_send ? op->bytes : ps->ops[w->op].bytes),
                        (unsigned long long)(op->is_send ? ps->ops[w->op].bytes : op->bytes));
    sim_links_add(x->links, op->is_send ? r : peer, op->is_send ? peer : r, op->bytes);
    x->pending[r]--;
    if (--x->pending[peer] == 0) x->next[x->nnext++] = peer;
  }
  if (x->pending[r] == 0) x->next[x->nnext++] = r;
  return COLL_OK;
}

static coll_status_t deadlock(const run_t *x) {
  char msg[256];
  size_t len = 0;
  msg[0] = '\0';
  int shown = 0;
  for (int r = 0; r < x->b->n && shown < 6; r++) {
    const shape_t *sh = &x->b->shapes[x->b->shape_of[r]];
    if (x->cur[r] < sh->nsteps) {
      len += (size_t)snprintf(msg + len, sizeof msg - len, " rank %d in step %u;", r, x->cur[r]);
      shown++;
    }
  }
  return coll_error(COLL_ERR_INTERNAL, "sim_time: deadlock, no rank can progress:%s", msg);
}

static coll_status_t run_rounds(const book_t *b, sim_links_t *links, size_t *nrounds) {
  int n = b->n;
  run_t x = {.b = b, .links = links};
  x.cur = malloc((size_t)n * sizeof *x.cur);
  x.pending = calloc((size_t)n, sizeof *x.pending);
  x.now = malloc((size_t)n * sizeof *x.now);
  x.next = malloc((size_t)n * sizeof *x.next);
  coll_status_t st = COLL_OK;
  if (x.cur == NULL || x.pending == NULL || x.now == NULL || x.next == NULL) {
    st = coll_error(COLL_ERR_NO_MEMORY, "sim_time: out of memory");
    goto out;
  }
  for (int r = 0; r < n; r++) x.cur[r] = UINT32_MAX, x.now[r] = r;
  x.nnow = (size_t)n;
  size_t round = 0;
  while (x.nnow > 0 && st == COLL_OK) {
    for (size_t i = 0; i < x.nnow && st == COLL_OK; i++) st = enter(&x, x.now[i]);
    sim_links_end_round(links);
    int *t = x.now;
    x.now = x.next, x.next = t;
    x.nnow = x.nnext, x.nnext = 0;
    if (x.finished < n) round++;
  }
  if (st == COLL_OK && x.finished < n) st = deadlock(&x);
  *nrounds = round;
out:
  free(x.cur);
  free(x.pending);
  free(x.now);
  free(x.next);
  return st;
}

coll_status_t sim_time_algo(coll_algo_t algo, const sched_params_t *p, const sim_topo_t *topo,
                            sim_time_result_t *res) {
  if (res == NULL || p == NULL || p->nranks < 1)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_time_algo: bad arguments");
  memset(res, 0, sizeof *res);
  if (algo_elem_size(p->dtype) == 0)
    return coll_error(COLL_ERR_INVALID_ARGUMENT, "sim_time_algo: unknown dtype %d", (int)p->dtype);
  sim_links_t links;
  coll_status_t st = sim_links_init(&links, topo, p->nranks);
  if (st != COLL_OK) return st;
  book_t b = {0};
  st = build_all(algo, p, &b);
  size_t nrounds = 0;
  if (st == COLL_OK) st = run_rounds(&b, &links, &nrounds);
  if (st == COLL_OK) st = sim_links_report(&links, res);
  if (st == COLL_OK) {
    res->nrounds = nrounds;
    res->distinct_schedules = b.nshapes;
    for (size_t i = 0; i < b.nshapes; i++)
      if (b.shapes[i].nsteps > res->max_steps) res->max_steps = b.shapes[i].nsteps;
  } else {
    sim_time_result_free(res);
  }
  book_free(&b);
  sim_links_free(&links);
  return st;
}

void sim_time_result_free(sim_time_result_t *res) {
  if (res == NULL) return;
  free(res->uplink_egress);
  free(res->uplink_ingress);
  memset(res, 0, sizeof *res);
}
