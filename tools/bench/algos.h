/* algos.h -- private to weft-bench: -A resolved against the algorithms this build of weft has. */
#ifndef WEFT_TOOLS_BENCH_ALGOS_H_
#define WEFT_TOOLS_BENCH_ALGOS_H_

#include <stddef.h>

#include "include/weft.h"
#include "tools/bench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `coll` runs with `algo` in this build (weft_algo_supported; sendrecv needs it for both
 * send and recv). WEFT_ALGO_AUTO: always. */
int bench_algo_supported(bench_coll_t coll, weft_algo_t algo);

/* The algorithms -A `name` selects for `coll`, into out[0 .. cap): "all" gives every algorithm
 * the collective has (auto left out), in weft_algo_t order; any other name gives that one.
 * Returns how many (>= 1), or -1 with a one-line message in `err`: an unknown name (listing the
 * known ones), an algorithm the collective lacks, or "all" for a collective with none (listing
 * what it has). */
int bench_algos_resolve(bench_coll_t coll, const char *name, weft_algo_t *out, int cap, char *err,
                        size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_ALGOS_H_ */
