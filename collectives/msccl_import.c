/* msccl_import.c -- MSCCL programs: reading and checking them (msccl_parse), the reference
 * execution that orders each peer's one stream, and per-rank schedules (msccl_build). */
#include "collectives/msccl_import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/emit.h"
#include "collectives/xml_reader.h"
#include "common/error.h"

enum { BUF_I = 0, BUF_O = 1, BUF_S = 2 };

typedef enum { T_S, T_R, T_RCS, T_RRS, T_RRC, T_RRCS, T_CPY, T_RE, T_NOP } step_type_t;

static const char *const type_names[] = {"s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"};

static int type_sends(step_type_t t) { return t == T_S || t == T_RCS || t == T_RRS || t == T_RRCS; }
static int type_recvs(step_type_t t) {
  return t == T_R || t == T_RCS || t == T_RRS || t == T_RRC || t == T_RRCS;
}
/* Reads its local source range (srcbuf/srcoff): sends from it, or reduces with it. */
static int type_reads_src(step_type_t t) {
  return t == T_S || t == T_RRS || t == T_RRC || t == T_RRCS || t == T_CPY || t == T_RE;
}
/* Writes its local destination range (dstbuf/dstoff). */
static int type_writes_dst(step_type_t t) {
  return t == T_R || t == T_RCS || t == T_RRC || t == T_RRCS || t == T_CPY || t == T_RE;
}

typedef struct {
  step_type_t type;
  int srcbuf, srcoff, dstbuf, dstoff, cnt;
  int depid, deps; /* tb index and step, -1: none */
  int line;
  int send_idx, recv_idx; /* its place among its tb's sends / receives (channel order) */
} step_t;

typedef struct {
  int id, send, recv, chan, line;
  step_t *steps;
  int nsteps;
  int send_pair, recv_pair; /* reference execution: its (sender, receiver) streams, -1: none */
} tb_t;

typedef struct {
  int id, line;
  int chunks[3]; /* i, o, s */
  tb_t *tbs;
  int ntbs;
  /* The order its steps ran in the reference execution: (tb, step) pairs. */
  int *run_tb, *run_step;
  int nrun;
} gpu_t;

struct msccl_program {
  char name[128];
  char what[256]; /* the file, for messages */
  weft_coll_t coll;
  int ngpus, nchannels, nchunksperloop, inplace;
  gpu_t *gpus;
  uint64_t hash;
};

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct {
  const xml_doc_t *d;
  const char *what;
} ctx_t;

static weft_result_t missing(const ctx_t *c, int e, const char *name) {
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s:%d: <%s>: attribute %s is missing", c->what,
                  c->d->elems[e].line, xml_name(c->d, e), name);
}

/* Integer attribute in [lo, hi]; `def` when absent and def_ok. */
static weft_result_t int_attr(const ctx_t *c, int e, const char *name, long lo, long hi, int def_ok,
                              long def, int *out) {
  const char *v = xml_attr(c->d, e, name);
  if (!v) {
    if (def_ok) {
      *out = (int)def;
      return WEFT_SUCCESS;
    }
    return missing(c, e, name);
  }
  char *end;
  long x = strtol(v, &end, 10);
  if (end == v || *end != 0 || x < lo || x > hi)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <%s>: attribute %s=\"%.40s\" is not an integer in [%ld, %ld]", c->what,
                    c->d->elems[e].line, xml_name(c->d, e), name, v, lo, hi);
  *out = (int)x;
  return WEFT_SUCCESS;
}

static weft_result_t buf_attr(const ctx_t *c, int e, const char *name, int *out) {
  const char *v = xml_attr(c->d, e, name);
  if (!v) return missing(c, e, name);
  if (strcmp(v, "i") == 0 || strcmp(v, "input") == 0)
    *out = BUF_I;
  else if (strcmp(v, "o") == 0 || strcmp(v, "output") == 0)
    *out = BUF_O;
  else if (strcmp(v, "s") == 0 || strcmp(v, "scratch") == 0)
    *out = BUF_S;
  else
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <%s>: attribute %s=\"%.40s\" is not a buffer (i, o or s)", c->what,
                    c->d->elems[e].line, xml_name(c->d, e), name, v);
  return WEFT_SUCCESS;
}

