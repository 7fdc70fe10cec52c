/* binomial_scatter.c -- scatter from any root over a binomial tree (binomial.h) in
 * ceil(log2 p) rounds: the latency-optimal choice for small blocks.
 *
 * The root sends each child its subtree's blocks as one message, largest subtree first so that
 * the deepest forwarding starts earliest; straight from sendbuf, except the one subtree whose
 * ranks wrap past p-1 to 0, which is first copied together in scratch. Every other rank
 * receives its subtree's blocks in scratch (a leaf: its block straight into recvbuf), then
 * keeps its own and forwards each child's part as one message:
 *
 *   p = 8, vranks   round 1: 0->4              (4 blocks)
 *                   round 2: 0->2 4->6         (2 blocks)
 *                   round 3: 0->1 2->3 4->5 6->7  (1 block each)
 *
 * Forwarding waits for the whole received message (store and forward): the parts forwarded are
 * smaller than it, and a slice-wise dependency pairs slices of equal ops only. A rank's sends are
 * chained, each waiting whole for the one before: posted together, the executor would share the
 * port among them and the largest subtree, whose forwarding is the critical path, would get its
 * data last instead of first (weft-sim measured up to 1.7 times the cost below at 16 ranks).
 *
 * Cost (a: seconds per message, b: per byte, S the slice, n the root's sendbuf in bytes,
 * c = n/p): the call description first, h = a + 40 b; then each rank sends its children their
 * subtrees one after the other, largest first, and a child forwards once its own has arrived:
 *   h + S(p),  S(m) = max over children k of sum_{j >= k} (ceil(m_j c/S) a + m_j c b) + S(m_k)
 * For p a power of two that is h + log2(p) a + (p-1) c b with one slice per message.
 * Bus bandwidth (nccl-tests) = algbw (p-1)/p. */
#include "collectives/algorithms.h"
#include "collectives/binomial.h"
#include "collectives/emit.h"
#include "common/error.h"

double binomial_scatter_cost(const cost_model_t *m, int p, double n) {
  if (p < 2) return 0;
  return m->alpha + 40 * m->beta + binomial_time(m, p, n / p);
}

static int real_rank(int v, const sched_args_t *a) { return (v + a->root) % a->nranks; }

/* The root: each child's subtree from its place in sendbuf, the wrapping one through scratch
 * (copied together first); the sends chained, largest subtree first. */
static int scatter_from_root(schedule_t *s, const sched_args_t *a) {
  int p = a->nranks, root = a->root, prev = -1;
  size_t n = a->count;
  if (emit_own_copy(s, a->in_place, 0, (size_t)root * n, n) == EMIT_OOM) return -1;
  int kids = binomial_nchildren(0, p);
  for (int k = kids - 1; k >= 0; k--) {
    int d = binomial_child(0, p, k), span = binomial_span(d, p), first = root + d;
    if (!(first < p && first + span > p)) continue;
    size_t head = (size_t)(p - first) * n, tail = (size_t)span * n - head;
    sched_op_t copy = {.kind = SCHED_COPY,
                       .buf = SCHED_SCRATCH,
                       .count = head,
                       .src_buf = SCHED_SENDBUF,
                       .src_offset = (size_t)first * n,
                       .dep = -1};
    if ((prev = emit(s, copy)) == EMIT_OOM) return -1;
    copy.offset = head;
    copy.count = tail;
    copy.src_offset = 0;
    copy.dep = prev;
    copy.dep_whole = 1;
    if ((prev = emit(s, copy)) == EMIT_OOM) return -1;
  }
  for (int k = kids - 1; k >= 0; k--) {
    int d = binomial_child(0, p, k), span = binomial_span(d, p), first = root + d;
    int wraps = first < p && first + span > p;
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = real_rank(d, a),
                     .buf = wraps ? SCHED_SCRATCH : SCHED_SENDBUF,
                     .offset = wraps ? 0 : (size_t)(first % p) * n,
                     .count = (size_t)span * n,
                     .dep = prev,
                     .dep_whole = 1,
                     .step = kids - k};
    if ((prev = emit(s, op)) == EMIT_OOM) return -1;
  }
  return 0;
}

weft_result_t binomial_scatter_build(schedule_t *s, const sched_args_t *a) {
  int p = a->nranks, v = (a->rank - a->root + p) % p;
  size_t n = a->count;
  sched_init(s, v == 0 ? n * (size_t)p : 0, n);
  sched_ring_headers(s, a->rank, p);
  if (v == 0) {
    if (scatter_from_root(s, a)) goto oom;
    emit_size_scratch(s);
    return WEFT_SUCCESS;
  }
  int span = binomial_span(v, p), kids = binomial_nchildren(v, p), round = 0;
  while ((1 << round) < (v & -v)) round++;
  /* Rounds as in the diagram: offset 2^k from its parent hears in round L - k, L the root's
   * number of children. */
  int rounds = binomial_nchildren(0, p), step = rounds - round;
  sched_op_t down = {.kind = SCHED_RECV_COPY,
                     .peer = real_rank(binomial_parent(v), a),
                     .buf = span > 1 ? SCHED_SCRATCH : SCHED_RECVBUF,
                     .count = (size_t)span * n,
                     .dep = -1,
                     .step = step};
  int recv = emit(s, down);
  if (recv == EMIT_OOM) goto oom;
  if (span > 1) {
    sched_op_t keep = {.kind = SCHED_COPY,
                       .buf = SCHED_RECVBUF,
                       .count = n,
                       .src_buf = SCHED_SCRATCH,
                       .dep = recv,
                       .dep_whole = 1,
                       .step = step};
    if (emit(s, keep) == EMIT_OOM) goto oom;
  }
  for (int k = kids - 1, prev = recv; k >= 0; k--) {
    int d = binomial_child(v, p, k);
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = real_rank(v + d, a),
                     .buf = SCHED_SCRATCH,
                     .offset = (size_t)d * n,
                     .count = (size_t)binomial_span(v + d, p) * n,
                     .dep = prev,
                     .dep_whole = 1,
                     .step = rounds - k};
    if ((prev = emit(s, op)) == EMIT_OOM) goto oom;
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "binomial scatter: out of memory building the schedule");
}
