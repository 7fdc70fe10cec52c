/* algo_select.h -- internal: which algorithm runs a call: the call's own choice, else WEFT_ALGO,
 * else the hierarchical all-reduce where the topology calls for it (WEFT_HIERARCHY), else the
 * cheapest under the communicator's cost model. */
#ifndef WEFT_COLLECTIVES_ALGO_SELECT_H_
#define WEFT_COLLECTIVES_ALGO_SELECT_H_

#include "collectives/algorithms.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What WEFT_ALGO forces, per collective (WEFT_ALGO_AUTO: nothing forced). */
typedef struct {
  weft_algo_t forced[WEFT_NUM_COLLS];
} algo_policy_t;

/* What the choice knows of the machine: every rank's host (as sched_args_t has it; NULL / 0:
 * unknown, one host) and WEFT_HIERARCHY (-1: by the topology, 0: never, 1: always). */
typedef struct {
  const int *node_of;
  int nnodes;
  int hierarchy;
} algo_topo_t;

/* 1 when an automatic all_reduce runs hierarchically: hierarchy 1, or hierarchy -1 with ranks on
 * more than one host and some host holding more than one rank (then a flat ring crosses hosts at
 * least twice and sends all of its 2(p-1)/p n per rank over them, where the hierarchy sends 1/L of
 * that per rank in 2(H-1) inter-host steps; with one rank per host it would be the ring itself).
 * `t` NULL: 0. */
int algo_topo_prefers_hierarchy(const algo_topo_t *t, int nranks);

/* Parses "auto", a bare name ("ring": every collective that has it), or a list
 * "all_reduce=tree,broadcast=ring". Errors name the bad part and list what exists. */
weft_result_t algo_policy_parse(const char *spec, algo_policy_t *out);

/* The table entry to run: per_call if not AUTO, else the policy's, else for all_reduce the
 * hierarchical one where algo_topo_prefers_hierarchy says so, else the cheapest by `m` for
 * `bytes` among the rest (ties: table order; the hierarchical row is left out of this: its cost
 * function cannot see the topology). A forced algorithm the collective lacks is an error that
 * lists the ones it has. Every rank must choose alike, so `m` and `topo` (NULL: unknown) must be
 * the same on every rank. */
weft_result_t algo_choose(weft_coll_t coll, weft_algo_t per_call, const algo_policy_t *policy,
                          const cost_model_t *m, int nranks, double bytes, const algo_topo_t *topo,
                          const algo_entry_t **out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_ALGO_SELECT_H_ */
