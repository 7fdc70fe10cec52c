/* binomial_gather.c -- gather to any root over a binomial tree (binomial.h) in ceil(log2 p)
 * rounds: the latency-optimal choice for small blocks.
 *
 * Every rank collects its subtree's blocks in scratch, in vrank order (its own first, then each
 * child's subtree as the child sent it), and once all are in sends them to its parent as one
 * message. The root receives each child's subtree straight into recvbuf, except the one subtree
 * whose ranks wrap past p-1 to 0: that one lands in scratch and is copied into its two places.
 *
 *   p = 8, vranks   round 1: 1->0 3->2 5->4 7->6   (1 block each)
 *                   round 2: 2->0 6->4             (2 blocks)
 *                   round 3: 4->0                  (4 blocks)
 *
 * A rank's receives are chained (each waits whole for the one before, its own copy first), so
 * that its send, which waits whole for the last, starts once every block is in; children of a
 * binomial tree finish in that order anyway, smallest subtree first.
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n the gathered bytes, c = n/p): the
 * call description first, h = a + 40 b; then store and forward, a rank's one port taking its
 * children's subtrees one after the other: binomial_scatter_cost's S run backwards,
 *   h + S(p),  S(m) = max over children k of sum_{j >= k} (ceil(m_j c/S) a + m_j c b) + S(m_k)
 * (children numbered smallest subtree first, m_k ranks in child k's subtree).
 * For p a power of two that is h + log2(p) a + (p-1) c b with one slice per message: log2(p)
 * messages where the linear gather has p-1. Bus bandwidth (nccl-tests) = algbw (p-1)/p. */
#include "collectives/algorithms.h"
#include "collectives/binomial.h"
#include "collectives/emit.h"
#include "common/error.h"

double binomial_gather_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  return m->alpha + 40 * m->beta + binomial_time(m, p, n / p);
}

static int real_rank(int v, const sched_args_t *a) { return (v + a->root) % a->nranks; }

/* The root: each child's subtree into its place in recvbuf, the wrapping one through scratch. */
static int gather_at_root(schedule_t *s, const sched_args_t *a) {
  int p = a->nranks, root = a->root;
  size_t n = a->count;
  if (emit_own_copy(s, a->in_place, (size_t)root * n, 0, n) == EMIT_OOM) return -1;
  for (int k = 0; binomial_child(0, p, k); k++) {
    int d = binomial_child(0, p, k), span = binomial_span(d, p), first = root + d;
    int wraps = first < p && first + span > p;
    sched_op_t op = {.kind = SCHED_RECV_COPY,
                     .peer = real_rank(d, a),
                     .buf = wraps ? SCHED_SCRATCH : SCHED_RECVBUF,
                     .offset = wraps ? 0 : (size_t)(first % p) * n,
                     .count = (size_t)span * n,
                     .dep = -1,
                     .step = k + 1};
    int recv = emit(s, op);
    if (recv == EMIT_OOM) return -1;
    if (!wraps) continue;
    size_t head = (size_t)(p - first) * n, tail = (size_t)span * n - head;
    sched_op_t copy = {.kind = SCHED_COPY,
                       .buf = SCHED_RECVBUF,
                       .offset = (size_t)first * n,
                       .count = head,
                       .src_buf = SCHED_SCRATCH,
                       .dep = recv,
                       .dep_whole = 1,
                       .step = k + 1};
    if (emit(s, copy) == EMIT_OOM) return -1;
    copy.offset = 0;
    copy.count = tail;
    copy.src_offset = head;
    if (emit(s, copy) == EMIT_OOM) return -1;
  }
  return 0;
}

weft_result_t binomial_gather_build(schedule_t *s, const sched_args_t *a) {
  int p = a->nranks, v = (a->rank - a->root + p) % p;
  size_t n = a->count;
  sched_init(s, n, v == 0 ? n * (size_t)p : 0);
  sched_ring_headers(s, a->rank, p);
  if (v == 0) {
    if (gather_at_root(s, a)) goto oom;
    emit_size_scratch(s);
    return WEFT_SUCCESS;
  }
  int span = binomial_span(v, p), round = 0;
  while ((1 << round) < (v & -v)) round++;
  sched_op_t up = {.kind = SCHED_SEND,
                   .peer = real_rank(binomial_parent(v), a),
                   .buf = SCHED_SENDBUF,
                   .count = n,
                   .dep = -1,
                   .step = round + 1};
  if (span > 1) {
    /* Own block first, then each child's subtree after it, each waiting for the one before. */
    sched_op_t op = {.kind = SCHED_COPY,
                     .buf = SCHED_SCRATCH,
                     .count = n,
                     .src_buf = SCHED_SENDBUF,
                     .dep = -1};
    int prev = emit(s, op);
    for (int k = 0; prev != EMIT_OOM && binomial_child(v, p, k); k++) {
      int d = binomial_child(v, p, k);
      sched_op_t recv = {.kind = SCHED_RECV_COPY,
                         .peer = real_rank(v + d, a),
                         .buf = SCHED_SCRATCH,
                         .offset = (size_t)d * n,
                         .count = (size_t)binomial_span(v + d, p) * n,
                         .dep = prev,
                         .dep_whole = 1,
                         .step = k + 1};
      prev = emit(s, recv);
    }
    if (prev == EMIT_OOM) goto oom;
    up.buf = SCHED_SCRATCH;
    up.count = (size_t)span * n;
    up.dep = prev;
    up.dep_whole = 1;
  }
  if (emit(s, up) == EMIT_OOM) goto oom;
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "binomial gather: out of memory building the schedule");
}
