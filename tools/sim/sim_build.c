/* sim_build.c -- the simulator's setup: every rank's schedule, cut into executor.c's streams.
 *
 * Schedules come from the algorithms table (or the caller); streams are grouped exactly as
 * executor.c groups them, and the two ends of each stream are paired up and counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/sim/sim_internal.h"
#include "tools/sim/topology.h"

void sim_model_defaults(sim_model_t *m) {
  /* A loopback-like model (the library's defaults before its per-transport constants; the sim
   * tests' bands and tolerances were measured on it) and config.c's WEFT_SLICE_BYTES and
   * WEFT_SLICES_IN_FLIGHT. What the library's automatic choice assumes for a transport is
   * --transport's (cli.c: collectives/cost_constants.c). */
  m->alpha = m->inter_alpha = 30e-6;
  m->beta = m->inter_beta = 1.0 / 1.5e9;
  m->gamma = 1.0 / 4e9;
  m->beta_mem = 0;
  m->slice_bytes = 65536;
  m->window = 4;
  m->ranks_per_node = 0;
  m->headers = 1;
  m->topo = NULL;
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
  const sched_op_t *op = &r->s.ops[oi];
  /* executor.c: a token that carries values to agree on is SIM_AGREE_BYTES, a bare one 1. */
  if (is_token(op->kind)) return op->agree.on ? SIM_AGREE_BYTES : 1;
  size_t left = op->count - j * w->slice_elems;
  return (double)((left < w->slice_elems ? left : w->slice_elems) * w->esize);
}

static sim_stream_t *stream_for(sim_world_t *w, sim_rank_t *r, int peer, int send) {
  for (int i = 0; i < r->nstreams; i++)
    if (r->streams[i].peer == peer && r->streams[i].is_send == send) return &r->streams[i];
  sim_stream_t *st = &r->streams[r->nstreams++];
  memset(st, 0, sizeof *st);
  st->peer = peer;
  st->is_send = send;
  st->match = -1;
  st->waiting = -1;
  st->ops = malloc(sizeof(int) * (size_t)(r->s.nops + 1));
  st->fifo = malloc(sizeof(sim_slot_t) * (size_t)w->m->window);
  return st->ops && st->fifo ? st : NULL;
}

static weft_result_t build_schedule_with(sim_world_t *w, const sim_call_t *c, int rank,
                                         const sched_args_t *args) {
  sched_args_t a = *args;
  weft_coll_t coll = c->coll;
  /* A p2p group runs as its simplest case, one send: the same tokens and data. */
  if (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV || coll == WEFT_COLL_P2P_GROUP) {
    coll = rank == 0 ? WEFT_COLL_SEND : WEFT_COLL_RECV;
    a.coll = coll;
    a.root = rank == 0 ? c->root : 0;
    if (rank != 0 && rank != c->root) {
      sched_init(&w->ranks[rank].s, 0, 0);
      return WEFT_SUCCESS;
    }
  }
  const algo_entry_t *e = algo_lookup(coll, c->algo);
  if (!e)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s has no %s", weft_coll_name(coll),
                    weft_algo_name(c->algo));
  weft_result_t res = e->build(&w->ranks[rank].s, &a);
  if (res == WEFT_SUCCESS) res = sched_validate(&w->ranks[rank].s, c->nranks);
  if (res != WEFT_SUCCESS)
    return err_context(res, "rank %d: %s %s schedule", rank, weft_coll_name(coll),
                       weft_algo_name(c->algo));
  return WEFT_SUCCESS;
}

/* The schedule of rank `rank`: send and recv pair rank 0 with the root; others sit idle. The
 * model's nodes (ranks_per_node) reach the builders as sched_args_t's topology. */
static weft_result_t build_schedule(sim_world_t *w, const sim_call_t *c, int rank) {
  sched_args_t a = {
      .coll = c->coll, .rank = rank, .nranks = c->nranks, .count = c->count, .root = c->root};
  int rpn = w->m->ranks_per_node;
  int *node_of = rpn > 0 && rpn < c->nranks ? malloc(sizeof(int) * (size_t)c->nranks) : NULL;
  if (node_of) {
    for (int r = 0; r < c->nranks; r++) node_of[r] = topo_node_of(w->m, r); /* r / rpn */
    a.node_of = node_of;
    a.nnodes = (c->nranks + rpn - 1) / rpn;
  }
  /* all_to_allv runs with even splits: count per pair, parts end to end. */
  size_t *even =
      c->coll == WEFT_COLL_ALL_TO_ALLV ? malloc(sizeof(size_t) * 2 * (size_t)c->nranks) : NULL;
  if (even) {
    for (int j = 0; j < c->nranks; j++) {
      even[j] = c->count;
      even[c->nranks + j] = (size_t)j * c->count;
    }
    a.send_counts = a.recv_counts = even;
    a.send_displs = a.recv_displs = even + c->nranks;
  } else if (c->coll == WEFT_COLL_ALL_TO_ALLV) {
    free(node_of);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory");
  }
  weft_result_t res = build_schedule_with(w, c, rank, &a);
  free(node_of);
  free(even);
  return res;
}

