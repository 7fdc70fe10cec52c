/* devcompile.c -- one rank's schedule compiled into a device program (devcompile.h,
 * kernels/devprog.h).
 *
 * Three passes over the schedule's ops:
 *   1. check: refuse what the device loop does not take (tokens, dep_whole), as UNSUPPORTED
 *      with the op and the reason; a malformed fused op is INTERNAL (sched_validate's job);
 *   2. place: decide for every fused op whether its forward SEND folds into it, and where the
 *      folded step goes (see choose_place below);
 *   3. emit: walk the ops in order, writing one step per op except the SENDs a fold absorbed,
 *      assigning links in first-use order, then translate deps from op to step indices and
 *      check that each points to an earlier step of the same count.
 *
 * All ranks of a call must decide alike (all compile or all fall back to the executor). The
 * decision reads only the rank's schedule's shape (op kinds, dep_whole flags, deps, fwd links),
 * the dtype and the slot size, never a buffer or a rank's data; folding or not is per rank and
 * changes no message, so it needs no agreement. Where every rank's schedule has the same kinds of
 * ops, as in every ring, chain, recursive-doubling and pairwise schedule, ranks decide alike.
 * They do not where ranks' shapes differ: binomial gather (p >= 4) and scatter (p >= 3)
 * (WEFT_ALGO_TREE) wait whole (dep_whole) on inner ranks only, so their leaves compile and the
 * inner ranks are refused; and a rank with more than DP_MAX_LINKS (peer, direction) pairs (a linear root of
 * more than 64 ranks) is refused alone. A caller must therefore combine the ranks' decisions (or
 * refuse those rows as a whole) before launching; tests/collectives/devcompile_test.cc lists
 * which rows decide alike. */
#include "collectives/devcompile.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* dp_buf_t is copied from sched_buf_t value for value (a step's buf is the op's buf). */
_Static_assert(DP_SENDBUF == (int)SCHED_SENDBUF && DP_RECVBUF == (int)SCHED_RECVBUF &&
                   DP_SCRATCH == (int)SCHED_SCRATCH && DP_NUM_BUFS == (int)SCHED_NUM_BUFS,
               "dp_buf_t must equal sched_buf_t");

/* What becomes of a fused op and the SEND it feeds. */
typedef enum {
  PLACE_AT_RECV = 1, /* one folded step where the fused receive was; the SEND is dropped */
  PLACE_AT_SEND = 2, /* one folded step where the SEND was; nothing where the receive was */
  PLACE_UNFUSED = 3  /* two steps: the receive into buf, then the SEND from buf */
} place_t;

/* Per op: for a fused op its place_t, for a SEND fed by a fused op that op's index + 1 (so that 0
 * means "a plain op"), and the step it ended up in. */
typedef struct {
  int *place;
  int *fed_by;
  int *step_of;
} plan_t;

static int is_token(sched_kind_t k) { return k == SCHED_SEND_TOKEN || k == SCHED_RECV_TOKEN; }

/* Pass 1. Tokens and dep_whole are properties of the algorithm, not of a rank's buffers. A
 * dep_whole flag on an op without a dep changes nothing (sched_dep_ready) and is let through. */
static weft_result_t check_op(const schedule_t *s, int i, int nranks) {
  const sched_op_t *op = &s->ops[i];
  if (is_token(op->kind))
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "devcompile: op %d (%s, peer %d): the device loop moves no tokens (barriers, "
                    "a p2p group's tag checks)",
                    i, sched_kind_name(op->kind), op->peer);
  /* An imported program's extra prerequisites and local reductions have no device step; the
   * channel field is a label (the host executor ignores it too) and passes. */
  if (op->nmore > 0)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "devcompile: op %d (%s, step %d) waits for %d ops besides op %d: a device step "
                    "has one dependency",
                    i, sched_kind_name(op->kind), op->step, op->nmore, op->dep);
  if (op->kind == SCHED_REDUCE)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "devcompile: op %d (reduce, step %d): the device loop has no local reduction",
                    i, op->step);
  if (op->dep_whole && op->dep >= 0)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "devcompile: op %d (%s, step %d) waits for the whole of op %d (dep_whole): the "
                    "device loop only pipelines slice r after slice r",
                    i, sched_kind_name(op->kind), op->step, op->dep);
  if (op->kind != SCHED_COPY && (op->peer < 0 || op->peer >= nranks))
    return WEFT_ERR(WEFT_ERR_INTERNAL, "devcompile: op %d (%s): peer %d out of range", i,
                    sched_kind_name(op->kind), op->peer);
  if (op->dep >= i)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "devcompile: op %d depends on later op %d", i, op->dep);
  if (sched_is_fused(op->kind)) {
    const sched_op_t *f = op->fwd > i && op->fwd < s->nops ? &s->ops[op->fwd] : NULL;
    if (!f || f->kind != SCHED_SEND || f->dep != i || f->count != op->count)
      return WEFT_ERR(WEFT_ERR_INTERNAL,
                      "devcompile: op %d (%s): fwd %d is not a later send of the same count that "
                      "depends on it",
                      i, sched_kind_name(op->kind), op->fwd);
  }
  return WEFT_SUCCESS;
}

