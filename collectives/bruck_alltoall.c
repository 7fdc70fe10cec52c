/* bruck_alltoall.c -- all-to-all in ceil(log2 p) exchanges (Bruck, Ho, Kipnis, Upfal, Weathersby
 * 1997): the latency-optimal choice for small blocks.
 *
 * Number a rank's blocks by distance: block i is the one for rank+i. In step k every rank sends
 * to rank+2^k, as one message, all blocks whose distance has bit k set, and receives the same
 * distances from rank-2^k. A block thus hops along the set bits of its distance, and after the
 * last step the block a rank holds at distance i came from rank-i: it goes to recvbuf block
 * rank-i.
 *
 *   p = 4, rank 0 holds distances 0 1 2 3
 *     step 0 (bit 1): send 1,3 to rank 1; receive 1,3 from rank 3
 *     step 1 (bit 2): send 2,3 to rank 2; receive 2,3 from rank 2
 *     then recvbuf[0-i] = distance i (i = 1: from rank 3, 2: from rank 2, 3: from rank 1)
 *
 * The blocks of one message are not contiguous, so each step packs them with local copies into
 * scratch and receives into fresh scratch; nothing is ever overwritten, so a block is read
 * from wherever its latest copy lives (sendbuf before its first hop) and no copy waits for a
 * later one. Dependencies are single ops, so they are chained: a step's receive waits whole for
 * the step before's (then every earlier block has arrived), its packing copies wait whole for
 * that receive and for one another, and its send for the last copy. The p-1 final copies into
 * recvbuf wait whole for the last receive.
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n = p c the bytes of one rank's
 * sendbuf, c a block, m_k the distances in 1..p-1 with bit k set, about p/2): the call
 * description first, h = a + 40 b; then per step one message of m_k blocks, the steps one after
 * another (each packs what the one before received):
 *   h + sum_k (ceil(m_k c/S) a + m_k c b)
 * That is ceil(log2 p) a against the pairwise exchange's (p-1) a, for about (p/2) log2(p) c bytes
 * on the wire against (p-1) c. Local copies are not priced, as nowhere in this model (weft-sim's
 * beta_mem is 0 by default): here they add about (p/2) log2(p) c + (p-1) c bytes of memory
 * traffic, one more reason to leave large blocks to the pairwise exchange. Bus bandwidth
 * (nccl-tests' alltoall) = algbw (p-1)/p. */
#include <math.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double bruck_alltoall_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double c = n / p, t = m->alpha + 40 * m->beta;
  for (int bit = 1; bit < p; bit <<= 1) {
    int mk = 0;
    for (int i = 1; i < p; i++) mk += (i & bit) != 0;
    t += ceil(mk * c / m->slice_bytes) * m->alpha + mk * c * m->beta;
  }
  return t;
}

weft_result_t bruck_alltoall_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  size_t c = a->count;
  weft_result_t res = WEFT_SUCCESS;
  sched_init(s, c * (size_t)p, c * (size_t)p);
  sched_ring_headers(s, rank, p);
  if (c == 0) return WEFT_SUCCESS; /* the call descriptions only */
  /* Where the latest copy of each distance's block lives. */
  sched_buf_t *loc_buf = malloc(sizeof *loc_buf * (size_t)p);
  size_t *loc_off = malloc(sizeof *loc_off * (size_t)p);
  if (!loc_buf || !loc_off) goto oom;
  for (int i = 0; i < p; i++) {
    loc_buf[i] = SCHED_SENDBUF;
    loc_off[i] = (size_t)((rank + i) % p) * c;
  }
  if (emit_own_copy(s, 0, (size_t)rank * c, (size_t)rank * c, c) == EMIT_OOM) goto oom;
  size_t top = 0; /* scratch in use */
  int prev_recv = -1, step = 0;
  for (int bit = 1; bit < p; bit <<= 1, step++) {
    size_t pack = top, m = 0;
    int last = prev_recv;
    for (int i = 1; i < p; i++) {
      if (!(i & bit)) continue;
      sched_op_t cp = {.kind = SCHED_COPY,
                       .buf = SCHED_SCRATCH,
                       .offset = pack + m * c,
                       .count = c,
                       .src_buf = loc_buf[i],
                       .src_offset = loc_off[i],
                       .dep = last,
                       .step = step,
                       .dep_whole = 1};
      last = emit(s, cp);
      if (last == EMIT_OOM) goto oom;
      m++;
    }
    size_t into = pack + m * c;
    top = into + m * c;
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = (rank + bit) % p,
                       .buf = SCHED_SCRATCH,
                       .offset = pack,
                       .count = m * c,
                       .dep = last,
                       .step = step,
                       .dep_whole = 1};
    sched_op_t recv = {.kind = SCHED_RECV_COPY,
                       .peer = (rank - bit + p) % p,
                       .buf = SCHED_SCRATCH,
                       .offset = into,
                       .count = m * c,
                       .dep = prev_recv,
                       .step = step,
                       .dep_whole = 1};
    if (emit(s, send) == EMIT_OOM) goto oom;
    prev_recv = emit(s, recv);
    if (prev_recv == EMIT_OOM) goto oom;
    m = 0;
    for (int i = 1; i < p; i++) {
      if (!(i & bit)) continue;
      loc_buf[i] = SCHED_SCRATCH;
      loc_off[i] = into + m++ * c;
    }
  }
  for (int i = 1; i < p; i++) {
    sched_op_t cp = {.kind = SCHED_COPY,
                     .buf = SCHED_RECVBUF,
                     .offset = (size_t)((rank - i + p) % p) * c,
                     .count = c,
                     .src_buf = loc_buf[i],
                     .src_offset = loc_off[i],
                     .dep = prev_recv,
                     .step = step,
                     .dep_whole = 1};
    if (emit(s, cp) == EMIT_OOM) goto oom;
  }
  emit_size_scratch(s);
  goto out;
oom:
  res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "bruck all-to-all: out of memory building the schedule");
out:
  free(loc_buf);
  free(loc_off);
  return res;
}
