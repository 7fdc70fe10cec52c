/* goal.c -- every rank's schedule as GOAL text for LogGOPSim (goal.h says what is written). */
#include "tools/sim/goal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms.h"
#include "common/error.h"

static int is_token(sched_kind_t k) { return k == SCHED_SEND_TOKEN || k == SCHED_RECV_TOKEN; }
static int is_send(sched_kind_t k) { return k == SCHED_SEND || k == SCHED_SEND_TOKEN; }

weft_result_t goal_build(const sim_model_t *m, const sim_call_t *c, schedule_t *scheds) {
  weft_coll_t coll = c->coll;
  if (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV || coll == WEFT_COLL_P2P_GROUP ||
      coll == WEFT_COLL_ALL_TO_ALLV)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "weft-sim-goal: %s is not exported (collectives over all ranks with one "
                    "count only)",
                    weft_coll_name(coll));
  if (c->nranks < 1)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft-sim-goal: %d ranks: need at least 1",
                    c->nranks);
  const algo_entry_t *e = algo_lookup(coll, c->algo);
  if (!e)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft-sim-goal: %s has no %s algorithm",
                    weft_coll_name(coll), weft_algo_name(c->algo));
  /* The model's nodes reach the builders as topology, as in weft-sim. */
  int rpn = m->ranks_per_node;
  int *node_of = NULL;
  if (rpn > 0 && rpn < c->nranks) {
    node_of = malloc(sizeof(int) * (size_t)c->nranks);
    if (!node_of) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim-goal: out of memory");
    for (int r = 0; r < c->nranks; r++) node_of[r] = r / rpn;
  }
  for (int r = 0; r < c->nranks; r++) sched_init(&scheds[r], 0, 0);
  weft_result_t res = WEFT_SUCCESS;
  for (int r = 0; r < c->nranks && res == WEFT_SUCCESS; r++) {
    sched_args_t a = {
        .coll = coll, .rank = r, .nranks = c->nranks, .count = c->count, .root = c->root};
    if (node_of) {
      a.node_of = node_of;
      a.nnodes = (c->nranks + rpn - 1) / rpn;
    }
    res = e->build(&scheds[r], &a);
    if (res == WEFT_SUCCESS) res = sched_validate(&scheds[r], c->nranks);
    if (res != WEFT_SUCCESS)
      res = err_context(res, "weft-sim-goal: rank %d: %s %s schedule", r, weft_coll_name(coll),
                        weft_algo_name(c->algo));
  }
  free(node_of);
  if (res != WEFT_SUCCESS) goal_free(scheds, c->nranks);
  return res;
}

void goal_free(schedule_t *scheds, int nranks) {
  for (int r = 0; r < nranks; r++) sched_free(&scheds[r]);
}

goal_loggp_t goal_loggp(const sim_model_t *m, double unit_s) {
  goal_loggp_t p = {0};
  p.L = p.g = lround(m->alpha / unit_s);
  p.G = lround(m->beta / unit_s);
  p.S = 2147483647; /* LogGOPSim's largest: every message eager */
  return p;
}

/* One rank's writer: its schedule, slices and the per-peer state of its streams. */
typedef struct {
  FILE *out;
  const sim_model_t *m;
  const schedule_t *s;
  size_t esize, slice_elems;
  double unit_s;
  size_t *nslices;           /* per op */
  long *send_seq, *recv_seq; /* per peer: messages so far in each direction (the tag) */
  int *last_op;              /* per peer: the stream's last send (op index, -1: the header, */
  size_t *last_slice;        /* -2: none yet) and its slice */
  goal_stats_t *st;
} writer_t;

static double slice_bytes(const writer_t *w, const sched_op_t *op, size_t j) {
  /* executor.c: a token that carries values to agree on is SIM_AGREE_BYTES, a bare one 1. */
  if (is_token(op->kind)) return op->agree.on ? SIM_AGREE_BYTES : 1;
  size_t left = op->count - j * w->slice_elems;
  return (double)((left < w->slice_elems ? left : w->slice_elems) * w->esize);
}

/* The label that says slice j of op i is done: its reduction, its copy, or its message. */
static void done_label(const writer_t *w, int i, size_t j, char *buf, size_t len) {
  sched_kind_t k = w->s->ops[i].kind;
  char c = sched_is_reduce(k) ? 'r' : sched_is_local(k) ? 'c' : 'o';
  snprintf(buf, len, "%c%d_%zu", c, i, j);
}

/* The label that starts slice j of op i: its message, or its copy. */
static void start_label(const writer_t *w, int i, size_t j, char *buf, size_t len) {
  snprintf(buf, len, "%c%d_%zu", sched_is_local(w->s->ops[i].kind) ? 'c' : 'o', i, j);
}