static weft_result_t coll_attr(const ctx_t *c, int e, weft_coll_t *out) {
  static const struct {
    const char *name;
    weft_coll_t coll;
  } colls[] = {
      {"allreduce", WEFT_COLL_ALL_REDUCE},         {"all_reduce", WEFT_COLL_ALL_REDUCE},
      {"allgather", WEFT_COLL_ALL_GATHER},         {"all_gather", WEFT_COLL_ALL_GATHER},
      {"reducescatter", WEFT_COLL_REDUCE_SCATTER}, {"reduce_scatter", WEFT_COLL_REDUCE_SCATTER},
      {"alltoall", WEFT_COLL_ALL_TO_ALL},          {"all_to_all", WEFT_COLL_ALL_TO_ALL}};
  const char *v = xml_attr(c->d, e, "coll");
  if (!v) return missing(c, e, "coll");
  for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
    if (strcmp(v, colls[i].name) == 0) {
      *out = colls[i].coll;
      return WEFT_SUCCESS;
    }
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                  "%s:%d: <algo>: coll=\"%.40s\" is not a collective weft runs from a program "
                  "(allreduce, allgather, reducescatter, alltoall)",
                  c->what, c->d->elems[e].line, v);
}

static weft_result_t unexpected(const ctx_t *c, int e, const char *parent) {
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s:%d: <%.40s> inside <%s>: unknown element", c->what,
                  c->d->elems[e].line, xml_name(c->d, e), parent);
}

static int count_children(const xml_doc_t *d, int e) {
  int n = 0;
  for (int k = d->elems[e].first_child; k >= 0; k = d->elems[k].next_sibling) n++;
  return n;
}

static weft_result_t read_step(const ctx_t *c, int e, const gpu_t *g, int index, step_t *st) {
  int s;
  WEFT_CHECK(int_attr(c, e, "s", 0, 1 << 20, 1, index, &s));
  if (s != index)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <step>: s=\"%d\" but it is step %d of its <tb> (steps are numbered "
                    "in order from 0)",
                    c->what, c->d->elems[e].line, s, index);
  const char *t = xml_attr(c->d, e, "type");
  if (!t) return missing(c, e, "type");
  int found = 0;
  for (int k = 0; k < (int)(sizeof type_names / sizeof type_names[0]); k++)
    if (strcmp(t, type_names[k]) == 0) {
      st->type = (step_type_t)k;
      found = 1;
    }
  if (!found)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <step>: unknown type \"%.40s\" (s r rcs rrs rrc rrcs cpy re nop)",
                    c->what, c->d->elems[e].line, t);
  st->line = c->d->elems[e].line;
  int nop = st->type == T_NOP;
  int big = 1 << 30;
  st->srcbuf = st->dstbuf = BUF_I;
  st->srcoff = st->dstoff = 0;
  if (!nop || xml_attr(c->d, e, "srcbuf")) WEFT_CHECK(buf_attr(c, e, "srcbuf", &st->srcbuf));
  if (!nop || xml_attr(c->d, e, "dstbuf")) WEFT_CHECK(buf_attr(c, e, "dstbuf", &st->dstbuf));
  /* A nop moves nothing: msccl-tools writes its offsets as -1. */
  WEFT_CHECK(int_attr(c, e, "srcoff", nop ? -1 : 0, big, nop, 0, &st->srcoff));
  WEFT_CHECK(int_attr(c, e, "dstoff", nop ? -1 : 0, big, nop, 0, &st->dstoff));
  WEFT_CHECK(int_attr(c, e, "cnt", nop ? 0 : 1, big, nop, 0, &st->cnt));
  WEFT_CHECK(int_attr(c, e, "depid", -1, big, 1, -1, &st->depid));
  WEFT_CHECK(int_attr(c, e, "deps", -1, big, 1, -1, &st->deps));
  int hasdep; /* a hint for MSCCL's kernels (others wait for this step); checked, not needed */
  WEFT_CHECK(int_attr(c, e, "hasdep", 0, 1, 1, 0, &hasdep));
  if ((st->depid < 0) != (st->deps < 0))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <step>: depid=\"%d\" and deps=\"%d\": both name the step waited for, "
                    "or both are -1",
                    c->what, st->line, st->depid, st->deps);
  /* Local ranges, in chunks of this gpu's buffers. */
  if (!nop && type_reads_src(st->type) && st->srcoff + st->cnt > g->chunks[st->srcbuf])
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <step>: source chunks [%d, %d) of buffer %c lie outside its %d chunks",
                    c->what, st->line, st->srcoff, st->srcoff + st->cnt, "ios"[st->srcbuf],
                    g -> chunks[st->srcbuf]);
  if (!nop && type_writes_dst(st->type) && st->dstoff + st->cnt > g->chunks[st->dstbuf])
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <step>: destination chunks [%d, %d) of buffer %c lie outside its %d "
                    "chunks",
                    c->what, st->line, st->dstoff, st->dstoff + st->cnt, "ios"[st->dstbuf],
                    g -> chunks[st->dstbuf]);
  return WEFT_SUCCESS;
}

