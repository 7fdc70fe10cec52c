/* sim_build.c -- the simulator's setup: every rank's schedule, cut into executor.c's streams.
 *
 * Schedules come from the algorithms table (or the caller); streams are grouped exactly as
 * executor.c groups them, and the two ends of each stream are paired up and counted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/sim/sim_internal.h"
#include "tools/sim/sim_symmetry.h"
#include "tools/sim/topology.h"

void sim_model_defaults(sim_model_t *m) {
  /* A loopback-like model (the library's defaults before its per-transport constants; the sim
   * tests' bands and tolerances were measured on it), config.c's WEFT_SLICE_BYTES and the
   * executor's default slices in flight (4, shm's; TCP keeps 1 MiB's worth, 16 such slices:
   * transport_ops_t.depth_bytes). What the library's automatic choice assumes for a transport
   * is --transport's (cli.c: collectives/cost_constants.c). */
  m->alpha = m->inter_alpha = 30e-6;
  m->beta = m->inter_beta = 1.0 / 1.5e9;
  m->gamma = 1.0 / 4e9;
  m->beta_mem = 0;
  m->slice_bytes = 65536;
  m->window = 4;
  m->ranks_per_node = 0;
  m->headers = 1;
  m->topo = NULL;
  m->replay = SIM_REPLAY_FULL;
  m->skip = 1;
  m->estimate_slices = 128;
  m->estimate_cache = NULL;
}

int sim_same_node(const sim_model_t *m, int a, int b) {
  if (m->topo) return topo_node_of(m, a) == topo_node_of(m, b); /* its rank order */
  return m->ranks_per_node <= 0 || a / m->ranks_per_node == b / m->ranks_per_node;
}

double sim_link_time(const sim_model_t *m, int from, int to, double bytes) {
  if (sim_same_node(m, from, to)) return m->alpha + bytes * m->beta;
  return m->inter_alpha + bytes * m->inter_beta;
}

static int is_token(sched_kind_t k) { return k == SCHED_SEND_TOKEN || k == SCHED_RECV_TOKEN; }
static int is_send(sched_kind_t k) { return k == SCHED_SEND || k == SCHED_SEND_TOKEN; }

double sim_slice_bytes(const sim_world_t *w, const sim_rank_t *r, int oi, size_t j) {
  const sim_op_t *op = &r->ops[oi];
  /* executor.c: a token that carries values to agree on is SIM_AGREE_BYTES, a bare one 1. */
  if (is_token((sched_kind_t)op->kind)) return op->agree ? SIM_AGREE_BYTES : 1;
  size_t left = op->count - j * w->slice_elems;
  return (double)((left < w->slice_elems ? left : w->slice_elems) * w->esize);
}

/* The index of `r`'s stream to or from `peer`, found through slot_of (2 entries per peer, -1:
 * none yet) and numbered in first-use order, executor.c's order. */
static int stream_index(sim_rank_t *r, int *slot_of, int peer, int send) {
  int *slot = &slot_of[2 * peer + send];
  if (*slot < 0) *slot = r->nstreams++;
  return *slot;
}

static void stream_init(sim_stream_t *st, int peer, int send) {
  st->peer = st->gpeer = peer;
  st->is_send = send;
  st->match = -1;
  st->waiting = -1;
}

static weft_result_t build_schedule_with(schedule_t *s, const sim_call_t *c, int rank,
                                         const sched_args_t *args) {
  sched_args_t a = *args;
  weft_coll_t coll = c->coll;
  /* A p2p group runs as its simplest case, one send: the same tokens and data. */
  if (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV || coll == WEFT_COLL_P2P_GROUP) {
    coll = rank == 0 ? WEFT_COLL_SEND : WEFT_COLL_RECV;
    a.coll = coll;
    a.root = rank == 0 ? c->root : 0;
    if (rank != 0 && rank != c->root) {
      sched_init(s, 0, 0);
      return WEFT_SUCCESS;
    }
  }
  const algo_entry_t *e = algo_lookup(coll, c->algo);
  if (!e)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s has no %s", weft_coll_name(coll),
                    weft_algo_name(c->algo));
  weft_result_t res = e->build(s, &a);
  if (res == WEFT_SUCCESS) res = sched_validate(s, c->nranks);
  if (res != WEFT_SUCCESS)
    return err_context(res, "rank %d: %s %s schedule", rank, weft_coll_name(coll),
                       weft_algo_name(c->algo));
  return WEFT_SUCCESS;
}

