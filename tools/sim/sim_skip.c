/* sim_skip.c -- periodic-state detection and the jump over it (sim_skip.h says what and why).
 *
 * One walk over the world serves both ends: recording, it appends what the future depends on
 * to a signature; applying, it visits the same fields in the same order and moves each by n
 * periods (times by n*T, counters by n times their increment). The two cannot drift apart. */
#include "tools/sim/sim_skip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* How a signature entry compares between checkpoints. */
enum {
  E_EXACT, /* equal */
  E_TIME,  /* a time relative to now: equal within the tolerance */
  E_COUNT, /* a counter: the same increment each period; `limit` the op's slices (< 0: none) */
  E_END,   /* a rank's last finish: either relative to now (moves) or absolute (does not) */
  E_GAP    /* slices a stream's dependency lets it go past its head; `limit` indexes the
            * stream's slice counter */
};

typedef struct {
  double v, limit;
  int kind;
} entry_t;

typedef struct {
  entry_t *v;
  long n, cap;
  double at; /* the checkpoint's time */
} sig_t;

struct sim_skip {
  int rank, stream, op; /* the trigger: op `op` on send stream `stream` of `rank`; -1: none */
  long seen, every;     /* its messages so far; a checkpoint every `every` of them */
  int fails;            /* checkpoints in a row that did not agree */
  double recorded;      /* signature entries recorded so far: the skip's own cost */
  int due;
  sig_t sig[2];  /* the last two checkpoints, older first once `have` is 2 */
  int have;      /* how many of them hold one */
  double *delta; /* per entry: the increment from sig[0] to sig[1] (E_END: 1 moves, 0 not) */
  long delta_cap;
  int delta_ok; /* sig[0] and sig[1] agree up to delta */
  double *next;
  sim_event_t *ev; /* scratch: the pending events in pop order */
  long ev_cap;
};

/* One walk: recording into `sig`, or applying `delta` times n with times moved by `shift`. */
typedef struct {
  sim_skip_t *s;
  sig_t *sig;
  int apply, oom;
  const double *delta;
  double n, shift;
  long i;
} walk_t;

/* A checkpoint is taken only on an op that has this many windows (plus margin) of slices left:
 * three checkpoints and a jump have to fit. */
#define MIN_WINDOWS 16
/* Checkpoints in a row that disagree before they are spaced twice as far apart, up to MAX_EVERY
 * messages: a world periodic over several trigger messages is found too, and one that is not
 * periodic costs a signature per MAX_EVERY messages. */
#define MAX_FAILS 6
#define MAX_EVERY 64
/* Signature entries recorded per message replayed, at most: beyond it checkpoints are spaced
 * further apart (past MAX_EVERY too), so that a world that never repeats costs a few percent. */
#define BUDGET 1

static void put(walk_t *k, int kind, double v, double limit) {
  if (k->apply) {
    k->i++;
    return;
  }
  sig_t *g = k->sig;
  if (g->n == g->cap) {
    long cap = g->cap ? 2 * g->cap : 1024;
    entry_t *e = realloc(g->v, sizeof *e * (size_t)cap);
    if (!e) {
      k->oom = 1;
      return;
    }
    g->v = e;
    g->cap = cap;
  }
  g->v[g->n++] = (entry_t){v, limit, kind};
}

static void ex(walk_t *k, double v) { put(k, E_EXACT, v, 0); }

/* A time relative to now; returns what to add to the absolute time it came from. */
static double tm(walk_t *k, double rel) {
  put(k, E_TIME, rel, 0);
  return k->apply ? k->shift : 0;
}

/* A counter of an op with `limit` slices (< 0: unbounded); returns what to add to it. */
static double ctr(walk_t *k, double v, double limit) {
  long i = k->i;
  put(k, E_COUNT, v, limit);
  return k->apply ? k->n * k->delta[i] : 0;
}

static double endt(walk_t *k, double end) {
  long i = k->i;
  put(k, E_END, end, 0);
  return k->apply ? k->delta[i] * k->shift : 0;
}

/* The index the next entry gets, to refer to it from a later E_GAP. */
static long here(const walk_t *k) { return k->apply ? k->i : k->sig->n; }

static int rel_slot(const sim_world_t *w, const sim_stream_t *st, int slot) {
  return (slot - st->head + w->m->window) % w->m->window;
}

