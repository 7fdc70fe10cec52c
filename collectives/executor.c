/* executor.c -- the one engine that runs every schedule: slicing, pipelining, fused reduction,
 * fused ring steps, call-description check and timeouts.
 *
 * Ops to one peer in one direction form a stream. Each stream keeps a FIFO of up to `window`
 * posted slices; a slice is retired when its transfer completed and, for a reducing receive, once
 * it has been folded into the output from its staging slot (still warm in cache: the reduction is
 * part of the receive path, not a second pass). Retiring strictly in FIFO order gives every op a
 * "slices done" counter that dependent ops (the forwarding sends of a ring) wait on.
 *
 * A fused step (recv-reduce-send, ...) is retired through the send it feeds: when its slice is at
 * the head of the receive stream and that send's stream would post the same slice next, the
 * send's transport lends the slot the next peer will read (lend_send), the one pass writes it
 * (and the output, for the copying kinds), and commit_send posts it. If the send side cannot take
 * it yet (its window is full, or the transport has no free slot) the receive waits at the head,
 * holding the peer's slot: that back-pressure is why rings run in rounds (ring_allreduce.c).
 * Device mode enqueues the pass on the device queue and commits once its fence has passed, in
 * lending order; no plain post_send goes on a stream while one of its slots is lent. */
#include "collectives/executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "kernels/reduce.h"
#include "kernels/stream.h"

#define HDR_BYTES CALL_DESC_BYTES
/* Over a transport with desc_slot the description takes a whole slot: the description, then the
 * length of the message carried in the slot (u32, 0: none), then from DESC_SLOT_DATA (aligned for
 * the reduction's vector loads) that message, the stream's first. A whole slot, whatever it
 * carries, so that both ends agree on the length of the first message before either has looked
 * at the other's description: a mismatch is then always reported from the description. */
#define DESC_SLOT_DATA 64
#define AGREE_BYTES 32
#define AGREE_MAGIC 0x57464147u /* "WFAG" */
#define MAX_WINDOW WEFT_MAX_SLICES_IN_FLIGHT
/* Slices in flight per stream where neither WEFT_SLICES_IN_FLIGHT nor the transport says. */
#define DEFAULT_WINDOW 4
/* How long one wait blocks at most, so the inactivity timeout is checked often enough. */
#define WAIT_SLICE_MS 200
/* How long one wait blocks at most while device work is pending (fences are polled). */
#define DEVICE_POLL_MS 1

typedef struct {
  int op; /* schedule index, or -1 for the call description */
  size_t slice;
  xfer_t x;
  /* A received description slot (DESC_SLOT_DATA): x.data points at it until it is looked at. */
  int desc_slot;
  /* Device mode, reducing receives: the reduction was enqueued, and the fence after it. */
  int reducing;
  uint64_t ticket;
  /* Device mode, a send in a lent slot: the fused step's device work writing it is behind
   * `ticket`; the slot is committed once that passed. */
  int filling;
} flight_t;

typedef struct stream {
  int peer, is_send;
  conn_t *conn;
  int *ops, nops; /* schedule indices in stream order */
  int cur;        /* position in ops of the op being posted */
  size_t next_slice;
  int hdr_pending; /* the call description still has to be posted on this stream */
  int desc_slot;   /* ... as a whole slot, which may carry the first message (DESC_SLOT_DATA) */
  int desc_wait;   /* receive: that slot has not been looked at: post nothing after it yet */
  flight_t *fifo;  /* `cap` entries, each set when posted: a small call's few slices need few,
                    * and zeroing `window` of them per stream (560 bytes each) was over a third
                    * of a small call's instructions */
  int cap;         /* min(window, the messages the stream carries in this call) */
  int head, count;
  int lent;      /* send streams, device mode: slots lent and not yet committed */
  char *staging; /* cap slots of slice bytes, for reducing receives */
} stream_t;

/* Transports that lend a received slice in place (shm) let a reducing receive read the peer's
 * bytes where they landed: no staging slot, no copy into it. TCP has to land them somewhere. */
static int recv_in_place(const stream_t *st) { return st->conn->ops->post_recv_inplace != NULL; }

/* Index of the k-th entry (k < cap) after the head of a stream's FIFO. Without a division: the
 * remainder was a divide per message posted and retired, on every small call's path. */
static int fifo_index(const stream_t *st, int k) {
  int i = st->head + k;
  return i < st->cap ? i : i - st->cap;
}

typedef struct {
  size_t nslices, done;
  /* Device mode, local copies: slices enqueued, and the fence after the last of them. */
  size_t issued;
  uint64_t ticket;
  /* A fused receive that runs fused: `out` is the stream of the send it feeds. That send is
   * `fed`: its slices are posted by the fused step, never by post_ready. */
  int fused, fed;
  struct stream *out;
} op_state_t;

typedef struct {
  exec_ctx_t *ctx;
  const schedule_t *s;
  const coll_desc_t *desc;
  char *bufs[SCHED_NUM_BUFS]; /* base of each sched_buf_t */
  size_t esize, slice_elems;
  int device;      /* the buffers are device memory: reductions and copies go to the queue */
  int dev_pending; /* device work enqueued whose fence has not passed yet */
  kern_reduce_fn reduce;
  kern_reduce_copy_fn reduce_copy;
  op_state_t *states;
  stream_t *streams;
  int nstreams;
  int *copies, ncopies; /* local copy ops, run as their dependencies allow */
  conn_t **conns;
  int nconns;
  unsigned char *hdr_out, *hdr_in, *token;
  unsigned char *agree; /* AGREE_BYTES per op, for tokens that carry values (schedule.h) */
  exec_plan_t *plan;    /* where this run's layout is kept for the next call, or NULL */
} run_t;

/* What setup laid out for a kept schedule, valid for its next call with the same element size
 * (slices per op, staging) while ctx->scratch stays where it was (the header and staging
 * pointers) and every stream's connection is the same. */
struct exec_plan {
  int valid;
  size_t esize, slice_elems;
  unsigned conn_epoch; /* ctx->conn_epoch when the streams got their connections */
  void *scratch;    /* ctx->scratch the layout points into */
  size_t need;      /* of it */
  void *mem, *fifo; /* op states, streams, connections, copies, op lists; FIFO entries */
  size_t mem_bytes, fifo_bytes;
  op_state_t *states;
  stream_t *streams;
  conn_t **conns;
  int *copies;
  int nstreams, nconns, ncopies;
  int agree; /* the schedule has tokens that carry values: r->agree per call */
};

/* Slices of `op` (of nslices) whose dependencies have been met: the fewest any one allows. */
static size_t dep_ready(const run_t *r, const sched_op_t *op, size_t nslices) {
  size_t ready = nslices;
  for (int k = 0; k < sched_ndeps(op) && ready > 0; k++) {
    sched_dep_t dp = sched_dep_at(r->s, op, k);
    const op_state_t *d = &r->states[dp.op];
    size_t n = sched_dep_ready(dp.op, dp.whole, nslices, d->done, d->nslices);
    if (n < ready) ready = n;
  }
  return ready;
}

/* ---- values two ranks agree on (sched_agree_t) -------------------------------------------- */

static void agree_encode(unsigned char *p, const coll_desc_t *d, const sched_agree_t *a) {
  uint32_t w[4] = {AGREE_MAGIC, (uint32_t)d->kind, (uint32_t)a->tag, (uint32_t)a->dtype};
  uint64_t q[2] = {(uint64_t)a->count, (uint64_t)a->back};
  memcpy(p, w, sizeof w);
  memcpy(p + 16, q, sizeof q);
}

weft_result_t exec_peek_p2p(conn_t *conn, int *state, int *tag, weft_dtype_t *dtype,
                            size_t *count) {
  if (!conn->ops->peek_recv)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "the %s transport to rank %d cannot look at a message before receiving it, "
                    "which a receive from any source needs",
                    conn->ops->name, conn->peer);
  unsigned char p[AGREE_BYTES];
  WEFT_CHECK(conn->ops->peek_recv(conn, p, sizeof p, state));
  if (*state != TRANSPORT_PEEK_READY) return WEFT_SUCCESS;
  uint32_t w[4];
  uint64_t q[2];
  memcpy(w, p, sizeof w);
  memcpy(q, p + 16, sizeof q);
  /* A p2p token says so in its first two words; a call description or a collective's data
   * that happened to start with them would be taken for one (2^-64 for random data). */
  if (w[0] != AGREE_MAGIC || w[1] != (uint32_t)WEFT_COLL_P2P_GROUP || q[1] != 0) {
    *state = TRANSPORT_PEEK_EMPTY;
    return WEFT_SUCCESS;
  }
  *tag = (int)w[2];
  *dtype = (weft_dtype_t)w[3];
  *count = (size_t)q[0];
  return WEFT_SUCCESS;
}

