/* sim_run.c -- the simulator's event loop: messages on ports, reductions and copies on CPUs.
 *
 * Slices retire in stream order as executor.c retires them; sim.h describes the model. */
#include <stdlib.h>

#include "common/error.h"
#include "tools/sim/sim_internal.h"

/* A send stream whose head waits only for ports, ordered first-come first-served. */
typedef struct {
  double waiting;
  int rank, stream;
} cand_t;

typedef struct {
  cand_t *v;
  int n, cap;
} cands_t;

static weft_result_t oom(void) { return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory"); }

/* Something changed at `rank`: the next try_start looks at its pending and waiting pairs. */
static void mark_dirty(sim_world_t *w, int rank) {
  sim_rank_t *r = &w->ranks[rank];
  if (r->dirty) return;
  r->dirty = 1;
  w->dirty_list[w->ndirty++] = rank;
}

static void list_stream(sim_rank_t *r, int si) {
  if (r->streams[si].listed) return;
  r->streams[si].listed = 1;
  r->pending[r->npending++] = si;
}

/* The pair of stream `si` of `rank` may have become posted at both ends: it is looked at when
 * either end's rank is next dirty, as a scan of every stream of that rank would. */
static void touch(sim_world_t *w, int rank, int si) {
  sim_stream_t *st = &w->ranks[rank].streams[si];
  list_stream(&w->ranks[rank], si);
  list_stream(&w->ranks[st->peer], st->match);
}

/* Op `oi` of `rank` completed a slice: the streams of the ops waiting on it may move. */
static void touch_dependants(sim_world_t *w, int rank, int oi) {
  sim_rank_t *r = &w->ranks[rank];
  for (int k = r->ops[oi].dep_first; k >= 0; k = r->ops[k].dep_next)
    if (r->ops[k].stream >= 0) touch(w, rank, r->ops[k].stream);
}

/* A pair stops waiting for ports (it starts): out of its two ranks' waiting lists. */
static void unwait(int *list, int *n, sim_stream_t *streams, int pos) {
  list[pos] = list[--*n];
  streams[list[pos]].wpos = pos;
}

/* The next message of a stream: the call description (op -1) or slice *slice of op *op. */
static int head(const sim_stream_t *st, int *op, size_t *slice) {
  *op = -1;
  *slice = 0;
  if (st->hdr) return 1;
  if (st->cur >= st->nops) return 0;
  *op = st->ops[st->cur];
  *slice = st->slice;
  return 1;
}

/* Slices of op `oi` whose dependency has been met (schedule.h's rule, as the executor's). */
static size_t dep_ready(const sim_rank_t *r, int oi) {
  const sim_op_t *op = &r->ops[oi];
  if (op->dep < 0) return op->nslices;
  const sim_op_t *d = &r->ops[op->dep];
  return sched_dep_ready(op->dep, op->dep_whole, op->nslices, d->done, d->nslices);
}

/* Posted: the stream has a free slot and the op's dependency has completed this slice. */
static int posted(const sim_world_t *w, const sim_rank_t *r, const sim_stream_t *st) {
  int op;
  size_t j;
  if (st->count >= w->m->window || !head(st, &op, &j)) return 0;
  return op < 0 || dep_ready(r, op) > j;
}

static double head_bytes(const sim_world_t *w, const sim_rank_t *r, const sim_stream_t *st) {
  int op;
  size_t j;
  head(st, &op, &j);
  return op < 0 ? SIM_HDR_BYTES : sim_slice_bytes(w, r, op, j);
}

/* Moves the stream's head one message on. */
static void advance(sim_rank_t *r, sim_stream_t *st) {
  int op;
  size_t j;
  head(st, &op, &j);
  if (st->hdr)
    st->hdr = 0;
  else if (++st->slice == r->ops[op].nslices) {
    st->cur++;
    st->slice = 0;
    /* Thousands of ranks walk their op arrays side by side, too many streams for the hardware
     * prefetcher: fetch the record after the new head, which the next message reads. */
    if (st->cur + 1 < st->nops) __builtin_prefetch(&r->ops[st->ops[st->cur + 1]]);
  }
}

/* Starts the CPU on the oldest task if it is idle. Invariant: an idle CPU has an empty queue
 * except between popping a task and calling this. */
static weft_result_t cpu_kick(sim_world_t *w, int rank) {
  sim_rank_t *r = &w->ranks[rank];
  if (r->cpu_busy || r->task_count == 0) return WEFT_SUCCESS;
  r->cpu_busy = 1;
  sim_event_t e = {.t = w->now + r->tasks[r->task_head].seconds, .kind = SIM_EV_CPU, .rank = rank};
  return sim_heap_push(&w->heap, &e) ? oom() : WEFT_SUCCESS;
}

static weft_result_t cpu_push(sim_world_t *w, int rank, sim_task_t t) {
  sim_rank_t *r = &w->ranks[rank];
  if (r->task_count == r->task_cap) {
    int cap = r->task_cap ? 2 * r->task_cap : 16;
    sim_task_t *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return oom();
    for (int i = 0; i < r->task_count; i++) v[i] = r->tasks[(r->task_head + i) % r->task_cap];
    free(r->tasks);
    r->tasks = v;
    r->task_cap = cap;
    r->task_head = 0;
  }
  r->tasks[(r->task_head + r->task_count++) % r->task_cap] = t;
  return cpu_kick(w, rank);
}

/* Hands the CPU every copy slice whose source is ready. */
static weft_result_t queue_copies(sim_world_t *w, int rank) {
  sim_rank_t *r = &w->ranks[rank];
  for (int k = 0; k < r->ncopies; k++) {
    int oi = r->copies[k];
    while (r->copy_queued[k] < dep_ready(r, oi)) {
      double bytes = sim_slice_bytes(w, r, oi, r->copy_queued[k]++);
      sim_task_t t = {SIM_TASK_COPY, -1, -1, oi, bytes * w->m->beta_mem};
      WEFT_CHECK(cpu_push(w, rank, t));
    }
  }
  return WEFT_SUCCESS;
}

/* Retires completed slots in FIFO order; a retired slice counts as done for its dependants. */
static weft_result_t retire(sim_world_t *w, int rank, sim_stream_t *st) {
  sim_rank_t *r = &w->ranks[rank];
  int any = 0;
  int si = (int)(st - r->streams), popped = 0;
  while (st->count > 0 && st->fifo[st->head].complete) {
    int op = st->fifo[st->head].op;
    if (op >= 0) {
      r->ops[op].done++, any = 1;
      touch_dependants(w, rank, op);
    }
    st->head = (st->head + 1) % w->m->window;
    st->count--;
    r->end = w->now;
    popped = 1;
  }
  if (popped) touch(w, rank, si);
  mark_dirty(w, rank);
  return any ? queue_copies(w, rank) : WEFT_SUCCESS;
}

static weft_result_t start(sim_world_t *w, int from, int si) {
  sim_rank_t *s = &w->ranks[from];
  sim_stream_t *out = &s->streams[si];
  sim_rank_t *d = &w->ranks[out->peer];
  sim_stream_t *in = &d->streams[out->match];
  int sop, dop;
  size_t sj, dj;
  head(out, &sop, &sj);
  head(in, &dop, &dj);
  double bytes = head_bytes(w, s, out);
  int skind = sop < 0 ? -1 : (int)s->ops[sop].kind, dkind = dop < 0 ? -1 : (int)d->ops[dop].kind;
  int stok = skind == SCHED_SEND_TOKEN, dtok = dkind == SCHED_RECV_TOKEN;
  if (bytes != head_bytes(w, d, in) || (sop < 0) != (dop < 0) || stok != dtok)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "schedules disagree: rank %d sends %.0f bytes (op %d, step %d) to rank %d, "
                    "which expects %.0f bytes (op %d, step %d)",
                    from, bytes, sop, sop < 0 ? -1 : s->ops[sop].step, out->peer,
                    head_bytes(w, d, in), dop, dop < 0 ? -1 : d->ops[dop].step);
  int sslot = (out->head + out->count) % w->m->window;
  int dslot = (in->head + in->count) % w->m->window;
  out->fifo[sslot] = (sim_slot_t){sop, sj, 0};
  in->fifo[dslot] = (sim_slot_t){dop, dj, 0};
  out->count++;
  in->count++;
  advance(s, out);
  advance(d, in);
  if (out->waiting >= 0) {
    unwait(s->out_wait, &s->nout_wait, s->streams, out->wpos);
    unwait(d->in_wait, &d->nin_wait, d->streams, in->wpos);
  }
  out->waiting = -1;
  touch(w, from, si);
  s->out_busy = d->in_busy = 1;
  w->res.messages++;
  w->res.bytes += bytes;
  w->res.cross_node += !sim_same_node(w->m, from, out->peer);
  return sim_xfer_schedule(w, from, si, dslot, bytes);
}

