/* msccl_build.c -- one rank's schedule from a read MSCCL program (msccl_build), and which calls
 * it runs (msccl_applies). */
#include <stdlib.h>
#include <string.h>

#include "collectives/msccl_program.h"
#include "common/error.h"

/* Elements of the input and output for a call of `count` (weft.h's per-rank count). */
static void call_sizes(weft_coll_t coll, int nranks, size_t count, size_t *in, size_t *out) {
  size_t n = (size_t)nranks;
  *in = coll == WEFT_COLL_REDUCE_SCATTER || coll == WEFT_COLL_ALL_TO_ALL ? n * count : count;
  *out = coll == WEFT_COLL_ALL_GATHER || coll == WEFT_COLL_ALL_TO_ALL ? n * count : count;
}

size_t msccl_count_unit(const msccl_program_t *p, int nranks) {
  size_t in, out;
  call_sizes(p->coll, nranks, 1, &in, &out);
  /* The smallest count whose input cuts into the chunks: chunks / gcd(chunks, in per count). */
  size_t chunks = (size_t)p->gpus[0].chunks[BUF_I], x = chunks, y = in;
  while (y) {
    size_t t = x % y;
    x = y;
    y = t;
  }
  return chunks / x;
}

weft_result_t msccl_applies(const msccl_program_t *p, weft_coll_t coll, int nranks, size_t count,
                            int *use) {
  *use = 0;
  if (coll != p->coll) return WEFT_SUCCESS;
  if (nranks != p->ngpus)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "algorithm file %s is for %d ranks (ngpus) but the communicator has %d",
                    p->what, p->ngpus, nranks);
  *use = count > 0 && count % msccl_count_unit(p, nranks) == 0;
  return WEFT_SUCCESS;
}

/* ---- building one rank's schedule ----------------------------------------------------------- */

typedef struct {
  sched_buf_t buf;
  size_t off, len;
} range_t;

typedef struct {
  const msccl_program_t *p;
  const gpu_t *x;
  schedule_t *s;
  size_t chunk;
  sched_buf_t map_buf[3];
  size_t map_off[3];
  size_t rrs_next;            /* scratch for rrs results */
  int *first_op, *last_op;    /* per (tb, step): the step's ops, -1 for none (nop) */
  int *base;                  /* per tb: index of its step 0 in first_op/last_op */
  int prelude;                /* the copy every first step waits for, -1: none */
  size_t *rrs_off;            /* per (tb, step): its result's scratch offset */
  int *seen_any, *seen_whole; /* per (tb, step): the op wait_for last visited it for */
} build_t;

static range_t map(const build_t *b, int buf, int off, int cnt) {
  return (range_t){b->map_buf[buf], b->map_off[buf] + (size_t)off * b->chunk,
                   (size_t)cnt * b->chunk};
}

/* The local ranges a step touches. */
static int ranges(const build_t *b, int tb, int si, range_t *r) {
  const step_t *st = &b->x->tbs[tb].steps[si];
  int n = 0;
  if (st->type == T_NOP) return 0;
  if (type_reads_src(st->type)) r[n++] = map(b, st->srcbuf, st->srcoff, st->cnt);
  if (type_writes_dst(st->type)) r[n++] = map(b, st->dstbuf, st->dstoff, st->cnt);
  if (st->type == T_RRS)
    r[n++] = (range_t){SCHED_SCRATCH, b->rrs_off[b->base[tb] + si], (size_t)st->cnt * b->chunk};
  return n;
}

/* Whether step (t1, s1) may wait for (t2, s2) slice by slice: the same count, and every range
 * they share at the same place (slice j of one is slice j of the other), at least one shared.
 * Otherwise it waits for the whole step. A chain of slice-wise waits is safe only through
 * shared ranges, so disjoint steps -- linked for ordering's sake -- wait whole too. */
static int slicewise(const build_t *b, int t1, int s1, int t2, int s2) {
  const step_t *x = &b->x->tbs[t1].steps[s1], *y = &b->x->tbs[t2].steps[s2];
  if (x->type == T_NOP || y->type == T_NOP || x->cnt != y->cnt) return 0;
  range_t rx[3], ry[3];
  int nx = ranges(b, t1, s1, rx), ny = ranges(b, t2, s2, ry), same = 0;
  for (int i = 0; i < nx; i++)
    for (int j = 0; j < ny; j++) {
      if (rx[i].buf != ry[j].buf) continue;
      if (rx[i].off == ry[j].off) {
        same = 1;
        continue;
      }
      if (rx[i].off < ry[j].off + ry[j].len && ry[j].off < rx[i].off + rx[i].len) return 0;
    }
  return same;
}

