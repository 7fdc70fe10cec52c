/* tree_broadcast.c -- pipelined binary-tree broadcast from any root.
 *
 * The tree is tree_single() rooted at `root`. Every rank but the root receives the buffer from
 * its parent into recvbuf and forwards each slice to its (at most two) children as soon as it
 * has arrived, so all levels carry data at once:
 *
 *   root  [s0][s1][s2] -> 2 children
 *   d=1        [s0][s1][s2] -> 2 children each
 *   d=2             [s0][s1][s2]
 *
 * Cost with depth d ~ log2(p), k = ceil(n / slice) slices of s = n/k bytes, every stage sending
 * a slice to two children: (d + k - 1)(alpha + 2 s beta), which tends to 2 n beta for large n
 * and to d (alpha + 2 n beta) for small n: log-depth latency where the chain has p-1. Bus
 * bandwidth (nccl-tests) = algbw. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double tree_broadcast_cost(const cost_model_t *m, int p, double n) {
  if (p < 2 || n <= 0) return 0;
  double k = ceil(n / m->slice_bytes);
  return (tree_depth(p) + k - 1) * (m->alpha + 2 * n / k * m->beta);
}

weft_result_t tree_broadcast_build(schedule_t *s, const sched_args_t *a) {
  sched_init(s, a->count, a->count);
  sched_ring_headers(s, a->rank, a->nranks);
  tree_node_t t;
  tree_single(a->nranks, a->root, a->rank, &t);
  /* The root forwards from sendbuf, so its own copy runs beside the sends. */
  if (t.parent < 0 && emit_own_copy(s, a->in_place, 0, 0, a->count) == EMIT_OOM) goto oom;
  if (tree_emit_down(s, &t, 0, a->count, SCHED_SENDBUF, -1, -1)) goto oom;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tree broadcast: out of memory building the schedule");
}
