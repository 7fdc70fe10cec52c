/* halving.c -- recursive halving over units, shared by the Rabenseifner algorithms. */
#include "collectives/halving.h"

#include "collectives/emit.h"
#include "collectives/fold.h"

int halving_first(const halving_t *h, int w) { return h->per_rank ? fold_first(w, h->rem) : w; }

int halving_send(halving_t *h, int peer, int first, int end, int record, int step) {
  for (int c = first; c < end; c++) {
    unit_t *u = &h->u[c];
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = peer,
                     .buf = u->buf,
                     .offset = u->buf_off,
                     .count = u->len,
                     .dep = u->op,
                     .step = step};
    int i = emit(h->s, op);
    if (i == EMIT_OOM) return -1;
    if (record) u->sent = i;
  }
  return 0;
}

int halving_fold(halving_t *h, int peer, int first, int end, int final, int step) {
  for (int c = first; c < end; c++) {
    unit_t *u = &h->u[c];
    sched_op_t op = {.kind = SCHED_RECV_REDUCE,
                     .peer = peer,
                     .buf = u->acc,
                     .offset = u->acc_off,
                     .count = u->len,
                     .src_buf = u->buf,
                     .src_offset = u->buf_off,
                     .dep = u->op,
                     .final = final,
                     .step = step};
    if ((u->op = emit(h->s, op)) == EMIT_OOM) return -1;
    u->buf = u->acc;
    u->buf_off = u->acc_off;
  }
  return 0;
}

int halving_run(halving_t *h) {
  int lo = 0, step = 1;
  for (int half = h->q / 2; half >= 1; half /= 2, step++) {
    int peer = fold_real(h->v ^ half, h->rem);
    int keep = h->v & half ? lo + half : lo, give = h->v & half ? lo : lo + half;
    if (halving_send(h, peer, halving_first(h, give), halving_first(h, give + half), 1, step) ||
        halving_fold(h, peer, halving_first(h, keep), halving_first(h, keep + half), half == 1,
                     step))
      return -1;
    lo = keep;
  }
  return 0;
}
