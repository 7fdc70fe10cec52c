/* chain_reduce.c -- pipelined chain reduce to any root (the ring algorithm for reduce).
 *
 * Ranks form a chain that ends at the root: root+1 -> root+2 -> ... -> root-1 -> root. The
 * first rank sends its sendbuf; every later one folds what arrives into its own contribution
 * (in scratch; recvbuf is the root's alone) and forwards each slice as soon as it is reduced;
 * the root folds into recvbuf, finalizing (WEFT_AVG divides there):
 *
 *   root+1  [s0][s1][s2] ->
 *   root+2       [s0+][s1+][s2+] ->
 *   root              [s0][s1][s2] = reduction
 *
 * Ranks in the middle reduce what arrives with their input straight into the next rank's slot
 * (recv-reduce-send, schedule.h): scratch is only the two-pass path's. No cycle, no rounds.
 *
 * Cost (a: seconds per message, b: per byte sent, g: per byte reduced, S the slice): the call
 * description first, h = a + 40 b. The first slice, s1 = min(n, S) bytes, is sent and reduced
 * p-2 times before it reaches the last link; from there either the last link carries all
 * k = ceil(n/S) slices and the root reduces the last one (r bytes), or the root's CPU, which
 * starts on the first slice, reduces all n bytes:
 *   h + (p-2)(a + s1 (b + g)) + max(k a + n b + r g, a + s1 b + n g)
 * Links and CPUs all work at once: for large n, max(k a + n b, n g) rather than a sum. */
#include <math.h>

#include "collectives/algorithms.h"
#include "collectives/emit.h"
#include "common/error.h"

double chain_reduce_cost(const cost_model_t *m, int p, double n) {
  double a = m->alpha, b = m->beta, g = m->gamma, S = m->slice_bytes;
  if (p < 2) return 0;
  if (n <= 0) return a + 40 * b;
  double k = ceil(n / S), s1 = fmin(n, S), r = n - (k - 1) * S;
  double last_link = k * a + n * b + r * g, root_cpu = a + s1 * b + n * g;
  return a + 40 * b + (p - 2) * (a + s1 * (b + g)) + fmax(last_link, root_cpu);
}

weft_result_t chain_reduce_build(schedule_t *s, const sched_args_t *a) {
  int rank = a->rank, p = a->nranks, is_root = rank == a->root;
  size_t n = a->count;
  sched_init(s, n, is_root ? n : 0);
  sched_ring_headers(s, rank, p);
  if (p == 1) {
    if (emit_own_copy(s, a->in_place, 0, 0, n) == EMIT_OOM) goto oom;
    return WEFT_SUCCESS;
  }
  int pos = (rank - a->root - 1 + p) % p; /* 0 starts the chain, p-1 is the root */
  int folded = -1;
  if (pos > 0) {
    /* Ranks in the middle reduce straight into the next rank's slot (schedule.h); the scratch
     * buffer is only where that cannot be done. */
    sched_op_t op = {.kind = is_root ? SCHED_RECV_REDUCE : SCHED_RECV_REDUCE_SEND,
                     .peer = (rank - 1 + p) % p,
                     .buf = is_root ? SCHED_RECVBUF : SCHED_SCRATCH,
                     .count = n,
                     .src_buf = SCHED_SENDBUF,
                     .dep = -1,
                     .final = is_root,
                     .step = pos - 1};
    if ((folded = emit(s, op)) == EMIT_OOM) goto oom;
  }
  if (!is_root) {
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = (rank + 1) % p,
                     .buf = pos == 0 ? SCHED_SENDBUF : SCHED_SCRATCH,
                     .count = n,
                     .dep = folded,
                     .step = pos};
    int sent = emit(s, op);
    if (sent == EMIT_OOM) goto oom;
    emit_link(s, folded, sent);
  }
  emit_size_scratch(s);
  return WEFT_SUCCESS;
oom:
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "chain reduce: out of memory building the schedule");
}