static weft_result_t read_tb(const ctx_t *c, int e, const msccl_program_t *p, const gpu_t *g,
                             tb_t *tb) {
  tb->line = c->d->elems[e].line;
  WEFT_CHECK(int_attr(c, e, "id", 0, 1 << 20, 0, 0, &tb->id));
  WEFT_CHECK(int_attr(c, e, "send", -1, p->ngpus - 1, 0, 0, &tb->send));
  WEFT_CHECK(int_attr(c, e, "recv", -1, p->ngpus - 1, 0, 0, &tb->recv));
  WEFT_CHECK(int_attr(c, e, "chan", 0, p->nchannels - 1, 1, 0, &tb->chan));
  if (tb->send == g->id || tb->recv == g->id)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s:%d: <tb>: gpu %d sends to or receives from "
                    "itself",
                    c->what, tb->line, g->id);
  int n = count_children(c->d, e);
  tb->steps = calloc((size_t)(n ? n : 1), sizeof *tb->steps);
  if (!tb->steps) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
  int nsend = 0, nrecv = 0;
  for (int k = c->d->elems[e].first_child; k >= 0; k = c->d->elems[k].next_sibling) {
    if (strcmp(xml_name(c->d, k), "step") != 0) return unexpected(c, k, "tb");
    step_t *st = &tb->steps[tb->nsteps];
    WEFT_CHECK(read_step(c, k, g, tb->nsteps, st));
    tb->nsteps++;
    if (type_sends(st->type) && tb->send < 0)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <step>: type %s sends, but its <tb> (line %d) has send=\"-1\"",
                      c->what, st->line, type_names[st->type], tb->line);
    if (type_recvs(st->type) && tb->recv < 0)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <step>: type %s receives, but its <tb> (line %d) has recv=\"-1\"",
                      c->what, st->line, type_names[st->type], tb->line);
    st->send_idx = type_sends(st->type) ? nsend++ : -1;
    st->recv_idx = type_recvs(st->type) ? nrecv++ : -1;
  }
  return WEFT_SUCCESS;
}

