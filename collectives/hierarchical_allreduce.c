/* hierarchical_allreduce.c -- two-level all-reduce: reduce-scatter inside each host, all-reduce
 * of every piece across hosts, all-gather inside each host (as NCCL's and Horovod's hierarchical
 * all-reduce do).
 *
 * Hosts come from sched_args_t's node_of: host h has L_h ranks, numbered 0 .. L_h-1 in rank
 * order (its "local index"; ranks of a host need not be contiguous), H hosts in all. Host h cuts
 * the buffer into L_h nearly equal chunks (sched_chunk) and local index i owns chunk i.
 *
 *   2 hosts x 2 ranks, ranks {0, 2} on host A and {1, 3} on host B, buffer halves x y:
 *   phase 1, ring inside each host:   A: 0 owns x, 2 owns y (sums of A)   B: 1 owns x, 3 owns y
 *   phase 2, ring across hosts:       0 <-> 1 all-reduce x,   2 <-> 3 all-reduce y
 *   phase 3, ring inside each host:   A: 0 passes x to 2, 2 passes y to 0; B likewise
 *
 * Uneven hosts: with different L_h the chunk boundaries differ between hosts, so the unit of the
 * inter-host rings is a *piece*: the buffer is cut at every chunk boundary of every host (the
 * common refinement; at most 2p pieces, just L when all hosts are alike). Each piece lies in
 * exactly one chunk of every host, so it has one owner per host, and those H owners all-reduce it
 * with a ring ordered by host. A rank of a small host owns more pieces and joins more inter-host
 * rings, but every rank still sends about n/L_h of its host's share: balanced within each host.
 * Every piece is cut into H cells; all ops work on whole cells, since the executor's
 * dependencies join ops of equal count (phase 2's ring moves one cell per step, and phase 1's
 * last reduction of a cell is what phase 2 waits for, cell by cell).
 *
 * Phase 1 (L_h > 1) is ring all-reduce's reduce-scatter with the ownership shifted: in step s
 * (0 .. L-2) local index i sends chunk i-1-s (its own input in step 0, then what arrived the step
 * before) to i+1 and reduces chunk i-2-s arriving from i-1 into recvbuf (= sendbuf op incoming,
 * so in place and out of place are one schedule); the last step completes chunk i. Phase 2 is
 * ring_allreduce.c's schedule per piece on cells, reading phase 1's result (or sendbuf when
 * L_h = 1); its last reduction of a cell is the final one (WEFT_AVG divides there, once, on one
 * rank). Phase 3 is ring_allgather.c's schedule inside the host. With one host (or node_of NULL)
 * phase 2 is empty, phase 1's last step is final, and the whole is a ring all-reduce in rank
 * order; with one rank per host phases 1 and 3 are empty and it is a ring in host order.
 *
 * Ordering: intra-host and inter-host peers are disjoint, phase 1 waits on nothing, phase 2 only
 * on phase 1 and itself, phase 3 on phase 2 and itself, and both ends of a link list their ops in
 * the same (phase, step, piece, cell) order, so no stream waits on a later one. Each piece's
 * final value needs this rank's contribution to it, which is why a receive that overwrites a
 * partial sum (phase 2's all-gather, phase 3) cannot land before that partial has been sent.
 * The call description goes around all ranks ordered by (host, local index).
 *
 * Cost (a, b, g, n as in ring_allreduce.c), hosts of L ranks, H hosts: the phases as if they ran
 * one after another, a ring all-reduce of n among L and one of n/L among H:
 *   ring(L, n) + [H > 1] (ring(H, n/L) - h)      (h: the one call description)
 * i.e. 2(L-1)/L n b + 2(H-1)/H n/L b on the wire per rank: the inter-host part, the one that
 * crosses the slow links, is 1/L of what a ring crossing hosts at every hop sends over them, in
 * 2(H-1) steps instead of 2(p-1). This overstates a little (phase 2 of a cell starts as soon as
 * phase 1 has finished it) and counts a message per chunk where the schedule sends one per cell
 * (H per chunk; the same for n/p >= S). Limitations: the model has one alpha and one beta, so
 * inter-host bytes are priced like intra-host ones, and the table's cost function sees only p,
 * not node_of, so it prices the one-host case (= ring_allreduce_cost). Hence the automatic
 * choice takes this algorithm by the topology rule in algo_select.c, not by comparing costs;
 * hierarchical_allreduce_cost_topo gives the layout's cost for tools that know it. */
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

