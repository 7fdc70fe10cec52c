/* schedule.c -- building and checking schedules (the data every algorithm produces). */
#include "collectives/schedule.h"

#include <stdlib.h>

#include "common/error.h"

const char *sched_kind_name(sched_kind_t k) {
  switch (k) {
    case SCHED_SEND:
      return "send";
    case SCHED_RECV_COPY:
      return "recv-copy";
    case SCHED_RECV_REDUCE:
      return "recv-reduce";
    case SCHED_SEND_TOKEN:
      return "send-token";
    case SCHED_RECV_TOKEN:
      return "recv-token";
    case SCHED_COPY:
      return "copy";
    case SCHED_RECV_REDUCE_SEND:
      return "recv-reduce-send";
    case SCHED_RECV_REDUCE_COPY_SEND:
      return "recv-reduce-copy-send";
    case SCHED_RECV_COPY_SEND:
      return "recv-copy-send";
    case SCHED_REDUCE:
      return "reduce";
  }
  return "?";
}

void sched_init(schedule_t *s, size_t send_count, size_t recv_count) {
  s->ops = NULL;
  s->nops = 0;
  s->cap = 0;
  s->buf_count[SCHED_SENDBUF] = send_count;
  s->buf_count[SCHED_RECVBUF] = recv_count;
  s->buf_count[SCHED_SCRATCH] = 0;
  s->hdr_to = -1;
  s->hdr_from = -1;
  s->deps = NULL;
  s->ndeps = s->deps_cap = 0;
}

void sched_ring_headers(schedule_t *s, int rank, int nranks) {
  if (nranks < 2) return;
  s->hdr_to = (rank + 1) % nranks;
  s->hdr_from = (rank - 1 + nranks) % nranks;
}

void sched_free(schedule_t *s) {
  free(s->ops);
  s->ops = NULL;
  s->nops = s->cap = 0;
  free(s->deps);
  s->deps = NULL;
  s->ndeps = s->deps_cap = 0;
}

int sched_add_dep(schedule_t *s, int i, int dep, int whole) {
  sched_op_t *op = &s->ops[i];
  if (op->dep < 0 && op->nmore == 0) {
    op->dep = dep;
    op->dep_whole = whole;
    return 0;
  }
  if (op->nmore == 0) op->more_deps = s->ndeps;
  if (op->more_deps + op->nmore != s->ndeps) return -1;
  if (s->ndeps == s->deps_cap) {
    int cap = s->deps_cap ? 2 * s->deps_cap : 16;
    sched_dep_t *d = realloc(s->deps, sizeof *d * (size_t)cap);
    if (!d) return -1;
    s->deps = d;
    s->deps_cap = cap;
  }
  s->deps[s->ndeps++] = (sched_dep_t){dep, whole};
  op->nmore++;
  return 0;
}

int sched_add(schedule_t *s, const sched_op_t *op) {
  if (s->nops == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    sched_op_t *ops = realloc(s->ops, sizeof *ops * (size_t)cap);
    if (!ops) return -1;
    s->ops = ops;
    s->cap = cap;
  }
  s->ops[s->nops] = *op;
  return s->nops++;
}

weft_result_t sched_append(schedule_t *s, const schedule_t *part, size_t base) {
  int shift = s->nops;
  if (part->buf_count[SCHED_SCRATCH] > 0)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule: a part with scratch cannot be appended");
  if (part->ndeps > 0)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "schedule: a part with further dependencies cannot be appended");
  for (int i = 0; i < part->nops; i++) {
    sched_op_t op = part->ops[i];
    op.offset += base;
    op.src_offset += base;
    if (op.dep >= 0) op.dep += shift;
    if (sched_is_fused(op.kind)) op.fwd += shift;
    if (sched_add(s, &op) < 0)
      return WEFT_ERR(WEFT_ERR_NO_MEMORY, "schedule: out of memory appending %d ops", part->nops);
  }
  return WEFT_SUCCESS;
}

void sched_chunk(size_t count, int nchunks, int c, size_t *offset, size_t *len) {
  size_t base = count / (size_t)nchunks;
  size_t extra = count % (size_t)nchunks;
  size_t cc = (size_t)c;
  *offset = cc * base + (cc < extra ? cc : extra);
  *len = base + (cc < extra ? 1 : 0);
}

static int is_token(sched_kind_t k) { return k == SCHED_SEND_TOKEN || k == SCHED_RECV_TOKEN; }

