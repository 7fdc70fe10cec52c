/* algo_select.c -- WEFT_ALGO parsing and the cost-model choice. */
#include "collectives/algo_select.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

static weft_coll_t coll_from_name(const char *name) {
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    if (strcmp(name, weft_coll_name((weft_coll_t)c)) == 0) return (weft_coll_t)c;
  return WEFT_NUM_COLLS;
}

static weft_result_t unsupported(weft_coll_t coll, weft_algo_t algo, const char *where) {
  char have[256];
  algo_list_names(coll, have, sizeof have);
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: %s has no '%s' algorithm (it has: %s)", where,
                  weft_coll_name(coll), weft_algo_name(algo), have);
}

static weft_result_t parse_item(const char *item, algo_policy_t *out) {
  const char *eq = strchr(item, '=');
  char coll_name[64] = "";
  const char *algo_name = item;
  if (eq) {
    size_t n = (size_t)(eq - item);
    if (n >= sizeof coll_name) n = sizeof coll_name - 1;
    memcpy(coll_name, item, n);
    coll_name[n] = '\0';
    algo_name = eq + 1;
  }
  weft_algo_t algo = weft_algo_from_name(algo_name);
  if (algo == WEFT_NUM_ALGOS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "WEFT_ALGO: unknown algorithm '%s' (known: auto, ring, tree, double_tree, "
                    "recursive_doubling, rabenseifner, dissemination, hierarchical, linear, pairwise, "
                    "bruck)",
                    algo_name);
  if (!eq) {
    /* A bare name applies wherever it exists; collectives without it stay automatic. */
    for (int c = 0; c < WEFT_NUM_COLLS; c++)
      if (algo == WEFT_ALGO_AUTO || algo_lookup((weft_coll_t)c, algo)) out->forced[c] = algo;
    return WEFT_SUCCESS;
  }
  weft_coll_t coll = coll_from_name(coll_name);
  if (coll == WEFT_NUM_COLLS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "WEFT_ALGO: unknown collective '%s' (known: all_reduce, broadcast, reduce, "
                    "all_gather, reduce_scatter, barrier, gather, scatter, all_to_all, "
                    "all_to_allv)",
                    coll_name);
  if (algo != WEFT_ALGO_AUTO && !algo_lookup(coll, algo))
    return unsupported(coll, algo, "WEFT_ALGO");
  out->forced[coll] = algo;
  return WEFT_SUCCESS;
}

weft_result_t algo_policy_parse(const char *spec, algo_policy_t *out) {
  for (int c = 0; c < WEFT_NUM_COLLS; c++) out->forced[c] = WEFT_ALGO_AUTO;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec ? spec : "");
  char *save = NULL;
  for (char *item = strtok_r(buf, ", ", &save); item; item = strtok_r(NULL, ", ", &save))
    WEFT_CHECK(parse_item(item, out));
  return WEFT_SUCCESS;
}

int algo_topo_prefers_hierarchy(const algo_topo_t *t, int nranks) {
  if (!t || t->hierarchy == 0) return 0;
  if (t->hierarchy > 0) return 1;
  /* Nodes are numbered by first appearance, so all nnodes hold ranks, and with fewer nodes than
   * ranks one holds two or more. */
  return t->node_of && t->nnodes > 1 && t->nnodes < nranks;
}

weft_result_t algo_choose(weft_coll_t coll, weft_algo_t per_call, const algo_policy_t *policy,
                          const cost_model_t *m, int nranks, double bytes, const algo_topo_t *topo,
                          const algo_entry_t **out) {
  weft_algo_t want = per_call != WEFT_ALGO_AUTO ? per_call : policy->forced[coll];
  if (want != WEFT_ALGO_AUTO) {
    *out = algo_lookup(coll, want);
    if (!*out)
      return unsupported(coll, want, per_call != WEFT_ALGO_AUTO ? "this call" : "WEFT_ALGO");
    return WEFT_SUCCESS;
  }
  const algo_entry_t *best = NULL;
  double best_cost = 0;
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t *e = algo_at(i);
    if (e->coll != coll || e->algo == WEFT_ALGO_HIERARCHICAL) continue;
    double cost = algo_predicted(e, m, nranks, bytes);
    if (!best || cost < best_cost) {
      best = e;
      best_cost = cost;
    }
  }
  if (!best) return WEFT_ERR(WEFT_ERR_INTERNAL, "no algorithm for %s", weft_coll_name(coll));
  *out = best;
  /* Across hosts the hierarchy replaces the bandwidth algorithms; a latency-bound message (for
   * which the model picked recursive doubling or a tree) keeps its few steps, unless
   * WEFT_HIERARCHY=1 forces the hierarchy. */
  int bandwidth_pick = best->algo == WEFT_ALGO_RING || best->algo == WEFT_ALGO_RABENSEIFNER ||
                       best->algo == WEFT_ALGO_DOUBLE_TREE;
  const algo_entry_t *hier = algo_lookup(coll, WEFT_ALGO_HIERARCHICAL);
  if (hier && algo_topo_prefers_hierarchy(topo, nranks) &&
      (bandwidth_pick || (topo && topo->hierarchy == 1)))
    *out = hier;
  return WEFT_SUCCESS;
}