double hierarchical_allreduce_cost_topo(const cost_model_t *m, int L, int H, double n) {
  if (L < 1 || H <= 1) return ring_allreduce_cost(m, L, n);
  double inter = ring_allreduce_cost(m, H, n / L) - (m->alpha + 40 * m->beta);
  return (L > 1 ? ring_allreduce_cost(m, L, n) : m->alpha + 40 * m->beta) + inter;
}

double hierarchical_allreduce_cost(const cost_model_t *m, int p, double n) {
  return hierarchical_allreduce_cost_topo(m, p, 1, n);
}

/* The topology as this builder uses it. */
typedef struct {
  int H;         /* hosts with at least one rank */
  int *host;     /* host index (0 .. H-1, in node order) of every rank */
  int *local;    /* local index of every rank */
  int *L;        /* ranks on each host */
  int *member;   /* ranks of host h at member[start[h] .. start[h+1]) in rank order */
  int *start;    /* H + 1 entries */
  size_t *bound; /* piece q is [bound[q], bound[q+1]) */
  int npieces;
} topo_t;

static void topo_free(topo_t *t) {
  free(t->host);
  free(t->local);
  free(t->L);
  free(t->member);
  free(t->start);
  free(t->bound);
}

static int cmp_size(const void *x, const void *y) {
  size_t a = *(const size_t *)x, b = *(const size_t *)y;
  return a < b ? -1 : a > b;
}

static weft_result_t topo_init(topo_t *t, const sched_args_t *a) {
  int p = a->nranks;
  int nn = a->node_of && a->nnodes > 0 ? a->nnodes : 1;
  t->host = calloc((size_t)p, sizeof(int));
  t->local = calloc((size_t)p, sizeof(int));
  t->L = calloc((size_t)nn + 1, sizeof(int));
  t->member = calloc((size_t)p, sizeof(int));
  t->start = calloc((size_t)nn + 2, sizeof(int));
  t->bound = calloc(2 * (size_t)p + 2, sizeof(size_t));
  int *compact = calloc((size_t)nn, sizeof(int));
  if (!t->host || !t->local || !t->L || !t->member || !t->start || !t->bound || !compact) {
    free(compact);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "hierarchical all-reduce: out of memory");
  }
  for (int r = 0; r < p; r++) {
    int node = nn > 1 ? a->node_of[r] : 0;
    if (node < 0 || node >= nn) {
      free(compact);
      return WEFT_ERR(WEFT_ERR_INTERNAL, "hierarchical all-reduce: rank %d on node %d of %d", r,
                      node, nn);
    }
    compact[node] = 1;
  }
  /* Nodes without ranks (none in a communicator's topology, but cheap to allow) are skipped. */
  t->H = 0;
  for (int h = 0; h < nn; h++) compact[h] = compact[h] ? t->H++ : -1;
  for (int r = 0; r < p; r++) {
    int h = compact[nn > 1 ? a->node_of[r] : 0];
    t->host[r] = h;
    t->local[r] = t->L[h]++;
  }
  free(compact);
  for (int h = 0; h < t->H; h++) t->start[h + 1] = t->start[h] + t->L[h];
  for (int r = 0; r < p; r++) t->member[t->start[t->host[r]] + t->local[r]] = r;
  /* Pieces: every chunk boundary of every distinct host size, sorted, without repeats. */
  int nb = 0;
  for (int h = 0; h < t->H; h++) {
    int seen = 0;
    for (int g = 0; g < h && !seen; g++) seen = t->L[g] == t->L[h];
    if (seen) continue;
    for (int i = 0; i < t->L[h]; i++) {
      size_t off, len;
      sched_chunk(a->count, t->L[h], i, &off, &len);
      t->bound[nb++] = off;
    }
  }
  t->bound[nb++] = a->count;
  qsort(t->bound, (size_t)nb, sizeof(size_t), cmp_size);
  int u = 0;
  for (int i = 0; i < nb; i++)
    if (u == 0 || t->bound[i] != t->bound[u - 1]) t->bound[u++] = t->bound[i];
  t->npieces = u - 1; /* the last bound is count itself */
  return WEFT_SUCCESS;
}