weft_result_t sim_xfer_schedule(sim_world_t *w, int from, int si, int dslot, double bytes) {
  sim_stream_t *out = &w->ranks[from].streams[si];
  out->xfer_slot = dslot;
  out->xfer_start = w->now;
  out->xfer_bytes = bytes;
  return sim_xfer_move(w, from, si, w->now + sim_link_time(w->m, from, out->peer, bytes));
}

weft_result_t sim_xfer_move(sim_world_t *w, int from, int si, double end) {
  sim_stream_t *out = &w->ranks[from].streams[si];
  sim_event_t e = {
      .t = end, .kind = SIM_EV_XFER, .rank = from, .stream = si, .version = ++out->xfer_version};
  return sim_heap_push(&w->heap, &e) ? oom() : WEFT_SUCCESS;
}

static weft_result_t consider(sim_world_t *w, cands_t *c, int rank, int si) {
  sim_rank_t *r = &w->ranks[rank];
  sim_stream_t *st = &r->streams[si];
  if (st->epoch == w->epoch) return WEFT_SUCCESS;
  st->epoch = w->epoch;
  sim_rank_t *d = &w->ranks[st->peer];
  if (st->waiting < 0) {
    sim_stream_t *in = &d->streams[st->match];
    if (!posted(w, r, st) || !posted(w, d, in)) return WEFT_SUCCESS;
    st->waiting = w->now;
    st->wpos = r->nout_wait;
    r->out_wait[r->nout_wait++] = si;
    in->wpos = d->nin_wait;
    d->in_wait[d->nin_wait++] = st->match;
  }
  /* Ports only turn busy while a round starts messages: a pair blocked now stays blocked for
   * this round, so only pairs with both ports free need to be ordered. */
  if (r->out_busy || d->in_busy) return WEFT_SUCCESS;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    cand_t *v = realloc(c->v, sizeof *v * (size_t)cap);
    if (!v) return oom();
    c->v = v;
    c->cap = cap;
  }
  c->v[c->n++] = (cand_t){st->waiting, rank, si};
  return WEFT_SUCCESS;
}