/* Op `oi`'s done count; it belongs to one stream (or copy), so it is visited once. */
static void done(walk_t *k, sim_rank_t *r, int oi) {
  sim_op_t *op = &r->ops[oi];
  op->done += (uint32_t)ctr(k, op->done, op->nslices);
}

static void walk_stream(walk_t *k, const sim_world_t *w, sim_rank_t *r, sim_stream_t *st) {
  int window = w->m->window;
  ex(k, st->hdr);
  ex(k, st->cur);
  ex(k, st->count);
  int head_op = st->cur < st->nops ? st->ops[st->cur] : -1;
  long slice_at = here(k);
  if (head_op < 0)
    ex(k, (double)st->slice);
  else
    st->slice += (size_t)ctr(k, (double)st->slice, r->ops[head_op].nslices);
  if (st->waiting < 0) {
    ex(k, -1);
  } else {
    ex(k, 1);
    st->waiting += tm(k, st->waiting - w->now);
  }
  int last = -1;
  for (int i = 0; i < st->count; i++) {
    sim_slot_t *f = &st->fifo[(st->head + i) % window];
    ex(k, f->op);
    ex(k, f->complete);
    if (f->op < 0) {
      ex(k, (double)f->slice);
      continue;
    }
    f->slice += (size_t)ctr(k, (double)f->slice, r->ops[f->op].nslices);
    if (f->op != last) done(k, r, f->op);
    last = f->op;
  }
  if (head_op >= 0 && head_op != last) done(k, r, head_op);
  /* Whether the head may be posted as far as the dependency goes (sim_dep_ready): a constant
   * gap, or one that stays wider than a period's progress (see compare_triple). */
  if (head_op >= 0 && !st->hdr)
    put(k, E_GAP, (double)sim_dep_ready(r, head_op) - (double)st->slice, (double)slice_at);
}

/* The live entries of a wait list, in order; applying moves every entry's time, dead ones too
 * (a sort compares them with now). */
static void walk_waits(walk_t *k, const sim_world_t *w, sim_waitlist_t *l) {
  ex(k, l->live);
  for (int i = l->head; i < l->n; i++) {
    sim_wait_t *e = &l->v[i];
    const sim_stream_t *st = &w->ranks[e->rank].streams[e->stream];
    /* sim_run.c's wait_alive: the entry of the pair's current wait. */
    if (st->waiting >= 0 && st->wserial == e->serial) {
      ex(k, e->rank);
      ex(k, e->stream);
      e->waiting += tm(k, e->waiting - w->now);
    } else if (k->apply) {
      e->waiting += k->shift;
    }
  }
}