/* The chunk (sched_chunk's cut into L) that piece q lies in: the first count % L chunks have one
 * element more. */
static int chunk_of(const topo_t *t, size_t count, int L, int q) {
  size_t at = t->bound[q], base = count / (size_t)L, extra = count % (size_t)L;
  if (at < extra * (base + 1)) return (int)(at / (base + 1));
  return (int)(extra + (at - extra * (base + 1)) / base);
}

/* Cell c of piece q: [*off, +*len). */
static void cell_range(const topo_t *t, int q, int c, size_t *off, size_t *len) {
  sched_chunk(t->bound[q + 1] - t->bound[q], t->H, c, off, len);
  *off += t->bound[q];
}

/* Appends one op per cell of the pieces of `chunk` of this rank's host (pieces [first[chunk],
 * first[chunk+1])), with the cell's range and, from dep_of (per cell, NULL: none), its
 * dependency; records each op in rec (NULL: not). */
/* Makes receive `recv` (when it exists) write the slots of `send`, which depends on it: a
 * partial sum or a gathered cell goes on in one pass (schedule.h). A plain reduction or copy
 * becomes the fused kind that also keeps its result; a fused one keeps its kind. */
static void link_cell(schedule_t *s, int recv, int send) {
  if (recv < 0 || send < 0) return;
  sched_kind_t *k = &s->ops[recv].kind;
  if (sched_is_fused(*k) && s->ops[recv].fwd > recv) return; /* already feeds a send */
  if (*k == SCHED_RECV_REDUCE) *k = SCHED_RECV_REDUCE_COPY_SEND;
  if (*k == SCHED_RECV_COPY) *k = SCHED_RECV_COPY_SEND;
  if (sched_is_fused(*k)) s->ops[recv].fwd = send;
}

static int emit_chunk(schedule_t *s, const topo_t *t, const int *first, int chunk, sched_op_t op,
                      const int *dep_of, int *rec, const int *feeds) {
  for (int q = first[chunk]; q < first[chunk + 1]; q++) {
    for (int c = 0; c < t->H; c++) {
      int cell = q * t->H + c;
      cell_range(t, q, c, &op.offset, &op.count);
      op.src_offset = op.offset;
      op.dep = dep_of ? dep_of[cell] : -1;
      int i = emit(s, op);
      if (i == EMIT_OOM) return EMIT_OOM;
      if (rec) rec[cell] = i;
      if (feeds) link_cell(s, feeds[cell], i);
    }
  }
  return 0;
}

/* Per-cell op indices the phases hand on: p1 the last phase-1 reduction, done the op that made
 * the cell's final value here, p3 phase 3's last receive; first: the pieces of each chunk of this
 * rank's host (L + 1 entries); right/left: each piece's inter-host ring neighbours. */
typedef struct {
  int *p1, *done, *p3, *first, *right, *left;
} work_t;

