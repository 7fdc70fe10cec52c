/* devloop_steps.h -- internal: the device-resident step loop, written once in C for every
 * compiler that runs it: the host compiler (devloop_host.c: the emulated engine and the tests) and
 * nvcc (kernels/cuda/devloop_kernel.cu: the CUDA kernel). Only what differs between them goes
 * through macros that the includer defines before including this file:
 *
 *   DL_LOAD_ACQUIRE(p)      load *p (uint64_t) with acquire semantics
 *   DL_LOAD_RELAXED(p)      load *p (uint64_t, or the int abort flag): atomic, no ordering
 *   DL_STORE_RELEASE(p, v)  store v to *p (uint64_t) with release semantics
 *   DL_SPIN()               a pass moved nothing: pause or yield before polling again
 *   DL_NOW_NS()             a monotonic clock in ns (uint64_t), for the timeout
 *   DL_COPY(dst, src, bytes)                 dst = src
 *   DL_COPY2(dst, dst2, src, bytes)          dst = dst2 = src, one read
 *   DL_REDUCE(env, dst, a, b, n)             dst = a op b, n elements
 *   DL_REDUCE_COPY(env, dst, dst2, a, b, n)  dst = dst2 = a op b
 *   DL_AVG_FINAL(env, dst, dst2, a, b, n)    dst = (a + b) / nranks, and dst2 unless NULL
 *   DL_CHAOS(where)  optional, a no-op by default: tests inject delays at the DL_AT_* points
 *   DL_FN            optional, "static inline" by default: the functions' qualifiers
 *
 * `env` is the includer's element context (dtype, op, nranks, its kernels), passed through as is.
 * The element macros keep kernels/reduce.h's aliasing rules: a slot is disjoint from everything
 * else; dst2, and dst where it is a local buffer, may be exactly a (in place), never partly.
 *
 * What the loop does (kernels/devprog.h is the contract, kernels/devloop.h the link protocol):
 * rounds r = 0 .. nrounds-1; in round r every step with more than r slices moves its slice r, once
 * its dep has moved slice r and every earlier step (in program order) on each of its links has
 * moved slice r. The steps of a round are polled: a step whose message has not arrived or whose
 * slot is not free is passed over, and the pass goes on to the others, so no listing of steps can
 * make the loop wait on itself (two ranks that both list a receive before a send still finish).
 * Round r + 1 starts when every step of round r is done.
 *
 * What the loop cannot fix: a fused step holds its incoming message while it waits for a free slot
 * to forward into, so a ring of fused steps needs 2 slots per link (one for step 0's message of
 * the round, one for the forward); with 1 every rank waits on its right neighbour's slot and the
 * run times out. Giving a program enough slots is the compiler's business (devcompile.h). */
#ifndef WEFT_KERNELS_DEVLOOP_STEPS_H_
#define WEFT_KERNELS_DEVLOOP_STEPS_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/devloop.h"
#include "kernels/devprog.h"

#if !defined(DL_LOAD_ACQUIRE) || !defined(DL_LOAD_RELAXED) || !defined(DL_STORE_RELEASE) || \
    !defined(DL_SPIN) || !defined(DL_NOW_NS) || !defined(DL_COPY) || !defined(DL_COPY2) ||  \
    !defined(DL_REDUCE) || !defined(DL_REDUCE_COPY) || !defined(DL_AVG_FINAL)
#error "devloop_steps.h: define the DL_* platform macros before including it"
#endif

#ifndef DL_CHAOS
#define DL_CHAOS(where) ((void)0)
#endif
#ifndef DL_FN
#define DL_FN static inline
#endif
/* Test builds only (tests/kernels:devloop_mutation*): known-wrong variants of the protocol, to
 * check that the tests catch them. 0 in every real build. */
#ifndef DL_MUTATION
#define DL_MUTATION 0
#endif

/* The points where DL_CHAOS is called. */
enum {
  DL_AT_IDLE = 0,    /* a pass moved nothing; about to spin */
  DL_AT_READY = 1,   /* the counters allow a step; before it touches a slot */
  DL_AT_PUBLISH = 2, /* a slot is written; before the tail that publishes it */
  DL_AT_FREE = 3     /* a slot is read; before the head that frees it */
};

/* The loop's state besides the per-step counts: where each link is. */
typedef struct {
  /* Next message on each link: for a send link the message this end fills next (its tail), for a
   * receive link the one it reads next (its head). Only this end writes that counter, so the
   * local copy is the truth and the shared counter is only ever stored. */
  uint64_t seq[DP_MAX_LINKS];
  /* Per link, the step whose turn it is in this round (program order among the steps with a slice
   * in this round); nsteps when none is left. */
  int turn[DP_MAX_LINKS];
} dl_loop_t;

