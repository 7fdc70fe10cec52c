/* recursive_doubling_allgather.c -- all-gather in log2(p) exchanges of doubling size: the
 * latency-optimal choice for small messages.
 *
 * In step k rank v swaps everything it has gathered (the blocks of the 2^k ranks of its aligned
 * group) with v xor 2^k, straight into place in recvbuf. Other world sizes are folded onto the
 * largest power of two p' (fold.h): a folded-out rank hands its block over first and receives
 * the gathered buffer at the end.
 *
 *   p = 4    step 0: 0<->1 2<->3 (one block)    step 1: 0<->2 1<->3 (two blocks)
 *   p = 5    fold in: 0 -> 1 (block 0);  the steps above over 1 2 3 4;  fold out: 1 -> 0
 *
 * Each block travels as its own op, so that forwarding it waits (slice by slice) for exactly the
 * receive that brought it; a step's ops to one peer go out back to back, one round trip per step.
 * Every block of recvbuf is written once, so no receive waits for a send.
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n the gathered bytes): the call
 * description first, h = a + 40 b; then the blocks, c = n/p bytes each and ceil(c/S) messages,
 * that the busiest rank sends one after the other, forwarding each as soon as it arrived:
 *   h + B (ceil(c/S) a + c b),   B = p'-1 for p a power of two p'
 * one message per block, not per step: as many as the ring's p-1, so the ring is as fast. When p
 * is not a power of two, a rank that plays a folded pair sends B = p'-1 + sum over the steps of
 * min(2^i, p-p') blocks (its pair's second block) and then the p-1 blocks of the folded-out rank;
 * waits that this leaves out add up to 17% at one slice per block, 27% beyond (2..16 ranks). */
#include <math.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "collectives/fold.h"
#include "common/error.h"

double recursive_doubling_allgather_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  int q = fold_pow2(p), rem = p - q, blocks = q - 1;
  if (rem) {
    blocks += p - 1;
    for (int d = 1; d < q; d *= 2) blocks += d < rem ? d : rem;
  }
  double c = n / p;
  return m->alpha + 40 * m->beta + blocks * (ceil(c / m->slice_bytes) * m->alpha + c * m->beta);
}

typedef struct {
  schedule_t *s;
  int rank;
  size_t n;
  int *made; /* per block: the op that wrote it into recvbuf, -1 while it is not there */
} gather_t;

/* Sends blocks [first, end) except `skip` to `peer`, each once the op that brought it is done. */
static int send_blocks(gather_t *g, int peer, int first, int end, int skip, int step) {
  for (int b = first; b < end; b++) {
    if (b == skip) continue;
    int own = b == g->rank;
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = peer,
                     .buf = own ? SCHED_SENDBUF : SCHED_RECVBUF,
                     .offset = own ? 0 : (size_t)b * g->n,
                     .count = g->n,
                     .dep = own ? -1 : g->made[b],
                     .step = step};
    if (emit(g->s, op) == EMIT_OOM) return -1;
  }
  return 0;
}

static int recv_blocks(gather_t *g, int peer, int first, int end, int skip, int step) {
  for (int b = first; b < end; b++) {
    if (b == skip) continue;
    sched_op_t op = {.kind = SCHED_RECV_COPY,
                     .peer = peer,
                     .buf = SCHED_RECVBUF,
                     .offset = (size_t)b * g->n,
                     .count = g->n,
                     .dep = -1,
                     .step = step};
    if ((g->made[b] = emit(g->s, op)) == EMIT_OOM) return -1;
  }
  return 0;
}

weft_result_t recursive_doubling_allgather_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n, n * (size_t)p);
  sched_ring_headers(s, rank, p);
  int q = fold_pow2(p), rem = p - q, steps = fold_log2(q), v = fold_vrank(rank, rem);
  gather_t g = {s, rank, n, malloc(sizeof(int) * (size_t)p)};
  for (int b = 0; g.made && b < p; b++) g.made[b] = -1;
  if (!g.made || emit_own_copy(s, a->in_place, (size_t)rank * n, 0, n) == EMIT_OOM) goto oom;
  if (v < 0) {
    if (send_blocks(&g, rank + 1, rank, rank + 1, -1, 0) ||
        recv_blocks(&g, rank + 1, 0, p, rank, steps + 1))
      goto oom;
    free(g.made);
    return WEFT_SUCCESS;
  }
  int folded = rank < 2 * rem;
  if (folded && recv_blocks(&g, rank - 1, rank - 1, rank, -1, 0)) goto oom;
  for (int k = 0; k < steps; k++) {
    int w = v ^ (1 << k), mine = v & ~((1 << k) - 1), theirs = w & ~((1 << k) - 1);
    int peer = fold_real(w, rem), size = 1 << k;
    if (send_blocks(&g, peer, fold_first(mine, rem), fold_first(mine + size, rem), -1, k + 1) ||
        recv_blocks(&g, peer, fold_first(theirs, rem), fold_first(theirs + size, rem), -1, k + 1))
      goto oom;
  }
  if (folded && send_blocks(&g, rank - 1, 0, p, rank - 1, steps + 1)) goto oom;
  free(g.made);
  return WEFT_SUCCESS;
oom:
  free(g.made);
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "recursive-doubling all-gather: out of memory building the schedule");
}
