/* linear_barrier.c -- barrier in one step: every rank sends a token to every other rank and
 * waits for the tokens of all of them.
 *
 *   p = 4, rank 1:   tokens to 2, 3, 0     (posted at once, each rank starting at its next)
 *                    tokens from 0, 3, 2   (in the order their senders post them to this rank)
 *
 * A rank leaves as soon as every peer has arrived, whatever the order the others ran in: no
 * token waits for an earlier round. That matters where a dependent round costs more than a
 * message, as with more ranks than cores: there each of the dissemination barrier's ceil(log2 p)
 * rounds waits for its peer to be scheduled (results/2026-11-29-one-step). It costs p - 1
 * messages per rank against ceil(log2 p), so elsewhere the dissemination barrier stays the choice.
 *
 * Cost: the call description, a + 40 b, then p - 1 one-byte tokens out of the rank's port:
 * p alpha + (40 + p - 1) beta, in one round. */
#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double linear_barrier_cost(const cost_model_t *m, int p, double n) {
  (void)n;
  if (p < 2) return 0;
  return m->alpha + 40 * m->beta + (p - 1) * (m->alpha + m->beta);
}

weft_result_t linear_barrier_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  sched_init(s, 0, 0);
  sched_ring_headers(s, rank, p);
  for (int d = 1; d < p; d++) {
    sched_op_t send = {.kind = SCHED_SEND_TOKEN, .peer = (rank + d) % p, .dep = -1, .step = 0};
    sched_op_t recv = {.kind = SCHED_RECV_TOKEN, .peer = (rank - d + p) % p, .dep = -1, .step = 0};
    if (emit(s, send) == EMIT_OOM || emit(s, recv) == EMIT_OOM)
      return WEFT_ERR(WEFT_ERR_NO_MEMORY, "linear barrier: out of memory building the schedule");
  }
  return WEFT_SUCCESS;
}