/* The links a step uses, -1 for none (a kind that does not receive may leave recv_link unset). */
DL_FN int dl_recv_link(const dp_step_t *st) {
  return dp_kind_receives(st->kind) ? st->recv_link : -1;
}
DL_FN int dl_send_link(const dp_step_t *st) { return dp_kind_sends(st->kind) ? st->send_link : -1; }
DL_FN int dl_writes_buf(int k) {
  return k == DP_RECV_COPY || k == DP_RECV_REDUCE || k == DP_RECV_REDUCE_COPY_SEND ||
         k == DP_RECV_COPY_SEND || k == DP_COPY;
}
DL_FN int dl_reads_src(int k) { return dp_kind_reduces(k) || k == DP_COPY; }

DL_FN dl_status_t dl_status(int code, int step, int link, int waiting_for, uint64_t round) {
  dl_status_t s;
  s.code = code;
  s.step = step;
  s.link = link;
  s.waiting_for = waiting_for;
  s.round = round;
  return s;
}

/* Whether [off, off + count) lies in a buffer of `have` elements, without overflow. */
DL_FN int dl_in_range(uint64_t off, uint64_t count, uint64_t have) {
  return count <= have && off <= have - count;
}

/* Checks everything a run relies on before anything moves, so that a bad program fails whole
 * (DL_BAD_PROGRAM naming the step, -1 for the program or a link view) instead of after sending half
 * its messages, which would leave the peer's counters out of step with ours. */
DL_FN dl_status_t dl_validate(const dl_run_t *run) {
  const dp_program_t *p = run->prog;
  if (!p || p->nsteps < 0 || p->nlinks < 0 || p->nlinks > DP_MAX_LINKS ||
      (p->nsteps > 0 && !p->steps) || (p->nlinks > 0 && !run->links) || p->slice_elems == 0)
    return dl_status(DL_BAD_PROGRAM, -1, -1, 0, 0);
  uint64_t esize = dp_dtype_size(p->dtype);
  if (esize == 0 || (unsigned)p->op >= WEFT_NUM_OPS || (p->op == WEFT_AVG && p->nranks < 1))
    return dl_status(DL_BAD_PROGRAM, -1, -1, 0, 0);
  /* Every message is at most one slot: slice_elems elements must fit (no overflow either). */
  for (int l = 0; l < p->nlinks; l++) {
    const dl_link_view_t *v = &run->links[l];
    if (!v->slots || !v->ctr || v->nslots == 0 || v->slot_bytes / esize < p->slice_elems ||
        (p->links[l].dir != DP_LINK_SEND && p->links[l].dir != DP_LINK_RECV))
      return dl_status(DL_BAD_PROGRAM, -1, l, 0, 0);
  }
  for (int i = 0; i < p->nsteps; i++) {
    const dp_step_t *st = &p->steps[i];
    int k = st->kind;
    if (k >= DP_NUM_KINDS) return dl_status(DL_BAD_PROGRAM, i, -1, 0, 0);
    uint64_t slices = dp_step_slices(p, st);
    if (slices == 0) continue; /* takes no part: nothing of it is used */
    /* nrounds bounds the loop: a step with more slices would never finish. */
    if (slices > p->nrounds) return dl_status(DL_BAD_PROGRAM, i, -1, 0, 0);
    int rl = dl_recv_link(st), sl = dl_send_link(st);
    if (dp_kind_receives(k) && (rl < 0 || rl >= p->nlinks || p->links[rl].dir != DP_LINK_RECV))
      return dl_status(DL_BAD_PROGRAM, i, rl, 0, 0);
    if (dp_kind_sends(k) && (sl < 0 || sl >= p->nlinks || p->links[sl].dir != DP_LINK_SEND))
      return dl_status(DL_BAD_PROGRAM, i, sl, 0, 0);
    /* The buffers it reads or writes: bound, and the range inside the program's own size. */
    if ((dl_writes_buf(k) || k == DP_SEND) &&
        (st->buf >= DP_NUM_BUFS || !run->bufs[st->buf] ||
         !dl_in_range(st->offset, st->count, p->buf_count[st->buf])))
      return dl_status(DL_BAD_PROGRAM, i, -1, 0, 0);
    if (dl_reads_src(k) && (st->src_buf >= DP_NUM_BUFS || !run->bufs[st->src_buf] ||
                            !dl_in_range(st->src_offset, st->count, p->buf_count[st->src_buf])))
      return dl_status(DL_BAD_PROGRAM, i, -1, 0, 0);
    /* A dep is an earlier step with at least as many slices (devprog.h: the same count), so
     * that its slice r exists whenever ours does. */
    if (st->dep >= i || st->dep < -1 ||
        (st->dep >= 0 && dp_step_slices(p, &p->steps[st->dep]) < slices))
      return dl_status(DL_BAD_PROGRAM, i, -1, 0, 0);
  }
  return dl_status(DL_DONE, -1, -1, 0, 0);
}

