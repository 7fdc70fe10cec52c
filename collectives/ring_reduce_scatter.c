/* ring_reduce_scatter.c -- ring reduce-scatter: the first half of ring all-reduce, ending with
 * rank r holding the reduction of block r.
 *
 * Block c is sendbuf[c n, +n). In step s (s = 0 .. p-2) rank r sends the partial sum of block
 * r-1-s to its right neighbour and receives that of block r-2-s from its left one, adding its
 * own block as the data arrives; the last step lands block r, finalized, in recvbuf:
 *
 *   p = 3         step 0               step 1
 *   rank 0:   send c0 -> 1         send b0+b2 -> 1      recv a1+a2 (+a0) -> recvbuf
 *   rank 1:   send a1 -> 2         send c0+c1 -> 2      recv b2+b0 (+b1)
 *   rank 2:   send b2 -> 0         send a1+a2 -> 0      recv c0+c1 (+c2)
 *
 * Fused (schedule.h): steps 0 .. p-3 reduce what arrives with sendbuf straight into the right
 * neighbour's slot (recv-reduce-send), so only the last step writes recvbuf: (3p - 1)/p n bytes
 * of memory traffic per rank (c = n/p: 2c for step 0's send, 3c per intermediate step, 3c for
 * the last) instead of 5(p - 1)/p n (each step reduces into a local slot, 3c, and a send
 * copies it into the peer's, 2c). Rounds of at most round_count elements of each block
 * keep a ring of fused steps from waiting on itself (ring_allreduce.c).
 *
 * Unfused (WEFT_FUSED_STEPS=0, or a transport that lends no slot), partial sums alternate between
 * two slots (recvbuf and scratch; two scratch slots in place,
 * where recvbuf is this rank's own input block). A receive reduces into the slot that the send
 * of the step before read from, so it waits for that send, never for the send of its own step:
 * that one may only complete once the right neighbour has received, which would close a cycle
 * around the ring whenever a link buffers less than a slice.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, n the input, S the slice):
 * the call description goes first, h = a + 40 b. A block of c = n/p bytes travels as
 * k = ceil(c/S) messages, W = k a + c b, the first slice s1 = min(c, S), the last r. Each rank
 * sends p-1 blocks through its one port and reduces p-1 on its one CPU, and a slice moves on only
 * once it has been reduced; whichever binds:
 *   h + max((p-1) W + r g,                       the port never idles; the last slice is reduced
 *           (p-1)(a + s1 (b + g)) + [k > 1] r g,  each step waits for its first slice's reduction
 *           a + s1 b + (p-1) c g)                 the CPU never idles after the first slice
 * Unsliced that is h + (p-1)(a + n/p (b + g)); sliced, the reductions overlap the transfers.
 * Bus bandwidth (nccl-tests) = algbw * (p-1)/p. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

double ring_reduce_scatter_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double c = n / p, k = ceil(c / S), s1 = fmin(c, S), r = c - (k - 1) * S;
  double port = (p - 1) * (k * a + c * b) + r * g;
  double chain = (p - 1) * (a + s1 * (b + g)) + (k > 1 ? r * g : 0);
  double cpu = a + s1 * b + (p - 1) * c * g;
  return a + 40 * b + fmax(port, fmax(chain, cpu));
}

weft_result_t ring_reduce_scatter_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t n = a->count;
  sched_init(s, n * (size_t)p, n);
  sched_ring_headers(s, rank, p);
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  /* Unfused (schedule.h), slot[0] holds the partials of steps p-4, p-6, ..., slot[1] those of
   * p-3, p-5, ...; fused, the partials go straight into the next peer's slots and these stay
   * untouched. Rounds of at most round_count elements of every block (algorithms.h says why). */
  sched_buf_t slot_buf[2] = {a->in_place ? SCHED_SCRATCH : SCHED_RECVBUF, SCHED_SCRATCH};
  size_t slot_off[2] = {a->in_place ? n : 0, 0};
  size_t rounds = sched_rounds(n, a->round_count);
  for (size_t t = 0; t < rounds; t++) {
    size_t base, len;
    sched_round(n, a->round_count, t, &base, &len);
    int prev_recv = -1, prev_send = -1;
    sched_buf_t held_buf = SCHED_SENDBUF; /* where the partial the next send forwards lives */
    size_t held_off = 0;
    for (int step = 0; step < p - 1; step++) {
      int send_block = mod(rank - 1 - step, p), recv_block = mod(rank - 2 - step, p);
      sched_op_t send = {.kind = SCHED_SEND,
                         .peer = mod(rank + 1, p),
                         .buf = held_buf,
                         .offset = step == 0 ? (size_t)send_block * n + base : held_off,
                         .count = len,
                         .dep = prev_recv,
                         .step = step};
      int last = step == p - 2, slot = (p - 2 - step) % 2;
      sched_op_t recv = {.kind = last ? SCHED_RECV_REDUCE : SCHED_RECV_REDUCE_SEND,
                         .peer = mod(rank - 1, p),
                         .buf = last ? SCHED_RECVBUF : slot_buf[slot],
                         .offset = (last ? 0 : slot_off[slot]) + base,
                         .count = len,
                         .src_buf = SCHED_SENDBUF,
                         .src_offset = (size_t)recv_block * n + base,
                         .dep = prev_send,
                         .final = last,
                         .step = step};
      if ((prev_send = emit(s, send)) == EMIT_OOM) goto oom;
      emit_link(s, prev_recv, prev_send);
      if ((prev_recv = emit(s, recv)) == EMIT_OOM) goto oom;
      held_buf = recv.buf;
      held_off = recv.offset;
    }
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "ring reduce-scatter: out of memory building the schedule");
}
