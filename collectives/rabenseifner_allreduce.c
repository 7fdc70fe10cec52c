/* rabenseifner_allreduce.c -- all-reduce as a recursive-halving reduce-scatter followed by a
 * recursive-doubling all-gather (Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005).
 *
 * The buffer is cut into p' chunks (p' the largest power of two <= p; other world sizes fold,
 * fold.h). Halving (halving.h) leaves rank v with chunk v fully reduced after log2 p' steps of
 * shrinking size; doubling then swaps ever larger gathered ranges with v xor 1, 2, 4, ...:
 *
 *   p = 4, chunks a b c d
 *   halve 1: 0<->2 1<->3 (c d | a b)  halve 2: 0<->1 2<->3 (one chunk)  rank v: chunk v reduced
 *   double 1: 0<->1 2<->3 (one chunk)  double 2: 0<->2 1<->3 (a b | c d)  everyone: a b c d
 *
 * What a rank sends or receives in a step is one contiguous range, so every step is one op each
 * way (2 log2 p' + 2 ops a rank, whatever n), and every rank's schedule is rank 0's with its
 * peers xor-ed (at powers of two; weft-sim's symmetric replay finds that). Chunks accumulate in
 * place in recvbuf (step 1 reads sendbuf). A step's send reads ranges that several earlier ops
 * wrote, at other offsets than their own, so it waits for the whole of each (dep_whole: store
 * and forward per step). A gathered range arrives where this rank's partial of it was sent from
 * in the halving step with the same partner, so that receive waits for that send, slice by
 * slice (same range, same count): the halving never waits on the gathering, so this closes no
 * cycle.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): the call
 * description first, h = a + 40 b. Every step starts when the step before is complete and is
 * the same on every rank, so the steps add up: halving step k moves and reduces n/2^k bytes,
 * doubling step k moves n/2^k, each in ceil(m/S) slices pipelined through the port (halving.h's
 * step costs: R(m) = max(ceil(m/S) a + m b + r g, a + s1 b + m g), C(m) = ceil(m/S) a + m b):
 *   h + sum_{k=1..log2 p'} (R(n/2^k) + C(n/2^k))  [+ R(n) + C(n) when p folds onto p']
 * Unsliced that is the textbook 2 log2 p' a + 2 (p'-1)/p' n b + (p'-1)/p' n g (plus the fold's
 * 2 a + 2 n b + n g). Sliced, each step pays one alpha per slice and the steps do not overlap:
 * the ring, pipelining across steps, wins for large n. */
#include <math.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "collectives/halving.h"
#include "common/error.h"

double rabenseifner_allreduce_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double t = m->alpha + 40 * m->beta;
  if (n <= 0) return t;
  int q = fold_pow2(p);
  if (q != p) t += halving_reduce_step_cost(m, n) + halving_copy_step_cost(m, n);
  for (double c = n / 2; q > 1; q /= 2, c /= 2)
    t += halving_reduce_step_cost(m, c) + halving_copy_step_cost(m, c);
  return t;
}

/* Emits `op`, a send that reads what the ops in `writers` wrote, waiting for the whole of each;
 * returns its index as emit() does (-3 when adding a dependency runs out of memory). */
static int emit_after(schedule_t *s, sched_op_t op, const int *writers, int nw) {
  op.dep = -1;
  int i = emit(s, op);
  if (i < 0) return i;
  for (int k = 0; k < nw; k++)
    if (writers[k] >= 0 && sched_add_dep(s, i, writers[k], 1)) return EMIT_OOM;
  return i;
}

/* Recursive doubling over the reduced chunks: step d sends the d chunks gathered so far, one
 * range, and receives the partner's d next to them. writers[] collects every op that wrote a
 * part of the gathered range (the halving's last fold, then each receive here). */
static int gather(halving_t *h, int *writers, int *nw) {
  writers[(*nw)++] = h->op;
  for (int d = 1, step = fold_log2(h->q) + 1; d < h->q; d *= 2, step++) {
    int w = h->v ^ d, peer = fold_real(w, h->rem), mine = h->v & ~(d - 1), theirs = w & ~(d - 1);
    size_t moff, mlen, toff, tlen;
    halving_range(h, mine, mine + d, &moff, &mlen);
    halving_range(h, theirs, theirs + d, &toff, &tlen);
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = peer,
                       .buf = SCHED_RECVBUF,
                       .offset = moff,
                       .count = mlen,
                       .step = step};
    /* The partner's range is what this rank sent it in halving step log2(q/d). */
    sched_op_t recv = {.kind = SCHED_RECV_COPY,
                       .peer = peer,
                       .buf = SCHED_RECVBUF,
                       .offset = toff,
                       .count = tlen,
                       .dep = h->sent[fold_log2(h->q / d)],
                       .step = step};
    int r;
    if (emit_after(h->s, send, writers, *nw) < -1 || (r = emit(h->s, recv)) == EMIT_OOM) return -1;
    writers[(*nw)++] = r;
  }
  return 0;
}

weft_result_t rabenseifner_allreduce_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n, n);
  sched_ring_headers(s, rank, p);
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  halving_t h;
  halving_init(&h, s, rank, p, 0, n);
  int last = 2 * fold_log2(h.q) + 1, writers[HALVING_MAX_STEPS + 1], nw = 0;
  if (h.v < 0) {
    /* Folded out: hand the input over; in place, the result lands on what was sent. */
    sched_op_t give = {
        .kind = SCHED_SEND, .peer = rank + 1, .buf = SCHED_SENDBUF, .count = n, .dep = -1};
    int i = emit(s, give);
    sched_op_t back = {.kind = SCHED_RECV_COPY,
                       .peer = rank + 1,
                       .buf = SCHED_RECVBUF,
                       .count = n,
                       .dep = i,
                       .step = last};
    if (i == EMIT_OOM || emit(s, back) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  int folded = rank < 2 * h.rem;
  if (folded && halving_fold(&h, rank - 1, 0, n, 0)) goto oom;
  if (halving_run(&h) || gather(&h, writers, &nw)) goto oom;
  if (folded) {
    sched_op_t out = {
        .kind = SCHED_SEND, .peer = rank - 1, .buf = SCHED_RECVBUF, .count = n, .step = last};
    if (emit_after(s, out, writers, nw) < -1) goto oom;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "rabenseifner all-reduce: out of memory building the schedule");
}