/* The token of op `oi` from `peer` has arrived: its values against this rank's. Both ranks of a
 * pair check the other's token, so a disagreement fails both, each naming both sides. */
static weft_result_t check_agree(run_t *r, int peer, int oi) {
  const sched_agree_t *mine = &r->s->ops[oi].agree;
  const unsigned char *p = r->agree + (size_t)oi * AGREE_BYTES;
  uint32_t w[4];
  uint64_t q[2];
  memcpy(w, p, sizeof w);
  memcpy(q, p + 16, sizeof q);
  int me = r->ctx->rank, tag = (int)w[2];
  unsigned long long count = q[0], back = q[1];
  const char *what = weft_coll_name(r->desc->kind);
  if (w[0] != AGREE_MAGIC || w[1] != (uint32_t)r->desc->kind)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d did not send this rank the %s exchange this rank expects from it "
                    "(it called %s)",
                    peer, what, w[0] == AGREE_MAGIC ? weft_coll_name((weft_coll_t)w[1]) : "?");
  if (tag != mine->tag)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "%s: rank %d sends rank %d a message with tag %d (%llu elements), but the "
                    "receive rank %d posted for it has tag %d (%llu elements): a send matches "
                    "only a receive with its tag",
                    what, peer, me, tag, count, me, mine->tag, (unsigned long long)mine->count);
  if ((weft_dtype_t)w[3] != mine->dtype)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "%s: rank %d sends rank %d %s elements (tag %d), but rank %d receives %s", what,
                    peer, me, weft_dtype_name((weft_dtype_t)w[3]), tag, me,
                    weft_dtype_name(mine->dtype));
  if (count != mine->count)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "%s: rank %d sends %llu elements to rank %d (tag %d), which expects %llu", what,
                    peer, count, me, tag, (unsigned long long)mine->count);
  if (back != mine->back)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "%s: rank %d sends %llu elements to rank %d, which expects %llu", what, me,
                    (unsigned long long)mine->back, peer, back);
  return WEFT_SUCCESS;
}

/* The call description a peer sent on this stream (in flight f), against this rank's call. */
static weft_result_t check_header(run_t *r, int peer, const flight_t *f) {
  const unsigned char *in = f->desc_slot ? (const unsigned char *)f->x.data : r->hdr_in;
  return call_desc_check(in, r->desc, r->ctx->rank, peer);
}

static stream_t *stream_for(run_t *r, int peer, int is_send) {
  for (int i = 0; i < r->nstreams; i++)
    if (r->streams[i].peer == peer && r->streams[i].is_send == is_send) return &r->streams[i];
  stream_t *st = &r->streams[r->nstreams++];
  memset(st, 0, sizeof *st);
  st->peer = peer;
  st->is_send = is_send;
  return st;
}

static int is_send_kind(sched_kind_t k) { return k == SCHED_SEND || k == SCHED_SEND_TOKEN; }

static int is_token_kind(sched_kind_t k) { return k == SCHED_SEND_TOKEN || k == SCHED_RECV_TOKEN; }

/* A fused step runs fused when the send's transport lends its slot (by default only a slot the
 * message is taken from: transport.h, lend_in_place; WEFT_FUSED_STEPS=2 takes TCP's staging slot
 * too), and, for a copy-send, when the receive lands in place: over TCP a received slice is
 * already in buf, where the socket reads it from, so copying it into a staging slot first would
 * add a pass, not save one. Otherwise the op runs as its parts (schedule.h). Both ends of the
 * pair get the same answer. */
static void choose_fusion(run_t *r) {
  const schedule_t *s = r->s;
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    if (!sched_is_fused(op->kind)) continue;
    stream_t *in = stream_for(r, op->peer, 0);
    stream_t *out = stream_for(r, s->ops[op->fwd].peer, 1);
    const transport_ops_t *ops = out->conn->ops;
    int fused_steps = r->ctx->config->fused_steps;
    int lends = ops->lend_send != NULL && ops->commit_send != NULL &&
                (ops->lend_in_place || fused_steps == 2);
    int ok = lends && fused_steps &&
             (op->kind != SCHED_RECV_COPY_SEND || recv_in_place(in));
    if (op->kind == SCHED_RECV_REDUCE_COPY_SEND && !r->device && !r->reduce_copy) ok = 0;
    r->states[i].fused = ok;
    r->states[op->fwd].fed = ok;
    r->states[i].out = ok ? out : NULL;
  }
}

/* *mem holds at least `need` bytes (its contents lost when it grows); 0 when out of memory. */
static int reserve(void **mem, size_t *have, size_t need) {
  if (*have >= need) return 1;
  free(*mem);
  *mem = malloc(need);
  *have = *mem ? need : 0;
  return *mem != NULL;
}

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

/* Slices a stream over transport `t` keeps posted ahead: WEFT_SLICES_IN_FLIGHT where set, else
 * the slices that make up the bytes the transport asks for (transport_ops_t.depth_bytes), at
 * least DEFAULT_WINDOW. */
static int stream_window(const run_t *r, const transport_ops_t *t) {
  size_t w = (size_t)r->ctx->config->slices_in_flight;
  if (w == 0) {
    size_t slice = r->slice_elems * r->esize;
    w = (t->depth_bytes + slice - 1) / slice;
    if (w < DEFAULT_WINDOW) w = DEFAULT_WINDOW;
  }
  return w < MAX_WINDOW ? (int)w : MAX_WINDOW;
}

/* The call description out and in, the token and the schedule's scratch buffer, at the start of
 * ctx->scratch (each stream's staging slots follow, set by setup). */
static void place_scratch(run_t *r) {
  unsigned char *p = r->ctx->scratch;
  r->hdr_out = p;
  r->hdr_in = p + HDR_BYTES;
  r->token = p + 2 * HDR_BYTES;
  r->bufs[SCHED_SCRATCH] = (char *)p + 2 * HDR_BYTES + 64;
}

/* Groups the ops into streams, connects their peers, and lays out scratch memory (in r->plan's
 * memory, kept for the next call, where it has one). */