static weft_result_t read_gpu(const ctx_t *c, int e, msccl_program_t *p) {
  int id;
  WEFT_CHECK(int_attr(c, e, "id", 0, p->ngpus - 1, 0, 0, &id));
  gpu_t *g = &p->gpus[id];
  if (g->line)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s:%d: <gpu>: id %d was given already (line %d)",
                    c->what, c->d->elems[e].line, id, g->line);
  g->id = id;
  g->line = c->d->elems[e].line;
  WEFT_CHECK(int_attr(c, e, "i_chunks", 0, 1 << 24, 0, 0, &g->chunks[BUF_I]));
  WEFT_CHECK(int_attr(c, e, "o_chunks", 0, 1 << 24, 0, 0, &g->chunks[BUF_O]));
  WEFT_CHECK(int_attr(c, e, "s_chunks", 0, 1 << 24, 1, 0, &g->chunks[BUF_S]));
  /* In-place programs may give o_chunks="0": the output is the input's buffer (msccl-tools'
   * all-pairs all-reduce does). Its size is then what the collective implies. */
  if (p->inplace && g->chunks[BUF_O] == 0) {
    int in = g->chunks[BUF_I], n = p->ngpus;
    g->chunks[BUF_O] = p->coll == WEFT_COLL_ALL_GATHER       ? in * n
                       : p->coll == WEFT_COLL_REDUCE_SCATTER ? in / n
                                                             : in;
  }
  int n = count_children(c->d, e);
  g->tbs = calloc((size_t)(n ? n : 1), sizeof *g->tbs);
  if (!g->tbs) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
  for (int k = c->d->elems[e].first_child; k >= 0; k = c->d->elems[k].next_sibling) {
    if (strcmp(xml_name(c->d, k), "tb") != 0) return unexpected(c, k, "gpu");
    tb_t *tb = &g->tbs[g->ntbs++]; /* counted first: msccl_free frees what read_tb took */
    WEFT_CHECK(read_tb(c, k, p, g, tb));
    if (tb->id != g->ntbs - 1)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <tb>: id=\"%d\" but it is tb %d of gpu %d (ids are numbered in order "
                      "from 0)",
                      c->what, tb->line, tb->id, g->ntbs - 1, id);
  }
  /* One tb per (send peer, channel) and per (receive peer, channel): a channel's messages must
   * pair up in order, which two tbs on one channel would leave undefined. */
  for (int a = 0; a < g->ntbs; a++)
    for (int b = 0; b < a; b++) {
      const tb_t *x = &g->tbs[a], *y = &g->tbs[b];
      int same_send = x->send >= 0 && x->send == y->send && x->chan == y->chan;
      int same_recv = x->recv >= 0 && x->recv == y->recv && x->chan == y->chan;
      if (same_send || same_recv)
        return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                        "%s:%d: <tb>: tbs %d and %d of gpu %d both %s gpu %d on channel %d",
                        c->what, x->line, b, a, id, same_send ? "send to" : "receive from",
                        same_send ? x->send : x->recv, x->chan);
    }
  return WEFT_SUCCESS;
}

/* The chunk counts the collective implies. */
static weft_result_t check_shape(const ctx_t *c, const msccl_program_t *p) {
  for (int g = 0; g < p->ngpus; g++) {
    const gpu_t *x = &p->gpus[g];
    int in = x->chunks[BUF_I], out = x->chunks[BUF_O], n = p->ngpus, ok = in > 0;
    if (p->coll == WEFT_COLL_ALL_REDUCE || p->coll == WEFT_COLL_ALL_TO_ALL) ok &= in == out;
    if (p->coll == WEFT_COLL_ALL_GATHER) ok &= out == n * in;
    if (p->coll == WEFT_COLL_REDUCE_SCATTER) ok &= in == n * out;
    if (p->coll == WEFT_COLL_ALL_TO_ALL) ok &= in % n == 0;
    if (x->chunks[BUF_I] != p->gpus[0].chunks[BUF_I]) ok = 0;
    if (!ok)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <gpu>: gpu %d has i_chunks=%d o_chunks=%d, which do not fit %s on %d "
                      "gpus (every gpu alike)",
                      c->what, x->line, g, in, out, weft_coll_name(p->coll), n);
  }
  return WEFT_SUCCESS;
}

/* ---- checks over the whole program --------------------------------------------------------- */

static const step_t *step_at(const msccl_program_t *p, int g, int tb, int s) {
  return &p->gpus[g].tbs[tb].steps[s];
}

/* Every depid/deps names a step of the gpu, and no step waits for itself through its tb's order
 * and those references. */
