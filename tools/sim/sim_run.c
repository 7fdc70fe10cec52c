/* sim_run.c -- the simulator's event loop: messages on ports, reductions and copies on CPUs.
 *
 * Slices retire in stream order as executor.c retires them; sim.h describes the model. */
#include <stdlib.h>

#include "common/error.h"
#include "tools/sim/sim_internal.h"
#include "tools/sim/sim_net.h"
#include "tools/sim/sim_skip.h"
#include "tools/sim/sim_symmetry.h"

/* A walk along one free port's wait list during a round: `at` is its next live entry whose
 * other port is free too, `key` a copy of it. */
typedef struct {
  sim_wait_t key;
  int rank, out, at;
} iter_t;

/* The round's walks, a min-heap on their keys: popping merges every free port's list into one
 * first-come first-served order. */
typedef struct {
  iter_t *v;
  int n, cap;
} iters_t;

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

/* The first entry of `v` (n entries sorted by op, or by dep when by_dep) for `key`, or n. */
static int more_first(const sim_more_t *v, int n, int key, int by_dep) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if ((by_dep ? v[mid].dep : v[mid].op) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Op `oi` of `rank` completed a slice: the streams of the ops waiting on it may move. */
static void touch_dependants(sim_world_t *w, int rank, int oi) {
  sim_rank_t *r = &w->ranks[rank];
  for (int k = r->ops[oi].dep_first; k >= 0; k = r->ops[k].dep_next)
    if (r->ops[k].stream >= 0) touch(w, rank, r->ops[k].stream);
  if (r->nmore == 0) return;
  for (int k = more_first(r->more_by_dep, r->nmore, oi, 1);
       k < r->nmore && r->more_by_dep[k].dep == oi; k++) {
    int op = r->more_by_dep[k].op;
    if (r->ops[op].stream >= 0) touch(w, rank, r->ops[op].stream);
  }
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

/* Slices of op `oi` whose dependency has been met (schedule.h's rule, as the executor's): the
 * one place that says how many slices of an op may start. An op with several dependencies takes
 * the least over them here, and must be linked as a dependant of each (sim_build.c's
 * dep_first/dep_next), so that every completion looks at it again. */
static size_t dep_ready(const sim_rank_t *r, int oi) {
  const sim_op_t *op = &r->ops[oi];
  size_t ready = op->nslices;
  if (op->dep >= 0) {
    const sim_op_t *d = &r->ops[op->dep];
    ready = sched_dep_ready(op->dep, op->dep_whole, op->nslices, d->done, d->nslices);
  }
  if (!op->has_more) return ready;
  for (int k = more_first(r->more_by_op, r->nmore, oi, 0);
       k < r->nmore && r->more_by_op[k].op == oi; k++) {
    const sim_more_t *m = &r->more_by_op[k];
    const sim_op_t *d = &r->ops[m->dep];
    size_t n = sched_dep_ready(m->dep, m->whole, op->nslices, d->done, d->nslices);
    if (n < ready) ready = n;
  }
  return ready;
}

size_t sim_dep_ready(const sim_rank_t *r, int oi) { return dep_ready(r, oi); }

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
  /* Tasks that become ready at one instant in different events queue in the events' order,
   * which the full replay sets by rank numbers: a symmetric replay cannot vouch for it. */
  if (w->symmetric && r->push_ev && r->push_t == w->now && r->push_ev != w->nevents + 1) w->tie = 1;
  r->push_t = w->now;
  r->push_ev = w->nevents + 1;
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
      /* A local reduction (SCHED_REDUCE) costs what a receive's does. */
      double per_byte = r->ops[oi].kind == SCHED_REDUCE ? w->m->gamma : w->m->beta_mem;
      sim_task_t t = {SIM_TASK_COPY, -1, -1, oi, bytes * per_byte};
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
  if (w->symmetric) sim_sym_started(w, from, (sim_wait_t){out->waiting, from, si, out->wserial});
  if (out->waiting >= 0) s->out_wait.live--, d->in_wait.live--; /* their entries are dead now */
  out->waiting = -1;
  touch(w, from, si);
  if (!w->net) s->out_busy = d->in_busy = 1; /* network mode has no ports: links (sim_net.c) */
  w->res.messages++;
  w->res.bytes += bytes;
  w->res.cross_node += !sim_same_node(w->m, from, out->gpeer);
  if (w->skip) sim_skip_started(w, from, si, sop, sj);
  return sim_xfer_schedule(w, from, si, dslot, bytes);
}

weft_result_t sim_xfer_schedule(sim_world_t *w, int from, int si, int dslot, double bytes) {
  sim_stream_t *out = &w->ranks[from].streams[si];
  out->xfer_slot = dslot;
  out->xfer_start = w->now;
  out->xfer_bytes = bytes;
  if (w->net) return simnet_start(w, from, si, bytes); /* a flow on its route instead */
  return sim_xfer_move(w, from, si, w->now + sim_link_time(w->m, from, out->gpeer, bytes));
}

weft_result_t sim_xfer_move(sim_world_t *w, int from, int si, double end) {
  sim_stream_t *out = &w->ranks[from].streams[si];
  sim_event_t e = {
      .t = end, .kind = SIM_EV_XFER, .rank = from, .stream = si, .version = ++out->xfer_version};
  return sim_heap_push(&w->heap, &e) ? oom() : WEFT_SUCCESS;
}

static int wait_before(const sim_wait_t *x, const sim_wait_t *y) {
  if (x->waiting != y->waiting) return x->waiting < y->waiting;
  if (x->rank != y->rank) return x->rank < y->rank;
  return x->stream < y->stream;
}

static int wait_alive(const sim_world_t *w, const sim_wait_t *e) {
  const sim_stream_t *st = &w->ranks[e->rank].streams[e->stream];
  return st->waiting >= 0 && st->wserial == e->serial;
}

/* Whether the pair of a live wait entry may start now: its two ports are free. Network mode has
 * no port rule: a rank's streams may all have a message in flight at once, one each (sim_net.c),
 * so a pair may start once its send stream has none. Its delivery marks the sender dirty, whose
 * next round walks the entry again; it keeps its place (since when it waits). */
static int wait_free(const sim_world_t *w, const sim_wait_t *e) {
  const sim_rank_t *s = &w->ranks[e->rank];
  const sim_stream_t *st = &s->streams[e->stream];
  if (w->net) return st->count == 0;
  return !s->out_busy && !w->ranks[st->peer].in_busy;
}

/* Orders wait entries first-come first-served (ties: lower rank, then lower stream), typed and
 * in place. */
static void wait_sort(sim_wait_t *v, int n) {
  while (n > 16) {
    sim_wait_t pivot = v[(n - 1) / 2];
    int i = 0, j = n - 1;
    for (;;) {
      while (wait_before(&v[i], &pivot)) i++;
      while (wait_before(&pivot, &v[j])) j--;
      if (i >= j) break;
      sim_wait_t t = v[i];
      v[i++] = v[j];
      v[j--] = t;
    }
    /* Recurse into the smaller part, loop on the larger: O(log n) stack. */
    int left = j + 1;
    if (left < n - left) {
      wait_sort(v, left);
      v += left;
      n -= left;
    } else {
      wait_sort(v + left, n - left);
      n = left;
    }
  }
  for (int i = 1; i < n; i++) {
    sim_wait_t t = v[i];
    int k = i;
    for (; k > 0 && wait_before(&t, &v[k - 1]); k--) v[k] = v[k - 1];
    v[k] = t;
  }
}

/* Drops the dead entries of a list, keeping the order of the others. */
static void wait_compact(const sim_world_t *w, sim_waitlist_t *l) {
  int k = 0, sorted = 0;
  for (int i = l->head; i < l->n; i++)
    if (wait_alive(w, &l->v[i])) {
      sorted += i < l->sorted;
      l->v[k++] = l->v[i];
    }
  l->head = 0;
  l->n = k;
  l->sorted = sorted;
}

/* Appends a new wait to `rank`'s list; a full list first drops its dead entries. */
static weft_result_t wait_add(sim_world_t *w, int rank, sim_waitlist_t *l, const sim_wait_t *e) {
  if (l->n == l->cap) {
    wait_compact(w, l);
    if (2 * l->n >= l->cap) {
      int cap = l->cap ? 2 * l->cap : 8;
      sim_wait_t *v = realloc(l->v, sizeof *v * (size_t)cap);
      if (!v) return oom();
      l->v = v;
      l->cap = cap;
    }
  }
  l->v[l->n++] = *e;
  l->live++;
  sim_rank_t *r = &w->ranks[rank];
  if (!r->unsorted) {
    r->unsorted = 1;
    w->unsorted_list[w->nunsorted++] = rank;
  }
  return WEFT_SUCCESS;
}

/* Puts this round's new entries in key order. They all wait since now, later than or as long as
 * any other, so only the entries that also wait since now need sorting with them. */
static void wait_sort_new(const sim_world_t *w, sim_waitlist_t *l) {
  int lo = l->sorted;
  while (lo > l->head && l->v[lo - 1].waiting == w->now) lo--;
  wait_sort(l->v + lo, l->n - lo);
  l->sorted = l->n;
}

/* A pair found posted at both ends begins to wait for its ports: into both ranks' lists. */
static weft_result_t consider(sim_world_t *w, int rank, int si) {
  sim_rank_t *r = &w->ranks[rank];
  sim_stream_t *st = &r->streams[si];
  if (st->epoch == w->epoch || st->waiting >= 0) return WEFT_SUCCESS;
  st->epoch = w->epoch;
  sim_rank_t *d = &w->ranks[st->peer];
  if (!posted(w, r, st) || !posted(w, d, &d->streams[st->match])) return WEFT_SUCCESS;
  st->waiting = w->now;
  sim_wait_t e = {w->now, rank, si, ++st->wserial};
  WEFT_CHECK(wait_add(w, rank, &r->out_wait, &e));
  return wait_add(w, st->peer, &d->in_wait, &e);
}

static weft_result_t consider_end(sim_world_t *w, int rank, int si) {
  const sim_stream_t *st = &w->ranks[rank].streams[si];
  return st->is_send ? consider(w, rank, si) : consider(w, st->peer, st->match);
}

static void iters_swap(iters_t *h, int i, int j) {
  iter_t t = h->v[i];
  h->v[i] = h->v[j];
  h->v[j] = t;
}

/* Moves `it` to its next entry whose pair is alive and whose two ports are free, and pushes it;
 * a walk whose own port is busy, or at the end of its list, ends. */
static weft_result_t iter_next(sim_world_t *w, iters_t *h, iter_t it) {
  sim_rank_t *r = &w->ranks[it.rank];
  sim_waitlist_t *l = it.out ? &r->out_wait : &r->in_wait;
  if (it.out ? r->out_busy : r->in_busy) return WEFT_SUCCESS;
  for (; it.at < l->n; it.at++) {
    const sim_wait_t *e = &l->v[it.at];
    if (!wait_alive(w, e)) {
      if (it.at == l->head) l->head++;
      continue;
    }
    if (!wait_free(w, e)) continue;
    it.key = *e;
    if (h->n == h->cap) {
      int cap = h->cap ? 2 * h->cap : 64;
      iter_t *v = realloc(h->v, sizeof *v * (size_t)cap);
      if (!v) return oom();
      h->v = v;
      h->cap = cap;
    }
    int i = h->n++;
    h->v[i] = it;
    for (; i > 0 && wait_before(&h->v[i].key, &h->v[(i - 1) / 2].key); i = (i - 1) / 2)
      iters_swap(h, i, (i - 1) / 2);
    return WEFT_SUCCESS;
  }
  return WEFT_SUCCESS;
}

static iter_t iters_pop(iters_t *h) {
  iter_t top = h->v[0];
  h->v[0] = h->v[--h->n];
  for (int i = 0;;) {
    int a = 2 * i + 1, b = a + 1, m = i;
    if (a < h->n && wait_before(&h->v[a].key, &h->v[m].key)) m = a;
    if (b < h->n && wait_before(&h->v[b].key, &h->v[m].key)) m = b;
    if (m == i) break;
    iters_swap(h, i, m);
    i = m;
  }
  return top;
}

/* Starts every message that can start now, first-come first-served: in key order, each pair
 * whose two ports are still free. Only pairs with an end at a rank where something changed can
 * have become startable (before, each had a busy port or was not posted), so only those ranks'
 * free ports are walked: the pairs that changed there (pending) join the wait lists first, and
 * the lists of the free ports are merged in key order, each walk skipping pairs whose other port
 * is busy. A round costs what changed and what it starts, not the number of ranks or streams, and
 * starts what a sort of every posted pair at those ranks would. */
static weft_result_t try_start(sim_world_t *w, iters_t *h) {
  w->epoch++;
  for (int k = 0; k < w->ndirty; k++) {
    sim_rank_t *r = &w->ranks[w->dirty_list[k]];
    for (int i = 0; i < r->npending; i++) {
      r->streams[r->pending[i]].listed = 0;
      WEFT_CHECK(consider_end(w, w->dirty_list[k], r->pending[i]));
    }
    r->npending = 0;
  }
  for (int k = 0; k < w->nunsorted; k++) {
    sim_rank_t *r = &w->ranks[w->unsorted_list[k]];
    r->unsorted = 0;
    wait_sort_new(w, &r->out_wait);
    wait_sort_new(w, &r->in_wait);
  }
  w->nunsorted = 0;
  h->n = 0;
  for (int k = 0; k < w->ndirty; k++) {
    int q = w->dirty_list[k];
    sim_rank_t *r = &w->ranks[q];
    r->dirty = 0;
    /* Walks skip dead entries: keep them at most as many as the live ones. */
    if (r->out_wait.n - r->out_wait.head > 2 * r->out_wait.live + 8) wait_compact(w, &r->out_wait);
    if (r->in_wait.n - r->in_wait.head > 2 * r->in_wait.live + 8) wait_compact(w, &r->in_wait);
    WEFT_CHECK(iter_next(w, h, (iter_t){.rank = q, .out = 1, .at = r->out_wait.head}));
    WEFT_CHECK(iter_next(w, h, (iter_t){.rank = q, .out = 0, .at = r->in_wait.head}));
  }
  w->ndirty = 0;
  while (h->n > 0) {
    iter_t it = iters_pop(h);
    const sim_wait_t *e = &it.key;
    if (wait_alive(w, e) && wait_free(w, e)) {
      WEFT_CHECK(start(w, e->rank, e->stream));
      /* The walk's own port is busy now: it ends. Network mode has none: it goes on. */
      if (!w->net) continue;
    }
    it.at++;
    WEFT_CHECK(iter_next(w, h, it));
  }
  if (w->symmetric) sim_sym_check_round(w);
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
  iters_t c = {0};
  weft_result_t res = WEFT_SUCCESS;
  for (int q = 0; q < w->nranks && res == WEFT_SUCCESS; q++) {
    sim_rank_t *r = &w->ranks[q];
    mark_dirty(w, q);
    for (int i = 0; i < r->nstreams; i++) list_stream(r, i);
    res = queue_copies(w, q);
  }
  if (res == WEFT_SUCCESS) res = try_start(w, &c);
  sim_event_t e;
  while (res == WEFT_SUCCESS && !w->tie && sim_heap_pop(&w->heap, &e)) {
    w->now = e.t;
    w->nevents++;
    if (e.kind == SIM_EV_XFER)
      res = on_xfer(w, &e);
    else
      res = e.kind == SIM_EV_CPU ? on_cpu(w, e.rank) : simnet_event(w, &e);
    /* Everything at this instant first, so that ready messages compete on equal terms. */
    if (res == WEFT_SUCCESS && (w->heap.n == 0 || w->heap.ev[0].t > w->now)) {
      res = try_start(w, &c);
      if (res == WEFT_SUCCESS && w->skip) res = sim_skip_round(w);
    }
  }
  free(c.v);
  return res == WEFT_SUCCESS && !w->tie ? check_finished(w) : res;
}

/* Runs a built world and frees it; *tie: a symmetric replay met a tie (out is then unset). */
static weft_result_t finish(sim_world_t *w, weft_result_t res, sim_trace_fn trace, void *trace_arg,
                            sim_result_t *out, int *tie) {
  w->trace = trace;
  w->trace_arg = trace_arg;
  if (res == WEFT_SUCCESS) res = simnet_create(w);
  if (res == WEFT_SUCCESS) res = sim_skip_create(w);
  if (res == WEFT_SUCCESS) res = run(w);
  sim_skip_free(w);
  simnet_free(w);
  *tie = w->tie;
  if (res == WEFT_SUCCESS && !w->tie) {
    *out = w->res;
    out->time = 0;
    for (int q = 0; q < w->nranks; q++)
      if (w->ranks[q].end > out->time) out->time = w->ranks[q].end;
    out->replayed = w->nranks;
    if (w->symmetric) {
      /* Every rank's counts are its representative's (sim_symmetry.h). */
      long k = w->sym.p / w->sym.d;
      out->messages *= k;
      out->bytes *= (double)k;
      out->cross_node *= k;
      out->skipped_messages *= k;
    }
  }
  sim_world_free(w);
  return res;
}

weft_result_t sim_run(const sim_model_t *m, const sim_call_t *call, sim_trace_fn trace,
                      void *trace_arg, sim_result_t *out) {
  sim_world_t w;
  int found = 0, tie = 0;
  /* One rank per symmetry class where the call has a symmetry; a tie the representatives may
   * break otherwise than the full replay sends the call to the full replay. */
  int exact_only = m->topo || trace;
  if (m->replay != SIM_REPLAY_FULL && !exact_only) {
    weft_result_t res = sim_world_build_symmetric(&w, m, call, &found);
    if (res != WEFT_SUCCESS || found) {
      res = finish(&w, res, trace, trace_arg, out, &tie);
      if (res != WEFT_SUCCESS || !tie) return res;
    }
  }
  weft_result_t res = sim_world_build(&w, m, call);
  /* No symmetry: a long pipeline may be estimated instead, where the caller asked for it. */
  size_t quantum = res == WEFT_SUCCESS && !exact_only ? sim_estimate_quantum(&w, call) : 0;
  if (sim_estimate_applies(m, call, quantum)) {
    sim_world_free(&w);
    return sim_estimate_run(m, call, quantum, out);
  }
  return finish(&w, res, trace, trace_arg, out, &tie);
}

weft_result_t sim_run_schedules(const sim_model_t *m, int nranks, size_t esize,
                                const schedule_t *scheds, sim_trace_fn trace, void *trace_arg,
                                sim_result_t *out) {
  sim_world_t w;
  int tie;
  weft_result_t res = sim_world_borrow(&w, m, nranks, esize, scheds);
  return finish(&w, res, trace, trace_arg, out, &tie);
}