static weft_result_t setup(run_t *r) {
  exec_ctx_t *ctx = r->ctx;
  const schedule_t *s = r->s;
  size_t nops = (size_t)s->nops;
  unsigned epoch = ctx->conn_epoch; /* of the connections the streams get below */
  /* One zeroed block for the op states, streams, connections and local copies, then each
   * stream's op list (nops indices in all, ops_of below). */
  size_t b_states = ALIGN8((nops + 1) * sizeof *r->states);
  size_t b_streams = ALIGN8((nops + 2) * sizeof *r->streams);
  size_t b_conns = ALIGN8((nops + 2) * sizeof *r->conns);
  size_t b_copies = ALIGN8((nops + 1) * sizeof *r->copies);
  size_t zeroed = b_states + b_streams + b_conns + b_copies;
  exec_plan_t *plan = r->plan;
  void **mem = plan ? &plan->mem : &ctx->run_mem, **fifo_mem = plan ? &plan->fifo : &ctx->fifo_mem;
  size_t *mem_bytes = plan ? &plan->mem_bytes : &ctx->run_mem_bytes;
  size_t *fifo_bytes = plan ? &plan->fifo_bytes : &ctx->fifo_mem_bytes;
  if (plan) plan->valid = 0;
  if (!reserve(mem, mem_bytes, zeroed + (nops + 1) * sizeof(int))) goto oom;
  char *m = *mem;
  memset(m, 0, zeroed);
  r->states = (op_state_t *)m;
  r->streams = (stream_t *)(m + b_states);
  r->conns = (conn_t **)(m + b_states + b_streams);
  r->copies = (int *)(m + b_states + b_streams + b_conns);
  int *ops_of = (int *)(m + zeroed);
  for (int i = 0; i < s->nops && !r->agree; i++)
    if (s->ops[i].agree.on) {
      r->agree = calloc((size_t)s->nops, AGREE_BYTES);
      if (!r->agree) goto oom;
    }
  /* The call description goes first on its streams. */
  if (s->hdr_to >= 0) stream_for(r, s->hdr_to, 1)->hdr_pending = 1;
  if (s->hdr_from >= 0) stream_for(r, s->hdr_from, 0)->hdr_pending = 1;
  /* Counted first, so that each stream's op list is its part of ops_of. */
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    r->states[i].nslices =
        is_token_kind(op->kind) ? 1 : (op->count + r->slice_elems - 1) / r->slice_elems;
    if (sched_is_local(op->kind)) {
      r->copies[r->ncopies++] = i;
      continue;
    }
    stream_for(r, op->peer, is_send_kind(op->kind))->nops++;
  }
  size_t fifo_entries = 0;
  for (int i = 0; i < r->nstreams; i++) {
    stream_t *st = &r->streams[i];
    st->ops = ops_of;
    ops_of += st->nops;
    st->nops = 0; /* filled again below */
  }
  for (int i = 0; i < s->nops; i++) {
    const sched_op_t *op = &s->ops[i];
    if (sched_is_local(op->kind)) continue;
    stream_t *st = stream_for(r, op->peer, is_send_kind(op->kind));
    st->ops[st->nops++] = i;
  }
  for (int i = 0; i < r->nstreams; i++) {
    stream_t *st = &r->streams[i];
    /* Connected first: how deep a stream goes and whether it needs staging depend on its
     * transport. */
    WEFT_CHECK(ctx->get_conn(ctx->owner, st->peer, r->device, &st->conn));
    const transport_ops_t *t = st->conn->ops;
    st->desc_slot = st->hdr_pending && !r->device && t->desc_slot && t->lend_send &&
                    t->commit_send && t->post_recv_inplace && t->release_recv;
    if (r->device && !recv_in_place(st))
      return WEFT_ERR(WEFT_ERR_INTERNAL,
                      "the %s transport to rank %d cannot lend received "
                      "device slices in place",
                      st->conn->ops->name, st->peer);
    int known = 0;
    for (int c = 0; c < r->nconns; c++) known |= r->conns[c] == st->conn;
    if (!known) r->conns[r->nconns++] = st->conn;
    int window = stream_window(r, t);
    size_t msgs = (size_t)st->hdr_pending;
    for (int k = 0; k < st->nops; k++) msgs += r->states[st->ops[k]].nslices;
    st->cap = msgs < (size_t)window ? (int)(msgs ? msgs : 1) : window;
    fifo_entries += (size_t)st->cap;
  }
  if (!reserve(fifo_mem, fifo_bytes, fifo_entries * sizeof(flight_t))) goto oom;
  flight_t *fifo = *fifo_mem;
  for (int i = 0; i < r->nstreams; i++) {
    r->streams[i].fifo = fifo;
    fifo += r->streams[i].cap;
  }
  size_t slot_bytes = r->slice_elems * r->esize;
  /* Rounded up so the staging slots after it stay aligned for vector loads. */
  size_t scratch_bytes = (s->buf_count[SCHED_SCRATCH] * r->esize + 63) & ~(size_t)63;
  size_t need = 2 * HDR_BYTES + 64 + scratch_bytes;
  for (int i = 0; i < r->nstreams; i++) {
    stream_t *st = &r->streams[i];
    for (int k = 0; k < st->nops && !recv_in_place(st); k++)
      if (sched_is_reduce(s->ops[st->ops[k]].kind)) {
        need += (size_t)st->cap * slot_bytes;
        break;
      }
  }
  choose_fusion(r);
  if (ctx->scratch_bytes < need) {
    free(ctx->scratch);
    ctx->scratch = malloc(need);
    ctx->scratch_bytes = ctx->scratch ? need : 0;
    if (!ctx->scratch) goto oom;
  }
  place_scratch(r);
  if (r->device && scratch_bytes > 0) {
    /* Partial results of device calls live on the device too. */
    if (ctx->dev_scratch_bytes < scratch_bytes) {
      /* Safe mid-call: an engine frees nothing while a gate holds a user stream (device.h). */
      if (ctx->dev_scratch) ctx->dev->ops->release(ctx->dev, ctx->dev_scratch, 0);
      ctx->dev_scratch = NULL;
      ctx->dev_scratch_bytes = 0;
      WEFT_CHECK(ctx->dev->ops->alloc(ctx->dev, scratch_bytes, 0, &ctx->dev_scratch));
      ctx->dev_scratch_bytes = scratch_bytes;
    }
    r->bufs[SCHED_SCRATCH] = ctx->dev_scratch;
  }
  char *stage = r->bufs[SCHED_SCRATCH] + scratch_bytes;
  for (int i = 0; i < r->nstreams; i++) {
    stream_t *st = &r->streams[i];
    for (int k = 0; k < st->nops && !recv_in_place(st); k++)
      if (sched_is_reduce(s->ops[st->ops[k]].kind)) {
        st->staging = stage;
        stage += (size_t)st->cap * slot_bytes;
        break;
      }
  }
  call_desc_encode(r->hdr_out, r->desc);
  if (plan) {
    plan->esize = r->esize;
    plan->slice_elems = r->slice_elems;
    plan->scratch = ctx->scratch;
    plan->conn_epoch = epoch;
    plan->need = need;
    plan->states = r->states;
    plan->streams = r->streams;
    plan->conns = r->conns;
    plan->copies = r->copies;
    plan->nstreams = r->nstreams;
    plan->nconns = r->nconns;
    plan->ncopies = r->ncopies;
    plan->agree = r->agree != NULL;
    plan->valid = 1;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory setting up the collective");
}

/* The run's layout is its kept plan's, with every counter back at the start, when that plan was
 * laid out for this element size, in this scratch memory, over connections of the owner's
 * current epoch (none closed or replaced since): 1. Else 0, and setup lays it out again (a call
 * that grew the scratch memory since, connections dropped by a failure). */
static int reuse(run_t *r) {
  exec_ctx_t *ctx = r->ctx;
  const schedule_t *s = r->s;
  exec_plan_t *p = r->plan;
  if (!p || !p->valid || p->esize != r->esize || p->slice_elems != r->slice_elems ||
      p->scratch != ctx->scratch || ctx->scratch_bytes < p->need ||
      p->conn_epoch != ctx->conn_epoch)
    return 0;
  if (p->agree) {
    r->agree = calloc((size_t)s->nops, AGREE_BYTES);
    if (!r->agree) return 0;
  }
  r->states = p->states;
  r->streams = p->streams;
  r->conns = p->conns;
  r->copies = p->copies;
  r->nstreams = p->nstreams;
  r->nconns = p->nconns;
  r->ncopies = p->ncopies;
  for (int i = 0; i < s->nops; i++) {
    r->states[i].done = 0;
    r->states[i].issued = 0;
    r->states[i].ticket = 0;
  }
  for (int i = 0; i < r->nstreams; i++) {
    stream_t *st = &r->streams[i];
    st->cur = 0;
    st->next_slice = 0;
    st->hdr_pending = st->peer == (st->is_send ? s->hdr_to : s->hdr_from);
    st->desc_wait = 0;
    st->head = 0;
    st->count = 0;
    st->lent = 0;
  }
  place_scratch(r);
  call_desc_encode(r->hdr_out, r->desc);
  return 1;
}

/* The run's bookkeeping stays for the next call, in ctx or in its kept layout (exec_plan_t). */
static void run_free(run_t *r) { free(r->agree); }

static char *buf_base(run_t *r, sched_buf_t b) { return r->bufs[b]; }

/* Element range [first, first + n) of slice j of op. */
static void slice_range(const run_t *r, const sched_op_t *op, size_t j, size_t *first, size_t *n) {
  *first = j * r->slice_elems;
  size_t left = op->count - *first;
  *n = left < r->slice_elems ? left : r->slice_elems;
}

