/* chain_broadcast.c -- pipelined chain broadcast from any root.
 *
 * Ranks form a chain starting at the root: root -> root+1 -> ... -> root-1. Every rank but the
 * root receives the buffer from its predecessor straight into recvbuf, and every rank but the
 * last forwards each slice as soon as it has arrived, so all links carry data at once:
 *
 *   root  [s0][s1][s2] ->
 *   r+1        [s0][s1][s2] ->
 *   r+2             [s0][s1][s2]
 *
 * Ranks in the middle keep and forward each slice in one read of the peer's slot where it
 * lands in place (recv-copy-send, schedule.h). A chain has no cycle, so no rounds are needed.
 *
 * Cost (a: seconds per message, b: per byte, S the slice): the call description first,
 * h = a + 40 b; then the first slice, s1 = min(n, S) bytes, crosses p-2 links, and the last link
 * carries all k = ceil(n/S) slices:
 *   h + (p-2)(a + s1 b) + k a + n b
 * With k equal slices that is h + (p-1+k-1)(a + n/k b), which tends to n b for large n.
 * Bus bandwidth (nccl-tests) = algbw. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double chain_broadcast_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  return a + 40 * b + (p - 2) * (a + fmin(n, S) * b) + ceil(n / S) * a + n * b;
}

weft_result_t chain_broadcast_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, nranks = a->nranks, root = a->root;
  size_t count = a->count;
  sched_init(s, count, count);
  sched_ring_headers(s, rank, nranks);
  int pos = (rank - root + nranks) % nranks;
  /* The root forwards from sendbuf, so its own copy runs beside the send. */
  if (pos == 0 && emit_own_copy(s, a->in_place, 0, 0, count) == EMIT_OOM) goto oom;
  if (count == 0 || nranks == 1) return WEFT_SUCCESS;
  int recv = -1;
  if (pos > 0) {
    /* Ranks in the middle forward and keep each slice in one read of it (schedule.h). */
    sched_op_t op = {.kind = pos < nranks - 1 ? SCHED_RECV_COPY_SEND : SCHED_RECV_COPY,
                     .peer = (rank - 1 + nranks) % nranks,
                     .buf = SCHED_RECVBUF,
                     .count = count,
                     .dep = -1};
    if ((recv = sched_add(s, &op)) < 0) goto oom;
  }
  if (pos < nranks - 1) {
    /* The root reads the caller's input; the others forward what they received. */
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = (rank + 1) % nranks,
                     .buf = pos == 0 ? SCHED_SENDBUF : SCHED_RECVBUF,
                     .count = count,
                     .dep = recv,
                     .step = 1};
    int sent = sched_add(s, &op);
    if (sent < 0) goto oom;
    emit_link(s, recv, sent);
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "chain broadcast: out of memory building the schedule");
}