/* The builders' arguments shared by every rank, made once per call (not once per rank: node_of
 * and all_to_allv's splits have an entry per rank). The model's nodes (ranks_per_node) reach the
 * builders as sched_args_t's topology. */
typedef struct {
  sched_args_t a;
  int *node_of;
  size_t *even;
} call_args_t;

static void call_args_free(call_args_t *ca) {
  free(ca->node_of);
  free(ca->even);
}

static weft_result_t call_args_init(call_args_t *ca, const sim_model_t *m, const sim_call_t *c) {
  memset(ca, 0, sizeof *ca);
  ca->a.coll = c->coll;
  ca->a.nranks = c->nranks;
  ca->a.count = c->count;
  ca->a.root = c->root;
  int rpn = m->ranks_per_node;
  if (rpn > 0 && rpn < c->nranks) {
    if (!(ca->node_of = malloc(sizeof(int) * (size_t)c->nranks))) goto oom;
    for (int r = 0; r < c->nranks; r++) ca->node_of[r] = topo_node_of(m, r); /* r / rpn */
    ca->a.node_of = ca->node_of;
    ca->a.nnodes = (c->nranks + rpn - 1) / rpn;
  }
  /* all_to_allv runs with even splits: count per pair, parts end to end. */
  if (c->coll == WEFT_COLL_ALL_TO_ALLV) {
    if (!(ca->even = malloc(sizeof(size_t) * 2 * (size_t)c->nranks))) goto oom;
    for (int j = 0; j < c->nranks; j++) {
      ca->even[j] = c->count;
      ca->even[c->nranks + j] = (size_t)j * c->count;
    }
    ca->a.send_counts = ca->a.recv_counts = ca->even;
    ca->a.send_displs = ca->a.recv_displs = ca->even + c->nranks;
  }
  return WEFT_SUCCESS;
oom:
  call_args_free(ca);
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory for %d ranks' arguments", c->nranks);
}

/* The schedule of rank `rank`: send and recv pair rank 0 with the root; others sit idle. */
static weft_result_t build_schedule(schedule_t *s, const call_args_t *ca, const sim_call_t *c,
                                    int rank) {
  sched_args_t a = ca->a;
  a.rank = rank;
  return build_schedule_with(s, c, rank, &a);
}

static int more_by_op_cmp(const void *a, const void *b) {
  const sim_more_t *x = a, *y = b;
  return x->op != y->op ? (x->op < y->op ? -1 : 1) : 0;
}

static int more_by_dep_cmp(const void *a, const void *b) {
  const sim_more_t *x = a, *y = b;
  if (x->dep != y->dep) return x->dep < y->dep ? -1 : 1;
  return x->op != y->op ? (x->op < y->op ? -1 : 1) : 0;
}

/* The further dependencies of a rank's ops (schedule.h's deps list), kept aside in two orders:
 * by dependant for dep_ready, by prerequisite for waking dependants. -1 when out of memory. */
static int build_more(sim_rank_t *r, const schedule_t *s, int nmore) {
  r->more_by_op = malloc(sizeof *r->more_by_op * (size_t)nmore);
  r->more_by_dep = malloc(sizeof *r->more_by_dep * (size_t)nmore);
  if (!r->more_by_op || !r->more_by_dep) return -1;
  int at = 0;
  for (int i = 0; i < s->nops; i++)
    for (int k = 0; k < s->ops[i].nmore; k++) {
      sched_dep_t d = s->deps[s->ops[i].more_deps + k];
      r->more_by_op[at++] = (sim_more_t){i, d.op, (unsigned char)(d.whole != 0)};
    }
  r->nmore = at;
  /* Stable for equal ops: ops are visited in order, and qsort only reorders within an op. */
  qsort(r->more_by_op, (size_t)at, sizeof *r->more_by_op, more_by_op_cmp);
  memcpy(r->more_by_dep, r->more_by_op, sizeof *r->more_by_dep * (size_t)at);
  qsort(r->more_by_dep, (size_t)at, sizeof *r->more_by_dep, more_by_dep_cmp);
  return 0;
}

/* Streams in executor.c's order: the call description's first, then ops as they appear. Each
 * op's stream is found through slot_of (2 * nranks entries, all -1 between calls), so a rank
 * costs time linear in its ops whatever the number of peers. */