static int cand_before(const cand_t *x, const cand_t *y) {
  if (x->waiting != y->waiting) return x->waiting < y->waiting;
  if (x->rank != y->rank) return x->rank < y->rank;
  return x->stream < y->stream;
}

/* Orders candidates first-come first-served (ties: lower rank, then lower stream). Typed, in
 * place and without allocation: libc's qsort (a merge sort through a comparison pointer) was
 * the largest cost of rounds where every rank's ports free at once. Keys are distinct. */
static void cand_sort(cand_t *v, int n) {
  while (n > 16) {
    cand_t pivot = v[(n - 1) / 2];
    int i = 0, j = n - 1;
    for (;;) {
      while (cand_before(&v[i], &pivot)) i++;
      while (cand_before(&pivot, &v[j])) j--;
      if (i >= j) break;
      cand_t t = v[i];
      v[i++] = v[j];
      v[j--] = t;
    }
    /* Recurse into the smaller part, loop on the larger: O(log n) stack. */
    int left = j + 1;
    if (left < n - left) {
      cand_sort(v, left);
      v += left;
      n -= left;
    } else {
      cand_sort(v + left, n - left);
      n = left;
    }
  }
  for (int i = 1; i < n; i++) {
    cand_t t = v[i];
    int k = i;
    for (; k > 0 && cand_before(&t, &v[k - 1]); k--) v[k] = v[k - 1];
    v[k] = t;
  }
}