static weft_result_t build(schedule_t *s, const sched_args_t *a, const topo_t *t, work_t *w) {
  int rank = a->rank, p = a->nranks, H = t->H;
  size_t count = a->count;
  int me = t->host[rank], li = t->local[rank], L = t->L[me];
  const int *mine = &t->member[t->start[me]];
  int *p1 = w->p1, *done = w->done, *p3 = w->p3, *first = w->first;
  /* Call descriptions around all ranks in (host, local index) order. */
  if (p > 1) {
    int pos = t->start[me] + li;
    s->hdr_to = t->member[(pos + 1) % p];
    s->hdr_from = t->member[(pos + p - 1) % p];
  }
  if (p == 1 && emit_own_copy(s, a->in_place, 0, 0, count) == EMIT_OOM) goto oom;
  for (int i = 0; i < t->npieces * H; i++) p1[i] = done[i] = p3[i] = -1;
  /* Chunks are contiguous, so each owns a contiguous run of pieces (empty chunks none). */
  for (int i = 0; i <= L; i++) first[i] = t->npieces;
  for (int q = t->npieces - 1; q >= 0; q--) first[chunk_of(t, count, L, q)] = q;
  for (int i = L - 1; i >= 0; i--)
    if (first[i] > first[i + 1]) first[i] = first[i + 1];

  /* Phase 1: reduce-scatter inside the host; chunk li ends here. */
  for (int step = 0; step < L - 1; step++) {
    sched_op_t send = {.kind = SCHED_SEND,
                       .peer = mine[mod(li + 1, L)],
                       .buf = step == 0 ? SCHED_SENDBUF : SCHED_RECVBUF,
                       .step = step};
    if (emit_chunk(s, t, first, mod(li - 1 - step, L), send, step == 0 ? NULL : p1, NULL,
                   step == 0 ? NULL : p1))
      goto oom;
    /* Partial sums go straight into the next local peer's slots; the last step's are kept
     * (phase 2 reads them, or phase 3 forwards them) and linked to their first reader below. */
    sched_op_t recv = {.kind = step < L - 2 ? SCHED_RECV_REDUCE_SEND : SCHED_RECV_REDUCE,
                       .peer = mine[mod(li - 1, L)],
                       .buf = SCHED_RECVBUF,
                       .src_buf = SCHED_SENDBUF,
                       .final = H == 1 && step == L - 2,
                       .step = step};
    if (emit_chunk(s, t, first, mod(li - 2 - step, L), recv, NULL, p1, NULL)) goto oom;
  }
  /* Where this rank's host-wide sums of its own cells are (phase 1 made them, p1 says when). */
  sched_buf_t own_buf = L > 1 ? SCHED_RECVBUF : SCHED_SENDBUF;
  for (int i = 0; i < t->npieces * H; i++) done[i] = p1[i];

  /* Phase 2: for each owned piece, ring all-reduce of its H cells across hosts; all pieces
   * advance step by step together, in piece order on every link. */
  for (int q = first[li]; q < first[li + 1]; q++) {
    int rh = mod(me + 1, H), lh = mod(me - 1, H);
    w->right[q] = t->member[t->start[rh] + chunk_of(t, count, t->L[rh], q)];
    w->left[q] = t->member[t->start[lh] + chunk_of(t, count, t->L[lh], q)];
  }
  for (int step = 0; H > 1 && step < 2 * (H - 1); step++) {
    int reduce = step < H - 1, ag = step - (H - 1);
    int send_cell = reduce ? mod(me - step, H) : mod(me + 1 - ag, H);
    int recv_cell = reduce ? mod(me - step - 1, H) : mod(me - ag, H);
    for (int q = first[li]; q < first[li + 1]; q++) {
      int sc = q * H + send_cell, rc = q * H + recv_cell;
      sched_op_t send = {.kind = SCHED_SEND,
                         .peer = w->right[q],
                         .buf = step == 0 ? own_buf : SCHED_RECVBUF,
                         .dep = done[sc], /* step 0: phase 1's; then the receive before */
                         .step = L - 1 + step};
      cell_range(t, q, send_cell, &send.offset, &send.count);
      /* As ring_allreduce.c: partials into the next host's slot, the final sum kept and
       * forwarded in one pass, gathered cells kept and forwarded, the last one kept. */
      int last = step == 2 * (H - 1) - 1;
      sched_kind_t kind =
          reduce ? (step == H - 2 ? SCHED_RECV_REDUCE_COPY_SEND : SCHED_RECV_REDUCE_SEND)
                 : (last ? SCHED_RECV_COPY : SCHED_RECV_COPY_SEND);
      sched_op_t recv = {.kind = kind,
                         .peer = w->left[q],
                         .buf = SCHED_RECVBUF,
                         .src_buf = own_buf,
                         .dep = reduce ? p1[rc] : -1,
                         .final = step == H - 2,
                         .step = L - 1 + step};
      cell_range(t, q, recv_cell, &recv.offset, &recv.count);
      recv.src_offset = recv.offset;
      int sent = emit(s, send);
      if (sent == EMIT_OOM) goto oom;
      link_cell(s, done[sc], sent);
      if ((done[rc] = emit(s, recv)) == EMIT_OOM) goto oom;
    }
  }

  /* Phase 3: all-gather inside the host. */
  for (int step = 0; step < L - 1; step++) {
    int st = L - 1 + 2 * (H - 1) + step;
    sched_op_t send = {
        .kind = SCHED_SEND, .peer = mine[mod(li + 1, L)], .buf = SCHED_RECVBUF, .step = st};
    if (emit_chunk(s, t, first, mod(li - step, L), send, step == 0 ? done : p3, NULL,
                   step == 0 ? done : p3))
      goto oom;
    sched_op_t recv = {.kind = step < L - 2 ? SCHED_RECV_COPY_SEND : SCHED_RECV_COPY,
                       .peer = mine[mod(li - 1, L)],
                       .buf = SCHED_RECVBUF,
                       .step = st};
    if (emit_chunk(s, t, first, mod(li - 1 - step, L), recv, NULL, p3, NULL)) goto oom;
  }
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                  "hierarchical all-reduce: out of memory building the schedule");
}

