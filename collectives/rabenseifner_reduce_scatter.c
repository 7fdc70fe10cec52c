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
 * The blocks of consecutive virtual ranks are consecutive in sendbuf, so a half is one range:
 * one send and one reducing receive a step (the last step's receive is two on a rank that folds
 * another in: its partner's block, then its own). Partial sums accumulate in scratch, at most
 * half the input (the whole input on a rank that folds another in); the last step reduces the
 * rank's own block straight into recvbuf. Every rank's schedule is rank 0's with its peers
 * xor-ed at powers of two.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice, n the
 * input, c = n/p a block): the call description first, h = a + 40 b. Each step waits for the
 * whole of the one before (store and forward), so the steps add up along the ranks with the most
 * blocks: with u = p'/2^k units a half in step k, the half that starts at virtual rank 0 holds
 * m_k = (u + min(u, p - p')) c bytes, the most of any (the first p - p' virtual ranks own two
 * blocks). With halving.h's R(m, o) = max(o ceil(m/o/S) a + m b + r g, a + s1 b + m g) for o
 * ops of m bytes in all (the last step's units go block by block: o = 2 where they have two):
 *   h + sum_{k=1..log2 p'} R(m_k, o_k)  [+ R(n, 1) + ceil(c/S) a + c b when p folds onto p']
 * (the fold-out's block leaves while the own block still arrives where p - p' = 1: no term).
 * Exact at powers of two; unsliced, the textbook log2 p a + (p-1)/p n (b + g). Off them it
 * follows one chain of steps and leaves out what ports shared between steps add: weft-sim
 * measures 0.94 .. 1.18 times it over 2..16 ranks. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "collectives/halving.h"
#include "common/error.h"

double rabenseifner_reduce_scatter_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double t = m->alpha + 40 * m->beta;
  if (n <= 0) return t;
  int q = fold_pow2(p), rem = p - q;
  double c = n / p;
  /* The fold-out's block leaves while the own block still arrives, unless the port is still
   * sending the partner its two blocks (p - p' >= 2). */
  if (rem) t += halving_reduce_step_cost(m, n, 1) + (rem > 1 ? halving_copy_step_cost(m, c) : 0);
  /* The last step moves block by block: two ops where a unit has two blocks. */
  for (int u = q / 2; u >= 1; u /= 2) {
    int two = u < rem ? u : rem;
    t += halving_reduce_step_cost(m, (u + two) * c, u == 1 ? 1 + two : 1);
  }
  return t;
}

weft_result_t rabenseifner_reduce_scatter_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n * (size_t)p, n);
  sched_ring_headers(s, rank, p);
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  halving_t h;
  halving_init(&h, s, rank, p, 1, n);
  int last = fold_log2(h.q) + 1;
  if (h.v < 0) {
    /* Folded out: hand all blocks over, get block `rank` back (in place, onto what was sent). */
    if (halving_fold_out(s, rank, (size_t)p * n, n, last)) goto oom;
    return WEFT_SUCCESS;
  }
  int folded = rank < 2 * h.rem;
  /* Scratch holds what this rank keeps after step 1 (after the fold-in: all of it). */
  size_t keep_len;
  if (!folded) halving_range(&h, h.v & h.q / 2, (h.v & h.q / 2) + h.q / 2, &h.acc_shift, &keep_len);
  h.acc = SCHED_SCRATCH;
  h.own_off = (size_t)rank * n;
  h.own_len = n;
  if (folded && halving_fold(&h, rank - 1, 0, (size_t)p * n, 0)) goto oom;
  if (halving_run(&h)) goto oom;
  if (folded) {
    /* The partner's block, reduced in scratch by the last step's first receive. */
    sched_op_t out = {.kind = SCHED_SEND,
                      .peer = rank - 1,
                      .buf = SCHED_SCRATCH,
                      .offset = (size_t)(rank - 1) * n - h.acc_shift,
                      .count = n,
                      .dep = h.op,
                      .dep_whole = 1,
                      .step = last};
    if (emit(s, out) == EMIT_OOM) goto oom;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "rabenseifner reduce-scatter: out of memory building the schedule");
}
