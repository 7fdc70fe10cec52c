/* rabenseifner_allreduce.c -- all-reduce as a recursive-halving reduce-scatter followed by a
 * recursive-doubling all-gather (Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005).
 *
 * The buffer is cut into p' chunks (p' the largest power of two <= p; other world sizes fold,
 * fold.h). Halving (halving.h) leaves rank v with chunk v fully reduced after log2 p' steps of
 * shrinking size; doubling then swaps ever larger gathered ranges with v xor 1, 2, 4, ...:
 *
 *   p = 4, chunks a b c d
 *   halve 1: 0<->2 1<->3 (2 chunks)   halve 2: 0<->1 2<->3 (1 chunk)   rank v: chunk v reduced
 *   double 1: 0<->1 2<->3 (1 chunk)   double 2: 0<->2 1<->3 (2 chunks)  everyone: a b c d
 *
 * Chunks accumulate in place in recvbuf (step 1 reads sendbuf). A gathered chunk arrives where
 * this rank's partial of it was sent from during the halving, so its receive waits for that
 * send: the halving never waits on the gathering, so this closes no cycle.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): the call
 * description first, h = a + 40 b. Every chunk, c = n/p' bytes, travels as its own op of
 * ceil(c/S) messages (first slice s1, last r): the halving sends p'-1 chunks, the doubling p'-1
 * more. A rank's port serves all its steps first-come first-served, so the partner that owes it
 * a chunk of the first halving step may send that one last, after its own p'-1; the
 * p'/4 + p'/8 + ... + 1 = p'/2 - 1 chunks this rank forwards from it follow. The busiest port
 * then carries U = 2(p'-1) + p'/2 - 1 chunks (plus p' in and p' out on a rank that folds another
 * in), and the CPU reduces R = p'-1 chunks (plus p'):
 *   h + max(U (ceil(c/S) a + c b) + r g, a + s1 b + R c g)
 * One alpha per message, about 2.5 p' where the textbook has 2 log2 p': small sizes are
 * recursive doubling's; for large n about 2.5 n b, the ring's 2(p-1)/p n b. weft-sim measures
 * 0.83..1.19 times this over 2..16 ranks. */
#include <math.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "collectives/halving.h"
#include "common/error.h"

double rabenseifner_allreduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  int q = fold_pow2(p), folds = q != p;
  double c = n / q, k = ceil(c / S), s1 = fmin(c, S), r = c - (k - 1) * S;
  double port = (2 * (q - 1) + q / 2 - 1 + 2 * q * folds) * (k * a + c * b) + r * g;
  double cpu = a + s1 * b + (q - 1 + q * folds) * c * g;
  return a + 40 * b + fmax(port, cpu);
}

/* Recursive doubling over the reduced chunks: each received chunk lands where this rank's
 * partial of it was sent from. */
static int gather(halving_t *h) {
  for (int d = 1, step = fold_log2(h->q) + 1; d < h->q; d *= 2, step++) {
    int w = h->v ^ d, peer = fold_real(w, h->rem), mine = h->v & ~(d - 1), theirs = w & ~(d - 1);
    if (halving_send(h, peer, mine, mine + d, 0, step)) return -1;
    for (int c = theirs; c < theirs + d; c++) {
      unit_t *u = &h->u[c];
      sched_op_t op = {.kind = SCHED_RECV_COPY,
                       .peer = peer,
                       .buf = SCHED_RECVBUF,
                       .offset = u->off,
                       .count = u->len,
                       .dep = u->sent,
                       .step = step};
      if ((u->op = emit(h->s, op)) == EMIT_OOM) return -1;
      u->buf = SCHED_RECVBUF;
      u->buf_off = u->off;
    }
  }
  return 0;
}

weft_result_t rabenseifner_allreduce_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n, n);
  sched_ring_headers(s, rank, p);
  int q = fold_pow2(p), rem = p - q;
  halving_t h = {s, q, rem, fold_vrank(rank, rem), 0, calloc((size_t)q, sizeof(unit_t))};
  if (!h.u) goto oom;
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    free(h.u);
    return WEFT_SUCCESS;
  }
  for (int c = 0; c < q; c++) {
    size_t off, len;
    sched_chunk(n, q, c, &off, &len);
    h.u[c] = (unit_t){off, len, SCHED_RECVBUF, off, SCHED_SENDBUF, off, -1, -1};
  }
  int last = fold_log2(q) + 1;
  if (h.v < 0) {
    /* Folded out: hand the input over; in place, the result lands on what was sent. */
    if (halving_send(&h, rank + 1, 0, q, 1, 0)) goto oom;
    for (int c = 0; c < q; c++) {
      sched_op_t op = {.kind = SCHED_RECV_COPY,
                       .peer = rank + 1,
                       .buf = SCHED_RECVBUF,
                       .offset = h.u[c].off,
                       .count = h.u[c].len,
                       .dep = h.u[c].sent,
                       .step = 2 * last - 1};
      if (emit(s, op) == EMIT_OOM) goto oom;
    }
  } else {
    int folded = rank < 2 * rem;
    if (folded && halving_fold(&h, rank - 1, 0, q, 0, 0)) goto oom;
    if (halving_run(&h) || gather(&h)) goto oom;
    if (folded && halving_send(&h, rank - 1, 0, q, 0, 2 * last - 1)) goto oom;
  }
  free(h.u);
  return WEFT_SUCCESS;
oom:
  free(h.u);
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "rabenseifner all-reduce: out of memory building the schedule");
}