static weft_result_t build_streams(sim_world_t *w, int rank, const schedule_t *s) {
  sim_rank_t *r = &w->ranks[rank];
  int *slot_of = w->slot_of;
  size_t n = (size_t)s->nops + 1;
  int hdr_to = w->m->headers ? s->hdr_to : -1, hdr_from = w->m->headers ? s->hdr_from : -1;
  r->ops = calloc(n, sizeof *r->ops);
  r->nops = s->nops;
  r->stream_ops = malloc(sizeof(int) * n);
  if (!r->ops || !r->stream_ops) goto oom;
  /* First pass: number the streams and count the copies, so that both are sized exactly. */
  int nmore = 0;
  int hdr_out = hdr_to >= 0 ? stream_index(r, slot_of, hdr_to, 1) : -1;
  int hdr_in = hdr_from >= 0 ? stream_index(r, slot_of, hdr_from, 0) : -1;
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    sim_op_t *o = &r->ops[i];
    size_t nslices = is_token(op->kind) ? 1 : (op->count + w->slice_elems - 1) / w->slice_elems;
    if (nslices > UINT32_MAX)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "weft-sim: rank %d op %d has %zu slices, more than the engine counts", rank,
                      i, nslices);
    o->count = op->count;
    o->nslices = (uint32_t)nslices;
    o->dep = op->dep;
    o->dep_whole = op->dep_whole != 0;
    o->dep_first = o->dep_next = o->stream = -1;
    o->step = op->step;
    o->kind = (unsigned char)op->kind;
    o->agree = op->agree.on != 0;
    o->has_more = op->nmore > 0;
    nmore += op->nmore;
    if (sched_is_local(op->kind))
      r->ncopies++;
    else
      o->stream = stream_index(r, slot_of, op->peer, is_send(op->kind));
  }
  size_t nstreams = (size_t)(r->nstreams ? r->nstreams : 1), ncopies = (size_t)r->ncopies;
  r->streams = calloc(nstreams, sizeof *r->streams);
  r->copies = malloc(sizeof(int) * (ncopies ? ncopies : 1));
  r->copy_queued = calloc(ncopies ? ncopies : 1, sizeof *r->copy_queued);
  r->fifos = malloc(sizeof *r->fifos * nstreams * (size_t)w->m->window);
  r->pending = malloc(sizeof(int) * nstreams);
  if (!r->streams || !r->copies || !r->copy_queued || !r->fifos || !r->pending) goto oom;
  if (nmore > 0 && build_more(r, s, nmore) != 0) goto oom;
  if (hdr_out >= 0) stream_init(&r->streams[hdr_out], hdr_to, 1), r->streams[hdr_out].hdr = 1;
  if (hdr_in >= 0) stream_init(&r->streams[hdr_in], hdr_from, 0), r->streams[hdr_in].hdr = 1;
  r->ncopies = 0;
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    int si = r->ops[i].stream;
    if (si < 0) {
      r->copies[r->ncopies++] = i;
      continue;
    }
    stream_init(&r->streams[si], op->peer, is_send(op->kind));
    r->streams[si].nops++;
  }
  /* Dependants, newest first: who to look at again when an op completes a slice (every
   * dependency of an op links it, where ops get several). */
  for (int i = s->nops - 1; i >= 0; i--)
    if (s->ops[i].dep >= 0) {
      r->ops[i].dep_next = r->ops[s->ops[i].dep].dep_first;
      r->ops[s->ops[i].dep].dep_first = i;
    }
  int at = 0;
  for (int i = 0; i < r->nstreams; i++) {
    sim_stream_t *st = &r->streams[i];
    slot_of[2 * st->peer + st->is_send] = -1;
    st->ops = r->stream_ops + at;
    st->fifo = r->fifos + (size_t)i * (size_t)w->m->window;
    at += st->nops;
    st->nops = 0;
    st->nmsgs = st->hdr;
  }
  for (int i = 0; i < s->nops; i++) {
    if (r->ops[i].stream < 0) continue;
    sim_stream_t *st = &r->streams[r->ops[i].stream];
    st->ops[st->nops++] = i;
    st->nmsgs += (long)r->ops[i].nslices;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory building rank %d's streams", rank);
}

/* A rank's streams sorted for pair_streams' binary search: (2 * peer + is_send) in the high
 * half, the stream's index in the low. */