static weft_result_t check_deps(const msccl_program_t *p) {
  for (int g = 0; g < p->ngpus; g++) {
    const gpu_t *x = &p->gpus[g];
    int total = 0;
    for (int t = 0; t < x->ntbs; t++) {
      for (int s = 0; s < x->tbs[t].nsteps; s++) {
        const step_t *st = &x->tbs[t].steps[s];
        if (st->depid < 0) continue;
        if (st->depid >= x->ntbs || st->deps >= x->tbs[st->depid].nsteps)
          return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                          "%s:%d: <step>: depid=\"%d\" deps=\"%d\" names no step of gpu %d",
                          p->what, st->line, st->depid, st->deps, g);
      }
      total += x->tbs[t].nsteps;
    }
    /* Kahn's order: a step is done once its tb's previous step and its reference are. */
    int *pc = calloc((size_t)x->ntbs + 1, sizeof *pc);
    if (!pc) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
    int done = 0, moved = 1;
    while (moved) {
      moved = 0;
      for (int t = 0; t < x->ntbs; t++)
        while (pc[t] < x->tbs[t].nsteps) {
          const step_t *st = &x->tbs[t].steps[pc[t]];
          if (st->depid >= 0 && pc[st->depid] <= st->deps) break;
          pc[t]++;
          done++;
          moved = 1;
        }
    }
    weft_result_t res = WEFT_SUCCESS;
    if (done < total)
      for (int t = 0; t < x->ntbs && res == WEFT_SUCCESS; t++)
        if (pc[t] < x->tbs[t].nsteps) {
          const step_t *st = &x->tbs[t].steps[pc[t]];
          res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                         "%s:%d: <step>: dependency cycle on gpu %d: tb %d step %d waits for tb %d "
                         "step %d (line %d), which waits for it in turn",
                         p->what, st->line, g, t, pc[t], st->depid, st->deps,
                         step_at(p, g, st->depid, st->deps)->line);
        }
    free(pc);
    WEFT_CHECK(res);
  }
  return WEFT_SUCCESS;
}

/* The tb of gpu g that sends to `peer` (is_send) or receives from it on channel ch; -1: none. */
static int tb_for(const gpu_t *x, int peer, int is_send, int ch) {
  for (int t = 0; t < x->ntbs; t++)
    if ((is_send ? x->tbs[t].send : x->tbs[t].recv) == peer && x->tbs[t].chan == ch) return t;
  return -1;
}

/* The k-th sending (or receiving) step of tb t. */
static const step_t *nth(const tb_t *tb, int k, int is_send) {
  for (int s = 0; s < tb->nsteps; s++)
    if ((is_send ? tb->steps[s].send_idx : tb->steps[s].recv_idx) == k) return &tb->steps[s];
  return NULL;
}

static int tb_count(const tb_t *tb, int is_send) {
  int n = 0;
  for (int s = 0; s < tb->nsteps; s++)
    n += (is_send ? tb->steps[s].send_idx : tb->steps[s].recv_idx) >= 0;
  return n;
}

/* Whether tb `x` (on gpu a) and tb `y` (on gpu b) carry a -> b on one channel. */
static weft_result_t match_pair(const msccl_program_t *p, int a, const tb_t *sx, int b,
                                const tb_t *rx, int ch) {
  int ns = sx ? tb_count(sx, 1) : 0, nr = rx ? tb_count(rx, 0) : 0;
  for (int k = 0; k < ns || k < nr; k++) {
    const step_t *s = k < ns ? nth(sx, k, 1) : NULL, *r = k < nr ? nth(rx, k, 0) : NULL;
    if (!r)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <step>: gpu %d sends message %d to gpu %d on channel %d, but gpu %d "
                      "receives only %d from gpu %d there (unmatched send)",
                      p->what, s->line, a, k, b, ch, b, nr, a);
    if (!s)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <step>: gpu %d receives message %d from gpu %d on channel %d, but "
                      "gpu %d sends only %d to gpu %d there (unmatched receive)",
                      p->what, r->line, b, k, a, ch, a, ns, b);
    if (s->cnt != r->cnt)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <step>: gpu %d sends %d chunks to gpu %d on channel %d, but its "
                      "receive there (line %d) takes %d",
                      p->what, s->line, a, s->cnt, b, ch, r->line, r->cnt);
  }
  return WEFT_SUCCESS;
}