/* Whether step (t1, s1) writes memory that step (t2, s2) sends from. */
static int overwrites_sent(const build_t *b, int t1, int s1, int t2, int s2) {
  const step_t *x = &b->x->tbs[t1].steps[s1], *y = &b->x->tbs[t2].steps[s2];
  range_t w[2], src;
  int nw = 0;
  if (type_writes_dst(x->type)) w[nw++] = map(b, x->dstbuf, x->dstoff, x->cnt);
  if (x->type == T_RRS)
    w[nw++] = (range_t){SCHED_SCRATCH, b->rrs_off[b->base[t1] + s1], (size_t)x->cnt * b->chunk};
  if (y->type == T_S)
    src = map(b, y->srcbuf, y->srcoff, y->cnt);
  else if (y->type == T_RRS)
    src = (range_t){SCHED_SCRATCH, b->rrs_off[b->base[t2] + s2], (size_t)y->cnt * b->chunk};
  else
    src = map(b, y->dstbuf, y->dstoff, y->cnt);
  for (int i = 0; i < nw; i++)
    if (w[i].buf == src.buf && w[i].off < src.off + src.len && src.off < w[i].off + w[i].len)
      return 1;
  return 0;
}

/* Adds `dep` to op's prerequisites; the same one twice keeps the stricter. */
static weft_result_t add_dep(build_t *b, int op, int dep, int w) {
  const sched_op_t *o = &b->s->ops[op];
  for (int k = 0; k < sched_ndeps(o); k++) {
    sched_dep_t d = sched_dep_at(b->s, o, k);
    if (d.op != dep) continue;
    if (w && !d.whole) {
      if (k == 0 && o->dep == dep)
        b->s->ops[op].dep_whole = 1;
      else
        b->s->deps[o->more_deps + k - (o->dep >= 0)].whole = 1;
    }
    return WEFT_SUCCESS;
  }
  if (sched_add_dep(b->s, op, dep, w) < 0)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory building the schedule");
  return WEFT_SUCCESS;
}

/* Adds to op `op` what step (tb, si) needs of step (dt, ds), which comes before it on its tb or
 * is its depid/deps. A step's sending part only reads: unless (tb, si) overwrites what it sends,
 * waiting for the send to complete -- for the peer to take it -- would only couple the two ranks'
 * progress (a ring whose every rank waits for its own send before receiving deadlocks once a
 * chunk outgrows the link's buffers). So such a wait goes to the step's receive, or, for a plain
 * send, on to what the send itself waited for. A nop passes on what it waited for, whole. Each
 * step is visited at most twice per op (seen_any, seen_whole). */
static weft_result_t wait_for(build_t *b, int op, int tb, int si, int dt, int ds, int whole) {
  if (dt < 0 || ds < 0) {
    if (b->prelude >= 0 && ds < 0 && dt >= 0) return add_dep(b, op, b->prelude, 1);
    return WEFT_SUCCESS;
  }
  int slot = b->base[dt] + ds;
  if (b->seen_whole[slot] == op || (b->seen_any[slot] == op && !whole)) return WEFT_SUCCESS;
  b->seen_any[slot] = op;
  if (whole) b->seen_whole[slot] = op;
  const step_t *y = &b->x->tbs[dt].steps[ds];
  int pass = y->type == T_NOP;
  int target = b->last_op[slot];
  if (type_sends(y->type) && !overwrites_sent(b, tb, si, dt, ds)) {
    if (y->type == T_S)
      pass = 1;
    else
      target = b->first_op[slot];
  }
  if (!pass) return add_dep(b, op, target, whole || !slicewise(b, tb, si, dt, ds));
  int w = whole || y->type == T_NOP;
  WEFT_CHECK(wait_for(b, op, tb, si, dt, ds - 1, w));
  if (y->depid >= 0) WEFT_CHECK(wait_for(b, op, tb, si, y->depid, y->deps, w));
  return WEFT_SUCCESS;
}

static int add_op(build_t *b, sched_op_t op) {
  int i = sched_add(b->s, &op);
  return i;
}