/* One more message posted on the stream and not yet retired. */
static void count_posted(run_t *r, stream_t *st) {
  uint64_t now = (uint64_t)++st->count;
  if (now > r->ctx->stats.deepest) r->ctx->stats.deepest = now;
}

/* The stream's current slice has been posted: on to the next. */
static void stream_advance(run_t *r, stream_t *st) {
  if (++st->next_slice == r->states[st->ops[st->cur]].nslices) {
    st->cur++;
    st->next_slice = 0;
  }
}

/* Where the first slice of send op `oi` lies and its length, if it may be sent now (its
 * dependencies met, and not written by a fused step): else 0. */
static int first_send(run_t *r, int oi, const char **data, size_t *bytes) {
  const sched_op_t *op = &r->s->ops[oi];
  if (!is_send_kind(op->kind) || r->states[oi].fed || dep_ready(r, op, r->states[oi].nslices) == 0)
    return 0;
  if (op->kind == SCHED_SEND_TOKEN && op->agree.on) {
    unsigned char *a = r->agree + (size_t)oi * AGREE_BYTES;
    agree_encode(a, r->desc, &op->agree);
    *data = (const char *)a;
    *bytes = AGREE_BYTES;
  } else if (op->kind == SCHED_SEND_TOKEN) {
    *data = (const char *)r->token;
    *bytes = 1;
  } else {
    size_t first, n;
    slice_range(r, op, 0, &first, &n);
    *data = buf_base(r, op->buf) + (op->offset + first) * r->esize;
    *bytes = n * r->esize;
  }
  return 1;
}

/* Send streams with desc_slot: the description in a lent slot, with the stream's first message
 * after it when that is ready and fits. *posted = 0 while the transport has no free slot. */
static weft_result_t post_desc_slot(run_t *r, stream_t *st, flight_t *f, int *posted) {
  size_t slot_bytes = r->ctx->config->slice_bytes;
  char *slot = NULL;
  *posted = 0;
  f->x.device = 0;
  f->x.lend_part = 1; /* a description and at most a small message, written plainly */
  WEFT_CHECK(st->conn->ops->lend_send(st->conn, slot_bytes, &f->x, &slot));
  if (!slot) return WEFT_SUCCESS;
  const char *data = NULL;
  size_t bytes = 0;
  int oi = st->nops > 0 ? st->ops[0] : -1;
  if (oi < 0 || !first_send(r, oi, &data, &bytes) || bytes == 0 ||
      bytes + DESC_SLOT_DATA > slot_bytes)
    oi = -1; /* the description alone; an empty message is never carried (0 says none) */
  uint32_t carried = oi < 0 ? 0 : (uint32_t)bytes;
  memcpy(slot, r->hdr_out, HDR_BYTES);
  memcpy(slot + HDR_BYTES, &carried, sizeof carried);
  if (carried) memcpy(slot + DESC_SLOT_DATA, data, bytes);
  WEFT_CHECK(st->conn->ops->commit_send(st->conn, &f->x));
  r->ctx->stats.messages++;
  f->op = oi;
  f->slice = 0;
  f->desc_slot = 0;
  if (carried) {
    if (!is_token_kind(r->s->ops[oi].kind)) r->ctx->stats.slot_bytes += bytes;
    stream_advance(r, st);
  }
  *posted = 1;
  return WEFT_SUCCESS;
}

/* Receive streams: the description slot at the head has arrived. The description is checked
 * first (a mismatch is reported from it, never from the data); then the slot is either freed
 * (nothing carried) or becomes the flight of the stream's first message, slice 0 of its first
 * op, lying in the slot after the description. *open = 0 (nothing changed) while that op's
 * dependencies are not met: its data must not be used before. */
static weft_result_t open_desc_slot(run_t *r, stream_t *st, flight_t *f, int *open) {
  *open = 0;
  WEFT_CHECK(check_header(r, st->peer, f));
  uint32_t carried;
  memcpy(&carried, f->x.data + HDR_BYTES, sizeof carried);
  if (carried == 0) {
    WEFT_CHECK(st->conn->ops->release_recv(st->conn, &f->x));
    f->desc_slot = 0;
    st->desc_wait = 0;
    *open = 1;
    return WEFT_SUCCESS;
  }
  int oi = st->nops > 0 ? st->ops[0] : -1;
  const sched_op_t *op = oi < 0 ? NULL : &r->s->ops[oi];
  size_t first = 0, n = 0, bytes = 0;
  if (op && is_token_kind(op->kind)) {
    bytes = op->agree.on ? AGREE_BYTES : 1;
  } else if (op) {
    slice_range(r, op, 0, &first, &n);
    bytes = n * r->esize;
  }
  if (!op || is_send_kind(op->kind) || carried != bytes ||
      carried + DESC_SLOT_DATA > r->ctx->config->slice_bytes)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d sent %u bytes with its call description where this rank expected "
                    "%zu (the ranks run different schedules)",
                    st->peer, carried, bytes);
  if (dep_ready(r, op, r->states[oi].nslices) == 0) return WEFT_SUCCESS;
  f->desc_slot = 0;
  st->desc_wait = 0;
  f->op = oi;
  f->slice = 0;
  f->x.data += DESC_SLOT_DATA;
  stream_advance(r, st);
  *open = 1;
  /* Kinds that land in the peer's slot read it there (retire); the others are copied out now,
   * as the transport would have copied them. */
  int in_slot =
      sched_is_reduce(op->kind) || (op->kind == SCHED_RECV_COPY_SEND && r->states[oi].fused);
  if (in_slot) return WEFT_SUCCESS;
  char *dst;
  if (op->kind == SCHED_RECV_TOKEN)
    dst = op->agree.on ? (char *)r->agree + (size_t)oi * AGREE_BYTES : (char *)r->token + 1;
  else
    dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
  memcpy(dst, f->x.data, bytes);
  if (!is_token_kind(op->kind) && op->buf == SCHED_RECVBUF) r->ctx->stats.recvbuf_bytes += bytes;
  return st->conn->ops->release_recv(st->conn, &f->x);
}

