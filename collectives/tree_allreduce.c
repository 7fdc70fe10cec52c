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
 * Cost with depth d, k = ceil(n / slice) slices of s = n/k bytes; per stage the busiest rank
 * sends one slice up and two down and folds two: (2d + k - 1)(alpha + 3 s beta + 2 s gamma).
 * Latency 2d alpha where the ring has 2(p-1); bandwidth 3 n beta where the ring has
 * 2(p-1)/p n beta, which the double tree brings down to 2 n beta. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double tree_allreduce_cost(const cost_model_t *m, int p, double n) {
  if (p < 2 || n <= 0) return 0;
  double k = ceil(n / m->slice_bytes), sl = n / k;
  return (2 * tree_depth(p) + k - 1) * (m->alpha + 3 * sl * m->beta + 2 * sl * m->gamma);
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
  if (tree_emit_up(s, &t, 0, a->count, SCHED_RECVBUF, &up)) goto oom;
  if (tree_emit_down(s, &t, 0, a->count, SCHED_RECVBUF, up, up)) goto oom;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tree all-reduce: out of memory building the schedule");
}
