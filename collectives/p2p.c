/* p2p.c -- point-to-point: a group of sends and receives to any peers (comm/p2p_group.c), or,
 * for the simulators, one send or recv between two ranks.
 *
 *   rank a: [token tag 1, 4 elems][data]  [token tag 2, 0 elems]        --> rank b
 *   rank b: [recv token tag 1][recv data, after the token]  [recv token tag 2]
 *
 * Ops to one peer in one direction form one ordered stream, listed in tag order (issue order
 * among equal tags) on both sides, so they pair up by tag. Every message is preceded by a token
 * with its tag, dtype and count (schedule.h's sched_agree_t): the receiver's executor checks it
 * against its own op before the data is received, so a mismatch fails naming both. There is no
 * call description: the ranks of a group are only those it names, and the tokens say what the
 * description would. Streams to different peers and directions progress independently, so no
 * order of sends and receives between ranks can wait on itself.
 *
 * Cost of one message: a token then the data, 2a + (32 + n) b. */
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

/* Appends one op: its token, then its data (none for 0 elements). */
static int emit_one(schedule_t *s, const sched_p2p_t *o) {
  sched_op_t tok = {
      .kind = o->is_send ? SCHED_SEND_TOKEN : SCHED_RECV_TOKEN, .peer = o->peer, .dep = -1};
  tok.agree = (sched_agree_t){1, o->tag, o->dtype, o->count, 0};
  int t = emit(s, tok);
  if (t == EMIT_OOM) return EMIT_OOM;
  sched_op_t data = {.kind = o->is_send ? SCHED_SEND : SCHED_RECV_COPY,
                     .peer = o->peer,
                     .buf = o->is_send ? SCHED_SENDBUF : SCHED_RECVBUF,
                     .offset = o->offset,
                     .count = o->bytes,
                     /* A receive lands only once its token checked out. */
                     .dep = o->is_send ? -1 : t,
                     .dep_whole = !o->is_send};
  return emit(s, data) == EMIT_OOM ? EMIT_OOM : 0;
}

/* Stable order of one peer's ops in one direction: by tag, then as issued. */
static int by_tag(const void *x, const void *y) {
  const sched_p2p_t *a = *(const sched_p2p_t *const *)x, *b = *(const sched_p2p_t *const *)y;
  if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
  return a < b ? -1 : a > b;
}

weft_result_t p2p_build(schedule_t *s, const sched_args_t *a) {
  if (!a->p2p) { /* one send or recv of `count` elements of one byte, peer `root` */
    int is_send = a->coll == WEFT_COLL_SEND;
    sched_init(s, is_send ? a->count : 0, is_send ? 0 : a->count);
    sched_p2p_t one = {is_send, a->root, 0, WEFT_UINT8, a->count, a->count, 0};
    return emit_one(s, &one) == EMIT_OOM
               ? WEFT_ERR(WEFT_ERR_NO_MEMORY, "send/recv: out of memory building the schedule")
               : WEFT_SUCCESS;
  }
  sched_init(s, a->p2p_send_bytes, a->p2p_recv_bytes);
  const sched_p2p_t **order = malloc(sizeof *order * (size_t)(a->np2p ? a->np2p : 1));
  if (!order) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "p2p group: out of memory");
  weft_result_t res = WEFT_SUCCESS;
  for (int peer = 0; peer < a->nranks && res == WEFT_SUCCESS; peer++)
    for (int is_send = 1; is_send >= 0 && res == WEFT_SUCCESS; is_send--) {
      int n = 0;
      for (int i = 0; i < a->np2p; i++)
        if (a->p2p[i].peer == peer && a->p2p[i].is_send == is_send) order[n++] = &a->p2p[i];
      qsort(order, (size_t)n, sizeof *order, by_tag);
      for (int i = 0; i < n && res == WEFT_SUCCESS; i++)
        if (emit_one(s, order[i]) == EMIT_OOM)
          res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "p2p group: out of memory building the schedule");
    }
  free(order);
  return res;
}
