/* sim_estimate.c -- SIM_REPLAY_ESTIMATE: a long pipeline without a symmetry, from two short ones.
 *
 * Why: a call with no symmetry (trees, double trees, rooted collectives) is replayed slice by
 * slice, and a tree all-reduce of 1 GiB at 1,024 ranks is about 50 million events; its per-slice
 * rate wanders with the order in which reduction and broadcast slices take each port, so neither
 * the symmetric replay nor the periodic skip applies (README.md, "Trees at scale"). A sweep over
 * sizes mostly wants the shape of the curve, fast, and says so by asking for an estimate.
 *
 * How: the largest op of the call cuts its count into `parts` (a tree's whole buffer: 1, a double
 * tree's halves: 2, a ring's chunks: p), so a quantum of parts x slice elements takes one whole
 * slice from every op that spans a part and leaves each op's last, partial slice as it was. The
 * call is replayed with all but K and all but 2K quanta removed (K: sim_estimate_slices), and
 * time, messages and bytes are taken on the straight line through the two, at the call's count.
 * Past the pipeline's fill every added slice costs one period of the busiest resource; the line's
 * error is how much that period wanders beyond the first 2K slices, measured in README.md. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/error.h"
#include "tools/sim/sim_internal.h"

/* The short replays of a sweep: every power-of-two size past 2K quanta shortens to the same two
 * calls, so each is replayed once. A list: a run has a few dozen of them at most. */
typedef struct {
  sim_call_t call;
  sim_result_t res;
} cached_t;

struct sim_estimate_cache {
  pthread_mutex_t lock;
  cached_t *v;
  int n, cap;
};

struct sim_estimate_cache *sim_estimate_cache_create(void) {
  struct sim_estimate_cache *c = calloc(1, sizeof *c);
  if (c) pthread_mutex_init(&c->lock, NULL);
  return c;
}

void sim_estimate_cache_free(struct sim_estimate_cache *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->lock);
  free(c->v);
  free(c);
}

static int same_call(const sim_call_t *a, const sim_call_t *b) {
  return a->coll == b->coll && a->algo == b->algo && a->nranks == b->nranks &&
         a->count == b->count && a->dtype == b->dtype && a->root == b->root;
}

static int cache_get(struct sim_estimate_cache *c, const sim_call_t *call, sim_result_t *out) {
  int found = 0;
  if (!c) return 0;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->n && !found; i++)
    if (same_call(&c->v[i].call, call)) *out = c->v[i].res, found = 1;
  pthread_mutex_unlock(&c->lock);
  return found;
}

/* Best effort: a result that cannot be kept is replayed again when next asked for. */
static void cache_put(struct sim_estimate_cache *c, const sim_call_t *call,
                      const sim_result_t *res) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    cached_t *v = realloc(c->v, sizeof *v * (size_t)cap);
    if (v) c->v = v, c->cap = cap;
  }
  if (c->n < c->cap) c->v[c->n++] = (cached_t){*call, *res};
  pthread_mutex_unlock(&c->lock);
}

size_t sim_estimate_quantum(const sim_world_t *w, const sim_call_t *call) {
  size_t largest = 0;
  for (int q = 0; q < w->nranks; q++)
    for (int i = 0; i < w->ranks[q].nops; i++)
      if (w->ranks[q].ops[i].count > largest) largest = w->ranks[q].ops[i].count;
  if (largest == 0 || call->count == 0 || w->slice_elems == 0) return 0;
  size_t parts = (call->count + largest - 1) / largest;
  return parts * w->slice_elems;
}

size_t sim_estimate_slices(const sim_model_t *m, int nranks) {
  size_t k = m->estimate_slices > 0 ? (size_t)m->estimate_slices : 0;
  size_t fit = nranks > 0 ? ((size_t)1 << 19) / (size_t)nranks : k;
  if (fit < k) k = fit < 16 ? 16 : fit;
  return k < (size_t)m->estimate_slices ? k : (size_t)m->estimate_slices;
}

int sim_estimate_applies(const sim_model_t *m, const sim_call_t *call, size_t quantum) {
  if (m->replay != SIM_REPLAY_ESTIMATE || m->estimate_slices <= 0 || quantum == 0) return 0;
  return call->count / quantum > 2 * sim_estimate_slices(m, call->nranks);
}

static double along(double y1, double y2, double x) { return y2 + (y2 - y1) * x; }

weft_result_t sim_estimate_run(const sim_model_t *m, const sim_call_t *call, size_t quantum,
                               sim_result_t *out) {
  size_t k = call->count / quantum, K = sim_estimate_slices(m, call->nranks);
  /* The call has no symmetry (the caller tried): the short replays go straight to the full one. */
  sim_model_t sm = *m;
  sm.replay = SIM_REPLAY_FULL;
  sim_call_t c[2] = {*call, *call};
  c[0].count = call->count - (k - K) * quantum;
  c[1].count = call->count - (k - 2 * K) * quantum;
  sim_result_t r[2];
  for (int i = 0; i < 2; i++) {
    if (cache_get(m->estimate_cache, &c[i], &r[i])) continue;
    weft_result_t res = sim_run(&sm, &c[i], NULL, NULL, &r[i]);
    if (res != WEFT_SUCCESS)
      return err_context(res, "estimating %zu elements from a replay of %zu", call->count,
                         c[i].count);
    cache_put(m->estimate_cache, &c[i], &r[i]);
  }
  double x = (double)(k - 2 * K) / (double)K;
  *out = r[1];
  out->time = along(r[0].time, r[1].time, x);
  out->messages = lround(along((double)r[0].messages, (double)r[1].messages, x));
  out->bytes = along(r[0].bytes, r[1].bytes, x);
  out->cross_node = lround(along((double)r[0].cross_node, (double)r[1].cross_node, x));
  out->skip_jumps = r[0].skip_jumps + r[1].skip_jumps;
  out->skipped_messages = 0; /* of messages replayed, not of the estimate's */
  out->estimated = 1;
  out->estimated_from[0] = c[0].count;
  out->estimated_from[1] = c[1].count;
  return WEFT_SUCCESS;
}