static int by_key(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return x < y ? -1 : x > y;
}

static int find_stream(const unsigned long long *keys, int n, int peer, int send) {
  unsigned long long want = (unsigned long long)(2 * peer + send);
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (keys[mid] >> 32 < want)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && keys[lo] >> 32 == want ? (int)(keys[lo] & 0xffffffffu) : -1;
}

/* Every stream needs its opposite end on the peer, carrying as many messages. Each rank's
 * streams are sorted by peer once, so pairing costs O(streams log streams). In a symmetric
 * replay both ends must also follow one kind of map; where they do not, or do not pair, *paired
 * = 0 and the call is replayed in full (which names what disagrees, if anything does). */
static weft_result_t pair_streams(sim_world_t *w, int *paired) {
  unsigned long long **order = calloc((size_t)w->nranks, sizeof *order);
  weft_result_t res =
      order ? WEFT_SUCCESS : WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory");
  for (int r = 0; r < w->nranks && res == WEFT_SUCCESS; r++) {
    sim_rank_t *rk = &w->ranks[r];
    order[r] = malloc(sizeof **order * (size_t)(rk->nstreams ? rk->nstreams : 1));
    if (!order[r]) {
      res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory pairing streams");
      break;
    }
    for (int i = 0; i < rk->nstreams; i++) {
      const sim_stream_t *st = &rk->streams[i];
      order[r][i] = (unsigned long long)(2 * st->gpeer + st->is_send) << 32 | (unsigned)i;
    }
    qsort(order[r], (size_t)rk->nstreams, sizeof **order, by_key);
  }
  for (int r = 0; r < w->nranks && res == WEFT_SUCCESS && *paired; r++) {
    sim_rank_t *rk = &w->ranks[r];
    for (int i = 0; i < rk->nstreams; i++) {
      sim_stream_t *st = &rk->streams[i];
      sim_rank_t *pk = &w->ranks[st->peer];
      /* Who r is to the peer: in a symmetric replay, the peer's representative receives what r
       * sends to the peer, from the rank that stands to it as r stands to the peer. */
      int me = w->symmetric ? sim_sym_unmap(&w->sym, st->symkind, st->gpeer, r) : r;
      int k = find_stream(order[st->peer], pk->nstreams, me, !st->is_send);
      long theirs = k >= 0 ? pk->streams[k].nmsgs : 0;
      st->match = k;
      if (w->symmetric && (k < 0 || theirs != st->nmsgs || pk->streams[k].symkind != st->symkind)) {
        *paired = 0;
        break;
      }
      if (theirs != st->nmsgs) {
        res = WEFT_ERR(WEFT_ERR_INTERNAL,
                       "schedules disagree: rank %d %s %ld messages %s rank %d, which %s %ld", r,
                       st->is_send ? "sends" : "receives", st->nmsgs, st->is_send ? "to" : "from",
                       st->gpeer, st->is_send ? "receives" : "sends", theirs);
        break;
      }
    }
  }
  for (int r = 0; order && r < w->nranks; r++) free(order[r]);
  free(order);
  return res;
}

static weft_result_t check_call(const sim_call_t *c) {
  char have[256];
  if (c->nranks < 1)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft-sim: %d ranks: need at least 1", c->nranks);
  if (weft_dtype_size(c->dtype) == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft-sim: unknown dtype %d", (int)c->dtype);
  if (!algo_lookup(c->coll, c->algo)) {
    algo_list_names(c->coll, have, sizeof have);
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s has no '%s' algorithm in this build (it has: %s)", weft_coll_name(c->coll),
                    weft_algo_name(c->algo), have[0] ? have : "none");
  }
  int p2p =
      c->coll == WEFT_COLL_SEND || c->coll == WEFT_COLL_RECV || c->coll == WEFT_COLL_P2P_GROUP;
  if (p2p && (c->nranks < 2 || c->root < 1 || c->root >= c->nranks))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s: rank 0 sends to the root, which must be in 1..%d (got %d of %d ranks)",
                    weft_coll_name(c->coll), c->nranks - 1, c->root, c->nranks);
  if ((c->coll == WEFT_COLL_BROADCAST || c->coll == WEFT_COLL_REDUCE ||
       c->coll == WEFT_COLL_GATHER || c->coll == WEFT_COLL_SCATTER) &&
      (c->root < 0 || c->root >= c->nranks))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: root %d outside 0..%d", weft_coll_name(c->coll),
                    c->root, c->nranks - 1);
  return WEFT_SUCCESS;
}