static int in_buffer(const schedule_t *s, sched_buf_t b, size_t offset, size_t count) {
  return (unsigned)b < SCHED_NUM_BUFS && offset <= s->buf_count[b] &&
         count <= s->buf_count[b] - offset;
}

/* The checks of op i; fed_by[f] is the fused op that claimed send f so far (-1: none), so that
 * two fused ops feeding one send are found in one pass. */
static weft_result_t validate_op(const schedule_t *s, int nranks, int i, int *fed_by) {
  const sched_op_t *op = &s->ops[i];
  if (!sched_is_local(op->kind) && (op->peer < 0 || op->peer >= nranks))
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule op %d: peer %d out of range", i, op->peer);
  if (op->agree.on && !is_token(op->kind))
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule op %d: only tokens carry values to agree on", i);
  if (!is_token(op->kind) && (op->count == 0 || !in_buffer(s, op->buf, op->offset, op->count)))
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "schedule op %d: range [%zu, +%zu) outside buffer %d of %zu elements", i,
                    op->offset, op->count, (int)op->buf,
                    (unsigned)op->buf < SCHED_NUM_BUFS ? s->buf_count[op->buf] : 0);
  if (sched_has_src(op->kind) && !in_buffer(s, op->src_buf, op->src_offset, op->count))
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule op %d: source range outside its buffer", i);
  if (op->nmore < 0 || (op->nmore > 0 && (op->more_deps < 0 || op->more_deps > s->ndeps ||
                                          op->nmore > s->ndeps - op->more_deps)))
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule op %d: further dependencies outside the list", i);
  /* Every dependency is earlier: the ops' order is then a topological one, so no cycle. */
  for (int k = 0; k < sched_ndeps(op); k++) {
    sched_dep_t d = sched_dep_at(s, op, k);
    if (d.op >= i || d.op < 0)
      return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule op %d depends on later op %d", i, d.op);
    if (!d.whole && s->ops[d.op].count != op->count)
      return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule op %d: dependency %d has another count", i,
                      d.op);
  }
  if (sched_is_fused(op->kind) && op->fwd > i && op->fwd < s->nops && s->ops[op->fwd].nmore > 0)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "schedule op %d: the send it feeds (op %d) may wait for nothing else", i,
                    op->fwd);
  /* A recv-reduce-send keeps nothing: only the send it feeds may use its result. */
  if (op->dep >= 0 && s->ops[op->dep].kind == SCHED_RECV_REDUCE_SEND && s->ops[op->dep].fwd != i) {
    const sched_op_t *d = &s->ops[op->dep];
    int reads = (op->kind == SCHED_SEND && op->buf == d->buf) ||
                (sched_has_src(op->kind) && op->src_buf == d->buf);
    if (reads)
      return WEFT_ERR(WEFT_ERR_INTERNAL,
                      "schedule op %d reads the result of op %d, a recv-reduce-send that only "
                      "writes the slots of op %d",
                      i, op->dep, d->fwd);
  }
  if (sched_is_fused(op->kind)) {
    const sched_op_t *f = op->fwd > i && op->fwd < s->nops ? &s->ops[op->fwd] : NULL;
    if (!f || f->kind != SCHED_SEND || f->dep != i || f->count != op->count)
      return WEFT_ERR(WEFT_ERR_INTERNAL,
                      "schedule op %d: fused step must feed a later send that depends on it "
                      "(fwd %d)",
                      i, op->fwd);
    if (fed_by[op->fwd] >= 0)
      return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule ops %d and %d feed the same send %d",
                      fed_by[op->fwd], i, op->fwd);
    fed_by[op->fwd] = i;
  }
  return WEFT_SUCCESS;
}

weft_result_t sched_validate(const schedule_t *s, int nranks) {
  if (s->hdr_to >= nranks || s->hdr_from >= nranks)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule: call-description peer out of range");
  int *fed_by = s->nops > 0 ? malloc(sizeof(int) * (size_t)s->nops) : NULL;
  if (s->nops > 0 && !fed_by)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "schedule: out of memory checking %d ops", s->nops);
  for (int i = 0; i < s->nops; i++) fed_by[i] = -1;
  weft_result_t res = WEFT_SUCCESS;
  for (int i = 0; i < s->nops && res == WEFT_SUCCESS; i++) res = validate_op(s, nranks, i, fed_by);
  free(fed_by);
  return res;
}