/* Emits the ops of step (tb, si) and records its first and last op. */
static weft_result_t emit_step(build_t *b, int tb_i, int si) {
  const tb_t *tb = &b->x->tbs[tb_i];
  const step_t *st = &tb->steps[si];
  int slot = b->base[tb_i] + si;
  if (st->type == T_NOP) return WEFT_SUCCESS;
  range_t src = map(b, st->srcbuf, st->srcoff, st->cnt);
  range_t dst = map(b, st->dstbuf, st->dstoff, st->cnt);
  if (st->type == T_RRS)
    dst = (range_t){SCHED_SCRATCH, b->rrs_off[slot], (size_t)st->cnt * b->chunk};
  sched_op_t op = {.peer = -1, .dep = -1, .fwd = -1, .step = si, .channel = tb->chan};
  op.count = (size_t)st->cnt * b->chunk;
  int first = -1, last;
  switch (st->type) {
    case T_S:
      op.kind = SCHED_SEND;
      op.peer = tb->send;
      op.buf = src.buf;
      op.offset = src.off;
      break;
    case T_R:
    case T_RCS:
      op.kind = SCHED_RECV_COPY;
      op.peer = tb->recv;
      op.buf = dst.buf;
      op.offset = dst.off;
      break;
    case T_RRS:
    case T_RRC:
    case T_RRCS:
      op.kind = SCHED_RECV_REDUCE;
      op.peer = tb->recv;
      op.buf = dst.buf;
      op.offset = dst.off;
      op.src_buf = src.buf;
      op.src_offset = src.off;
      break;
    case T_CPY:
    case T_RE:
      op.kind = st->type == T_CPY ? SCHED_COPY : SCHED_REDUCE;
      op.buf = dst.buf;
      op.offset = dst.off;
      op.src_buf = src.buf;
      op.src_offset = src.off;
      if (src.buf == dst.buf && src.off != dst.off && src.off < dst.off + dst.len &&
          dst.off < src.off + src.len)
        return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                        "%s:%d: <step>: %s from a range that partly overlaps its destination",
                        b->p->what, st->line, msccl_type_names[st->type]);
      break;
    case T_NOP:
      break;
  }
  last = add_op(b, op);
  if (last < 0) goto oom;
  first = last;
  WEFT_CHECK(wait_for(b, first, tb_i, si, tb_i, si - 1, 0));
  if (st->depid >= 0) WEFT_CHECK(wait_for(b, first, tb_i, si, st->depid, st->deps, 0));
  if (st->type == T_RCS || st->type == T_RRS || st->type == T_RRCS) {
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = tb->send,
                       .buf = dst.buf,
                       .offset = dst.off,
                       .count = op.count,
                       .dep = first,
                       .fwd = -1,
                       .step = si,
                       .channel = tb->chan};
    last = add_op(b, send);
    if (last < 0) goto oom;
  }
  b->first_op[slot] = first;
  b->last_op[slot] = last;
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory building the schedule");
}

