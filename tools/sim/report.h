/* report.h -- private to weft-sim: sizes, bandwidths and the table it prints, as nccl-tests. */
#ifndef WEFT_TOOLS_SIM_REPORT_H_
#define WEFT_TOOLS_SIM_REPORT_H_

#include <stddef.h>

#include "collectives/algorithms.h"
#include "include/weft.h"
#include "tools/sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nccl-tests' busbw / algbw (PERFORMANCE.md): all_reduce 2(p-1)/p, all_gather, reduce_scatter,
 * gather, scatter and all_to_all (p-1)/p, broadcast, reduce, send and recv 1; barrier moves no data: 0. */
double simrep_bus_factor(weft_coll_t coll, int nranks);

/* One row's shape: `bytes` (nccl-tests' size) rounded down to what the collective can move,
 * the count nccl-tests prints (elements of the whole buffer), and the count a schedule builder
 * takes (per rank for all_gather, reduce_scatter, gather and scatter, per peer for all_to_all, as
 * weft.h). */
typedef struct {
  size_t bytes, count, sched_count;
} simrep_shape_t;

simrep_shape_t simrep_shape(weft_coll_t coll, int nranks, size_t esize, size_t bytes);

/* Walks -b..-e as nccl-tests: times stepfactor when > 1, else plus stepbytes; a size that rounds
 * to the previous row's, or to 0 from above 0, is skipped. Returns 1 with *shape, 0 at the end. */
typedef struct {
  size_t next, maxbytes, stepfactor, stepbytes;
  size_t last;
  int have, done;
} simrep_sizes_t;

void simrep_sizes_begin(simrep_sizes_t *it, size_t minbytes, size_t maxbytes, size_t stepfactor,
                        size_t stepbytes);
int simrep_sizes_next(simrep_sizes_t *it, weft_coll_t coll, int nranks, size_t esize,
                      simrep_shape_t *shape);

/* The table's cost model for an entry's closed form: the intra-node values on one node, the
 * inter-node ones (the slower links a ring must cross) on several. */
cost_model_t simrep_cost_model(const sim_model_t *m, int nranks);

/* Lines of the table, written like snprintf (whole lines ending in '\n'). */
int simrep_header(char *buf, size_t len);
/* model_s < 0 prints N/A for the closed form and the ratio (rows without a cost function). */
int simrep_row(char *buf, size_t len, const simrep_shape_t *sh, weft_dtype_t dtype,
               weft_algo_t algo, weft_coll_t coll, int nranks, double time_s, double model_s);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_SIM_REPORT_H_ */
