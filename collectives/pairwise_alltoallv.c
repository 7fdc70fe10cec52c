/* pairwise_alltoallv.c -- all_to_allv (a count per pair) in p-1 exchanges, as the pairwise
 * all_to_all: in step k every rank sends its part for rank+k straight from sendbuf and receives
 * the part of rank-k straight into recvbuf, at the caller's displacements.
 *
 *   rank r, step k:  r --token(send_counts[r+k], recv_counts[r+k]), data--> r+k
 *                    r <--token, data-- r-k   (the receive is posted once the token checked out)
 *
 * Each rank knows only its own side of a pair's counts, so before any data of a pair each side
 * sends a token with the count it will send and the count it expects back (schedule.h's
 * sched_agree_t). Both ranks check the other's token, so a count that disagrees fails both,
 * naming the two ranks and counts, instead of a short or long receive. The token goes even when
 * both counts are 0: that pair must agree on nothing else, but it must agree on that. The data
 * receive waits for the token, so a disagreement is reported before any data lands.
 *
 * Cost with even splits (a: seconds per message, b: per byte, S the slice, n = p c the bytes of
 * one rank's sendbuf): the call description, h = a + 40 b; then one port sends p-1 tokens and
 * the p-1 parts:
 *   h + (p-1)(a + 32 b) + (p-1)(ceil(c/S) a + c b)
 * Bus bandwidth (as nccl-tests' alltoall) = algbw (p-1)/p. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double pairwise_alltoallv_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  double c = n / p;
  return m->alpha + 40 * m->beta + (p - 1) * (m->alpha + 32 * m->beta) +
         (p - 1) * (ceil(c / m->slice_bytes) * m->alpha + c * m->beta);
}

weft_result_t pairwise_alltoallv_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks;
  const size_t *sc = a->send_counts, *sd = a->send_displs;
  const size_t *rc = a->recv_counts, *rd = a->recv_displs;
  size_t send_end = 0, recv_end = 0;
  for (int j = 0; j < p; j++) {
    if (sc[j] && sd[j] + sc[j] > send_end) send_end = sd[j] + sc[j];
    if (rc[j] && rd[j] + rc[j] > recv_end) recv_end = rd[j] + rc[j];
  }
  sched_init(s, send_end, recv_end);
  sched_ring_headers(s, rank, p);
  /* The caller checked that its own part has one count both ways. */
  if (emit_own_copy(s, 0, rd[rank], sd[rank], rc[rank]) == EMIT_OOM) goto oom;
  for (int k = 1; k < p; k++) {
    int to = (rank + k) % p, from = (rank - k + p) % p;
    sched_op_t tell = {.kind = SCHED_SEND_TOKEN, .peer = to, .dep = -1, .step = k};
    tell.agree = (sched_agree_t){1, 0, WEFT_UINT8, sc[to], rc[to]};
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = to,
                       .buf = SCHED_SENDBUF,
                       .offset = sd[to],
                       .count = sc[to],
                       .dep = -1,
                       .step = k};
    sched_op_t hear = {.kind = SCHED_RECV_TOKEN, .peer = from, .dep = -1, .step = k};
    hear.agree = (sched_agree_t){1, 0, WEFT_UINT8, rc[from], sc[from]};
    if (emit(s, tell) == EMIT_OOM || emit(s, send) == EMIT_OOM) goto oom;
    int heard = emit(s, hear);
    if (heard == EMIT_OOM) goto oom;
    sched_op_t recv = {.kind = SCHED_RECV_COPY,
                       .peer = from,
                       .buf = SCHED_RECVBUF,
                       .offset = rd[from],
                       .count = rc[from],
                       .dep = heard,
                       .step = k,
                       .dep_whole = 1};
    if (emit(s, recv) == EMIT_OOM) goto oom;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "pairwise all-to-allv: out of memory building the schedule");
}
