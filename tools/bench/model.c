/* model.c -- asks weft's algorithm table which algorithm the cost model would pick.
 *
 * This is the one weft-bench file that reaches into the library's internals
 * (collectives/algo_select.h), as weft-sim does: the pick must be the library's own, not a copy
 * of its cost formulas that could drift from them. */
#include "tools/bench/model.h"

#include <string.h>

#include "collectives/algo_select.h"
#include "common/config.h"

static cost_model_t model_of(const bench_tune_t *t) {
  cost_model_t m;
  weft_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.slice_bytes = 65536; /* config.c's default, should the environment hold a bad value */
  (void)config_load(&cfg, NULL, NULL);
  m.alpha = t->alpha;
  m.beta = t->beta;
  m.gamma = t->gamma;
  m.slice_bytes = (double)cfg.slice_bytes;
  return m;
}

weft_algo_t bench_model_pick(bench_coll_t coll, const bench_tune_t *t, int nranks, double bytes) {
  weft_coll_t c = bench_coll_weft(coll);
  if (c == WEFT_NUM_COLLS) return WEFT_NUM_ALGOS;
  algo_policy_t policy;
  for (int i = 0; i < WEFT_NUM_COLLS; i++) policy.forced[i] = WEFT_ALGO_AUTO;
  cost_model_t m = model_of(t);
  const algo_entry_t *e = NULL;
  if (algo_choose(c, WEFT_ALGO_AUTO, &policy, &m, nranks, bytes, NULL, &e) != WEFT_SUCCESS || !e) {
    return WEFT_NUM_ALGOS;
  }
  return e->algo;
}

double bench_model_cost(bench_coll_t coll, weft_algo_t algo, const bench_tune_t *t, int nranks,
                        double bytes) {
  weft_coll_t c = bench_coll_weft(coll);
  const algo_entry_t *e = c == WEFT_NUM_COLLS ? NULL : algo_lookup(c, algo);
  if (!e || !e->cost) return -1.0;
  cost_model_t m = model_of(t);
  return e->cost(&m, nranks, bytes);
}
