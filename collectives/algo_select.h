/* algo_select.h -- internal: which algorithm runs a call: the call's own choice, else WEFT_ALGO,
 * else the cheapest under the communicator's cost model. */
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

/* Parses "auto", a bare name ("ring": every collective that has it), or a list
 * "all_reduce=tree,broadcast=ring". Errors name the bad part and list what exists. */
weft_result_t algo_policy_parse(const char *spec, algo_policy_t *out);

/* The table entry to run: per_call if not AUTO, else the policy's, else the cheapest by `m` for
 * `bytes` (ties: table order). A forced algorithm the collective lacks is an error that lists the
 * ones it has. Every rank must choose alike, so `m` must be the same on every rank. */
weft_result_t algo_choose(weft_coll_t coll, weft_algo_t per_call, const algo_policy_t *policy,
                          const cost_model_t *m, int nranks, double bytes,
                          const algo_entry_t **out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_ALGO_SELECT_H_ */
