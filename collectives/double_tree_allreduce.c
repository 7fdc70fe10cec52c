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
 * For the same reason its steps stay two passes (receive into recvbuf, then send from it), not
 * fused (tree.h): a fused fold waits for its send's stream, and behind a reduction of the other
 * tree on that stream it would wait on itself (two ranks deadlock beyond a link's slots).
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): each tree
 * carries n/2 bytes in k = ceil(n/2S) slices; the first, s1 = min(n/2, S), goes up and back down
 * as in tree_allreduce.c (h = a + 40 b, the call description):
 *   first = tree_reduce_cost(s1) + tree_broadcast_cost(s1) - h
 * The rest follows through the busiest rank: per pair of slices it sends three in its interior
 * tree (one up, two down) and one up its leaf tree, and reduces two (c = min(2, p-1)). A pair of
 * ranks linked in both trees carries one tree's reduction and then the other's broadcast on one
 * stream, so below that link the broadcast starts only once the reduction over it has finished;
 * in weft-sim that costs about one message per pair more on 3 ranks and from 7 ranks on. So
 * w = 2 messages per pair on 2 ranks, 4 on 3..6, 5 from 7 on:
 *   first + max(w ((k-1) a + (n/2 - s1) b), c (n/2 - s1) g)
 * About 2.5 n b for large n (one tree: 3 n b), with the single tree's log-depth latency; weft-sim
 * measures 0.81..1.08 times this over 2..16 ranks. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double double_tree_allreduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes, half = n / 2;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double k = ceil(half / S), s1 = fmin(half, S);
  double first = tree_reduce_cost(m, p, s1) + tree_broadcast_cost(m, p, s1) - (a + 40 * b);
  int w = p == 2 ? 2 : p <= 6 ? 4 : 5, c = p > 2 ? 2 : 1;
  return first + fmax(w * ((k - 1) * a + (half - s1) * b), c * (half - s1) * g);
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
    if (tree_emit_up(s, &t[w], off[w], len[w], SCHED_RECVBUF, 0, &up[w])) goto oom;
  }
  for (int w = 0; w < 2; w++)
    if (tree_emit_down(s, &t[w], off[w], len[w], SCHED_RECVBUF, up[w], up[w], 0)) goto oom;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "double-tree all-reduce: out of memory building the schedule");
}
