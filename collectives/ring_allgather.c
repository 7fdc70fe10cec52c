/* ring_allgather.c -- ring all-gather: every block travels p-1 hops around the ring.
 *
 * Rank r's block lands in recvbuf[r n, +n). In step s (s = 0 .. p-2) rank r sends block r-s to
 * its right neighbour (its own block from sendbuf in step 0, then what it received the step
 * before, forwarded slice by slice) and receives block r-s-1 from its left one:
 *
 *   p = 3       step 0            step 1
 *   rank 0:   a -> 1, c <- 2    c -> 1, b <- 2
 *   rank 1:   b -> 2, a <- 0    a -> 2, c <- 0
 *   rank 2:   c -> 0, b <- 1    b -> 0, a <- 1
 *
 * Every block of recvbuf is written once, so no receive waits for a send. Fused (schedule.h):
 * a block arriving in place (shared memory, CUDA IPC) is kept and forwarded in one read of the
 * peer's slot (recv-copy-send), 3 bytes of memory traffic per byte instead of 4; over TCP it
 * lands in recvbuf and is sent from there (no copy to save). Rounds of at most round_count
 * elements of each block, as ring_allreduce.c says why. In place (sendbuf ==
 * recvbuf + r n) the own block is already where it belongs; otherwise a local copy puts it there.
 *
 * Cost (a: seconds per message, b: per byte, n the gathered buffer, S the slice): the call
 * description first, h = a + 40 b, then p-1 blocks of c = n/p bytes through each rank's port, each
 * as ceil(c/S) messages, forwarded slice by slice without a pause:
 *   h + (p-1)(ceil(c/S) a + c b)
 * For large n, (p-1)/p n b plus one alpha per slice sent.
 * Bus bandwidth (nccl-tests) = algbw * (p-1)/p. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

double ring_allgather_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double c = n / p;
  return m->alpha + 40 * m->beta + (p - 1) * (ceil(c / m->slice_bytes) * m->alpha + c * m->beta);
}

weft_result_t ring_allgather_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n, n * (size_t)p);
  sched_ring_headers(s, rank, p);
  if (emit_own_copy(s, a->in_place, (size_t)rank * n, 0, n) == EMIT_OOM) goto oom;
  /* Rounds of at most round_count elements of every block (algorithms.h says why). Each
   * receive but the last forwards and keeps its slice in one read where it lands in place. */
  size_t rounds = p > 1 ? sched_rounds(n, a->round_count) : 0;
  for (size_t t = 0; t < rounds; t++) {
    size_t base, len;
    sched_round(n, a->round_count, t, &base, &len);
    int prev = -1;
    for (int step = 0; step < p - 1; step++) {
      sched_op_t send = {.kind = SCHED_SEND,
                         .peer = mod(rank + 1, p),
                         .buf = step == 0 ? SCHED_SENDBUF : SCHED_RECVBUF,
                         .offset = (step == 0 ? 0 : (size_t)mod(rank - step, p) * n) + base,
                         .count = len,
                         .dep = prev,
                         .step = step};
      sched_op_t recv = {.kind = step == p - 2 ? SCHED_RECV_COPY : SCHED_RECV_COPY_SEND,
                         .peer = mod(rank - 1, p),
                         .buf = SCHED_RECVBUF,
                         .offset = (size_t)mod(rank - step - 1, p) * n + base,
                         .count = len,
                         .dep = -1,
                         .step = step};
      int sent = emit(s, send);
      if (sent == EMIT_OOM) goto oom;
      emit_link(s, prev, sent);
      if ((prev = emit(s, recv)) == EMIT_OOM) goto oom;
    }
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "ring all-gather: out of memory building the schedule");
}