static int line(writer_t *w, const char *a, const char *how, const char *b) {
  if (how[0] == 'i')
    w->st->irequires++;
  else
  w->st->requires ++;
  return fprintf(w->out, "%s %s %s\n", a, how, b) < 0;
}

/* Slice j of op i waits for its dependency as weft-sim's engine has it (sched_dep_ready). */
static int write_dep(writer_t *w, int i, size_t j, const char *me) {
  const sched_op_t *op = &w->s->ops[i];
  char other[48];
  if (op->dep < 0 || w->nslices[op->dep] == 0) return 0;
  if (op->dep_whole) {
    if (j > 0) { /* the first slice started: the dependency has finished */
      start_label(w, i, 0, other, sizeof other);
      return line(w, me, "irequires", other);
    }
    for (size_t k = 0; k < w->nslices[op->dep]; k++) {
      done_label(w, op->dep, k, other, sizeof other);
      if (line(w, me, "requires", other)) return 1;
    }
    return 0;
  }
  if (j >= w->nslices[op->dep]) return 0;
  done_label(w, op->dep, j, other, sizeof other);
  return line(w, me, "requires", other);
}

static long units(const writer_t *w, double seconds) { return lround(seconds / w->unit_s); }

static int write_slice(writer_t *w, int i, size_t j) {
  const sched_op_t *op = &w->s->ops[i];
  char me[48], prev[48];
  double bytes = slice_bytes(w, op, j);
  start_label(w, i, j, me, sizeof me);
  if (sched_is_local(op->kind)) { /* a local reduction costs what a receive's does (sim_run.c) */
    double per_byte = op->kind == SCHED_REDUCE ? w->m->gamma : w->m->beta_mem;
    w->st->calcs++;
    if (fprintf(w->out, "%s: calc %ld\n", me, units(w, bytes * per_byte)) < 0) return 1;
    return write_dep(w, i, j, me);
  }
  if (is_send(op->kind)) {
    w->st->sends++;
    w->st->bytes += bytes;
    if (fprintf(w->out, "%s: send %.0fb to %d tag %ld\n", me, bytes, op->peer,
                w->send_seq[op->peer]++) < 0)
      return 1;
    int last = w->last_op[op->peer];
    if (last != -2) { /* the stream leaves in schedule order */
      if (last == -1)
        snprintf(prev, sizeof prev, "hs");
      else
        snprintf(prev, sizeof prev, "o%d_%zu", last, w->last_slice[op->peer]);
      if (line(w, me, "irequires", prev)) return 1;
    }
    w->last_op[op->peer] = i;
    w->last_slice[op->peer] = j;
    return write_dep(w, i, j, me);
  }
  w->st->recvs++;
  if (fprintf(w->out, "%s: recv %.0fb from %d tag %ld\n", me, bytes, op->peer,
              w->recv_seq[op->peer]++) < 0)
    return 1;
  if (write_dep(w, i, j, me)) return 1;
  if (!sched_is_reduce(op->kind)) return 0;
  char red[48];
  done_label(w, i, j, red, sizeof red);
  w->st->calcs++;
  if (fprintf(w->out, "%s: calc %ld\n", red, units(w, bytes * w->m->gamma)) < 0) return 1;
  return line(w, red, "requires", me);
}

static int write_rank(writer_t *w, int rank) {
  const schedule_t *s = w->s;
  if (fprintf(w->out, "\nrank %d {\n", rank) < 0) return 1;
  if (w->m->headers && s->hdr_to >= 0) {
    w->st->sends++;
    w->st->bytes += SIM_HDR_BYTES;
    if (fprintf(w->out, "hs: send %db to %d tag %ld\n", SIM_HDR_BYTES, s->hdr_to,
                w->send_seq[s->hdr_to]++) < 0)
      return 1;
    w->last_op[s->hdr_to] = -1;
  }
  if (w->m->headers && s->hdr_from >= 0) {
    w->st->recvs++;
    if (fprintf(w->out, "hr: recv %db from %d tag %ld\n", SIM_HDR_BYTES, s->hdr_from,
                w->recv_seq[s->hdr_from]++) < 0)
      return 1;
  }
  for (int i = 0; i < s->nops; i++)
    for (size_t j = 0; j < w->nslices[i]; j++)
      if (write_slice(w, i, j)) return 1;
  return fprintf(w->out, "}\n") < 0;
}

/* Messages from rank `from` to rank `to`, counted as the writer counts them. */
static long stream_messages(const schedule_t *s, const sim_model_t *m, size_t slice_elems, int to,
                            int send) {
  long n = m->headers && (send ? s->hdr_to : s->hdr_from) == to;
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    if (sched_is_local(op->kind) || op->peer != to || is_send(op->kind) != send) continue;
    n += is_token(op->kind) ? 1 : (long)((op->count + slice_elems - 1) / slice_elems);
  }
  return n;
}

