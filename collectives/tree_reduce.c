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
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): the call
 * description first, h = a + 40 b. A rank has one incoming port, so it takes its children's
 * slices one after the other: a level costs the first slice, s1 = min(n, S) bytes, two messages
 * where both subtrees deliver at once and one where one delivers earlier. Over tree.c's shapes
 * that sums to
 *   up = 2j - 2 + [2x >= 3 * 2^j] + [p even]
 * messages (x: p rounded up to even, j = floor(log2 x); the last term is the single child of an
 * even p's root), each sent, then reduced. The rest of the buffer follows through the busiest
 * rank, which receives and reduces everything w = min(2, p-1) times:
 *   h + up (a + s1 (b + g)) + w max((k-1) a + (n - s1) b, (n - s1) g),   k = ceil(n/S)
 * For large n, 2 max(n b, n g) plus the alphas: the reductions overlap the transfers. Past one
 * slice the pipeline can take a few messages more to fill (a rank takes up to a window of its
 * first child's slices before its second child's first): up to +20% at 4 slices in weft-sim. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double tree_reduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double k = ceil(n / S), s1 = fmin(n, S);
  int x = p + p % 2, j = 0, w = p > 2 ? 2 : 1;
  while ((2 << j) <= x) j++;
  int up = 2 * j - 2 + (2 * x >= (3 << j)) + (p % 2 == 0);
  return a + 40 * b + up * (a + s1 * (b + g)) + w * fmax((k - 1) * a + (n - s1) * b, (n - s1) * g);
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
  } else if (tree_emit_up(s, &t, 0, a->count, is_root ? SCHED_RECVBUF : SCHED_SCRATCH, 1, &ready)) {
    goto oom;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tree reduce: out of memory building the schedule");
}
