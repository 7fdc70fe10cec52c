/* emit.h -- internal: the shorthands algorithm files append ops with. */
#ifndef WEFT_COLLECTIVES_EMIT_H_
#define WEFT_COLLECTIVES_EMIT_H_

#include "collectives/schedule.h"

#define EMIT_OOM (-2)

/* Appends `op` and returns its index. An op that would move no elements is left out and -1
 * returned: every op that depends on it has the same count and is left out as well, so -1 also
 * reads as "no dependency". EMIT_OOM when out of memory. */
static inline int emit(schedule_t *s, sched_op_t op) {
  if (op.count == 0 && op.kind != SCHED_SEND_TOKEN && op.kind != SCHED_RECV_TOKEN) return -1;
  int i = sched_add(s, &op);
  return i < 0 ? EMIT_OOM : i;
}

/* The local copy of the caller's input into the output that a rank needs unless the call is in
 * place; returns as emit() does. */
static inline int emit_own_copy(schedule_t *s, int in_place, size_t dst_off, size_t src_off,
                                size_t count) {
  if (in_place) return -1;
  sched_op_t op = {.kind = SCHED_COPY,
                   .buf = SCHED_RECVBUF,
                   .offset = dst_off,
                   .count = count,
                   .src_buf = SCHED_SENDBUF,
                   .src_offset = src_off,
                   .dep = -1};
  return emit(s, op);
}

/* Makes the receive `recv` (a fused kind) write the slots of the send `send`, which depends on
 * it. Either index may be -1 or EMIT_OOM (nothing emitted): then nothing is linked, and a fused
 * receive without a send runs as its unfused kind. */
static inline void emit_link(schedule_t *s, int recv, int send) {
  if (recv < 0) return;
  if (send >= 0) {
    s->ops[recv].fwd = send;
    return;
  }
  sched_kind_t *k = &s->ops[recv].kind;
  if (*k == SCHED_RECV_REDUCE_SEND || *k == SCHED_RECV_REDUCE_COPY_SEND) *k = SCHED_RECV_REDUCE;
  if (*k == SCHED_RECV_COPY_SEND) *k = SCHED_RECV_COPY;
}

/* Sizes the scratch buffer to what the ops use, so builders need not add it up themselves. */
static inline void emit_size_scratch(schedule_t *s) {
  size_t end = 0;
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    if (op->buf == SCHED_SCRATCH && op->offset + op->count > end) end = op->offset + op->count;
    int has_src = sched_has_src(op->kind);
    if (has_src && op->src_buf == SCHED_SCRATCH && op->src_offset + op->count > end)
      end = op->src_offset + op->count;
  }
  s->buf_count[SCHED_SCRATCH] = end;
}

#endif /* WEFT_COLLECTIVES_EMIT_H_ */