/* The first step at or after `from` that uses link l in round r, nsteps when none does. */
DL_FN int dl_next_on_link(const dp_program_t *p, int l, int from, uint64_t r) {
  for (int j = from; j < p->nsteps; j++) {
    const dp_step_t *st = &p->steps[j];
    if ((dl_recv_link(st) == l || dl_send_link(st) == l) && dp_step_slices(p, st) > r) return j;
  }
  return p->nsteps;
}

/* Element work of slice r of step st, between the counters' checks and their stores: reads the
 * receive slot `in` (NULL if none) and writes the send slot `out` (NULL if none). */
DL_FN void dl_move(const dl_run_t *run, void *env, const dp_step_t *st, uint64_t r, char *in,
                   char *out) {
  const dp_program_t *p = run->prog;
  uint64_t esize = dp_dtype_size(p->dtype);
  uint64_t first = r * p->slice_elems, n = st->count - first;
  if (n > p->slice_elems) n = p->slice_elems;
  /* Kinds that do not use buf or src_buf may leave them unbound (validation checked the rest). */
  char *buf = run->bufs[st->buf % DP_NUM_BUFS], *src = run->bufs[st->src_buf % DP_NUM_BUFS];
  char *own = buf ? buf + (st->offset + first) * esize : 0; /* buf's part: source of a send */
  const char *a = src ? src + (st->src_offset + first) * esize : 0;
  int avg_final = st->final && p->op == WEFT_AVG;
  switch (st->kind) {
    case DP_SEND:
      DL_COPY(out, own, n * esize);
      break;
    case DP_RECV_COPY:
      DL_COPY(own, in, n * esize);
      break;
    case DP_RECV_REDUCE:
      if (avg_final)
        DL_AVG_FINAL(env, own, (char *)0, a, in, n);
      else
        DL_REDUCE(env, own, a, in, n);
      break;
    case DP_RECV_REDUCE_SEND:
      if (avg_final)
        DL_AVG_FINAL(env, out, (char *)0, a, in, n);
      else
        DL_REDUCE(env, out, a, in, n);
      break;
    case DP_RECV_REDUCE_COPY_SEND:
      if (avg_final)
        DL_AVG_FINAL(env, out, own, a, in, n);
      else
        DL_REDUCE_COPY(env, out, own, a, in, n);
      break;
    case DP_RECV_COPY_SEND:
      DL_COPY2(out, own, in, n * esize);
      break;
    case DP_COPY:
      if (own != a) DL_COPY(own, a, n * esize); /* an in-place own copy moves nothing */
      break;
  }
}

/* Runs a validated program. moved[i] counts the slices step i has moved (nsteps entries, zeroed
 * by the caller); it is the only per-step state, so the caller picks where it lives (host memory,
 * a device scratch array). */
