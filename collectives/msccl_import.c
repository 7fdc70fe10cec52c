/* msccl_import.c -- MSCCL programs read and checked (msccl_parse, msccl_load): attributes, step
 * references, dependency cycles, sends against receives; msccl_order.c orders the streams and
 * msccl_build.c makes the schedules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/msccl_program.h"
#include "collectives/xml_reader.h"
#include "common/error.h"

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
  for (int k = 0; k < (int)(sizeof msccl_type_names / sizeof msccl_type_names[0]); k++)
    if (strcmp(t, msccl_type_names[k]) == 0) {
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
                      c->what, st->line, msccl_type_names[st->type], tb->line);
    if (type_recvs(st->type) && tb->recv < 0)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s:%d: <step>: type %s receives, but its <tb> (line %d) has recv=\"-1\"",
                      c->what, st->line, msccl_type_names[st->type], tb->line);
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
  if (res == WEFT_SUCCESS) res = msccl_reference_run(p);
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