weft_result_t msccl_build(const msccl_program_t *p, schedule_t *s, const sched_args_t *a) {
  size_t in, out;
  call_sizes(a->coll, a->nranks, a->count, &in, &out);
  const gpu_t *x = &p->gpus[a->rank];
  sched_init(s, in, out);
  sched_ring_headers(s, a->rank, a->nranks);
  build_t b = {.p = p, .x = x, .s = s, .prelude = -1};
  b.chunk = in / (size_t)x->chunks[BUF_I];
  size_t scratch = (size_t)x->chunks[BUF_S] * b.chunk;
  int nsteps = 0;
  for (int t = 0; t < x->ntbs; t++) nsteps += x->tbs[t].nsteps;
  b.first_op = malloc(sizeof(int) * (size_t)(nsteps + 1));
  b.last_op = malloc(sizeof(int) * (size_t)(nsteps + 1));
  b.base = malloc(sizeof(int) * (size_t)(x->ntbs + 1));
  b.rrs_off = malloc(sizeof(size_t) * (size_t)(nsteps + 1));
  b.seen_any = malloc(sizeof(int) * (size_t)(nsteps + 1));
  b.seen_whole = malloc(sizeof(int) * (size_t)(nsteps + 1));
  weft_result_t res = WEFT_SUCCESS;
  if (!b.first_op || !b.last_op || !b.base || !b.rrs_off || !b.seen_any || !b.seen_whole) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory building the schedule");
    goto out;
  }
  /* rrs results, then the buffers below, go after the program's scratch. */
  for (int t = 0, k = 0; t < x->ntbs; t++) {
    b.base[t] = k;
    for (int si = 0; si < x->tbs[t].nsteps; si++, k++) {
      b.first_op[k] = b.last_op[k] = b.seen_any[k] = b.seen_whole[k] = -1;
      b.rrs_off[k] = scratch;
      if (x->tbs[t].steps[si].type == T_RRS) scratch += (size_t)x->tbs[t].steps[si].cnt * b.chunk;
    }
  }
  /* Where i, o and s live. An in-place program's i and o are one buffer: the output for
   * all_reduce and all_gather (the input at this rank's place in it), else a scratch copy that is
   * copied out at the end. An out-of-place program reads the caller's input unless the call is
   * in place or the program writes i: then it reads a scratch copy. */
  b.map_buf[BUF_S] = SCHED_SCRATCH;
  b.map_off[BUF_S] = 0;
  size_t I = in, O = out;
  int prelude = 0, postlude = 0;
  size_t pre_dst_off = 0;
  sched_buf_t pre_dst = SCHED_RECVBUF;
  if (p->inplace) {
    size_t iu = 0, ou = 0;
    if (a->coll == WEFT_COLL_ALL_GATHER) iu = (size_t)a->rank * I;
    if (a->coll == WEFT_COLL_REDUCE_SCATTER) ou = (size_t)a->rank * O;
    if (a->coll == WEFT_COLL_ALL_REDUCE || a->coll == WEFT_COLL_ALL_GATHER) {
      b.map_buf[BUF_I] = b.map_buf[BUF_O] = SCHED_RECVBUF;
      b.map_off[BUF_I] = iu;
      b.map_off[BUF_O] = 0;
      prelude = !a->in_place;
      pre_dst = SCHED_RECVBUF;
      pre_dst_off = iu;
    } else {
      size_t u = scratch;
      scratch += (iu + I > ou + O ? iu + I : ou + O);
      b.map_buf[BUF_I] = b.map_buf[BUF_O] = SCHED_SCRATCH;
      b.map_off[BUF_I] = u + iu;
      b.map_off[BUF_O] = u + ou;
      prelude = postlude = 1;
      pre_dst = SCHED_SCRATCH;
      pre_dst_off = u + iu;
    }
  } else {
    int writes_i = 0;
    for (int t = 0; t < x->ntbs; t++)
      for (int si = 0; si < x->tbs[t].nsteps; si++) {
        const step_t *st = &x->tbs[t].steps[si];
        writes_i |= type_writes_dst(st->type) && st->dstbuf == BUF_I;
      }
    b.map_buf[BUF_O] = SCHED_RECVBUF;
    b.map_off[BUF_O] = 0;
    b.map_buf[BUF_I] = SCHED_SENDBUF;
    b.map_off[BUF_I] = 0;
    if (a->in_place || writes_i) {
      b.map_buf[BUF_I] = SCHED_SCRATCH;
      b.map_off[BUF_I] = scratch;
      prelude = 1;
      pre_dst = SCHED_SCRATCH;
      pre_dst_off = scratch;
      scratch += I;
    }
  }
  s->buf_count[SCHED_SCRATCH] = scratch;
  if (prelude) {
    sched_op_t cp = {.kind = SCHED_COPY,
                     .peer = -1,
                     .buf = pre_dst,
                     .offset = pre_dst_off,
                     .count = I,
                     .src_buf = SCHED_SENDBUF,
                     .dep = -1,
                     .fwd = -1,
                     .step = -1};
    b.prelude = sched_add(s, &cp);
    if (b.prelude < 0) res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
  }
  for (int k = 0; k < x->nrun && res == WEFT_SUCCESS; k++)
    res = emit_step(&b, x->run_tb[k], x->run_step[k]);
  if (res == WEFT_SUCCESS && postlude) {
    sched_op_t cp = {.kind = SCHED_COPY,
                     .peer = -1,
                     .buf = SCHED_RECVBUF,
                     .offset = 0,
                     .count = O,
                     .src_buf = SCHED_SCRATCH,
                     .src_offset = b.map_off[BUF_O],
                     .dep = -1,
                     .fwd = -1,
                     .step = -1};
    int i = sched_add(s, &cp);
    if (i < 0) res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
    /* After every tb's last op (each waits, through its tb's order, for the ops before it). */
    for (int t = 0; t < x->ntbs && res == WEFT_SUCCESS; t++)
      for (int si = x->tbs[t].nsteps - 1; si >= 0; si--) {
        int last = b.last_op[b.base[t] + si];
        if (last < 0) continue;
        if (sched_add_dep(s, i, last, 1) < 0)
          res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
        break;
      }
  }
  if (res == WEFT_SUCCESS) res = sched_validate(s, a->nranks);
  if (res != WEFT_SUCCESS)
    err_context(res, "rank %d: building %s from %s", a->rank, weft_coll_name(a->coll), p->what);
out:
  free(b.first_op);
  free(b.last_op);
  free(b.base);
  free(b.rrs_off);
  free(b.seen_any);
  free(b.seen_whole);
  if (res != WEFT_SUCCESS) sched_free(s);
  return res;
}
