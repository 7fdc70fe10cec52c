/* linear_gather.c -- gather to any root, every rank sending its block straight to the root.
 *
 * The root posts one receive per rank, each straight into that rank's place in recvbuf, and
 * copies its own block unless the call is in place:
 *
 *   rank 1 --[b1]--\
 *   rank 2 --[b2]---> root: recvbuf = [b0][b1][b2][b3]
 *   rank 3 --[b3]--/
 *
 * One step: the best choice for large blocks or few ranks, where the tree's forwarding of
 * whole subtrees only adds copies and waits.
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n the gathered bytes, c = n/p): the
 * call description first, h = a + 40 b; then the root's one port takes the p-1 blocks, each
 * in ceil(c/S) messages:
 *   h + (p-1)(ceil(c/S) a + c b)
 * Bus bandwidth (nccl-tests) = algbw (p-1)/p. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double linear_gather_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double c = n / p;
  return m->alpha + 40 * m->beta + (p - 1) * (ceil(c / m->slice_bytes) * m->alpha + c * m->beta);
}

weft_result_t linear_gather_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks, root = a->root;
  size_t n = a->count;
  sched_init(s, n, rank == root ? n * (size_t)p : 0);
  sched_ring_headers(s, rank, p);
  if (rank != root) {
    sched_op_t op = {.kind = SCHED_SEND, .peer = root, .buf = SCHED_SENDBUF, .count = n, .dep = -1};
    return emit(s, op) == EMIT_OOM ? WEFT_ERR(WEFT_ERR_NO_MEMORY,
                                              "linear gather: out of memory building the schedule")
                                   : WEFT_SUCCESS;
  }
  if (emit_own_copy(s, a->in_place, (size_t)root * n, 0, n) == EMIT_OOM) goto oom;
  /* In rank order after the root: the ranks right after it are the first a rank-ordered
   * launch brings up. */
  for (int i = 1; i < p; i++) {
    int peer = (root + i) % p;
    sched_op_t op = {.kind = SCHED_RECV_COPY,
                     .peer = peer,
                     .buf = SCHED_RECVBUF,
                     .offset = (size_t)peer * n,
                     .count = n,
                     .dep = -1,
                     .step = 1};
    if (emit(s, op) == EMIT_OOM) goto oom;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "linear gather: out of memory building the schedule");
}
