/* ring_allreduce.c -- ring all-reduce: a reduce-scatter then an all-gather around the ring.
 *
 * The buffer is cut into p chunks. In reduce-scatter step s (s = 0 .. p-2) rank r sends chunk
 * r-s to its right neighbour and receives chunk r-s-1 from its left one, adding its own
 * contribution as the data arrives; after p-1 steps rank r holds the full reduction of chunk r+1.
 * The all-gather then passes the reduced chunks on around the ring for p-1 more steps.
 *
 *   p = 3, chunks a b c       step 0            step 1              all-gather (2 steps)
 *   rank 0: a0 b0 c0      send a0 -> 1      send c0+c2 -> 1      pass reduced chunks on
 *   rank 1: a1 b1 c1      send b1 -> 2      send a0+a1 -> 2
 *   rank 2: a2 b2 c2      send c2 -> 0      send b1+b2 -> 0
 *
 * Each chunk is reduced exactly once per rank: recvbuf[c] = sendbuf[c] op incoming, which makes
 * out-of-place and in-place the same schedule with no initial copy. The executor cuts every chunk
 * into slices, so a slice is forwarded as soon as it has been reduced.
 *
 * Fused steps (schedule.h, as NCCL's primitives): step 0 sends from sendbuf (directSend); reduce-
 * scatter steps 1 .. p-3 reduce the arriving slice with sendbuf straight into the right
 * neighbour's slot (recv-reduce-send) and write nothing locally; step p-2 also keeps the final
 * sum (recv-reduce-copy-send); all-gather steps keep and forward what arrives in one read
 * (recv-copy-send), the last one only keeps it (recv-copy). So every element of recvbuf is written
 * once per call, in place too. Rounds: the buffer goes around in rounds of p chunks of at most
 * sched_args_t.round_count elements (half a link's slots), since a fused step forwards only into
 * a free slot of the next peer: with a whole chunk of sends ahead of the fused ones on every link
 * a ring could wait on itself.
 *
 * Memory traffic per rank (c = n/p bytes, reads + writes, host buffers over shared memory):
 *   step 0 send                   read sendbuf, write slot                      2c
 *   steps 1 .. p-3 (p-3 of them)  read slot + sendbuf, write next slot           3c each
 *   step p-2                      read slot + sendbuf, write next slot + recvbuf  4c
 *   all-gather, all but the last  read slot, write recvbuf + next slot           3c each
 *   last all-gather step          read slot, write recvbuf                       2c
 *   in all: (6p - 4) c = (6p - 4)/p n, half reads, half writes.
 * The two-pass path (WEFT_FUSED_STEPS=0) reduces into recvbuf (3c) and copies it into the slot
 * (2c) at every step and lands each all-gather slice in recvbuf before copying it on: 9(p-1)/p n.
 * So fusing saves 9(p-1)/(6p-4) of the traffic: 1.125x at 2 ranks, 1.35x at 4, 1.5x at many.
 * Ranks of one host share its memory bandwidth B (bytes read + written per second): their ring
 * cannot beat busbw = 2(p-1)/p n / t <= 2(p-1) B / (p (6p - 4)); TCP adds the kernel's socket
 * copies (2 per byte sent on each side) on top.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, n bytes, S the slice):
 * the call description goes first, h = a + 40 b. A chunk of c = n/p bytes travels as
 * k = ceil(c/S) messages, W = k a + c b, the first slice s1 = min(c, S) bytes, the last r. Every
 * rank sends 2(p-1) chunks through its one port, forwards a slice only once it has arrived and
 * been reduced, and reduces (p-1) chunks on its one CPU; whichever of the three binds:
 *   h + max(2(p-1) W,                          the port never idles
 *           (p-1)(a + s1 (b + g) + W),          each step waits for its first slice's reduction
 *           a + s1 b + (p-1)(c g + a + r b))    the CPU never idles, then the last slice goes
 *                                               around the all-gather
 * Unsliced (k = 1) that is h + 2(p-1)(a + n/p b) + (p-1) n/p g, the textbook cost plus the call
 * description; sliced, the reductions hide behind the transfers and it tends to
 * 2(p-1)/p n b + 2(p-1) ceil(n/pS) a: one alpha per message, not per step.
 * Bus bandwidth (nccl-tests) = algbw * 2(p-1)/p: each rank sends and receives 2(p-1)/p n bytes. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

/* Appends `op` over chunk `chunk` of the round [base, +len) when that chunk is non-empty; returns
 * its index, -1 when skipped, -2 on OOM. */