static weft_result_t post_ready(run_t *r, stream_t *st, int *progressed) {
  const transport_ops_t *t = st->conn->ops;
  while (st->count < st->cap) {
    int slot = fifo_index(st, st->count);
    flight_t *f = &st->fifo[slot];
    if (st->hdr_pending && st->desc_slot) {
      f->reducing = 0;
      f->filling = 0;
      if (st->is_send) {
        int posted = 0;
        WEFT_CHECK(post_desc_slot(r, st, f, &posted));
        if (!posted) break;
      } else {
        f->op = -1;
        f->slice = 0;
        f->desc_slot = 1;
        f->x.device = 0;
        WEFT_CHECK(t->post_recv_inplace(st->conn, r->ctx->config->slice_bytes, &f->x));
        st->desc_wait = 1;
      }
      if (r->ctx->trace)
        trace_post(r->ctx->trace, st->peer, st->is_send, slot, weft_coll_name(r->desc->kind),
                   weft_algo_name(r->desc->algo), r->desc->seq, -1, -1,
                   r->ctx->config->slice_bytes);
      st->hdr_pending = 0;
      count_posted(r, st);
      *progressed = 1;
      continue;
    }
    if (st->desc_wait) break; /* what follows depends on what the description slot carries */
    if (st->hdr_pending) {
      f->op = -1;
      f->slice = 0;
      f->desc_slot = 0;
      f->reducing = 0;
      f->filling = 0;
      f->x.device = 0;
      WEFT_CHECK(st->is_send ? t->post_send(st->conn, r->hdr_out, HDR_BYTES, &f->x)
                             : t->post_recv(st->conn, r->hdr_in, HDR_BYTES, &f->x));
      r->ctx->stats.messages += (uint64_t)st->is_send;
      if (r->ctx->trace)
        trace_post(r->ctx->trace, st->peer, st->is_send, slot, weft_coll_name(r->desc->kind),
                   weft_algo_name(r->desc->algo), r->desc->seq, -1, -1, HDR_BYTES);
      st->hdr_pending = 0;
      count_posted(r, st);
      *progressed = 1;
      continue;
    }
    if (st->cur >= st->nops) break;
    int oi = st->ops[st->cur];
    const sched_op_t *op = &r->s->ops[oi];
    size_t j = st->next_slice;
    if (r->states[oi].fed) break; /* its fused step posts it */
    if (st->lent > 0) break;      /* no post_send while a lent slot is uncommitted */
    if (dep_ready(r, op, r->states[oi].nslices) <= j) break;
    f->op = oi;
    f->slice = j;
    f->desc_slot = 0;
    f->reducing = 0;
    f->filling = 0;
    f->x.device = r->device && !is_token_kind(op->kind);
    size_t first, n;
    slice_range(r, op, j, &first, &n);
    char *data = buf_base(r, op->buf) + (op->offset + first) * r->esize;
    size_t bytes = n * r->esize;
    switch (op->kind) {
      case SCHED_SEND:
        WEFT_CHECK(t->post_send(st->conn, data, bytes, &f->x));
        r->ctx->stats.slot_bytes += bytes;
        break;
      case SCHED_RECV_COPY_SEND:
        /* Fused, it is read once from the peer's slot and written twice; unfused, it lands in
         * buf and the send reads it there. */
        if (r->states[oi].fused) {
          WEFT_CHECK(t->post_recv_inplace(st->conn, bytes, &f->x));
          break;
        }
        /* fall through */
      case SCHED_RECV_COPY:
        WEFT_CHECK(t->post_recv(st->conn, data, bytes, &f->x));
        if (op->buf == SCHED_RECVBUF) r->ctx->stats.recvbuf_bytes += bytes;
        break;
      case SCHED_RECV_REDUCE:
      case SCHED_RECV_REDUCE_SEND:
      case SCHED_RECV_REDUCE_COPY_SEND: {
        if (recv_in_place(st)) {
          WEFT_CHECK(t->post_recv_inplace(st->conn, bytes, &f->x));
          break;
        }
        char *stage = st->staging + (size_t)slot * r->slice_elems * r->esize;
        WEFT_CHECK(t->post_recv(st->conn, stage, bytes, &f->x));
        break;
      }
      case SCHED_SEND_TOKEN:
        if (op->agree.on) {
          unsigned char *a = r->agree + (size_t)oi * AGREE_BYTES;
          agree_encode(a, r->desc, &op->agree);
          WEFT_CHECK(t->post_send(st->conn, a, AGREE_BYTES, &f->x));
          break;
        }
        WEFT_CHECK(t->post_send(st->conn, r->token, 1, &f->x));
        break;
      case SCHED_RECV_TOKEN:
        if (op->agree.on) {
          WEFT_CHECK(
              t->post_recv(st->conn, r->agree + (size_t)oi * AGREE_BYTES, AGREE_BYTES, &f->x));
          break;
        }
        WEFT_CHECK(t->post_recv(st->conn, r->token + 1, 1, &f->x));
        break;
      case SCHED_COPY:
      case SCHED_REDUCE:
        return WEFT_ERR(WEFT_ERR_INTERNAL, "local op %d on a stream", oi);
    }
    if (r->ctx->trace)
      trace_post(r->ctx->trace, st->peer, st->is_send, slot, weft_coll_name(r->desc->kind),
                 weft_algo_name(r->desc->algo), r->desc->seq, op->step, (long)j, bytes);
    r->ctx->stats.messages += (uint64_t)st->is_send;
    count_posted(r, st);
    *progressed = 1;
    stream_advance(r, st);
  }
  return WEFT_SUCCESS;
}

/* Folds a received slice into the output: out = local op incoming. */
static void reduce_slice(run_t *r, const sched_op_t *op, size_t j, const char *stage) {
  size_t first, n;
  slice_range(r, op, j, &first, &n);
  char *dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
  const char *local = buf_base(r, op->src_buf) + (op->src_offset + first) * r->esize;
  if (op->final && r->desc->op == WEFT_AVG)
    kern_reduce_avg_final(dst, local, stage, n, r->desc->dtype, r->ctx->nranks);
  else
    r->reduce(dst, local, stage, n);
  if (op->buf == SCHED_RECVBUF) r->ctx->stats.recvbuf_bytes += n * r->esize;
}

/* ---- fused steps ---------------------------------------------------------------------------- */

/* The send stream `out` would post slice j of op `fwd` next: nothing ahead of it there and room
 * in its window. */
static int out_ready(const stream_t *out, int fwd, size_t j) {
  return !out->hdr_pending && out->count < out->cap && out->cur < out->nops &&
         out->ops[out->cur] == fwd && out->next_slice == j;
}

/* Borrows, for the fused step of received flight f, the slot its send's transport lends for the
 * next message, and takes the send stream's next FIFO entry for it. *slot = NULL (nothing taken)
 * when the send side cannot take the slice yet. */
static weft_result_t fused_lend(run_t *r, const flight_t *f, flight_t **sf, char **slot) {
  const sched_op_t *op = &r->s->ops[f->op];
  stream_t *out = r->states[f->op].out;
  size_t first, n;
  slice_range(r, op, f->slice, &first, &n);
  *slot = NULL;
  if (!out_ready(out, op->fwd, f->slice)) return WEFT_SUCCESS;
  flight_t *e = &out->fifo[fifo_index(out, out->count)];
  e->x.device = r->device;
  e->x.lend_part = 0;
  e->x.lent_stream = 0; /* transports that never ask leave them */
  e->x.time_fill = 0;
  WEFT_CHECK(out->conn->ops->lend_send(out->conn, n * r->esize, &e->x, slot));
  if (!*slot) return WEFT_SUCCESS;
  e->op = op->fwd;
  e->slice = f->slice;
  e->desc_slot = 0;
  e->reducing = 0;
  e->filling = 0;
  *sf = e;
  return WEFT_SUCCESS;
}

/* The lent slot's entry joins the send stream, as post_ready would have added it. */
static void fused_advance(run_t *r, stream_t *out, int fwd, size_t bytes) {
  int k = fifo_index(out, out->count);
  if (r->ctx->trace)
    trace_post(r->ctx->trace, out->peer, 1, k, weft_coll_name(r->desc->kind),
               weft_algo_name(r->desc->algo), r->desc->seq, r->s->ops[fwd].step,
               (long)out->next_slice, bytes);
  count_posted(r, out);
  if (++out->next_slice == r->states[fwd].nslices) {
    out->cur++;
    out->next_slice = 0;
  }
  r->ctx->stats.slot_bytes += bytes;
  r->ctx->stats.fused_slices++;
  r->ctx->stats.messages++;
}

/* Host mode: the one pass of a fused step, from the received slice `in` into the lent slot
 * (and buf, for the copying kinds). kernels/reduce.h's reduce-copy loops read each input once. */
static void fused_fill(run_t *r, const sched_op_t *op, size_t j, const char *in, char *slot) {
  size_t first, n;
  slice_range(r, op, j, &first, &n);
  char *dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
  const char *local = buf_base(r, op->src_buf) + (op->src_offset + first) * r->esize;
  int avg = op->final && r->desc->op == WEFT_AVG;
  weft_dtype_t dt = r->desc->dtype;
  switch (op->kind) {
    case SCHED_RECV_REDUCE_SEND:
      if (avg)
        kern_reduce_avg_final(slot, local, in, n, dt, r->ctx->nranks);
      else
        r->reduce(slot, local, in, n);
      return;
    case SCHED_RECV_REDUCE_COPY_SEND:
      if (avg)
        kern_reduce_copy_avg_final(slot, dst, local, in, n, dt, r->ctx->nranks);
      else
        r->reduce_copy(slot, dst, local, in, n);
      break;
    default: /* SCHED_RECV_COPY_SEND */
      kern_copy2(slot, dst, in, n * r->esize);
      break;
  }
  if (op->buf == SCHED_RECVBUF) r->ctx->stats.recvbuf_bytes += n * r->esize;
}

/* fused_fill into a slot the transport asked to have written with non-temporal stores
 * (xfer_t.lent_stream): the result goes into buf (the copying kinds) or, a piece at a time, into
 * a bounce that stays in the L1 cache, and from there into the slot with kern_copy_stream. */