/* Whether op k, where the schedule has it, uses link (peer, dir): a SEND its send link, every
 * receiving kind (fused ones included) its recv link. A fused op's sending half is its SEND op,
 * which the scan meets at the SEND's own index. */
static int op_uses(const sched_op_t *op, int peer, int dir) {
  if (sched_is_local(op->kind) || op->peer != peer) return 0;
  return dir == DP_LINK_SEND ? op->kind == SCHED_SEND : op->kind != SCHED_SEND;
}

/* Pass 2 for fused op i and its SEND j. Moving a link's use across another use of the same link
 * would change the order both ends count messages in, so:
 *   - at the receive's place (i), the send moves back from j to i: no op in (i, j) may use the
 *     send link. Deps stay earlier for free: the folded step's dep is the receive's (< i) and
 *     whatever depended on the SEND comes after j. Preferred for that reason;
 *   - else at the SEND's place (j), the receive moves forward from i to j: no op in (i, j) may use
 *     the recv link, nor depend on the receive (its dep would then point to a later step);
 *   - else unfused: both halves stay where they are (schedule.h: buf can hold the receive).
 * Checking against the schedule's own positions is enough although other folds move too: recv
 * uses only move forward and send uses only back, each without crossing a use of its link, so
 * two uses of one link never swap; and a fold whose receive moves to j leaves no dependent
 * behind it. */
static place_t choose_place(const schedule_t *s, int i) {
  const sched_op_t *f = &s->ops[i];
  int j = f->fwd;
  int send_peer = s->ops[j].peer;
  int send_free = 1, recv_free = 1;
  for (int k = i + 1; k < j; k++) {
    const sched_op_t *op = &s->ops[k];
    if (op_uses(op, send_peer, DP_LINK_SEND)) send_free = 0;
    if (op_uses(op, f->peer, DP_LINK_RECV) || op->dep == i) recv_free = 0;
  }
  if (send_free) return PLACE_AT_RECV;
  if (recv_free) return PLACE_AT_SEND;
  return PLACE_UNFUSED;
}

/* The index of link (peer, dir), added at its first use. */
static weft_result_t link_index(dp_program_t *p, int peer, int dir, int op, int16_t *out) {
  for (int l = 0; l < p->nlinks; l++)
    if (p->links[l].peer == peer && p->links[l].dir == dir) {
      *out = (int16_t)l;
      return WEFT_SUCCESS;
    }
  if (p->nlinks == DP_MAX_LINKS)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "devcompile: op %d (%s peer %d) needs link %d; a program has at most %d", op,
                    dir == DP_LINK_SEND ? "to" : "from", peer, DP_MAX_LINKS + 1, DP_MAX_LINKS);
  p->links[p->nlinks] = (dp_link_t){peer, dir};
  *out = (int16_t)p->nlinks++;
  return WEFT_SUCCESS;
}

/* The kind of a step that is one op (fused kinds: their receive half, when unfused). Tokens
 * never get here (check_op). */
static dp_kind_t plain_kind(sched_kind_t k) {
  if (k == SCHED_SEND) return DP_SEND;
  if (k == SCHED_COPY) return DP_COPY;
  if (k == SCHED_RECV_COPY || k == SCHED_RECV_COPY_SEND) return DP_RECV_COPY;
  /* RECV_REDUCE, and the reducing fused kinds unfused: reduce into buf (schedule.h: buf of a
   * fused kind is memory the SEND may read, recv-reduce-send's included). */
  return DP_RECV_REDUCE;
}

static dp_kind_t fused_kind(sched_kind_t k) {
  if (k == SCHED_RECV_REDUCE_SEND) return DP_RECV_REDUCE_SEND;
  if (k == SCHED_RECV_REDUCE_COPY_SEND) return DP_RECV_REDUCE_COPY_SEND;
  return DP_RECV_COPY_SEND;
}

/* Appends the step of op i (fused: folded when `folded`, else its receive half). */
static weft_result_t emit_step(const schedule_t *s, int i, int folded, dp_program_t *p) {
  const sched_op_t *op = &s->ops[i];
  dp_step_t st = {.kind = (uint8_t)(folded ? fused_kind(op->kind) : plain_kind(op->kind)),
                  .buf = (uint8_t)op->buf,
                  .src_buf = (uint8_t)op->src_buf,
                  .final = (uint8_t)(op->final != 0),
                  .recv_link = -1,
                  .send_link = -1,
                  .dep = -1,
                  .op = i,
                  .offset = op->offset,
                  .src_offset = op->src_offset,
                  .count = op->count};
  if (dp_kind_receives(st.kind))
    WEFT_CHECK(link_index(p, op->peer, DP_LINK_RECV, i, &st.recv_link));
  if (st.kind == DP_SEND) WEFT_CHECK(link_index(p, op->peer, DP_LINK_SEND, i, &st.send_link));
  if (folded) WEFT_CHECK(link_index(p, s->ops[op->fwd].peer, DP_LINK_SEND, op->fwd, &st.send_link));
  p->steps[p->nsteps++] = st;
  return WEFT_SUCCESS;
}

