/* ring_barrier.c -- barrier as p-1 token passes around the ring.
 *
 * In step s every rank sends a token to its right neighbour once it has received the token of
 * step s-1 from its left one. The token rank r receives in step s proves that rank r-1-s has
 * entered the barrier, so after p-1 steps every rank has heard, transitively, from all others.
 * (The executor's header exchange with the ring neighbours comes first and also checks that every
 * rank called barrier.) Cost: the call description, a + 40 b, then p-1 one-byte tokens one after
 * another, p alpha + (40 + p-1) beta in all. A dissemination barrier does it in log2(p) steps. */
#include "collectives/algorithms.h"
#include "common/error.h"

double ring_barrier_cost(const cost_model_t *m, int p, double n) {
  (void)n;
  if (p < 2) return 0;
  return m->alpha + 40 * m->beta + (p - 1) * (m->alpha + m->beta);
}

weft_result_t ring_barrier_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, nranks = a->nranks;
  sched_init(s, 0, 0);
  sched_ring_headers(s, rank, nranks);
  int prev = -1;
  for (int step = 0; step < nranks - 1; step++) {
    sched_op_t send = {.kind = SCHED_SEND_TOKEN, .peer = (rank + 1) % nranks, .dep = prev,
                       .step = step};
    sched_op_t recv = {.kind = SCHED_RECV_TOKEN, .peer = (rank - 1 + nranks) % nranks,
                       .dep = -1, .step = step};
    if (sched_add(s, &send) < 0 || (prev = sched_add(s, &recv)) < 0)
      return WEFT_ERR(WEFT_ERR_NO_MEMORY, "ring barrier: out of memory building the schedule");
  }
  return WEFT_SUCCESS;
}
