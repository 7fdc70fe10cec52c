/* tree_reduce.c -- pipelined binary-tree reduce to any root.
 *
 * The tree is tree_single() rooted at `root`. A leaf sends its sendbuf to its parent; an
 * interior rank folds its children's partial results into its own contribution as the slices
 * arrive (in scratch: recvbuf is the root's alone) and forwards each reduced slice at once; the
 * root folds into recvbuf, its last fold finalizing (WEFT_AVG divides there):
 *
 *   leaves     [s0][s1][s2] -> parent
 *   d-1             [s0+..][s1+..][s2+..] -> parent
 *   root                 [s0][s1][s2] = reduction
 *
 * Cost with depth d, k = ceil(n / slice) slices of s = n/k bytes, every stage receiving and
 * folding a slice from two children: (d + k - 1)(alpha + 2 s (beta + gamma)). */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double tree_reduce_cost(const cost_model_t *m, int p, double n) {
  if (p < 2 || n <= 0) return 0;
  double k = ceil(n / m->slice_bytes);
  return (tree_depth(p) + k - 1) * (m->alpha + 2 * n / k * (m->beta + m->gamma));
}

weft_result_t tree_reduce_build(schedule_t *s, const sched_args_t *a) {
  int is_root = a->rank == a->root;
  sched_init(s, a->count, is_root ? a->count : 0);
  sched_ring_headers(s, a->rank, a->nranks);
  tree_node_t t;
  tree_single(a->nranks, a->root, a->rank, &t);
  int ready;
  if (a->nranks == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, a->count) == EMIT_OOM) goto oom;
  } else if (tree_emit_up(s, &t, 0, a->count, is_root ? SCHED_RECVBUF : SCHED_SCRATCH, &ready)) {
    goto oom;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tree reduce: out of memory building the schedule");
}