static weft_result_t build_one(schedule_t *s, const sched_args_t *a) {
  sched_init(s, a->count, a->count);
  topo_t t = {0};
  weft_result_t res = topo_init(&t, a);
  if (res != WEFT_SUCCESS) {
    topo_free(&t);
    return res;
  }
  size_t ncells = (size_t)t.npieces * (size_t)t.H, np = (size_t)t.npieces;
  int *mem = malloc(sizeof(int) * (3 * ncells + 2 * np + (size_t)a->nranks + 2));
  if (!mem) {
    topo_free(&t);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "hierarchical all-reduce: out of memory");
  }
  work_t w = {mem,
              mem + ncells,
              mem + 2 * ncells,
              mem + 3 * ncells,
              mem + 3 * ncells + (size_t)a->nranks + 2,
              mem + 3 * ncells + (size_t)a->nranks + 2 + np};
  res = build(s, a, &t, &w);
  free(mem);
  topo_free(&t);
  if (res != WEFT_SUCCESS) sched_free(s);
  return res;
}

/* Elements per round: every host's chunk of a round within round_count (algorithms.h), so the
 * smallest host sets it; 0 for one round. */
static size_t round_elems(const sched_args_t *a) {
  if (a->round_count == 0) return 0;
  int nn = a->node_of && a->nnodes > 0 ? a->nnodes : 1, min_local = a->nranks;
  for (int h = 0; h < nn; h++) {
    int n = 0;
    for (int r = 0; r < a->nranks; r++) n += (nn > 1 ? a->node_of[r] : 0) == h;
    if (n > 0 && n < min_local) min_local = n;
  }
  return a->round_count * (size_t)min_local;
}

/* Fused steps wait for the next peer's slots, so the phases' rings run in rounds, as
 * ring_allreduce.c's: each round is the whole three-phase schedule over its part of the buffer,
 * and rounds follow each other on every link in the same order on both ends. */
weft_result_t hierarchical_allreduce_build(schedule_t *s, const sched_args_t *a) {
  size_t per = round_elems(a);
  if (per == 0 || a->count <= per) return build_one(s, a);
  sched_init(s, a->count, a->count);
  for (size_t base = 0; base < a->count; base += per) {
    sched_args_t sub = *a;
    sub.count = a->count - base < per ? a->count - base : per;
    schedule_t part;
    weft_result_t res = build_one(&part, &sub);
    if (res == WEFT_SUCCESS) res = sched_append(s, &part, base);
    if (res == WEFT_SUCCESS) {
      s->hdr_to = part.hdr_to;
      s->hdr_from = part.hdr_from;
      sched_free(&part);
    }
    if (res != WEFT_SUCCESS) {
      sched_free(s);
      return res;
    }
  }
  return WEFT_SUCCESS;
}
