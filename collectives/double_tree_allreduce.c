/* double_tree_allreduce.c -- all-reduce over two complementary binary trees (Sanders, Speck &
 * Traeff 2009; NCCL's double binary tree), each carrying half of the buffer.
 *
 * Tree 0 reduces and broadcasts the first half, tree 1 the second, both pipelined and at once
 * (tree_allreduce.c per tree). tree_double() labels them so that every rank is interior in at
 * most one: a rank forwards to two children only for its half, and is a leaf for the other.
 *
 *   p = 8     tree 0 (first half)        tree 1 (second half)
 *             0 - 4                      7 - 3
 *                / \                        / \
 *               2   6                      5   1
 *              / \ / \                    / \ / \
 *             1  3 5  7                  6  4 2  0
 *
 * Ops to one peer in one direction travel in order. A pair of ranks can be linked in both trees,
 * and then one link carries an up op of one tree and a down op of the other (never two ups: that
 * would make the parent interior in both). So every rank lists all its up ops before all its down
 * ops: both reductions run side by side, and no broadcast slice waits behind a reduction.
 *
 * Cost with depth d, k = ceil(n / 2 slice) slices of s = n/2k bytes per tree; per stage the
 * busiest rank sends one slice up in each tree and two down in its interior one, and folds two:
 * (2d + k - 1)(alpha + 4 s beta + 2 s gamma), about 2 n beta + n gamma for large n (one tree:
 * 3 n beta + 2 n gamma) with the tree's 2d alpha latency. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double double_tree_allreduce_cost(const cost_model_t *m, int p, double n) {
  if (p < 2 || n <= 0) return 0;
  double k = ceil(n / 2 / m->slice_bytes), sl = n / 2 / k;
  return (2 * tree_depth(p) + k - 1) * (m->alpha + 4 * sl * m->beta + 2 * sl * m->gamma);
}

weft_result_t double_tree_allreduce_build(schedule_t *s, const sched_args_t *a) {
  size_t count = a->count;
  sched_init(s, count, count);
  sched_ring_headers(s, a->rank, a->nranks);
  if (a->nranks == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, count) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  size_t off[2] = {0, count - count / 2}, len[2] = {count - count / 2, count / 2};
  tree_node_t t[2];
  int up[2];
  for (int w = 0; w < 2; w++) {
    tree_double(a->nranks, w, a->rank, &t[w]);
    if (tree_emit_up(s, &t[w], off[w], len[w], SCHED_RECVBUF, &up[w])) goto oom;
  }
  for (int w = 0; w < 2; w++)
    if (tree_emit_down(s, &t[w], off[w], len[w], SCHED_RECVBUF, up[w], up[w])) goto oom;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "double-tree all-reduce: out of memory building the schedule");
}
