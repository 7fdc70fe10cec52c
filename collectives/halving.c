/* halving.c -- recursive halving over units, shared by the Rabenseifner algorithms. */
#include "collectives/halving.h"

#include <math.h>

#include "collectives/emit.h"
#include "collectives/fold.h"

void halving_init(halving_t *h, schedule_t *s, int rank, int p, int per_rank, size_t count) {
  int q = fold_pow2(p), rem = p - q;
  *h = (halving_t){.s = s,
                   .q = q,
                   .rem = rem,
                   .v = fold_vrank(rank, rem),
                   .per_rank = per_rank,
                   .count = count,
                   .buf = SCHED_SENDBUF,
                   .op = -1,
                   .acc = SCHED_RECVBUF,
                   .own_op = -1,
                   .last_fold = -1};
  for (int k = 0; k <= HALVING_MAX_STEPS; k++) h->sent[k] = -1;
}

/* The first element of virtual rank w's units (w = q: the end of the buffer). */
static size_t unit_start(const halving_t *h, int w) {
  if (h->per_rank) return (size_t)fold_first(w, h->rem) * h->count;
  if (w >= h->q) return h->count;
  size_t off, len;
  sched_chunk(h->count, h->q, w, &off, &len);
  return off;
}

void halving_range(const halving_t *h, int w0, int w1, size_t *off, size_t *len) {
  *off = unit_start(h, w0);
  *len = unit_start(h, w1) - *off;
}

/* Receives [off, +len) from peer and folds it with the current values into dst[off - shift]. */
static int fold_into(halving_t *h, int peer, size_t off, size_t len, int final, int step,
                     sched_buf_t dst, size_t shift) {
  sched_op_t op = {.kind = SCHED_RECV_REDUCE,
                   .peer = peer,
                   .buf = dst,
                   .offset = off - shift,
                   .count = len,
                   .src_buf = h->buf,
                   .src_offset = off - h->shift,
                   .dep = h->op,
                   .dep_whole = 1,
                   .final = final,
                   .step = step};
  int i = emit(h->s, op);
  if (i >= 0) h->last_fold = i;
  return i;
}

int halving_fold(halving_t *h, int peer, size_t off, size_t len, int step) {
  int i = fold_into(h, peer, off, len, 0, step, h->acc, h->acc_shift);
  if (i == EMIT_OOM) return -1;
  h->op = i;
  h->buf = h->acc;
  h->shift = h->acc_shift;
  return 0;
}

int halving_fold_out(schedule_t *s, int rank, size_t give, size_t back, int step) {
  sched_op_t out = {
      .kind = SCHED_SEND, .peer = rank + 1, .buf = SCHED_SENDBUF, .count = give, .dep = -1};
  int i = emit(s, out);
  sched_op_t in = {.kind = SCHED_RECV_COPY,
                   .peer = rank + 1,
                   .buf = SCHED_RECVBUF,
                   .count = back,
                   .dep = i,
                   .dep_whole = give != back,
                   .step = step};
  return i == EMIT_OOM || emit(s, in) == EMIT_OOM ? -1 : 0;
}

int halving_run(halving_t *h) {
  int lo = 0, step = 1;
  for (int half = h->q / 2; half >= 1; half /= 2, step++) {
    int peer = fold_real(h->v ^ half, h->rem);
    int keep = h->v & half ? lo + half : lo, give = h->v & half ? lo : lo + half;
    size_t goff, glen, koff, klen;
    halving_range(h, give, give + half, &goff, &glen);
    halving_range(h, keep, keep + half, &koff, &klen);
    /* The last step of a reduce-scatter sends block by block: the partner receives its own
     * block apart (into recvbuf), and the ops of a stream pair one to one. */
    size_t piece = half == 1 && h->per_rank ? h->count : glen, o = goff;
    do {
      size_t len = goff + glen - o < piece ? goff + glen - o : piece;
      sched_op_t send = {.kind = SCHED_SEND,
                         .peer = peer,
                         .buf = h->buf,
                         .offset = o - h->shift,
                         .count = len,
                         .dep = h->op,
                         .dep_whole = 1,
                         .step = step};
      if ((h->sent[step] = emit(h->s, send)) == EMIT_OOM) return -1;
      o += len;
    } while (o < goff + glen);
    int i;
    if (half > 1 || h->own_len == 0) {
      i = fold_into(h, peer, koff, klen, half == 1, step, h->acc, h->acc_shift);
    } else {
      /* The own block ends the kept range (fold.h: real rank 2i+1 plays virtual rank i, whose
       * blocks are 2i and 2i+1), so the range is at most two pieces, in stream order. */
      i = fold_into(h, peer, koff, h->own_off - koff, 1, step, h->acc, h->acc_shift);
      if (i != EMIT_OOM)
        h->own_op = fold_into(h, peer, h->own_off, h->own_len, 1, step, SCHED_RECVBUF,
                              h->own_off - h->own_dst);
      if (h->own_op == EMIT_OOM) return -1;
    }
    if (i == EMIT_OOM) return -1;
    h->op = i;
    h->buf = h->acc;
    h->shift = h->acc_shift;
    lo = keep;
  }
  return 0;
}

double halving_copy_step_cost(const cost_model_t *c, double m) {
  if (m <= 0) return 0;
  return ceil(m / c->slice_bytes) * c->alpha + m * c->beta;
}

double halving_reduce_step_cost(const cost_model_t *c, double m, int ops) {
  if (m <= 0) return 0;
  double e = m / ops, k = ceil(e / c->slice_bytes), s1 = fmin(e, c->slice_bytes);
  double r = e - (k - 1) * c->slice_bytes;
  double port = ops * k * c->alpha + m * c->beta + r * c->gamma;
  double cpu = c->alpha + s1 * c->beta + m * c->gamma;
  return fmax(port, cpu);
}
