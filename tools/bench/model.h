/* model.h -- private to weft-bench: the algorithm weft's automatic choice makes under a model. */
#ifndef WEFT_TOOLS_BENCH_MODEL_H_
#define WEFT_TOOLS_BENCH_MODEL_H_

#include "include/weft.h"
#include "tools/bench/tune.h"
#include "tools/bench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What WEFT_ALGO_AUTO runs for `coll` on `nranks` ranks at nccl-tests size `bytes` (shape.h)
 * when the communicator's model is `t`: the library's own choice (algo_choose over the
 * algorithms table), with WEFT_SLICE_BYTES from the environment as a communicator reads it.
 * WEFT_NUM_ALGOS when the collective has no algorithm in this build. */
weft_algo_t bench_model_pick(bench_coll_t coll, const bench_tune_t *t, int nranks, double bytes);

/* The model's predicted seconds for `algo` (negative when there is no such algorithm or it has no
 * cost function). */
double bench_model_cost(bench_coll_t coll, weft_algo_t algo, const bench_tune_t *t, int nranks,
                        double bytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_MODEL_H_ */
