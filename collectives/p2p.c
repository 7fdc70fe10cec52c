/* p2p.c -- send and recv between two ranks: one op each, the call description checked between
 * exactly those two (the other ranks take no part). Cost: alpha + n beta. */
#include "collectives/algorithms.h"
#include "common/error.h"

weft_result_t p2p_build(schedule_t *s, const sched_args_t *a) {
  int is_send = a->coll == WEFT_COLL_SEND;
  sched_init(s, is_send ? a->count : 0, is_send ? 0 : a->count);
  if (is_send)
    s->hdr_to = a->root;
  else
    s->hdr_from = a->root;
  if (a->count == 0) return WEFT_SUCCESS;
  sched_op_t op = {.kind = is_send ? SCHED_SEND : SCHED_RECV_COPY,
                   .peer = a->root,
                   .buf = is_send ? SCHED_SENDBUF : SCHED_RECVBUF,
                   .count = a->count,
                   .dep = -1};
  if (sched_add(s, &op) < 0)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "send/recv: out of memory building the schedule");
  return WEFT_SUCCESS;
}