static int ev_before(const void *a, const void *b) {
  const sim_event_t *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The pending events in pop order, each with the message it delivers; applying rebuilds the
 * heap from them moved, in the same order (push order breaks ties as before). */
static void walk_events(walk_t *k, sim_world_t *w) {
  sim_skip_t *s = k->s;
  sim_heap_t *h = &w->heap;
  if (h->n > s->ev_cap) {
    sim_event_t *v = realloc(s->ev, sizeof *v * (size_t)h->n);
    if (!v) {
      k->oom = 1;
      return;
    }
    s->ev = v;
    s->ev_cap = h->n;
  }
  long n = h->n;
  if (n > 0) memcpy(s->ev, h->ev, sizeof *s->ev * (size_t)n);
  qsort(s->ev, (size_t)n, sizeof *s->ev, ev_before);
  ex(k, (double)n);
  for (long i = 0; i < n; i++) {
    sim_event_t *e = &s->ev[i];
    ex(k, e->kind);
    ex(k, e->rank);
    e->t += tm(k, e->t - w->now);
    if (e->kind != SIM_EV_XFER) continue;
    sim_stream_t *out = &w->ranks[e->rank].streams[e->stream];
    const sim_stream_t *in = &w->ranks[out->peer].streams[out->match];
    ex(k, e->stream);
    ex(k, e->version == out->xfer_version);
    if (e->version != out->xfer_version) continue;
    ex(k, rel_slot(w, in, out->xfer_slot));
    ex(k, out->xfer_bytes);
    out->xfer_start += tm(k, out->xfer_start - w->now);
  }
  if (!k->apply) return;
  h->n = 0;
  for (long i = 0; i < n; i++) sim_heap_push(h, &s->ev[i]); /* fits: the heap held them */
}

/* Everything the replay reads from here on, relative to now. */
static void walk(walk_t *k, sim_world_t *w) {
  w->res.messages += (long)ctr(k, (double)w->res.messages, -1);
  w->res.bytes += ctr(k, w->res.bytes, -1);
  w->res.cross_node += (long)ctr(k, (double)w->res.cross_node, -1);
  for (int q = 0; q < w->nranks && !k->oom; q++) {
    sim_rank_t *r = &w->ranks[q];
    ex(k, r->out_busy);
    ex(k, r->in_busy);
    ex(k, r->cpu_busy);
    r->end += endt(k, r->end);
    ex(k, r->task_count);
    for (int i = 0; i < r->task_count; i++) {
      const sim_task_t *t = &r->tasks[(r->task_head + i) % r->task_cap];
      ex(k, t->kind);
      ex(k, t->op);
      ex(k, t->seconds);
      ex(k, t->stream);
      ex(k, t->kind == SIM_TASK_REDUCE ? rel_slot(w, &r->streams[t->stream], t->slot) : -1);
    }
    ex(k, r->npending);
    for (int i = 0; i < r->npending; i++) ex(k, r->pending[i]);
    walk_waits(k, w, &r->out_wait);
    walk_waits(k, w, &r->in_wait);
    for (int c = 0; c < r->ncopies; c++) {
      done(k, r, r->copies[c]);
      r->copy_queued[c] += (size_t)ctr(k, (double)r->copy_queued[c], r->ops[r->copies[c]].nslices);
    }
    for (int i = 0; i < r->nstreams; i++) walk_stream(k, w, r, &r->streams[i]);
  }
  if (!k->oom) walk_events(k, w);
}

static void forget(sim_skip_t *s) {
  s->have = 0;
  s->delta_ok = 0;
}

/* Whether `b` (later) agrees with `a` up to a time shift and counter increments, written to
 * `d`. */
static int compare_pair(const sig_t *a, const sig_t *b, double *d) {
  double period = b->at - a->at, tol = 1e-9 * period;
  if (a->n != b->n || !(period > 0)) return 0;
  for (long i = 0; i < a->n; i++) {
    const entry_t *x = &a->v[i], *y = &b->v[i];
    if (x->kind != y->kind) return 0;
    d[i] = 0;
    switch (x->kind) {
      case E_EXACT:
        if (x->v != y->v) return 0;
        break;
      case E_TIME:
        if (fabs(x->v - y->v) > tol) return 0;
        break;
      case E_COUNT:
        if (x->limit != y->limit || y->v < x->v) return 0;
        d[i] = y->v - x->v;
        break;
      case E_END:
        if (fabs((x->v - a->at) - (y->v - b->at)) <= tol)
          d[i] = 1;
        else if (x->v != y->v)
          return 0;
        break;
      case E_GAP:
        if (x->limit != y->limit) return 0;
        d[i] = y->v - x->v;
        break;
    }
  }
  return 1;
}

/* Given that older -> old (increments `d0`) and old -> now (`d1`, `cur` now's signature) both
 * agree: whether the increments are the same, and the most periods n that keep every active op
 * clear of its end (0: none). */
static double periods_left(const sig_t *cur, const double *d0, const double *d1, int window) {
  double n = INFINITY, margin = window + 2;
  int bounded = 0;
  for (long i = 0; i < cur->n; i++) {
    const entry_t *e = &cur->v[i];
    if (d0[i] != d1[i]) return 0;
    if (e->kind == E_COUNT && d1[i] > 0 && e->limit >= 0) {
      double left = floor((e->limit - 1 - margin - e->v) / d1[i]);
      if (left < n) n = left;
      bounded = 1;
    } else if (e->kind == E_GAP && d1[i] != 0) {
      /* A changing gap must stay wider than the slices the stream starts in a period: then
       * the dependency never holds the stream back, in the periods seen or the ones skipped. */
      double step = d1[(long)e->limit], older = e->v - 2 * d1[i];
      double least = older < e->v ? older : e->v;
      if (least <= step) return 0;
      if (d1[i] < 0) {
        double left = floor((e->v - step - 1) / -d1[i]);
        if (left < n) n = left;
      }
    }
  }
  if (!bounded || n < window) return 0;
  return n - fmod(n, window);
}

static weft_result_t oom(void) { return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory"); }

weft_result_t sim_skip_create(sim_world_t *w) {
  w->skip = NULL;
  if (!w->m->skip || w->net || w->trace) return WEFT_SUCCESS;
  sim_skip_t *s = calloc(1, sizeof *s);
  if (!s) return oom();
  s->rank = -1;
  s->every = 1;
  w->skip = s;
  return WEFT_SUCCESS;
}

void sim_skip_free(sim_world_t *w) {
  sim_skip_t *s = w->skip;
  if (!s) return;
  free(s->sig[0].v);
  free(s->sig[1].v);
  free(s->delta);
  free(s->next);
  free(s->ev);
  free(s);
  w->skip = NULL;
}

void sim_skip_started(sim_world_t *w, int from, int si, int op, size_t slice) {
  sim_skip_t *s = w->skip;
  if (s->rank >= 0) {
    const sim_stream_t *t = &w->ranks[s->rank].streams[s->stream];
    if (t->cur < t->nops && t->ops[t->cur] == s->op) {
      if (from == s->rank && si == s->stream && ++s->seen % s->every == 0) s->due = 1;
      return;
    }
    s->rank = -1; /* its op has started its last slice: another one takes over */
  }
  if (op < 0) return;
  const sim_op_t *o = &w->ranks[from].ops[op];
  if (o->nslices - slice < (size_t)(MIN_WINDOWS * (w->m->window + 2))) return;
  s->rank = from;
  s->stream = si;
  s->op = op;
  s->seen = 0;
  s->every = 1;
  s->fails = 0;
  forget(s);
}

/* The signatures disagreed: after MAX_FAILS in a row, space checkpoints further apart. */
static void failed(sim_skip_t *s) {
  if (++s->fails < MAX_FAILS || s->every >= MAX_EVERY) return;
  s->every *= 2;
  s->seen = 0;
  s->fails = 0;
  forget(s);
}

weft_result_t sim_skip_round(sim_world_t *w) {
  sim_skip_t *s = w->skip;
  if (!s->due) return WEFT_SUCCESS;
  s->due = 0;
  if (w->ndirty || w->nunsorted) { /* not between rounds: no checkpoint here */
    forget(s);
    return WEFT_SUCCESS;
  }
  if (s->recorded > BUDGET * (double)w->res.messages) {
    s->every *= 2;
    s->seen = 0;
    s->fails = 0;
    forget(s);
    return WEFT_SUCCESS;
  }
  /* Record into the slot after the newest. */
  int slot = s->have < 2 ? s->have : 0;
  if (s->have == 2) { /* drop the oldest: sig[1] becomes sig[0] */
    sig_t t = s->sig[0];
    s->sig[0] = s->sig[1];
    s->sig[1] = t;
    slot = 1;
  }
  sig_t *g = &s->sig[slot];
  g->n = 0;
  g->at = w->now;
  walk_t k = {.s = s, .sig = g};
  walk(&k, w);
  if (k.oom) return oom();
  s->recorded += (double)g->n;
  if (slot == 0) {
    s->have = 1;
    return WEFT_SUCCESS;
  }
  if (g->n > s->delta_cap) {
    double *a = realloc(s->delta, sizeof *a * (size_t)g->n);
    double *b = a ? realloc(s->next, sizeof *b * (size_t)g->n) : NULL;
    if (a) s->delta = a;
    if (!b) return oom();
    s->next = b;
    s->delta_cap = g->n;
  }
  /* With three signatures, sig[0] was the middle one when delta was made. */
  int had_three = s->have == 2;
  int agree = compare_pair(&s->sig[0], g, s->next);
  s->have = 2;
  if (!agree) {
    s->delta_ok = 0;
    failed(s);
    return WEFT_SUCCESS;
  }
  double n = had_three && s->delta_ok ? periods_left(g, s->delta, s->next, w->m->window) : 0;
  double *t = s->delta;
  s->delta = s->next;
  s->next = t;
  s->delta_ok = 1;
  if (n < 1) return WEFT_SUCCESS;
  /* Jump: the world as it will be n periods on. */
  double period = g->at - s->sig[0].at;
  walk_t j = {.s = s, .apply = 1, .delta = s->delta, .n = n, .shift = n * period};
  walk(&j, w);
  w->now += n * period;
  w->res.skip_jumps++;
  w->res.skipped_messages += (long)(n * s->delta[0]); /* entry 0: the messages counter */
  s->fails = 0;
  forget(s);
  return WEFT_SUCCESS;
}