static weft_result_t consider_end(sim_world_t *w, cands_t *c, int rank, int si) {
  const sim_stream_t *st = &w->ranks[rank].streams[si];
  return st->is_send ? consider(w, c, rank, si) : consider(w, c, st->peer, st->match);
}

/* Starts every message that can start now. Only pairs with an end at a rank where something
 * changed can have become startable, and of those only the ones that changed (pending) or that
 * wait for ports (out_wait, in_wait) can be posted at both ends: every other stream of a dirty
 * rank is known not to be. So a round costs what changed, not the number of ranks or streams,
 * and sees the same candidates, with the same waiting times, as a scan of every dirty rank. */
static weft_result_t try_start(sim_world_t *w, cands_t *c) {
  w->epoch++;
  c->n = 0;
  for (int k = 0; k < w->ndirty; k++) {
    int q = w->dirty_list[k];
    sim_rank_t *r = &w->ranks[q];
    r->dirty = 0;
    for (int i = 0; i < r->npending; i++) {
      r->streams[r->pending[i]].listed = 0;
      WEFT_CHECK(consider_end(w, c, q, r->pending[i]));
    }
    r->npending = 0;
    for (int i = 0; i < r->nout_wait; i++) WEFT_CHECK(consider(w, c, q, r->out_wait[i]));
    for (int i = 0; i < r->nin_wait; i++) WEFT_CHECK(consider_end(w, c, q, r->in_wait[i]));
  }
  w->ndirty = 0;
  cand_sort(c->v, c->n);
  for (int k = 0; k < c->n; k++) {
    sim_rank_t *s = &w->ranks[c->v[k].rank];
    int peer = s->streams[c->v[k].stream].peer;
    if (!s->out_busy && !w->ranks[peer].in_busy) WEFT_CHECK(start(w, c->v[k].rank, c->v[k].stream));
  }
  return WEFT_SUCCESS;
}

static weft_result_t on_xfer(sim_world_t *w, const sim_event_t *e) {
  sim_rank_t *s = &w->ranks[e->rank];
  sim_stream_t *out = &s->streams[e->stream];
  if (e->version != out->xfer_version) return WEFT_SUCCESS; /* moved: a later event ends it */
  int from = e->rank, to = out->peer, to_slot = out->xfer_slot;
  sim_rank_t *d = &w->ranks[to];
  sim_stream_t *in = &d->streams[out->match];
  double bytes = out->xfer_bytes;
  if (w->trace) {
    int op = in->fifo[to_slot].op;
    w->trace(w->trace_arg, from, to, bytes, out->xfer_start, e->t,
             op < 0 ? "desc" : sched_kind_name((sched_kind_t)d->ops[op].kind));
  }
  s->out_busy = d->in_busy = 0;
  /* A send stream has one message in flight at a time (one outgoing port): it is the head. */
  out->fifo[out->head].complete = 1;
  WEFT_CHECK(retire(w, from, out));
  sim_slot_t *f = &in->fifo[to_slot];
  /* Fused or not, a reducing receive costs its reduction; the model counts one pass over the
   * bytes either way (gamma), and its send waits for it through the dependency. */
  if (f->op >= 0 && sched_is_reduce((sched_kind_t)d->ops[f->op].kind)) {
    sim_task_t t = {SIM_TASK_REDUCE, out->match, to_slot, f->op, bytes * w->m->gamma};
    WEFT_CHECK(cpu_push(w, to, t));
  } else {
    f->complete = 1;
  }
  mark_dirty(w, to);
  return retire(w, to, in);
}

