/* linear_scatter.c -- scatter from any root, the root sending every rank its block directly.
 *
 * The root sends block r of its sendbuf to rank r, straight from sendbuf, and copies its own
 * block into recvbuf unless the call is in place; every other rank receives straight into
 * recvbuf:
 *
 *                          /--[b1]--> rank 1
 *   root: [b0][b1][b2][b3] ---[b2]--> rank 2
 *                          \--[b3]--> rank 3
 *
 * One step: the best choice for large blocks or few ranks.
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n the root's sendbuf in bytes,
 * c = n/p): the call description first, h = a + 40 b; then the root's one port sends the p-1
 * blocks, each in ceil(c/S) messages:
 *   h + (p-1)(ceil(c/S) a + c b)
 * Bus bandwidth (nccl-tests) = algbw (p-1)/p. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double linear_scatter_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double c = n / p;
  return m->alpha + 40 * m->beta + (p - 1) * (ceil(c / m->slice_bytes) * m->alpha + c * m->beta);
}

weft_result_t linear_scatter_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks, root = a->root;
  size_t n = a->count;
  sched_init(s, rank == root ? n * (size_t)p : 0, n);
  sched_ring_headers(s, rank, p);
  if (rank != root) {
    sched_op_t op = {
        .kind = SCHED_RECV_COPY, .peer = root, .buf = SCHED_RECVBUF, .count = n, .dep = -1};
    return emit(s, op) == EMIT_OOM ? WEFT_ERR(WEFT_ERR_NO_MEMORY,
                                              "linear scatter: out of memory building the schedule")
                                   : WEFT_SUCCESS;
  }
  if (emit_own_copy(s, a->in_place, 0, (size_t)root * n, n) == EMIT_OOM) goto oom;
  for (int i = 1; i < p; i++) {
    int peer = (root + i) % p;
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = peer,
                     .buf = SCHED_SENDBUF,
                     .offset = (size_t)peer * n,
                     .count = n,
                     .dep = -1,
                     .step = 1};
    if (emit(s, op) == EMIT_OOM) goto oom;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "linear scatter: out of memory building the schedule");
}