/* Every stream's two ends carry as many messages, or the tags would not pair. Each stream is
 * counted once (seen[peer] == r), not once per op. */
static weft_result_t check_pairs(const sim_model_t *m, int nranks, const schedule_t *scheds,
                                 size_t slice_elems) {
  int *seen = malloc(sizeof(int) * 2 * (size_t)nranks); /* [2 peer + sends] */
  if (!seen) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim-goal: out of memory");
  for (int q = 0; q < 2 * nranks; q++) seen[q] = -1;
  weft_result_t res = WEFT_SUCCESS;
  for (int r = 0; r < nranks && res == WEFT_SUCCESS; r++) {
    const schedule_t *s = &scheds[r];
    for (int i = -2; i < s->nops && res == WEFT_SUCCESS; i++) {
      /* -2, -1: the call description's streams; then the ops' */
      int send = i == -2 || (i >= 0 && is_send(s->ops[i].kind));
      int peer = i == -2 ? s->hdr_to : i == -1 ? s->hdr_from : s->ops[i].peer;
      if (i < 0 && (!m->headers || peer < 0)) continue;
      if (i >= 0 && sched_is_local(s->ops[i].kind)) continue;
      if (seen[2 * peer + send] == r) continue;
      seen[2 * peer + send] = r;
      long mine = stream_messages(s, m, slice_elems, peer, send);
      long theirs = stream_messages(&scheds[peer], m, slice_elems, r, !send);
      if (mine != theirs)
        res = WEFT_ERR(WEFT_ERR_INTERNAL,
                       "weft-sim-goal: rank %d %s %ld messages %s rank %d, which %s %ld", r,
                       send ? "sends" : "receives", mine, send ? "to" : "from", peer,
                       send ? "receives" : "sends", theirs);
    }
  }
  free(seen);
  return res;
}

weft_result_t goal_write(FILE *out, const sim_model_t *m, int nranks, size_t esize,
                         const schedule_t *scheds, double unit_s, goal_stats_t *stats) {
  goal_stats_t local;
  goal_stats_t *st = stats ? stats : &local;
  memset(st, 0, sizeof *st);
  if (!(unit_s > 0) || nranks < 1 || esize < 1 || m->slice_bytes < 1)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "weft-sim-goal: unit %g s, %d ranks, %zu-byte elements, %zu-byte slices: "
                    "each must be > 0",
                    unit_s, nranks, esize, m->slice_bytes);
  size_t slice_elems = m->slice_bytes / esize ? m->slice_bytes / esize : 1;
  WEFT_CHECK(check_pairs(m, nranks, scheds, slice_elems));
  writer_t w = {
      .out = out, .m = m, .esize = esize, .slice_elems = slice_elems, .unit_s = unit_s, .st = st};
  w.send_seq = calloc((size_t)nranks, sizeof(long));
  w.recv_seq = calloc((size_t)nranks, sizeof(long));
  w.last_op = malloc(sizeof(int) * (size_t)nranks);
  w.last_slice = calloc((size_t)nranks, sizeof(size_t));
  weft_result_t res = WEFT_SUCCESS;
  if (!w.send_seq || !w.recv_seq || !w.last_op || !w.last_slice) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim-goal: out of memory for %d ranks", nranks);
    goto done;
  }
  if (fprintf(out,
              "// weft schedules for LogGOPSim: one send/recv per slice, calc in units "
              "of %g s\nnum_ranks %d\n",
              unit_s, nranks) < 0)
    goto io;
  for (int r = 0; r < nranks; r++) {
    const schedule_t *s = &scheds[r];
    w.s = s;
    free(w.nslices);
    w.nslices = calloc((size_t)s->nops + 1, sizeof(size_t));
    if (!w.nslices) {
      res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim-goal: out of memory for rank %d", r);
      goto done;
    }
    for (int i = 0; i < s->nops; i++) {
      const sched_op_t *op = &s->ops[i];
      w.nslices[i] = is_token(op->kind) ? 1 : (op->count + slice_elems - 1) / slice_elems;
    }
    memset(w.send_seq, 0, sizeof(long) * (size_t)nranks);
    memset(w.recv_seq, 0, sizeof(long) * (size_t)nranks);
    for (int q = 0; q < nranks; q++) w.last_op[q] = -2;
    if (write_rank(&w, r)) goto io;
  }
  if (fflush(out) == 0) goto done;
io:
  res = WEFT_ERR(WEFT_ERR_SYSTEM, "weft-sim-goal: writing the GOAL text: %s", strerror(errno));
done:
  free(w.nslices);
  free(w.send_seq);
  free(w.recv_seq);
  free(w.last_op);
  free(w.last_slice);
  return res;
}