static weft_result_t on_cpu(sim_world_t *w, int rank) {
  sim_rank_t *r = &w->ranks[rank];
  sim_task_t t = r->tasks[r->task_head];
  r->task_head = (r->task_head + 1) % r->task_cap;
  r->task_count--;
  r->cpu_busy = 0;
  mark_dirty(w, rank);
  r->end = w->now;
  WEFT_CHECK(cpu_kick(w, rank));
  if (t.kind == SIM_TASK_REDUCE) {
    r->streams[t.stream].fifo[t.slot].complete = 1;
    WEFT_CHECK(retire(w, rank, &r->streams[t.stream]));
  } else {
    r->ops[t.op].done++;
    touch_dependants(w, rank, t.op);
    WEFT_CHECK(queue_copies(w, rank));
  }
  return WEFT_SUCCESS;
}

/* Names the first stream that never finished, for a schedule that waits on itself. */
static weft_result_t check_finished(const sim_world_t *w) {
  for (int q = 0; q < w->nranks; q++) {
    const sim_rank_t *r = &w->ranks[q];
    for (int i = 0; i < r->nstreams; i++) {
      const sim_stream_t *st = &r->streams[i];
      int op;
      size_t j;
      if (!head(st, &op, &j) && st->count == 0) continue;
      return WEFT_ERR(WEFT_ERR_INTERNAL,
                      "schedule deadlock: rank %d never finished %s rank %d (op %d, step %d, "
                      "slice %zu)",
                      q, st->is_send ? "sending to" : "receiving from", st->peer, op,
                      op < 0 ? -1 : r->ops[op].step, j);
    }
    for (int k = 0; k < r->ncopies; k++)
      if (r->ops[r->copies[k]].done < r->ops[r->copies[k]].nslices)
        return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule deadlock: rank %d never finished copy op %d",
                        q, r->copies[k]);
  }
  return WEFT_SUCCESS;
}

static weft_result_t run(sim_world_t *w) {
  cands_t c = {0};
  weft_result_t res = WEFT_SUCCESS;
  for (int q = 0; q < w->nranks && res == WEFT_SUCCESS; q++) {
    sim_rank_t *r = &w->ranks[q];
    mark_dirty(w, q);
    for (int i = 0; i < r->nstreams; i++) list_stream(r, i);
    res = queue_copies(w, q);
  }
  if (res == WEFT_SUCCESS) res = try_start(w, &c);
  sim_event_t e;
  while (res == WEFT_SUCCESS && sim_heap_pop(&w->heap, &e)) {
    w->now = e.t;
    res = e.kind == SIM_EV_XFER ? on_xfer(w, &e) : on_cpu(w, e.rank);
    /* Everything at this instant first, so that ready messages compete on equal terms. */
    if (res == WEFT_SUCCESS && (w->heap.n == 0 || w->heap.ev[0].t > w->now)) res = try_start(w, &c);
  }
  free(c.v);
  return res == WEFT_SUCCESS ? check_finished(w) : res;
}

/* Runs a built world and frees it. */
static weft_result_t finish(sim_world_t *w, weft_result_t res, sim_trace_fn trace, void *trace_arg,
                            sim_result_t *out) {
  w->trace = trace;
  w->trace_arg = trace_arg;
  if (res == WEFT_SUCCESS) res = run(w);
  if (res == WEFT_SUCCESS) {
    *out = w->res;
    out->time = 0;
    for (int q = 0; q < w->nranks; q++)
      if (w->ranks[q].end > out->time) out->time = w->ranks[q].end;
  }
  sim_world_free(w);
  return res;
}

weft_result_t sim_run(const sim_model_t *m, const sim_call_t *call, sim_trace_fn trace,
                      void *trace_arg, sim_result_t *out) {
  sim_world_t w;
  weft_result_t res = sim_world_build(&w, m, call);
  return finish(&w, res, trace, trace_arg, out);
}

weft_result_t sim_run_schedules(const sim_model_t *m, int nranks, size_t esize,
                                const schedule_t *scheds, sim_trace_fn trace, void *trace_arg,
                                sim_result_t *out) {
  sim_world_t w;
  weft_result_t res = sim_world_borrow(&w, m, nranks, esize, scheds);
  return finish(&w, res, trace, trace_arg, out);
}