/* What building streams needs for any number of ranks, peers among `p`. */
static weft_result_t prepare(sim_world_t *w, int p) {
  /* executor.c: barriers move bytes (esize 1), everything else elements of the dtype. */
  w->slice_elems = w->m->slice_bytes / w->esize ? w->m->slice_bytes / w->esize : 1;
  w->slot_of = malloc(sizeof(int) * 2 * (size_t)p);
  w->dirty_list = malloc(sizeof(int) * (size_t)w->nranks);
  w->unsorted_list = malloc(sizeof(int) * (size_t)w->nranks);
  if (!w->slot_of || !w->dirty_list || !w->unsorted_list)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory for %d ranks", w->nranks);
  for (int i = 0; i < 2 * p; i++) w->slot_of[i] = -1;
  return WEFT_SUCCESS;
}

static weft_result_t alloc_ranks(sim_world_t *w, const sim_model_t *m, int nranks) {
  memset(w, 0, sizeof *w);
  w->m = m;
  w->nranks = nranks;
  if (m->window < 1 || m->slice_bytes < 1)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft-sim: window and slice must be >= 1");
  w->ranks = nranks > 0 ? calloc((size_t)nranks, sizeof *w->ranks) : NULL;
  if (!w->ranks) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory");
  return WEFT_SUCCESS;
}

weft_result_t sim_world_build(sim_world_t *w, const sim_model_t *m, const sim_call_t *c) {
  memset(w, 0, sizeof *w);
  WEFT_CHECK(check_call(c));
  WEFT_CHECK(alloc_ranks(w, m, c->nranks));
  w->esize = c->coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(c->dtype);
  WEFT_CHECK(prepare(w, w->nranks));
  call_args_t ca;
  WEFT_CHECK(call_args_init(&ca, m, c));
  /* One rank's schedule at a time: only its compact form (sim_op_t) stays. */
  weft_result_t res = WEFT_SUCCESS;
  for (int r = 0; r < c->nranks && res == WEFT_SUCCESS; r++) {
    schedule_t s;
    sched_init(&s, 0, 0);
    res = build_schedule(&s, &ca, c, r);
    if (res == WEFT_SUCCESS) res = build_streams(w, r, &s);
    sched_free(&s);
  }
  call_args_free(&ca);
  int paired = 1;
  return res == WEFT_SUCCESS ? pair_streams(w, &paired) : res;
}

/* Builds rank r's schedule into `s` (sched_free'd by the caller) and, for a representative,
 * its record in w, whose streams may follow any kind of map g admits until checks narrow it. */
static weft_result_t build_rank(sim_world_t *w, const call_args_t *ca, const sim_call_t *c,
                                const sim_sym_t *g, int r, schedule_t *s) {
  sched_init(s, 0, 0);
  WEFT_CHECK(build_schedule(s, ca, c, r));
  if (r >= w->nranks) return WEFT_SUCCESS;
  WEFT_CHECK(build_streams(w, r, s));
  for (int i = 0; i < w->ranks[r].nstreams; i++)
    w->ranks[r].streams[i].symkind = (unsigned char)g->kinds;
  return WEFT_SUCCESS;
}

/* Whether rank r's schedule is its representative's under g (sim_sym_matches); builds it, and
 * frees it before returning, so that one schedule lives at a time. */
static weft_result_t check_rank(sim_world_t *w, const call_args_t *ca, const sim_call_t *c,
                                const sim_sym_t *g, int r, int *ok) {
  schedule_t s;
  *ok = 0;
  weft_result_t res = build_rank(w, ca, c, g, r, &s);
  if (res == WEFT_SUCCESS)
    *ok = sim_sym_matches(g, w->m, &w->ranks[sim_sym_rep(g, r)], &s, r, w->sym_owner);
  sched_free(&s);
  return res;
}

/* Builds ranks 0..d-1 of g into w and checks every other rank against them, one schedule at a
 * time: time linear in the call's ops, memory in the representatives'. Rank d is checked right
 * after rank 0, before the other representatives are built, so that most calls without the
 * symmetry cost two schedules. *ok = 0 where a rank differs (w is then to be freed). */