DL_FN dl_status_t dl_loop(const dl_run_t *run, void *env, uint64_t *moved) {
  const dp_program_t *p = run->prog;
  dl_loop_t s;
  /* Where each end left its link: a sender continues from its tail, a receiver from its head.
   * Relaxed loads are enough: this end is the counter's only writer, and whatever handed this run
   * to us after the last one (a kernel launch, a thread join) already orders its stores before. */
  for (int l = 0; l < p->nlinks; l++) {
    dl_counters_t *c = run->links[l].ctr;
    s.seq[l] =
        p->links[l].dir == DP_LINK_SEND ? DL_LOAD_RELAXED(&c->tail) : DL_LOAD_RELAXED(&c->head);
  }
  int idle = 0;            /* the last pass moved nothing */
  uint64_t idle_since = 0; /* DL_NOW_NS() at the first pass of this idle stretch */
  for (uint64_t r = 0; r < p->nrounds; r++) {
    /* Each link's first step of the round: walking backwards, the last write is the first. */
    for (int l = 0; l < p->nlinks; l++) s.turn[l] = p->nsteps;
    for (int j = p->nsteps - 1; j >= 0; j--) {
      const dp_step_t *st = &p->steps[j];
      if (dp_step_slices(p, st) <= r) continue;
      if (dl_recv_link(st) >= 0) s.turn[dl_recv_link(st)] = j;
      if (dl_send_link(st) >= 0) s.turn[dl_send_link(st)] = j;
    }
    int lo = 0; /* every step before lo is done with round r */
    for (;;) {
      int progress = 0, left = 0;
      int wstep = -1, wlink = -1, wfor = 0; /* the first step in program order held by a link */
      int next_lo = -1;
      for (int i = lo; i < p->nsteps; i++) {
        const dp_step_t *st = &p->steps[i];
        if (dp_step_slices(p, st) <= r || moved[i] > r) continue;
        left = 1;
        if (next_lo < 0) next_lo = i;
        /* Its dep has moved slice r (moved[] is this thread's own state: no ordering needed). */
        if (st->dep >= 0 && moved[st->dep] <= r) continue;
        int rl = dl_recv_link(st), sl = dl_send_link(st);
#if DL_MUTATION != 3
        /* Its turn on each link: the earlier steps on the link have moved their slice r, so the
         * k-th message on a link is the k-th one the peer expects (devprog.h's order). */
        if ((rl >= 0 && s.turn[rl] != i) || (sl >= 0 && s.turn[sl] != i)) continue;
#endif
        char *in = 0, *out = 0;
        if (rl >= 0) {
          const dl_link_view_t *v = &run->links[rl];
          /* Acquire: pairs with the sender's release store of tail, so once tail says message
           * seq is there, the sender's writes of its slot are visible to our reads below. */
          if (DL_LOAD_ACQUIRE(&v->ctr->tail) <= s.seq[rl]) {
            if (wstep < 0) wstep = i, wlink = rl, wfor = 0;
            continue;
          }
          in = v->slots + (s.seq[rl] % v->nslots) * v->slot_bytes;
        }
        if (sl >= 0) {
          const dl_link_view_t *v = &run->links[sl];
          /* Acquire: pairs with the receiver's release store of head, so its last reads of the
           * slot we are about to overwrite happened before our writes (no torn message). */
          uint64_t head = DL_LOAD_ACQUIRE(&v->ctr->head);
#if DL_MUTATION == 2
          if (s.seq[sl] - head > v->nslots) { /* one message too many in flight */
#else
          if (s.seq[sl] - head >= v->nslots) {
#endif
            if (wstep < 0) wstep = i, wlink = sl, wfor = 1;
            continue;
          }
          out = v->slots + (s.seq[sl] % v->nslots) * v->slot_bytes;
        }
        DL_CHAOS(DL_AT_READY);
#if DL_MUTATION == 1
        /* Wrong on purpose: publish before writing, free before reading. */
        if (sl >= 0) DL_STORE_RELEASE(&run->links[sl].ctr->tail, s.seq[sl] + 1);
        if (rl >= 0) DL_STORE_RELEASE(&run->links[rl].ctr->head, s.seq[rl] + 1);
        DL_CHAOS(DL_AT_PUBLISH);
#endif
        dl_move(run, env, st, r, in, out);
#if DL_MUTATION != 1
        if (sl >= 0) {
          DL_CHAOS(DL_AT_PUBLISH);
          /* Release: our writes of the slot (and of buf) happen before the receiver can see
           * tail > seq; it reads the slot only after an acquire load of tail. */
          DL_STORE_RELEASE(&run->links[sl].ctr->tail, s.seq[sl] + 1);
        }
        if (rl >= 0) {
          DL_CHAOS(DL_AT_FREE);
          /* Release, after our last read of the slot (the fused kinds read it while writing the
           * send slot, so this comes after the tail above): the sender's acquire of head then
           * orders its next write of this slot after those reads. */
          DL_STORE_RELEASE(&run->links[rl].ctr->head, s.seq[rl] + 1);
        }
#endif
        if (sl >= 0) s.seq[sl]++, s.turn[sl] = dl_next_on_link(p, sl, i + 1, r);
        if (rl >= 0) s.seq[rl]++, s.turn[rl] = dl_next_on_link(p, rl, i + 1, r);
        moved[i] = r + 1;
        progress = 1;
      }
      if (!left) break; /* round r is done */
      lo = next_lo;
      if (progress) {
        idle = 0;
        continue;
      }
      /* A wait turn: nothing moved. An abort is a relaxed read: the flag carries no data, only
       * the decision to stop, so it needs no ordering, just to be seen eventually. */
      if (run->abort && DL_LOAD_RELAXED(run->abort))
        return dl_status(DL_ABORTED, wstep, wlink, wfor, r);
      if (run->timeout_ns) {
        uint64_t now = DL_NOW_NS();
        if (!idle) {
          idle = 1;
          idle_since = now;
        } else if (now - idle_since >= run->timeout_ns) {
          return dl_status(DL_TIMEOUT, wstep, wlink, wfor, r);
        }
      }
      DL_CHAOS(DL_AT_IDLE);
      DL_SPIN();
    }
  }
  return dl_status(DL_DONE, -1, -1, 0, p->nrounds);
}

#endif /* WEFT_KERNELS_DEVLOOP_STEPS_H_ */
