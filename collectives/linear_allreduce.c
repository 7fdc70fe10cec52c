/* linear_allreduce.c -- all-reduce in one step: every rank sends its whole input to every other
 * rank and reduces all p inputs itself, in rank order.
 *
 *   p = 3, rank 1:   x1 --> 0, x1 --> 2        (its sends, posted at once)
 *                    recvbuf = x0               (received from 0)
 *                    recvbuf = recvbuf op x1    (its own input, at its place in the order)
 *                    recvbuf = recvbuf op x2    (received from 2)
 *
 * Every rank folds the same inputs in the same order, ((x0 op x1) op x2) ..., so every rank holds
 * the same bits, as with the ring. A receive waits in its peer's slot until the fold before it is
 * done, so the order costs no copy. In place the input is copied to scratch first: the sends read
 * it while recvbuf, the same memory, takes the fold.
 *
 * One step instead of recursive doubling's log2(p): each rank depends on nobody's partial
 * result, only on every peer's input, so a rank that has sent is done waiting as soon as the
 * last input lands. That counts where a dependent step costs more than a message, as with more
 * ranks than cores (each step then waits for its peer to be scheduled); it moves (p-1) n bytes
 * per rank each way, so it is for small messages only.
 *
 * Cost (a: seconds per message, b: per byte, g: per byte reduced, S the slice, k = ceil(n/S)):
 * the call description first, h = a + 40 b; then p-1 messages of k slices out of the rank's port
 * and as many into it, and p-1 folds. The receives wait in rank order while each peer sends
 * starting at its next rank, so the input a rank folds last can be the one its sender sent last,
 * and the message times add up along the fold as well as along the ports: weft-sim puts the
 * call at up to twice the one-port count at 16 ranks, at 1.0 at 2 ranks. The closed form charges
 * that, 2p - 3 message times:
 *   h + (2p - 3)(k a + n b) + (p - 1) n g
 * and the model's wake (one dependent round, against recursive doubling's log2 p) is what makes it
 * the choice, for small messages on hosts with more ranks than CPUs.
 * Bus bandwidth (nccl-tests) = algbw 2(p-1)/p, as for any all-reduce. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double linear_allreduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma;
  if (p < 2) return 0;
  double k = n > 0 ? ceil(n / m->slice_bytes) : 1;
  return a + 40 * b + (2 * p - 3) * (k * a + n * b) + (p - 1) * n * g;
}

weft_result_t linear_allreduce_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n, n);
  sched_ring_headers(s, rank, p);
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  /* Where this rank's input stays readable while recvbuf takes the fold. */
  sched_buf_t own = SCHED_SENDBUF;
  int own_op = -1;
  if (a->in_place) {
    sched_op_t copy = {
        .kind = SCHED_COPY, .buf = SCHED_SCRATCH, .count = n, .src_buf = SCHED_SENDBUF, .dep = -1};
    if ((own_op = emit(s, copy)) == EMIT_OOM) goto oom;
    own = SCHED_SCRATCH;
  }
  /* Sends first, each to a different next rank, so that no peer is everyone's first. */
  for (int d = 1; d < p; d++) {
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = (rank + d) % p,
                       .buf = own,
                       .count = n,
                       .dep = own_op,
                       .step = 1};
    if (emit(s, send) == EMIT_OOM) goto oom;
  }
  /* The fold, in rank order. Until the first op writes recvbuf, the running result is the
   * input of rank 0 (own, when this is rank 0). */
  sched_buf_t acc = SCHED_RECVBUF;
  int prev = own_op, started = 0;
  for (int q = 0; q < p; q++) {
    int last = q == p - 1;
    sched_op_t op = {.buf = acc, .count = n, .dep = prev, .final = last, .step = 1};
    if (q == rank && !started) {
      if (!last) continue; /* rank 0: its input starts the fold where it is */
    }
    if (q == rank) {
      op.kind = SCHED_REDUCE;
      op.src_buf = own;
    } else if (!started && rank != 0) {
      op.kind = SCHED_RECV_COPY;
      op.peer = q;
    } else {
      op.kind = SCHED_RECV_REDUCE;
      op.peer = q;
      op.src_buf = started ? acc : own;
    }
    if ((prev = emit(s, op)) == EMIT_OOM) goto oom;
    started = 1;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "linear all-reduce: out of memory building the schedule");
}