/* Streams in executor.c's order: the call description's first, then ops as they appear. */
static weft_result_t build_streams(sim_world_t *w, int rank) {
  sim_rank_t *r = &w->ranks[rank];
  const schedule_t *s = &r->s;
  size_t n = (size_t)s->nops + 1;
  r->nslices = calloc(n, sizeof(size_t));
  r->done = calloc(n, sizeof(size_t));
  r->queued = calloc(n, sizeof(size_t));
  r->streams = calloc(n + 2, sizeof *r->streams);
  r->copies = calloc(n, sizeof(int));
  if (!r->nslices || !r->done || !r->queued || !r->streams || !r->copies) goto oom;
  sim_stream_t *st;
  if (w->m->headers && s->hdr_to >= 0) {
    if (!(st = stream_for(w, r, s->hdr_to, 1))) goto oom;
    st->hdr = 1;
  }
  if (w->m->headers && s->hdr_from >= 0) {
    if (!(st = stream_for(w, r, s->hdr_from, 0))) goto oom;
    st->hdr = 1;
  }
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    r->nslices[i] = is_token(op->kind) ? 1 : (op->count + w->slice_elems - 1) / w->slice_elems;
    if (sched_is_local(op->kind)) {
      r->copies[r->ncopies++] = i;
      continue;
    }
    if (!(st = stream_for(w, r, op->peer, is_send(op->kind)))) goto oom;
    st->ops[st->nops++] = i;
  }
  for (int i = 0; i < r->nstreams; i++) {
    st = &r->streams[i];
    st->nmsgs = st->hdr;
    for (int k = 0; k < st->nops; k++) st->nmsgs += (long)r->nslices[st->ops[k]];
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory building rank %d's streams", rank);
}

/* Every stream needs its opposite end on the peer, carrying as many messages. */
static weft_result_t pair_streams(sim_world_t *w) {
  for (int r = 0; r < w->nranks; r++) {
    sim_rank_t *rk = &w->ranks[r];
    for (int i = 0; i < rk->nstreams; i++) {
      sim_stream_t *st = &rk->streams[i];
      sim_rank_t *pk = &w->ranks[st->peer];
      long theirs = 0;
      for (int k = 0; k < pk->nstreams; k++)
        if (pk->streams[k].peer == r && pk->streams[k].is_send != st->is_send) {
          st->match = k;
          theirs = pk->streams[k].nmsgs;
        }
      if (theirs != st->nmsgs)
        return WEFT_ERR(WEFT_ERR_INTERNAL,
                        "schedules disagree: rank %d %s %ld messages %s rank %d, which %s %ld", r,
                        st->is_send ? "sends" : "receives", st->nmsgs, st->is_send ? "to" : "from",
                        st->peer, st->is_send ? "receives" : "sends", theirs);
    }
  }
  return WEFT_SUCCESS;
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

/* Streams and pairing for schedules already in w->ranks[*].s. */
static weft_result_t setup(sim_world_t *w) {
  /* executor.c: barriers move bytes (esize 1), everything else elements of the dtype. */
  w->slice_elems = w->m->slice_bytes / w->esize ? w->m->slice_bytes / w->esize : 1;
  for (int r = 0; r < w->nranks; r++) WEFT_CHECK(build_streams(w, r));
  return pair_streams(w);
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
  w->owns_schedules = 1;
  w->esize = c->coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(c->dtype);
  for (int r = 0; r < c->nranks; r++) WEFT_CHECK(build_schedule(w, c, r));
  return setup(w);
}

weft_result_t sim_world_borrow(sim_world_t *w, const sim_model_t *m, int nranks, size_t esize,
                               const schedule_t *scheds) {
  WEFT_CHECK(alloc_ranks(w, m, nranks));
  w->esize = esize ? esize : 1;
  for (int r = 0; r < nranks; r++) {
    w->ranks[r].s = scheds[r];
    WEFT_CHECK(sched_validate(&scheds[r], nranks));
  }
  return setup(w);
}

void sim_world_free(sim_world_t *w) {
  for (int r = 0; w->ranks && r < w->nranks; r++) {
    sim_rank_t *rk = &w->ranks[r];
    for (int i = 0; rk->streams && i < rk->nstreams; i++) {
      free(rk->streams[i].ops);
      free(rk->streams[i].fifo);
    }
    if (w->owns_schedules) sched_free(&rk->s);
    free(rk->nslices);
    free(rk->done);
    free(rk->queued);
    free(rk->streams);
    free(rk->copies);
    free(rk->tasks);
  }
  free(w->ranks);
  sim_heap_free(&w->heap);
  w->ranks = NULL;
}
