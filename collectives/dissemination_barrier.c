/* dissemination_barrier.c -- barrier in ceil(log2 p) rounds (Hensgen, Finkel & Manber 1988).
 *
 * In round k rank r sends a token to r + 2^k and receives one from r - 2^k (mod p). A token
 * sent in round k carries everything its sender had heard by then, so after round k rank r has
 * heard, transitively, from ranks r-1 .. r-(2^(k+1)-1); after ceil(log2 p) rounds from all:
 *
 *   p = 5    round 0: r -> r+1    round 1: r -> r+2    round 2: r -> r+4
 *
 * Both the send and the receive of round k wait for the receive of round k-1: the send so that
 * it carries that knowledge, the receive so that when it is done every earlier one is too.
 * Cost: the call description, a + 40 b, then ceil(log2 p) rounds of one-byte tokens:
 * (ceil(log2 p) + 1) alpha + (40 + ceil(log2 p)) beta (the ring barrier's: p alpha). */
#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double dissemination_barrier_cost(const cost_model_t *m, int p, double n) {
  (void)n;
  if (p < 2) return 0;
  int rounds = 0;
  while ((1 << rounds) < p) rounds++;
  return m->alpha + 40 * m->beta + rounds * (m->alpha + m->beta);
}

weft_result_t dissemination_barrier_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  sched_init(s, 0, 0);
  sched_ring_headers(s, rank, p);
  int prev = -1;
  for (int k = 0, d = 1; d < p; k++, d *= 2) {
    sched_op_t send = {.kind = SCHED_SEND_TOKEN, .peer = (rank + d) % p, .dep = prev, .step = k};
    sched_op_t recv = {
        .kind = SCHED_RECV_TOKEN, .peer = (rank - d + p) % p, .dep = prev, .step = k};
    if (emit(s, send) == EMIT_OOM || (prev = emit(s, recv)) == EMIT_OOM)
      return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                      "dissemination barrier: out of memory building the schedule");
  }
  return WEFT_SUCCESS;
}
