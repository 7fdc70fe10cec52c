/* rabenseifner_reduce_scatter.c -- reduce-scatter by recursive halving (the first half of
 * Rabenseifner's all-reduce): log2 p steps where the ring takes p-1.
 *
 * The units are the p blocks of sendbuf, block r ending on rank r. With p a power of two,
 * virtual rank v = r owns block r; otherwise the world folds onto the largest power of two p'
 * (fold.h) and a virtual rank owns the one or two blocks of the real ranks behind it. Each step
 * sends half of what is left and folds the partner's copy of the other half in (halving.h):
 *
 *   p = 4, blocks a b c d
 *   step 1: 0<->2 1<->3 (2 blocks)    step 2: 0<->1 2<->3 (1 block)    rank r: block r reduced
 *   p = 5: fold in 0 -> 1 (all 5 blocks), the steps over 1 2 3 4, fold out 1 -> 0 (block 0)
 *
 * Partial sums accumulate in scratch (a rank's own block in recvbuf), at most half the input, the
 * whole input on a rank that folds another in.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice, n the
 * input): the call description first, h = a + 40 b. Every block, c = n/p bytes, travels as its
 * own op of ceil(c/S) messages (first slice s1, last r); a step sends and folds half of what is
 * left, p'-1 units of p/p' blocks in all. A rank's port serves all its steps first-come
 * first-served, so the partner that owes it a unit of the first step may send that one last,
 * after its own p'-1; the p'/2 - 1 units this rank forwards from it follow. The busiest port
 * carries U = (3p'/2 - 2) p/p' blocks (plus p + 1 on a rank that folds another in: all blocks
 * in, its partner's block out), and the CPU reduces R = (p'-1) p/p' blocks (plus p):
 *   h + max(U (ceil(c/S) a + c b) + r g, a + s1 b + R c g)
 * The port term is never below the ring's (p-1)(ceil(c/S) a + c b): with one alpha per message,
 * log2 p' steps save nothing. weft-sim measures 0.79..1.27 times this over 2..16 ranks (the
 * most where p is not a power of two). */
#include <math.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "collectives/halving.h"
#include "common/error.h"

double rabenseifner_reduce_scatter_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  int q = fold_pow2(p), folds = q != p;
  double c = n / p, k = ceil(c / S), s1 = fmin(c, S), r = c - (k - 1) * S;
  double port = ((1.5 * q - 2) * p / q + (p + 1) * folds) * (k * a + c * b) + r * g;
  double cpu = a + s1 * b + ((double)(q - 1) * p / q + p * folds) * c * g;
  return a + 40 * b + fmax(port, cpu);
}

weft_result_t rabenseifner_reduce_scatter_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n * (size_t)p, n);
  sched_ring_headers(s, rank, p);
  int q = fold_pow2(p), rem = p - q;
  halving_t h = {s, q, rem, fold_vrank(rank, rem), 1, calloc((size_t)p, sizeof(unit_t))};
  if (!h.u) goto oom;
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    free(h.u);
    return WEFT_SUCCESS;
  }
  int folded = rank < 2 * rem;
  /* A non-folding rank only ever accumulates the half it keeps in step 1. */
  int base = folded || h.v < 0 ? 0 : halving_first(&h, h.v & q / 2);
  for (int c = 0; c < p; c++) {
    size_t off = (size_t)c * n, acc_off = c >= base ? (size_t)(c - base) * n : 0;
    h.u[c] = (unit_t){off, n, SCHED_SCRATCH, acc_off, SCHED_SENDBUF, off, -1, -1};
    if (c == rank) {
      h.u[c].acc = SCHED_RECVBUF;
      h.u[c].acc_off = 0;
    }
  }
  int last = fold_log2(q) + 1;
  if (h.v < 0) {
    /* Folded out: hand all blocks over, get block `rank` back (in place, onto what was sent). */
    if (halving_send(&h, rank + 1, 0, p, 1, 0)) goto oom;
    sched_op_t op = {.kind = SCHED_RECV_COPY,
                     .peer = rank + 1,
                     .buf = SCHED_RECVBUF,
                     .count = n,
                     .dep = h.u[rank].sent,
                     .step = last};
    if (emit(s, op) == EMIT_OOM) goto oom;
  } else {
    if (folded && halving_fold(&h, rank - 1, 0, p, 0, 0)) goto oom;
    if (halving_run(&h)) goto oom;
    if (folded && halving_send(&h, rank - 1, rank - 1, rank, 0, last)) goto oom;
  }
  emit_size_scratch(s);
  free(h.u);
  return WEFT_SUCCESS;
oom:
  free(h.u);
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "rabenseifner reduce-scatter: out of memory building the schedule");
}