static void fused_fill_stream(run_t *r, const sched_op_t *op, size_t j, const char *in,
                              char *slot) {
  size_t first, n, es = r->esize;
  slice_range(r, op, j, &first, &n);
  char *dst = buf_base(r, op->buf) + (op->offset + first) * es;
  const char *local = buf_base(r, op->src_buf) + (op->src_offset + first) * es;
  int avg = op->final && r->desc->op == WEFT_AVG, nranks = r->ctx->nranks;
  weft_dtype_t dt = r->desc->dtype;
  switch (op->kind) {
    case SCHED_RECV_REDUCE_SEND: {
      _Alignas(64) char bounce[4096];
      size_t per = sizeof bounce / es;
      for (size_t k = 0; k < n; k += per) {
        size_t m = n - k < per ? n - k : per;
        if (avg)
          kern_reduce_avg_final(bounce, local + k * es, in + k * es, m, dt, nranks);
        else
          r->reduce(bounce, local + k * es, in + k * es, m);
        kern_copy_stream(slot + k * es, bounce, m * es);
      }
      return;
    }
    case SCHED_RECV_REDUCE_COPY_SEND:
      if (avg)
        kern_reduce_avg_final(dst, local, in, n, dt, nranks);
      else
        r->reduce(dst, local, in, n);
      kern_copy_stream(slot, dst, n * es);
      break;
    default: /* SCHED_RECV_COPY_SEND */
      if (dst != in) memcpy(dst, in, n * es);
      kern_copy_stream(slot, in, n * es);
      break;
  }
  if (op->buf == SCHED_RECVBUF) r->ctx->stats.recvbuf_bytes += n * es;
}

/* Host mode: retires received flight f (the head of st) through its fused step. *done = 0 when
 * the send side cannot take the slice yet: f stays at the head and is tried again later. */
static weft_result_t fused_retire(run_t *r, stream_t *st, flight_t *f, int *done) {
  const sched_op_t *op = &r->s->ops[f->op];
  stream_t *out = r->states[f->op].out;
  flight_t *sf = NULL;
  char *slot = NULL;
  *done = 0;
  WEFT_CHECK(fused_lend(r, f, &sf, &slot));
  if (!slot) return WEFT_SUCCESS;
  if (r->ctx->trace) trace_retire(r->ctx->trace, st->peer, 0, st->head);
  const char *in =
      recv_in_place(st) ? f->x.data : st->staging + (size_t)st->head * r->slice_elems * r->esize;
  int64_t t0 = sf->x.time_fill ? clock_now_ns() : 0; /* the transport weighs its slot kinds */
  if (sf->x.lent_stream) {
    fused_fill_stream(r, op, f->slice, in, slot);
    r->ctx->stats.streamed_slices++;
  } else {
    fused_fill(r, op, f->slice, in, slot);
  }
  if (t0) sf->x.fill_ns = clock_now_ns() - t0;
  size_t first, n;
  slice_range(r, op, f->slice, &first, &n);
  WEFT_CHECK(out->conn->ops->commit_send(out->conn, &sf->x));
  fused_advance(r, out, op->fwd, n * r->esize);
  if (recv_in_place(st)) WEFT_CHECK(st->conn->ops->release_recv(st->conn, &f->x));
  if (r->ctx->trace) trace_fused(r->ctx->trace, st->peer, st->head, sched_kind_name(op->kind));
  *done = 1;
  return WEFT_SUCCESS;
}

/* Device mode: enqueues the fused step of received flight f on the device queue: its work
 * writes the lent slot (and buf), and both f and the send entry wait for the fence after it
 * (f to release the peer's slot, the send to be committed). *started = 0 when the send side
 * cannot take the slice yet. */
static weft_result_t fused_start_device(run_t *r, flight_t *f, int *started) {
  const sched_op_t *op = &r->s->ops[f->op];
  stream_t *out = r->states[f->op].out;
  flight_t *sf = NULL;
  char *slot = NULL;
  *started = 0;
  WEFT_CHECK(fused_lend(r, f, &sf, &slot));
  if (!slot) return WEFT_SUCCESS;
  size_t first, n;
  slice_range(r, op, f->slice, &first, &n);
  char *dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
  const char *local = buf_base(r, op->src_buf) + (op->src_offset + first) * r->esize;
  dev_queue_t *q = r->ctx->queue;
  const dev_ops_t *d = r->ctx->dev->ops;
  int avg = op->final && r->desc->op == WEFT_AVG ? r->ctx->nranks : 0;
  /* The slot is taken from here on: count it before anything can fail, so the stream's state
   * says so and the connection's close reclaims it. */
  sf->filling = 1;
  out->lent++;
  fused_advance(r, out, op->fwd, n * r->esize);
  if (op->kind == SCHED_RECV_COPY_SEND) {
    /* Two copies from the peer's slot: the device engines have no two-destination copy, and
     * a copy reads at the bandwidth it writes, so this is one extra read of a warm slice. */
    WEFT_CHECK(d->copy(q, slot, f->x.data, n * r->esize));
    WEFT_CHECK(d->copy(q, dst, f->x.data, n * r->esize));
  } else {
    void *dst2 = op->kind == SCHED_RECV_REDUCE_COPY_SEND ? dst : NULL;
    WEFT_CHECK(d->reduce(q, slot, dst2, local, f->x.data, n, r->desc->dtype, r->desc->op, avg));
  }
  if (op->kind != SCHED_RECV_REDUCE_SEND && op->buf == SCHED_RECVBUF)
    r->ctx->stats.recvbuf_bytes += n * r->esize;
  WEFT_CHECK(d->fence(q, &f->ticket));
  sf->ticket = f->ticket;
  f->reducing = 1;
  r->dev_pending++;
  *started = 1;
  return WEFT_SUCCESS;
}

/* Device mode, send streams: commits, in lending order, the lent slots whose device work has
 * finished. */