static weft_result_t try_symmetry(sim_world_t *w, const sim_model_t *m, const sim_call_t *c,
                                  const call_args_t *ca, const sim_sym_t *g, int *ok) {
  *ok = 0;
  WEFT_CHECK(alloc_ranks(w, m, g->d));
  w->esize = c->coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(c->dtype);
  WEFT_CHECK(prepare(w, c->nranks));
  w->sym_owner = calloc(2 * (size_t)c->nranks, sizeof(int));
  if (!(w->started = malloc(sizeof(int) * (size_t)g->d)) || !w->sym_owner)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory for %d ranks", g->d);
  int same = 0;
  for (int r = 0; r < g->d; r++) {
    schedule_t s;
    weft_result_t res = build_rank(w, ca, c, g, r, &s);
    sched_free(&s);
    WEFT_CHECK(res);
    if (r == 0) {
      WEFT_CHECK(check_rank(w, ca, c, g, g->d, &same));
      if (!same) return WEFT_SUCCESS;
    }
  }
  for (int r = g->d + 1; r < c->nranks; r++) {
    WEFT_CHECK(check_rank(w, ca, c, g, r, &same));
    if (!same) return WEFT_SUCCESS;
  }
  /* Every rank checked: each stream takes a kind that fitted every rank (rotations where both
   * did), and names its peer's representative; pair_streams pairs them across the maps. */
  for (int r = 0; r < g->d; r++)
    for (int i = 0; i < w->ranks[r].nstreams; i++) {
      sim_stream_t *st = &w->ranks[r].streams[i];
      st->symkind = st->symkind & SIM_SYM_ROTATE ? SIM_SYM_ROTATE : SIM_SYM_XOR;
      st->peer = sim_sym_rep(g, st->gpeer);
    }
  w->symmetric = 1;
  w->sym = *g;
  *ok = 1;
  return WEFT_SUCCESS;
}

weft_result_t sim_world_build_symmetric(sim_world_t *w, const sim_model_t *m, const sim_call_t *c,
                                        int *found) {
  memset(w, 0, sizeof *w);
  *found = 0;
  WEFT_CHECK(check_call(c));
  sim_sym_t cand[64];
  int n = sim_sym_candidates(m, c->nranks, cand, 64);
  if (n == 0) return WEFT_SUCCESS;
  call_args_t ca;
  WEFT_CHECK(call_args_init(&ca, m, c));
  weft_result_t res = WEFT_SUCCESS;
  for (int i = 0; i < n && res == WEFT_SUCCESS && !*found; i++) {
    res = try_symmetry(w, m, c, &ca, &cand[i], found);
    if (res == WEFT_SUCCESS && *found) res = pair_streams(w, found);
    if (res != WEFT_SUCCESS || !*found) sim_world_free(w);
  }
  call_args_free(&ca);
  return res;
}

weft_result_t sim_world_borrow(sim_world_t *w, const sim_model_t *m, int nranks, size_t esize,
                               const schedule_t *scheds) {
  WEFT_CHECK(alloc_ranks(w, m, nranks));
  w->esize = esize ? esize : 1;
  WEFT_CHECK(prepare(w, w->nranks));
  for (int r = 0; r < nranks; r++) {
    WEFT_CHECK(sched_validate(&scheds[r], nranks));
    WEFT_CHECK(build_streams(w, r, &scheds[r]));
  }
  int paired = 1;
  return pair_streams(w, &paired);
}

void sim_world_free(sim_world_t *w) {
  for (int r = 0; w->ranks && r < w->nranks; r++) {
    sim_rank_t *rk = &w->ranks[r];
    free(rk->ops);
    free(rk->streams);
    free(rk->stream_ops);
    free(rk->fifos);
    free(rk->copies);
    free(rk->copy_queued);
    free(rk->more_by_op);
    free(rk->more_by_dep);
    free(rk->pending);
    free(rk->out_wait.v);
    free(rk->in_wait.v);
    free(rk->tasks);
  }
  free(w->ranks);
  free(w->dirty_list);
  free(w->unsorted_list);
  free(w->slot_of);
  free(w->started);
  free(w->sym_owner);
  sim_heap_free(&w->heap);
  w->ranks = NULL;
  w->dirty_list = NULL;
  w->unsorted_list = NULL;
  w->slot_of = NULL;
  w->started = NULL;
  w->sym_owner = NULL;
}
