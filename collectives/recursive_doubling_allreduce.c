/* recursive_doubling_allreduce.c -- all-reduce in log2(p) exchanges of the whole buffer: the
 * latency-optimal choice for small messages.
 *
 * In step k rank v swaps its partial result with v xor 2^k and folds the two; after log2(p)
 * steps every rank holds the full reduction. Other world sizes are folded onto the largest power
 * of two p' (fold.h): one extra step in, one out.
 *
 *   p = 4    step 0: 0<->1  2<->3    step 1: 0<->2  1<->3    (each: send, receive, fold)
 *   p = 5    fold in: 0 -> 1;  the steps above over 1 2 3 4;  fold out: 1 -> 0
 *
 * Each step folds into fresh memory (scratch, the last step into recvbuf) instead of into the
 * partial it sends: a receive that overwrote what its step's send reads would have to wait for
 * that send, which may only complete once the partner has received, whose receive waits for its
 * own send in turn -- a cycle whenever a link buffers less than a slice. So receives wait only on
 * the previous step's fold, at the price of (log2 p') n elements of scratch (in place, the input
 * is copied to scratch first, since recvbuf gets the result while step 0 still sends it).
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): the call
 * description first, h = a + 40 b. A rank folds e = log2 p' exchanges of the whole buffer (one
 * more, the fold-in, when p is not a power of two), each n bytes in k = ceil(n/S) slices, the
 * first s1 = min(n, S), the last r. A slice of one step goes out as soon as the step before has
 * folded it, so the steps overlap; whichever of port, dependency chain and CPU binds:
 *   h + max(e (k a + n b) + r g,                       the port never idles
 *           e (a + s1 (b + g)) + [k > 1] r g,           each step waits for its first slice
 *           a + s1 b + e n g)                           the CPU never idles
 * plus a + r b for the folded-out rank's result. Unsliced that is h + e (a + n (b + g)), plus
 * a + n b when p is not a power of two: the textbook cost; sliced, the reductions overlap the
 * transfers. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "common/error.h"

double recursive_doubling_allreduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  int q = fold_pow2(p), e = fold_log2(q) + (q != p);
  double k = ceil(n / S), s1 = fmin(n, S), r = n - (k - 1) * S;
  double port = e * (k * a + n * b) + r * g;
  double chain = e * (a + s1 * (b + g)) + (k > 1 ? r * g : 0);
  double cpu = a + s1 * b + e * n * g;
  return a + 40 * b + fmax(port, fmax(chain, cpu)) + (q != p ? a + r * b : 0);
}

weft_result_t recursive_doubling_allreduce_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n, n);
  sched_ring_headers(s, rank, p);
  int q = fold_pow2(p), rem = p - q, steps = fold_log2(q), v = fold_vrank(rank, rem);
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  if (v < 0) { /* folded out: hand the input over, get the result back */
    sched_op_t send = {
        .kind = SCHED_SEND, .peer = rank + 1, .buf = SCHED_SENDBUF, .count = n, .dep = -1};
    int i = emit(s, send);
    /* In place, the result overwrites the input that the send reads. */
    sched_op_t recv = {.kind = SCHED_RECV_COPY,
                       .peer = rank + 1,
                       .buf = SCHED_RECVBUF,
                       .count = n,
                       .dep = i,
                       .step = steps + 1};
    if (i == EMIT_OOM || emit(s, recv) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  int folded = rank < 2 * rem;
  /* Step k's partial X_k goes to scratch slot k; slot 0 only exists when X_0 is not sendbuf. */
  int base = folded || a->in_place ? 0 : 1;
  sched_buf_t x_buf = SCHED_SENDBUF;
  size_t x_off = 0;
  int x_op = -1;
  if (folded) {
    sched_op_t op = {.kind = SCHED_RECV_REDUCE,
                     .peer = rank - 1,
                     .buf = SCHED_SCRATCH,
                     .count = n,
                     .src_buf = SCHED_SENDBUF,
                     .dep = -1};
    x_buf = SCHED_SCRATCH;
    if ((x_op = emit(s, op)) == EMIT_OOM) goto oom;
  } else if (a->in_place) {
    sched_op_t op = {
        .kind = SCHED_COPY, .buf = SCHED_SCRATCH, .count = n, .src_buf = SCHED_SENDBUF, .dep = -1};
    x_buf = SCHED_SCRATCH;
    if ((x_op = emit(s, op)) == EMIT_OOM) goto oom;
  }
  for (int k = 0; k < steps; k++) {
    int peer = fold_real(v ^ (1 << k), rem), last = k == steps - 1;
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = peer,
                       .buf = x_buf,
                       .offset = x_off,
                       .count = n,
                       .dep = x_op,
                       .step = k + 1};
    sched_op_t recv = {.kind = SCHED_RECV_REDUCE,
                       .peer = peer,
                       .buf = last ? SCHED_RECVBUF : SCHED_SCRATCH,
                       .offset = last ? 0 : (size_t)(k + 1 - base) * n,
                       .count = n,
                       .src_buf = x_buf,
                       .src_offset = x_off,
                       .dep = x_op,
                       .final = last,
                       .step = k + 1};
    if (emit(s, send) == EMIT_OOM || (x_op = emit(s, recv)) == EMIT_OOM) goto oom;
    x_buf = recv.buf;
    x_off = recv.offset;
  }
  if (folded) {
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = rank - 1,
                     .buf = SCHED_RECVBUF,
                     .count = n,
                     .dep = x_op,
                     .step = steps + 1};
    if (emit(s, op) == EMIT_OOM) goto oom;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "recursive-doubling all-reduce: out of memory building the schedule");
}