/* Gpu a's sends to b on a channel pair up, in order and in size, with b's receives from a. */
static weft_result_t check_matching(const msccl_program_t *p) {
  for (int a = 0; a < p->ngpus; a++) {
    const gpu_t *x = &p->gpus[a];
    for (int t = 0; t < x->ntbs; t++) {
      const tb_t *tb = &x->tbs[t];
      if (tb->send >= 0) {
        int tr = tb_for(&p->gpus[tb->send], a, 0, tb->chan);
        const tb_t *rx = tr >= 0 ? &p->gpus[tb->send].tbs[tr] : NULL;
        WEFT_CHECK(match_pair(p, a, tb, tb->send, rx, tb->chan));
      }
      if (tb->recv >= 0 && tb_for(&p->gpus[tb->recv], a, 1, tb->chan) < 0)
        WEFT_CHECK(match_pair(p, tb->recv, NULL, a, tb, tb->chan));
    }
  }
  return WEFT_SUCCESS;
}

/* ---- the reference execution --------------------------------------------------------------- */

/* One message in a pair's single stream: its channel and its place among the channel's. */
typedef struct {
  int chan, idx;
} msg_t;

typedef struct {
  msg_t *v;
  int n, cap, head;
} fifo_t;

/* Runs the program in rounds (msccl_import.h) and records, per gpu, the order its steps ran. */
static weft_result_t reference_run(msccl_program_t *p) {
  int n = p->ngpus;
  weft_result_t res = WEFT_SUCCESS;
  fifo_t *fifo = NULL;
  int **pc = calloc((size_t)n, sizeof *pc);
  int *ready_tb = NULL, *ready_g = NULL, *pair_from = NULL, *pair_to = NULL;
  int total = 0, nready_cap = 0, npairs = 0, ntbs = 0;
  if (!pc) goto oom;
  /* One stream per (sender, receiver) that some tb sends on, numbered as found. */
  for (int g = 0; g < n; g++) ntbs += p->gpus[g].ntbs;
  pair_from = malloc(sizeof(int) * (size_t)(ntbs + 1));
  pair_to = malloc(sizeof(int) * (size_t)(ntbs + 1));
  fifo = calloc((size_t)ntbs + 1, sizeof *fifo);
  if (!pair_from || !pair_to || !fifo) goto oom;
  for (int g = 0; g < n; g++)
    for (int t = 0; t < p->gpus[g].ntbs; t++) {
      tb_t *tb = &p->gpus[g].tbs[t];
      tb->send_pair = -1;
      if (tb->send < 0) continue;
      for (int k = 0; k < npairs && tb->send_pair < 0; k++)
        if (pair_from[k] == g && pair_to[k] == tb->send) tb->send_pair = k;
      if (tb->send_pair < 0) {
        pair_from[npairs] = g;
        pair_to[npairs] = tb->send;
        tb->send_pair = npairs++;
      }
    }
  for (int g = 0; g < n; g++)
    for (int t = 0; t < p->gpus[g].ntbs; t++) {
      tb_t *tb = &p->gpus[g].tbs[t];
      tb->recv_pair = -1;
      for (int k = 0; k < npairs && tb->recv >= 0 && tb->recv_pair < 0; k++)
        if (pair_from[k] == tb->recv && pair_to[k] == g) tb->recv_pair = k;
    }
  for (int g = 0; g < n; g++) {
    gpu_t *x = &p->gpus[g];
    int steps = 0;
    for (int t = 0; t < x->ntbs; t++) steps += x->tbs[t].nsteps;
    x->run_tb = malloc(sizeof(int) * (size_t)(steps + 1));
    x->run_step = malloc(sizeof(int) * (size_t)(steps + 1));
    pc[g] = calloc((size_t)x->ntbs + 1, sizeof(int));
    if (!x->run_tb || !x->run_step || !pc[g]) goto oom;
    total += steps;
    nready_cap += x->ntbs;
  }
  ready_tb = malloc(sizeof(int) * (size_t)(nready_cap + 1));
  ready_g = malloc(sizeof(int) * (size_t)(nready_cap + 1));
  if (!ready_tb || !ready_g) goto oom;
  for (int ran = 0; ran < total;) {
    /* Which tbs' next steps may run, judged at the round's start. */
    int nready = 0;
    for (int g = 0; g < n; g++) {
      const gpu_t *x = &p->gpus[g];
      for (int t = 0; t < x->ntbs; t++) {
        if (pc[g][t] >= x->tbs[t].nsteps) continue;
        const tb_t *tb = &x->tbs[t];
        const step_t *st = &tb->steps[pc[g][t]];
        if (st->depid >= 0 && pc[g][st->depid] <= st->deps) continue;
        if (type_recvs(st->type)) {
          const fifo_t *f = tb->recv_pair >= 0 ? &fifo[tb->recv_pair] : NULL;
          if (!f || f->head >= f->n || f->v[f->head].chan != tb->chan ||
              f->v[f->head].idx != st->recv_idx)
            continue;
        }
        ready_g[nready] = g;
        ready_tb[nready++] = t;
      }
    }
    if (nready == 0) break;
    for (int k = 0; k < nready; k++) {
      int g = ready_g[k], t = ready_tb[k];
      gpu_t *x = &p->gpus[g];
      const tb_t *tb = &x->tbs[t];
      const step_t *st = &tb->steps[pc[g][t]];
      if (type_recvs(st->type)) fifo[tb->recv_pair].head++;
      if (type_sends(st->type)) {
        fifo_t *f = &fifo[tb->send_pair];
        if (f->n == f->cap) {
          int cap = f->cap ? 2 * f->cap : 16;
          msg_t *v = realloc(f->v, sizeof *v * (size_t)cap);
          if (!v) goto oom;
          f->v = v;
          f->cap = cap;
        }
        f->v[f->n++] = (msg_t){tb->chan, st->send_idx};
      }
      x->run_tb[x->nrun] = t;
      x->run_step[x->nrun++] = pc[g][t]++;
      ran++;
    }
    if (ran == total) break;
  }
  /* Stuck: name the first step that could not run, and why. */
  for (int g = 0; g < n && res == WEFT_SUCCESS; g++) {
    const gpu_t *x = &p->gpus[g];
    for (int t = 0; t < x->ntbs && res == WEFT_SUCCESS; t++) {
      if (pc[g][t] >= x->tbs[t].nsteps) continue;
      const tb_t *tb = &x->tbs[t];
      const step_t *st = &tb->steps[pc[g][t]];
      if (st->depid >= 0 && pc[g][st->depid] <= st->deps) continue;
      if (!type_recvs(st->type)) continue;
      const fifo_t *f = tb->recv_pair >= 0 ? &fifo[tb->recv_pair] : NULL;
      int sent = 0;
      for (int k = f ? f->head : 0; f && k < f->n; k++)
        sent |= f->v[k].chan == tb->chan && f->v[k].idx == st->recv_idx;
      if (sent)
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                       "%s:%d: <step>: gpu %d tb %d step %d receives from gpu %d on channel %d "
                       "only after a message gpu %d sent it earlier on channel %d: weft carries "
                       "one ordered stream per peer, and this program needs that message "
                       "overtaken",
                       p->what, st->line, g, t, pc[g][t], tb->recv, tb->chan, tb->recv,
                       f->v[f->head].chan);
      else
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                       "%s:%d: <step>: gpu %d tb %d step %d waits for a message from gpu %d on "
                       "channel %d that gpu %d never gets to send: the program deadlocks",
                       p->what, st->line, g, t, pc[g][t], tb->recv, tb->chan, tb->recv);
    }
  }
  if (res == WEFT_SUCCESS && p->ngpus > 0) {
    int ran = 0;
    for (int g = 0; g < n; g++) ran += p->gpus[g].nrun;
    if (ran < total)
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: the program deadlocks (%d of %d steps run)",
                     p->what, ran, total);
  }
  goto out;
