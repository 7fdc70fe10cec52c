/* tree_allreduce.c -- all-reduce as a pipelined binary-tree reduce to rank 0's tree root
 * followed by a pipelined broadcast back down the same tree, both running at once.
 *
 * Every rank folds its children's partial results into recvbuf and sends the slice up; the
 * root's last fold finalizes a slice and sends it straight back down, so slice j travels down
 * while slice j+1 is still being reduced:
 *
 *   up:    leaves -> ... -> root   (fold into recvbuf, forward each slice when reduced)
 *   down:  root -> ... -> leaves   (recvbuf, forward each slice when it arrived)
 *
 * A rank's partial result lives in recvbuf until the final value comes back into the same
 * place, so the receive from the parent waits, slice by slice, for the send to the parent
 * (in place, a leaf's sendbuf is that memory too).
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): the first
 * slice, s1 = min(n, S) bytes, goes up as in tree_reduce.c and comes back down as in
 * tree_broadcast.c, one call description (h = a + 40 b) for both:
 *   first = tree_reduce_cost(s1) + tree_broadcast_cost(s1) - h
 *         = h + up (a + s1 (b + g)) + down (a + s1 b)
 * The rest of the buffer follows through the busiest rank, which sends one slice up and two down
 * (w = 3 messages; 2 on 3 ranks, 1 on 2) and reduces two (c = min(2, p-1)):
 *   first + max(w ((k-1) a + (n - s1) b), c (n - s1) g),   k = ceil(n/S)
 * Latency 2 log2 p messages where the ring has 2(p-1); bandwidth 3 n b where the ring has
 * 2(p-1)/p n b, which the double tree brings down to 2.5 n b. Past one slice the pipeline can take
 * a few messages more to fill, as in tree_reduce.c: up to +20% at 16 slices in weft-sim. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double tree_allreduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double k = ceil(n / S), s1 = fmin(n, S);
  double first = tree_reduce_cost(m, p, s1) + tree_broadcast_cost(m, p, s1) - (a + 40 * b);
  int w = p > 3 ? 3 : p - 1, c = p > 2 ? 2 : 1;
  return first + fmax(w * ((k - 1) * a + (n - s1) * b), c * (n - s1) * g);
}

weft_result_t tree_allreduce_build(schedule_t *s, const sched_args_t *a) {
  sched_init(s, a->count, a->count);
  sched_ring_headers(s, a->rank, a->nranks);
  if (a->nranks == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, a->count) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  tree_node_t t;
  tree_single(a->nranks, 0, a->rank, &t);
  int up;
  if (tree_emit_up(s, &t, 0, a->count, SCHED_RECVBUF, 1, &up)) goto oom;
  if (tree_emit_down(s, &t, 0, a->count, SCHED_RECVBUF, up, up, 1)) goto oom;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tree all-reduce: out of memory building the schedule");
}
