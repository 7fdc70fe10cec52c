/* pairwise_alltoall.c -- all-to-all in p-1 exchanges: in step k every rank sends its block for
 * rank+k straight to it and receives the block of rank-k, straight into recvbuf.
 *
 *   p = 4, rank 0   step 1: 0 -[b01]-> 1   0 <-[b30]- 3
 *                   step 2: 0 -[b02]-> 2   0 <-[b20]- 2
 *                   step 3: 0 -[b03]-> 3   0 <-[b10]- 1      (own block b00: a local copy)
 *
 * Every block crosses one link once and nothing is copied but the rank's own block, so it is
 * the choice for large blocks. Each exchange is its own pair of streams, so the executor keeps
 * all of them in flight at once (as deep as its window); the step order is the order they are
 * listed in, so that at any moment most ranks work in the pairs the steps name.
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n = p c the bytes of one rank's
 * sendbuf, c a block): the call description first, h = a + 40 b; then one port sends the p-1
 * blocks, each in ceil(c/S) messages:
 *   h + (p-1)(ceil(c/S) a + c b)
 * Bus bandwidth (nccl-tests' alltoall) = algbw (p-1)/p. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double pairwise_alltoall_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double c = n / p;
  return m->alpha + 40 * m->beta + (p - 1) * (ceil(c / m->slice_bytes) * m->alpha + c * m->beta);
}

weft_result_t pairwise_alltoall_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t c = a->count;
  sched_init(s, c * (size_t)p, c * (size_t)p);
  sched_ring_headers(s, rank, p);
  if (emit_own_copy(s, 0, (size_t)rank * c, (size_t)rank * c, c) == EMIT_OOM) goto oom;
  for (int k = 1; k < p; k++) {
    int to = (rank + k) % p, from = (rank - k + p) % p;
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = to,
                       .buf = SCHED_SENDBUF,
                       .offset = (size_t)to * c,
                       .count = c,
                       .dep = -1,
                       .step = k};
    sched_op_t recv = {.kind = SCHED_RECV_COPY,
                       .peer = from,
                       .buf = SCHED_RECVBUF,
                       .offset = (size_t)from * c,
                       .count = c,
                       .dep = -1,
                       .step = k};
    if (emit(s, send) == EMIT_OOM || emit(s, recv) == EMIT_OOM) goto oom;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "pairwise all-to-all: out of memory building the schedule");
}