/* Pass 3a: the steps in program order; plan->step_of filled for every op. */
static weft_result_t emit_all(const schedule_t *s, plan_t *plan, dp_program_t *p) {
  for (int k = 0; k < s->nops; k++) {
    int fused = sched_is_fused(s->ops[k].kind);
    int owner = plan->fed_by[k] - 1; /* the fused op feeding this SEND; -1 */
    if (fused && plan->place[k] == PLACE_AT_SEND) continue; /* emitted at its SEND */
    if (owner >= 0 && plan->place[owner] == PLACE_AT_RECV) continue; /* folded already */
    if (owner >= 0 && plan->place[owner] == PLACE_AT_SEND) {
      plan->step_of[owner] = plan->step_of[k] = p->nsteps;
      WEFT_CHECK(emit_step(s, owner, 1, p));
      continue;
    }
    int folded = fused && plan->place[k] == PLACE_AT_RECV;
    plan->step_of[k] = p->nsteps;
    if (folded) plan->step_of[s->ops[k].fwd] = p->nsteps;
    WEFT_CHECK(emit_step(s, k, folded, p));
  }
  return WEFT_SUCCESS;
}

/* Pass 3b: deps from op to step indices. A folded step's dep is its receive's (the dropped
 * SEND's dep is the fused op itself); a dep on a dropped SEND lands on the folded step. */
static weft_result_t translate_deps(const schedule_t *s, const plan_t *plan, dp_program_t *p) {
  for (int t = 0; t < p->nsteps; t++) {
    dp_step_t *st = &p->steps[t];
    int dep_op = s->ops[st->op].dep;
    if (dep_op < 0) continue;
    st->dep = plan->step_of[dep_op];
    if (st->dep < 0 || st->dep >= t || p->steps[st->dep].count != st->count)
      return WEFT_ERR(WEFT_ERR_INTERNAL,
                      "devcompile: step %d (op %d, %s) depends on step %d (op %d), which is not an "
                      "earlier step of the same count",
                      t, st->op, dp_kind_name((dp_kind_t)st->kind), st->dep, dep_op);
  }
  return WEFT_SUCCESS;
}

static void finish(const schedule_t *s, dp_program_t *p) {
  for (int b = 0; b < DP_NUM_BUFS; b++) p->buf_count[b] = s->buf_count[b];
  p->nrounds = 0;
  for (int t = 0; t < p->nsteps; t++) {
    uint64_t n = dp_step_slices(p, &p->steps[t]);
    if (n > p->nrounds) p->nrounds = n;
  }
}

static weft_result_t compile(const schedule_t *s, int nranks, plan_t *plan, dp_program_t *p) {
  for (int i = 0; i < s->nops; i++) WEFT_CHECK(check_op(s, i, nranks));
  for (int i = 0; i < s->nops; i++) {
    plan->place[i] = 0;
    plan->fed_by[i] = 0;
    plan->step_of[i] = -1;
  }
  for (int i = 0; i < s->nops; i++)
    if (sched_is_fused(s->ops[i].kind)) {
      if (plan->fed_by[s->ops[i].fwd])
        return WEFT_ERR(WEFT_ERR_INTERNAL, "devcompile: ops %d and %d feed the same send %d",
                        plan->fed_by[s->ops[i].fwd] - 1, i, s->ops[i].fwd);
      plan->place[i] = choose_place(s, i);
      plan->fed_by[s->ops[i].fwd] = i + 1;
    }
  WEFT_CHECK(emit_all(s, plan, p));
  WEFT_CHECK(translate_deps(s, plan, p));
  finish(s, p);
  return WEFT_SUCCESS;
}

weft_result_t dp_compile(const schedule_t *s, weft_dtype_t dtype, weft_op_t op, int nranks,
                         size_t slot_bytes, dp_program_t *out) {
  memset(out, 0, sizeof *out);
  size_t esize = weft_dtype_size(dtype);
  if (esize == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "devcompile: unknown dtype %d", (int)dtype);
  /* UNSUPPORTED, not INVALID_ARGUMENT: a small slot is a valid link, just not one a message of
   * whole elements fits; the caller falls back to the executor as for any other refusal. */
  if (slot_bytes < esize)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "devcompile: a slot of %zu bytes holds no %s element (%zu bytes)", slot_bytes,
                    weft_dtype_name(dtype), esize);
  out->slice_elems = slot_bytes / esize;
  out->dtype = dtype;
  out->op = op;
  out->nranks = nranks;
  if (s->nops == 0) return WEFT_SUCCESS;
  out->steps = malloc(sizeof *out->steps * (size_t)s->nops);
  int *ints = malloc(sizeof *ints * 3 * (size_t)s->nops);
  if (!out->steps || !ints) {
    free(ints);
    dp_free(out);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "devcompile: out of memory for %d ops", s->nops);
  }
  plan_t plan = {ints, ints + s->nops, ints + 2 * s->nops};
  weft_result_t res = compile(s, nranks, &plan, out);
  free(ints);
  if (res != WEFT_SUCCESS) dp_free(out);
  return res;
}
