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
 * Cost with L = log2 p', n the input: L alpha + (p'-1)/p' n (beta + gamma), plus
 * 2 alpha + n (beta + gamma) when p is not a power of two. */
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "collectives/halving.h"
#include "common/error.h"

double rabenseifner_reduce_scatter_cost(const cost_model_t *m, int p, double n) {
  int q = fold_pow2(p);
  double t = fold_log2(q) * m->alpha + (double)(q - 1) / q * n * (m->beta + m->gamma);
  if (q != p) t += 2 * m->alpha + n * (m->beta + m->gamma);
  return t;
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