static weft_result_t commit_filled(run_t *r, stream_t *st, int *progressed) {
  for (int k = 0; k < st->count; k++) {
    flight_t *f = &st->fifo[fifo_index(st, k)];
    if (!f->filling) continue;
    int done = 0;
    WEFT_CHECK(r->ctx->dev->ops->poll(r->ctx->queue, f->ticket, &done));
    if (!done) break;
    f->filling = 0;
    st->lent--;
    WEFT_CHECK(st->conn->ops->commit_send(st->conn, &f->x));
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Device mode: the same reduction, enqueued on the device queue and fenced. `incoming` is device
 * memory or pinned host memory the device reads directly (the transport's slot). */
static weft_result_t reduce_slice_device(run_t *r, flight_t *f) {
  const sched_op_t *op = &r->s->ops[f->op];
  size_t first, n;
  slice_range(r, op, f->slice, &first, &n);
  char *dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
  const char *local = buf_base(r, op->src_buf) + (op->src_offset + first) * r->esize;
  int avg = op->final && r->desc->op == WEFT_AVG ? r->ctx->nranks : 0;
  dev_queue_t *q = r->ctx->queue;
  WEFT_CHECK(q ? WEFT_SUCCESS : WEFT_ERR(WEFT_ERR_INTERNAL, "device call without a queue"));
  WEFT_CHECK(r->ctx->dev->ops->reduce(q, dst, NULL, local, f->x.data, n, r->desc->dtype,
                                      r->desc->op, avg));
  if (op->buf == SCHED_RECVBUF) r->ctx->stats.recvbuf_bytes += n * r->esize;
  WEFT_CHECK(r->ctx->dev->ops->fence(q, &f->ticket));
  f->reducing = 1;
  r->dev_pending++;
  return WEFT_SUCCESS;
}

/* Device mode: enqueues the reductions of every slice that has arrived (they run back to back on
 * the device while the host goes on), then retires from the head those whose fence has passed. */
static weft_result_t retire_device(run_t *r, stream_t *st, int *progressed) {
  if (st->is_send) WEFT_CHECK(commit_filled(r, st, progressed));
  for (int k = 0; k < st->count && !st->is_send; k++) {
    flight_t *f = &st->fifo[fifo_index(st, k)];
    if (!f->x.complete) break;
    if (f->op < 0 || f->reducing) continue;
    const sched_op_t *op = &r->s->ops[f->op];
    if (r->states[f->op].fused) {
      int started = 0;
      WEFT_CHECK(fused_start_device(r, f, &started));
      if (!started) break; /* later slices wait: sends are lent in slice order */
      *progressed = 1;
    } else if (sched_is_reduce(op->kind)) {
      WEFT_CHECK(reduce_slice_device(r, f));
      *progressed = 1;
    }
  }
  while (st->count > 0 && st->fifo[st->head].x.complete && !st->fifo[st->head].filling) {
    flight_t *f = &st->fifo[st->head];
    if (f->op >= 0 && !st->is_send && r->states[f->op].fused && !f->reducing) break;
    if (f->reducing) {
      int done = 0;
      WEFT_CHECK(r->ctx->dev->ops->poll(r->ctx->queue, f->ticket, &done));
      if (!done) break;
      f->reducing = 0;
      r->dev_pending--;
      WEFT_CHECK(st->conn->ops->release_recv(st->conn, &f->x));
      if (r->ctx->trace && r->states[f->op].fused) {
        trace_retire(r->ctx->trace, st->peer, st->is_send, st->head);
        trace_fused(r->ctx->trace, st->peer, st->head, sched_kind_name(r->s->ops[f->op].kind));
      } else if (r->ctx->trace) {
        trace_reduce(r->ctx->trace, st->peer, st->head);
        trace_retire(r->ctx->trace, st->peer, st->is_send, st->head);
      }
    } else if (r->ctx->trace) {
      trace_retire(r->ctx->trace, st->peer, st->is_send, st->head);
    }
    if (f->op < 0) {
      if (!st->is_send) WEFT_CHECK(check_header(r, st->peer, f));
    } else {
      if (r->s->ops[f->op].agree.on && !st->is_send) WEFT_CHECK(check_agree(r, st->peer, f->op));
      r->states[f->op].done++;
    }
    st->head = fifo_index(st, 1);
    st->count--;
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

static weft_result_t retire(run_t *r, stream_t *st, int *progressed) {
  if (r->device) return retire_device(r, st, progressed);
  while (st->count > 0 && st->fifo[st->head].x.complete) {
    flight_t *f = &st->fifo[st->head];
    int opened = f->desc_slot; /* its description is checked by open_desc_slot */
    if (f->desc_slot) {
      int open = 0;
      WEFT_CHECK(open_desc_slot(r, st, f, &open));
      if (!open) break;
      *progressed = 1;
    }
    if (f->op >= 0 && !st->is_send && r->states[f->op].fused) {
      int done = 0;
      WEFT_CHECK(fused_retire(r, st, f, &done));
      if (!done) break;
      r->states[f->op].done++;
      st->head = fifo_index(st, 1);
      st->count--;
      *progressed = 1;
      continue;
    }
    if (r->ctx->trace) trace_retire(r->ctx->trace, st->peer, st->is_send, st->head);
    if (f->op < 0) {
      if (!st->is_send && !opened) WEFT_CHECK(check_header(r, st->peer, f));
    } else {
      const sched_op_t *op = &r->s->ops[f->op];
      if (op->agree.on && !st->is_send) WEFT_CHECK(check_agree(r, st->peer, f->op));
      if (sched_is_reduce(op->kind) && recv_in_place(st)) {
        /* Straight from the peer's slot, which is then handed back (retire is in FIFO order,
         * the order release_recv wants). */
        reduce_slice(r, op, f->slice, f->x.data);
        WEFT_CHECK(st->conn->ops->release_recv(st->conn, &f->x));
        if (r->ctx->trace) trace_reduce(r->ctx->trace, st->peer, st->head);
      } else if (sched_is_reduce(op->kind)) {
        reduce_slice(r, op, f->slice, st->staging + (size_t)st->head * r->slice_elems * r->esize);
        if (r->ctx->trace) trace_reduce(r->ctx->trace, st->peer, st->head);
      }
      r->states[f->op].done++;
    }
    st->head = fifo_index(st, 1);
    st->count--;
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Device mode: local copies and reductions are enqueued as their sources become ready, one fence
 * per batch; the slices count as done when it passes. */
static weft_result_t run_copies_device(run_t *r, int *progressed) {
  const dev_ops_t *d = r->ctx->dev->ops;
  for (int k = 0; k < r->ncopies; k++) {
    int oi = r->copies[k];
    const sched_op_t *op = &r->s->ops[oi];
    op_state_t *st = &r->states[oi];
    if (st->issued > st->done) {
      int done = 0;
      WEFT_CHECK(d->poll(r->ctx->queue, st->ticket, &done));
      if (!done) continue;
      st->done = st->issued;
      r->dev_pending--;
      *progressed = 1;
    }
    size_t ready = dep_ready(r, op, st->nslices);
    if (st->issued >= ready) continue;
    size_t first, n, last_first, last_n;
    slice_range(r, op, st->issued, &first, &n);
    slice_range(r, op, ready - 1, &last_first, &last_n);
    size_t elems = last_first + last_n - first;
    char *dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
    const char *src = buf_base(r, op->src_buf) + (op->src_offset + first) * r->esize;
    int avg = op->final && r->desc->op == WEFT_AVG ? r->ctx->nranks : 0;
    if (op->kind == SCHED_REDUCE)
      WEFT_CHECK(
          d->reduce(r->ctx->queue, dst, NULL, dst, src, elems, r->desc->dtype, r->desc->op, avg));
    else
      WEFT_CHECK(d->copy(r->ctx->queue, dst, src, elems * r->esize));
    WEFT_CHECK(d->fence(r->ctx->queue, &st->ticket));
    st->issued = ready;
    r->dev_pending++;
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Local copies and reductions run as soon as the slices they read are ready. */
static void run_copies(run_t *r, int *progressed) {
  for (int k = 0; k < r->ncopies; k++) {
    int oi = r->copies[k];
    const sched_op_t *op = &r->s->ops[oi];
    op_state_t *st = &r->states[oi];
    while (st->done < dep_ready(r, op, st->nslices)) {
      size_t first, n;
      slice_range(r, op, st->done, &first, &n);
      char *dst = buf_base(r, op->buf) + (op->offset + first) * r->esize;
      const char *src = buf_base(r, op->src_buf) + (op->src_offset + first) * r->esize;
      /* A local reduction runs through the same kernel as a reducing receive, in place; the
       * last one of an average divides, as a final receive does. */
      if (op->kind == SCHED_REDUCE && op->final && r->desc->op == WEFT_AVG)
        kern_reduce_avg_final(dst, dst, src, n, r->desc->dtype, r->ctx->nranks);
      else if (op->kind == SCHED_REDUCE)
        r->reduce(dst, dst, src, n);
      else
        memcpy(dst, src, n * r->esize);
      st->done++;
      *progressed = 1;
    }
  }
}

static int finished(const run_t *r) {
  for (int k = 0; k < r->ncopies; k++)
    if (r->states[r->copies[k]].done < r->states[r->copies[k]].nslices) return 0;
  for (int i = 0; i < r->nstreams; i++) {
    const stream_t *st = &r->streams[i];
    if (st->hdr_pending || st->count > 0 || st->cur < st->nops) return 0;
  }
  return 1;
}

static weft_result_t wait_any(run_t *r, int timeout_ms) {
  if (r->nconns == 0)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "schedule stuck: local copies wait on nothing");
  /* One transport kind per call is the common case; mixed kinds take turns with short waits. */
  const transport_ops_t *ops = r->conns[0]->ops;
  int mixed = 0;
  for (int i = 1; i < r->nconns; i++) mixed |= r->conns[i]->ops != ops;
  int spin_us = r->ctx->spin_us;
  if (!mixed) return ops->wait(r->conns, r->nconns, timeout_ms, spin_us);
  for (int i = 0; i < r->nconns; i++)
    WEFT_CHECK(r->conns[i]->ops->wait(&r->conns[i], 1, 1, spin_us));
  return WEFT_SUCCESS;
}

/* What the run was waiting for when it stopped: the first stream with a message in flight. */
static void waiting_on(const run_t *r, char *buf, size_t cap) {
  snprintf(buf, cap, "with nothing in flight");
  for (int i = 0; i < r->nstreams; i++) {
    const stream_t *st = &r->streams[i];
    if (st->count == 0) continue;
    snprintf(buf, cap, "while %s rank %d", st->is_send ? "sending to" : "receiving from",
             st->peer);
    return;
  }
}

static int run_aborted(const run_t *r) {
  return r->ctx->aborted && __atomic_load_n(r->ctx->aborted, __ATOMIC_ACQUIRE);
}

static weft_result_t aborted_error(const run_t *r) {
  char where[64];
  waiting_on(r, where, sizeof where);
  return WEFT_ERR(WEFT_ERR_ABORTED,
                  "the communicator was aborted (weft_comm_abort) %s: this call gave up", where);
}

static weft_result_t stall_error(const run_t *r, int waited_ms) {
  for (int i = 0; i < r->nstreams; i++) {
    const stream_t *st = &r->streams[i];
    if (st->count == 0) continue;
    const flight_t *f = &st->fifo[st->head];
    int step = f->op < 0 ? -1 : r->s->ops[f->op].step;
    char where[48];
    if (step < 0)
      snprintf(where, sizeof where, "the call description");
    else
      snprintf(where, sizeof where, "step %d", step);
    return WEFT_ERR(WEFT_ERR_TIMEOUT,
                    "no progress for %d ms (WEFT_TIMEOUT_MS) %s rank %d at %s: is that rank "
                    "alive and making the same call?",
                    waited_ms, st->is_send ? "sending to" : "receiving from", st->peer, where);
  }
  return WEFT_ERR(WEFT_ERR_TIMEOUT, "no progress for %d ms (WEFT_TIMEOUT_MS)", waited_ms);
}

/* A transport that sees a message of the wrong length fails with WEFT_ERR_MISMATCH before the
 * executor has looked at the call description that came ahead of it on the same ordered stream.
 * That description (or a token of values to agree on, schedule.h) has arrived, and says what the
 * peer called, which is what the user needs: report it instead when it disagrees. */
static weft_result_t prefer_header_error(run_t *r, weft_result_t res) {
  if (res != WEFT_ERR_MISMATCH && res != WEFT_ERR_REMOTE) return res;
  for (int i = 0; i < r->nstreams; i++) {
    const stream_t *st = &r->streams[i];
    if (st->is_send) continue;
    for (int k = 0; k < st->count; k++) {
      const flight_t *f = &st->fifo[fifo_index(st, k)];
      int agrees = f->op >= 0 && r->s->ops[f->op].agree.on;
      if ((f->op >= 0 && !agrees) || !f->x.complete) continue;
      char msg[ERR_MSG_MAX];
      snprintf(msg, sizeof msg, "%s", err_last());
      weft_result_t hdr = agrees ? check_agree(r, st->peer, f->op) : check_header(r, st->peer, f);
      if (hdr != WEFT_SUCCESS) return hdr;
      err_set_message(res, msg);
    }
  }
  return res;
}

static weft_result_t run_loop(run_t *r) {
  int timeout = r->ctx->config->timeout_ms;
  /* When the run last progressed, read only once it stops: a turn that progresses reads no clock
   * (-1: progress since the last read; the timeout counts from the first idle turn after it). */
  int64_t last = -1;
  /* Copies that wait on nothing (an in-place call's input set aside) run before the first post,
   * so that the sends they feed leave with the call description, in one message and one wake-up
   * of the peer, instead of one loop turn after it. */
  if (!r->device) {
    int ignored = 0;
    run_copies(r, &ignored);
  }
  while (!finished(r)) {
    if (run_aborted(r)) return aborted_error(r);
    int progressed = 0;
    for (int i = 0; i < r->nstreams; i++) WEFT_CHECK(post_ready(r, &r->streams[i], &progressed));
    for (int i = 0; i < r->nconns; i++) {
      weft_result_t res = r->conns[i]->ops->progress(r->conns[i], &progressed);
      if (res != WEFT_SUCCESS) return prefer_header_error(r, res);
    }
    for (int i = 0; i < r->nstreams; i++) WEFT_CHECK(retire(r, &r->streams[i], &progressed));
    if (r->device)
      WEFT_CHECK(run_copies_device(r, &progressed));
    else
      run_copies(r, &progressed);
    if (progressed) {
      last = -1;
      continue;
    }
    int64_t now = clock_now_ms();
    if (last < 0) last = now;
    if (now - last >= timeout) return stall_error(r, (int)(now - last));
    int left = (int)(timeout - (now - last));
    /* Fences wake nobody: with device work pending, look again soon. */
    int slice = r->dev_pending > 0 ? DEVICE_POLL_MS : WAIT_SLICE_MS;
    if (r->ctx->trace) trace_wait_begin(r->ctx->trace);
    weft_result_t res = wait_any(r, left < slice ? left : slice);
    if (res != WEFT_SUCCESS) return prefer_header_error(r, res);
    if (r->ctx->trace) trace_wait_end(r->ctx->trace);
  }
  return WEFT_SUCCESS;
}

weft_result_t exec_device_queue(exec_ctx_t *ctx, dev_queue_t **out) {
  if (!ctx->queue) WEFT_CHECK(ctx->dev->ops->queue_create(ctx->dev, &ctx->queue));
  *out = ctx->queue;
  return WEFT_SUCCESS;
}

weft_result_t exec_run(exec_ctx_t *ctx, const schedule_t *s, const coll_desc_t *desc,
                       const void *sendbuf, void *recvbuf, int device) {
  run_t r = {0};
  r.ctx = ctx;
  r.device = device;
  if (device && !ctx->dev)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "device buffers without a device engine");
  if (device) {
    dev_queue_t *queue;
    WEFT_CHECK(exec_device_queue(ctx, &queue));
  }
  r.s = s;
  r.desc = desc;
  r.bufs[SCHED_SENDBUF] = (char *)sendbuf;
  r.bufs[SCHED_RECVBUF] = recvbuf;
  r.esize = desc->kind == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(desc->dtype);
  r.slice_elems = (device ? ctx->dev_config : ctx->config)->slice_bytes / r.esize;
  if (r.slice_elems == 0) r.slice_elems = 1;
  r.reduce = kern_reduce_lookup(desc->dtype, desc->op);
  r.reduce_copy = kern_reduce_copy_lookup(desc->dtype, desc->op);
  weft_result_t res = s == ctx->validated ? WEFT_SUCCESS : sched_validate(s, ctx->nranks);
  /* A kept schedule keeps its layout (host buffers only: device runs lay out device scratch). */
  if (res == WEFT_SUCCESS && !device && s == ctx->validated && ctx->plan) {
    if (!*ctx->plan) *ctx->plan = calloc(1, sizeof **ctx->plan);
    r.plan = *ctx->plan; /* NULL when out of memory: laid out in ctx's memory as before */
  }
  if (res == WEFT_SUCCESS && reuse(&r))
    ctx->stats.plans_reused++;
  else if (res == WEFT_SUCCESS)
    res = setup(&r);
  if (res == WEFT_SUCCESS && (r.nstreams > 0 || r.ncopies > 0)) res = run_loop(&r);
  /* A failed device call may leave reductions and copies queued that still read the buffers and
   * the peers' slots: let them finish (bounded) before those go away. */
  if (res != WEFT_SUCCESS && device && ctx->queue) {
    char msg[ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err_last());
    (void)ctx->dev->ops->drain(ctx->queue, ctx->config->timeout_ms);
    err_set_message(res, msg);
  }
  run_free(&r);
  return res;
}

void exec_plan_free(exec_plan_t **plan) {
  if (!plan || !*plan) return;
  free((*plan)->mem);
  free((*plan)->fifo);
  free(*plan);
  *plan = NULL;
}

void exec_ctx_release(exec_ctx_t *ctx) {
  if (ctx->queue) ctx->dev->ops->queue_destroy(ctx->queue);
  if (ctx->dev_scratch) ctx->dev->ops->release(ctx->dev, ctx->dev_scratch, 0);
  ctx->queue = NULL;
  ctx->dev_scratch = NULL;
  ctx->dev_scratch_bytes = 0;
  free(ctx->scratch);
  ctx->scratch = NULL;
  ctx->scratch_bytes = 0;
  free(ctx->run_mem);
  free(ctx->fifo_mem);
  ctx->run_mem = ctx->fifo_mem = NULL;
  ctx->run_mem_bytes = ctx->fifo_mem_bytes = 0;
}
