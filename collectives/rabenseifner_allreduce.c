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
 * peers xor-ed (at powers of two; weft-sim's symmetric replay finds that). A step reads ranges
 * that earlier ops wrote at other offsets, so it waits for the whole of the op before it (one
 * dependency an op, dep_whole: store and forward per step, as MPICH). Partial sums go to
 * scratch (half the buffer; all of it on a rank that folds another in), the finished chunk and
 * the gathered ones to recvbuf: a gathered range never lands on a partial a halving send may
 * still read. Only the last one lands where step 1 sent from (sendbuf, which in place is
 * recvbuf), so it waits, slice by slice, for that send; the halving never waits on the
 * gathering, so this closes no cycle.
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
  if (q != p) t += halving_reduce_step_cost(m, n, 1) + halving_copy_step_cost(m, n);
  for (double c = n / 2; q > 1; q /= 2, c /= 2)
    t += halving_reduce_step_cost(m, c, 1) + halving_copy_step_cost(m, c);
  return t;
}

/* Recursive doubling over the reduced chunks: step d sends the d chunks gathered so far, one
 * range, and receives the partner's d next to them. `*chain` is the last op that wrote a part of
 * the gathered range; it waits for every other (each receive waits for the whole of the one
 * before), so a send needs only it. Where the halving's first send read user memory (sendbuf,
 * which in place is recvbuf), the last receive overwrites what that send read, so it waits for
 * that send instead, slice by slice (same range): nothing waits for it but the call's end. */
static int gather(halving_t *h, int from_user, int *chain) {
  *chain = h->last_fold;
  for (int d = 1, step = fold_log2(h->q) + 1; d < h->q; d *= 2, step++) {
    int w = h->v ^ d, peer = fold_real(w, h->rem), mine = h->v & ~(d - 1), theirs = w & ~(d - 1);
    size_t moff, mlen, toff, tlen;
    halving_range(h, mine, mine + d, &moff, &mlen);
    halving_range(h, theirs, theirs + d, &toff, &tlen);
    int war = 2 * d == h->q && from_user;
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = peer,
                       .buf = SCHED_RECVBUF,
                       .offset = moff,
                       .count = mlen,
                       .dep = *chain,
                       .dep_whole = 1,
                       .step = step};
    sched_op_t recv = {.kind = SCHED_RECV_COPY,
                       .peer = peer,
                       .buf = SCHED_RECVBUF,
                       .offset = toff,
                       .count = tlen,
                       .dep = war ? h->sent[1] : *chain,
                       .dep_whole = !war,
                       .step = step};
    int r;
    if (emit(h->s, send) == EMIT_OOM || (r = emit(h->s, recv)) == EMIT_OOM) return -1;
    if (r >= 0) *chain = r;
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
  int last = 2 * fold_log2(h.q) + 1, half = h.q / 2;
  if (h.v < 0) {
    /* Folded out: hand the input over; in place, the result lands on what was sent. */
    if (halving_fold_out(s, rank, n, n, last)) goto oom;
    return WEFT_SUCCESS;
  }
  /* Partial sums go to scratch, only the finished chunk to recvbuf, so that the gathering's
   * receives overwrite nothing a halving send may still read (but for the last one, gather()).
   * A rank that folds another in keeps all of the vector there, the others what step 1 keeps. */
  int folded = rank < 2 * h.rem, chain;
  h.acc = SCHED_SCRATCH;
  size_t len;
  if (!folded) halving_range(&h, h.v & half, (h.v & half) + half, &h.acc_shift, &len);
  halving_range(&h, h.v, h.v + 1, &h.own_off, &h.own_len);
  h.own_dst = h.own_off;
  if (folded && halving_fold(&h, rank - 1, 0, n, 0)) goto oom;
  if (halving_run(&h) || gather(&h, !folded, &chain)) goto oom;
  if (folded) {
    sched_op_t out = {.kind = SCHED_SEND,
                      .peer = rank - 1,
                      .buf = SCHED_RECVBUF,
                      .count = n,
                      .dep = chain,
                      .dep_whole = 1,
                      .step = last};
    if (emit(s, out) == EMIT_OOM) goto oom;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "rabenseifner all-reduce: out of memory building the schedule");
}