oom:
  res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
out:
  for (int i = 0; fifo && i < npairs; i++) free(fifo[i].v);
  free(pair_from);
  free(pair_to);
  for (int g = 0; pc && g < n; g++) free(pc[g]);
  free(fifo);
  free(pc);
  free(ready_tb);
  free(ready_g);
  return res;
}

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

weft_result_t msccl_parse(const char *text, size_t len, const char *what, msccl_program_t **out) {
  *out = NULL;
  xml_doc_t d;
  if (!what) what = "msccl program";
  WEFT_CHECK(xml_parse(text, len, what, &d));
  msccl_program_t *p = calloc(1, sizeof *p);
  if (!p) {
    xml_free(&d);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
  }
  snprintf(p->what, sizeof p->what, "%s", what);
  p->hash = fnv1a(text, len);
  ctx_t c = {&d, p->what};
  weft_result_t res = WEFT_SUCCESS;
  if (strcmp(xml_name(&d, 0), "algo") != 0) {
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s:%d: <%.40s>: the root element must be <algo>",
                   what, d.elems[0].line, xml_name(&d, 0));
    goto fail;
  }
  const char *name = xml_attr(&d, 0, "name");
  snprintf(p->name, sizeof p->name, "%s", name ? name : "unnamed");
  res = int_attr(&c, 0, "ngpus", 1, 4096, 0, 0, &p->ngpus);
  if (res == WEFT_SUCCESS) res = int_attr(&c, 0, "nchannels", 1, 1024, 1, 1, &p->nchannels);
  if (res == WEFT_SUCCESS)
    res = int_attr(&c, 0, "nchunksperloop", 1, 1 << 24, 1, 1, &p->nchunksperloop);
  if (res == WEFT_SUCCESS) res = int_attr(&c, 0, "inplace", 0, 1, 1, 0, &p->inplace);
  if (res == WEFT_SUCCESS) res = coll_attr(&c, 0, &p->coll);
  if (res != WEFT_SUCCESS) goto fail;
  p->gpus = calloc((size_t)p->ngpus, sizeof *p->gpus);
  if (!p->gpus) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
    goto fail;
  }
  for (int k = d.elems[0].first_child; k >= 0 && res == WEFT_SUCCESS; k = d.elems[k].next_sibling)
    res = strcmp(xml_name(&d, k), "gpu") == 0 ? read_gpu(&c, k, p) : unexpected(&c, k, "algo");
  for (int g = 0; g < p->ngpus && res == WEFT_SUCCESS; g++)
    if (!p->gpus[g].line)
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                     "%s:%d: <algo>: ngpus=\"%d\" but there is no <gpu id=\"%d\">", what,
                     d.elems[0].line, p->ngpus, g);
  if (res == WEFT_SUCCESS) res = check_shape(&c, p);
  if (res == WEFT_SUCCESS) res = check_deps(p);
  if (res == WEFT_SUCCESS) res = check_matching(p);
  if (res == WEFT_SUCCESS) res = reference_run(p);
  if (res != WEFT_SUCCESS) goto fail;
  xml_free(&d);
  *out = p;
  return WEFT_SUCCESS;