static int add_chunk_op(schedule_t *s, sched_op_t op, int chunk, int nranks, size_t base,
                        size_t len) {
  sched_chunk(len, nranks, chunk, &op.offset, &op.count);
  op.offset += base;
  op.src_offset = op.offset;
  if (op.count == 0) return -1;
  int idx = sched_add(s, &op);
  return idx < 0 ? -2 : idx;
}

double ring_allreduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double c = n / p, k = ceil(c / S), s1 = fmin(c, S), r = c - (k - 1) * S, w = k * a + c * b;
  double port = 2 * (p - 1) * w;
  double chain = (p - 1) * (a + s1 * (b + g) + w);
  double cpu = a + s1 * b + (p - 1) * (c * g + a + r * b);
  return a + 40 * b + fmax(port, fmax(chain, cpu));
}

weft_result_t ring_allreduce_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, nranks = a->nranks;
  size_t count = a->count;
  sched_init(s, count, count);
  sched_ring_headers(s, rank, nranks);
  /* One rank has nothing to reduce; out of place its input still has to reach recvbuf. */
  if (nranks == 1 && emit_own_copy(s, a->in_place, 0, 0, count) == EMIT_OOM) goto oom;
  int right = mod(rank + 1, nranks), left = mod(rank - 1, nranks);
  /* Rounds of p chunks of at most round_count elements each (algorithms.h says why). */
  size_t rounds = nranks > 1 ? sched_rounds((count + nranks - 1) / nranks, a->round_count) : 0;
  for (size_t t = 0; t < rounds; t++) {
    size_t base, len;
    sched_round(count, a->round_count * (size_t)nranks, t, &base, &len);
    int prev_recv = -1; /* the receive whose chunk the next send forwards */
    for (int step = 0; step < 2 * (nranks - 1); step++) {
      int reduce_phase = step < nranks - 1;
      int ag = step - (nranks - 1); /* all-gather step, when not reducing */
      int send_chunk = reduce_phase ? mod(rank - step, nranks) : mod(rank + 1 - ag, nranks);
      int recv_chunk = reduce_phase ? mod(rank - step - 1, nranks) : mod(rank - ag, nranks);
      sched_op_t send = {
          .kind = SCHED_SEND,
          .peer = right,
          .buf = step == 0 ? SCHED_SENDBUF : SCHED_RECVBUF,
          .dep = step == 0 ? -1 : prev_recv,
          .step = step,
      };
      int sent = add_chunk_op(s, send, send_chunk, nranks, base, len);
      if (sent == -2) goto oom;
      emit_link(s, prev_recv, sent);
      int last = step == 2 * (nranks - 1) - 1, final = step == nranks - 2;
      sched_kind_t kind = reduce_phase
                              ? (final ? SCHED_RECV_REDUCE_COPY_SEND : SCHED_RECV_REDUCE_SEND)
                              : (last ? SCHED_RECV_COPY : SCHED_RECV_COPY_SEND);
      sched_op_t recv = {
          .kind = kind,
          .peer = left,
          .buf = SCHED_RECVBUF,
          .src_buf = SCHED_SENDBUF,
          .dep = -1,
          .final = final,
          .step = step,
      };
      prev_recv = add_chunk_op(s, recv, recv_chunk, nranks, base, len);
      if (prev_recv == -2) goto oom;
    }
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "ring all-reduce: out of memory building the schedule");
}
