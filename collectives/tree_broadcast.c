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
 * Cost (a: seconds per message, b: per byte, S the slice): the call description first,
 * h = a + 40 b. A rank has one port, so it sends each slice to its two children one after the
 * other: a slice reaches the second child two message times after it reached the parent. The
 * deepest leaf hangs below second children all the way down, down = 2d - [p even] messages
 * from the root (d = tree_depth(p); for even p the root has one child). The first slice,
 * s1 = min(n, S) bytes, takes that many messages to get there; the rest of the buffer follows
 * through the busiest ports, which send everything w = min(2, p-1) times:
 *   h + down (a + s1 b) + w ((k-1) a + (n - s1) b),   k = ceil(n/S)
 * That is h + down (a + n b) for n <= S (log-depth latency where the chain has p-1) and tends
 * to 2 n b for large n (the chain's n b). Bus bandwidth (nccl-tests) = algbw. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/tree.h"
#include "common/error.h"

double tree_broadcast_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double k = ceil(n / S), s1 = fmin(n, S);
  int down = 2 * tree_depth(p) - (p % 2 == 0), w = p > 2 ? 2 : 1;
  return a + 40 * b + down * (a + s1 * b) + w * ((k - 1) * a + (n - s1) * b);
}

weft_result_t tree_broadcast_build(schedule_t *s, const sched_args_t *a) {
  sched_init(s, a->count, a->count);
  sched_ring_headers(s, a->rank, a->nranks);
  tree_node_t t;
  tree_single(a->nranks, a->root, a->rank, &t);
  /* The root forwards from sendbuf, so its own copy runs beside the sends. */
  if (t.parent < 0 && emit_own_copy(s, a->in_place, 0, 0, a->count) == EMIT_OOM) goto oom;
  if (tree_emit_down(s, &t, 0, a->count, SCHED_SENDBUF, -1, -1, 1)) goto oom;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tree broadcast: out of memory building the schedule");
}