fail:
  xml_free(&d);
  msccl_free(p);
  return res;
}

weft_result_t msccl_load(const char *path, msccl_program_t **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: cannot open the algorithm file", path);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 65536) {
      size_t nc = cap ? 2 * cap : 65536;
      char *b = nc <= ((size_t)1 << 30) ? realloc(buf, nc) : NULL;
      if (!b) {
        free(buf);
        fclose(f);
        return WEFT_ERR(WEFT_ERR_NO_MEMORY, "%s: algorithm file too large", path);
      }
      buf = b;
      cap = nc;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: error reading the algorithm file", path);
  }
  weft_result_t res = msccl_parse(buf, len, path, out);
  free(buf);
  return res;
}

void msccl_free(msccl_program_t *p) {
  if (!p) return;
  for (int g = 0; p->gpus && g < p->ngpus; g++) {
    gpu_t *x = &p->gpus[g];
    for (int t = 0; t < x->ntbs; t++) free(x->tbs[t].steps);
    free(x->tbs);
    free(x->run_tb);
    free(x->run_step);
  }
  free(p->gpus);
  free(p);
}

const char *msccl_name(const msccl_program_t *p) { return p->name; }
weft_coll_t msccl_coll(const msccl_program_t *p) { return p->coll; }
int msccl_ngpus(const msccl_program_t *p) { return p->ngpus; }
int msccl_nchannels(const msccl_program_t *p) { return p->nchannels; }
uint64_t msccl_hash(const msccl_program_t *p) { return p->hash; }

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
                        b->p->what, st->line, type_names[st->type]);
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
