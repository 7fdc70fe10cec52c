/* sim_symmetry.c -- which rank maps a call's replay is invariant under (sim_symmetry.h). */
#include "tools/sim/sim_symmetry.h"

static int pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

int sim_sym_candidates(const sim_model_t *m, int p, sim_sym_t *out, int max) {
  if (m->topo || p < 2) return 0;
  /* Maps must keep ranks of a node together: shifts by whole nodes, over whole nodes only. */
  int rpn = m->ranks_per_node, unit = rpn <= 0 || rpn >= p ? 1 : rpn;
  if (p % unit != 0) return 0;
  int n = 0;
  for (int d = unit; d < p && n < max; d += unit) {
    if (p % d != 0) continue;
    /* XOR by multiples of d permutes 0..p-1 only for p and d powers of two; a power-of-two d
     * that is a multiple of the node size keeps nodes whole. */
    unsigned kinds = SIM_SYM_ROTATE | (pow2(p) && pow2(d) ? SIM_SYM_XOR : 0);
    out[n++] = (sim_sym_t){p, d, kinds};
  }
  return n;
}

int sim_sym_map(const sim_sym_t *g, unsigned kind, int b, int x) {
  int t = b - sim_sym_rep(g, b);
  if (kind == SIM_SYM_XOR) return x ^ t;
  return (int)(((long)x + t) % g->p);
}

int sim_sym_unmap(const sim_sym_t *g, unsigned kind, int b, int x) {
  int t = b - sim_sym_rep(g, b);
  if (kind == SIM_SYM_XOR) return x ^ t;
  return (int)(((long)x - t + g->p) % g->p);
}

/* Op or call description of rank r on rep's stream `si` goes to (or comes from) `peer`. The
 * first time in r's check, the stream's kinds narrow to those that move its peer onto `peer`
 * with the same link, and r's stream to `peer` is claimed in owner[] (2 * peer + is_send: r + 1)
 * so that no other stream of rep maps onto it; later ones must name the same peer. 0: r's
 * schedule is not rep's. */
static int fit_peer(const sim_sym_t *g, const sim_model_t *m, sim_rank_t *rep, int si, int r,
                    int peer, int *owner) {
  sim_stream_t *st = &rep->streams[si];
  if (st->symchecked == r + 1) return peer == st->sympeer;
  int *slot = &owner[2 * peer + st->is_send];
  if (*slot == r + 1) return 0; /* two of rep's streams onto one of r's */
  *slot = r + 1;
  st->symchecked = r + 1;
  st->sympeer = peer;
  unsigned left = 0;
  for (unsigned k = SIM_SYM_ROTATE; k <= SIM_SYM_XOR; k <<= 1)
    if ((st->symkind & k) && sim_sym_map(g, k, r, st->peer) == peer) left |= k;
  st->symkind = (unsigned char)left;
  return left && sim_same_node(m, r, peer) == sim_same_node(m, sim_sym_rep(g, r), st->peer);
}

/* rep's stream that carries its call description out (send) or in, or -1: build_streams numbers
 * them first. */
static int hdr_stream(const sim_rank_t *rep, int send) {
  for (int i = 0; i < rep->nstreams && i < 2; i++)
    if (rep->streams[i].hdr && rep->streams[i].is_send == send) return i;
  return -1;
}

int sim_sym_matches(const sim_sym_t *g, const sim_model_t *m, sim_rank_t *rep, const schedule_t *s,
                    int r, int *owner) {
  if (s->nops != rep->nops) return 0;
  int hdr_out = hdr_stream(rep, 1), hdr_in = hdr_stream(rep, 0);
  int hdr_to = m->headers ? s->hdr_to : -1, hdr_from = m->headers ? s->hdr_from : -1;
  if ((hdr_to >= 0) != (hdr_out >= 0) || (hdr_from >= 0) != (hdr_in >= 0)) return 0;
  if (hdr_out >= 0 && !fit_peer(g, m, rep, hdr_out, r, hdr_to, owner)) return 0;
  if (hdr_in >= 0 && !fit_peer(g, m, rep, hdr_in, r, hdr_from, owner)) return 0;
  int more = 0; /* the next of rep's further dependencies, in op order */
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    const sim_op_t *o = &rep->ops[i];
    if ((unsigned char)op->kind != o->kind || op->count != o->count || op->dep != o->dep ||
        (op->dep_whole != 0) != o->dep_whole || op->step != o->step ||
        (op->agree.on != 0) != o->agree || (op->nmore > 0) != o->has_more)
      return 0;
    /* The same kind, so the same direction; one peer per stream and one stream per peer (fit_peer)
     * make r's streams, numbered in first-use order, rep's. */
    if (o->stream >= 0 && !fit_peer(g, m, rep, o->stream, r, op->peer, owner)) return 0;
    for (int k = 0; k < op->nmore; k++, more++) {
      sched_dep_t d = s->deps[op->more_deps + k];
      if (more >= rep->nmore || rep->more_by_op[more].op != i ||
          rep->more_by_op[more].dep != d.op || rep->more_by_op[more].whole != (d.whole != 0))
        return 0;
    }
  }
  return more == rep->nmore;
}

void sim_sym_started(sim_world_t *w, int from, sim_wait_t key) {
  sim_rank_t *r = &w->ranks[from];
  r->out_epoch = w->epoch;
  r->out_key = key;
  w->started[w->nstarted++] = from;
}

/* Whether x comes before y among one sender's pairs (sim_run.c's first-come first-served key). */
static int before(const sim_wait_t *x, const sim_wait_t *y) {
  return x->waiting != y->waiting ? x->waiting < y->waiting : x->stream < y->stream;
}

/* Whether a wait entry's pair still waits (sim_run.c's wait_alive). */
static int alive(const sim_world_t *w, const sim_wait_t *e) {
  const sim_stream_t *st = &w->ranks[e->rank].streams[e->stream];
  return st->waiting >= 0 && st->wserial == e->serial;
}

/* The receiver of the pair started with key `f` got it ahead of the senders that wait since the
 * same instant: each of them must have been held by its own port. */
static void check_receiver(sim_world_t *w, const sim_wait_t *f) {
  const sim_rank_t *d = &w->ranks[w->ranks[f->rank].streams[f->stream].peer];
  const sim_waitlist_t *l = &d->in_wait;
  int lo = l->head, hi = l->n; /* sorted by waiting: the first entry that waits since f's */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (l->v[mid].waiting < f->waiting)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (int i = lo; i < l->n && l->v[i].waiting == f->waiting; i++) {
    const sim_wait_t *e = &l->v[i];
    if (!alive(w, e)) continue;
    const sim_rank_t *s = &w->ranks[e->rank];
    int held = s->out_busy && (s->out_epoch != w->epoch || before(&s->out_key, e));
    if (!held) w->tie = 1;
  }
}

void sim_sym_check_round(sim_world_t *w) {
  for (int k = 0; k < w->nstarted && !w->tie; k++)
    check_receiver(w, &w->ranks[w->started[k]].out_key);
  w->nstarted = 0;
}
