/* halving.h -- internal: recursive halving over the units of a buffer, the reduce-scatter that
 * the Rabenseifner algorithms share.
 *
 * The buffer is cut into units. With the world folded onto a power of two q (fold.h), virtual
 * rank w owns units [first(w), first(w + 1)): one unit per virtual rank (all-reduce), or one per
 * real rank, the block of each of the one or two real ranks behind w (reduce-scatter). In step k
 * rank v keeps the half of its current range that holds its own units, sends the other half to
 * v xor q/2^k, and folds the partner's copy of the kept half in; after log2 q steps the units of
 * v are fully reduced (finalized in the last step).
 *
 * Units of consecutive virtual ranks are consecutive elements, so each half is one contiguous
 * range: a step is ONE send and ONE reducing receive, whatever q (a reduce-scatter's last step
 * goes block by block, as its receiver keeps its own block apart). Both read what the step
 * before reduced, but a different sub-range of it (the upper half starts mid-way), so slice j
 * does not line up with slice j: each waits for the whole of the step before (dep_whole, store
 * and forward per step, as MPICH's). A fold writes the half this rank keeps, which no send of it
 * reads any more, so no receive waits for a send. Every op has one dependency (the device loop
 * and the test engine take no more). */
#ifndef WEFT_COLLECTIVES_HALVING_H_
#define WEFT_COLLECTIVES_HALVING_H_

#include "collectives/algorithms.h"
#include "collectives/schedule.h"

#define HALVING_MAX_STEPS 32

typedef struct {
  schedule_t *s;
  int q, rem, v; /* fold.h: power of two, folded pairs, this rank's virtual rank */
  int per_rank;  /* units are the real ranks' blocks of `count` elements, else q chunks of it */
  size_t count;
  sched_buf_t buf; /* where the current range's values are: element e at buf[e - shift] ... */
  size_t shift;
  int op;          /* ... and the op that put them there (-1: there from the start) */
  sched_buf_t acc; /* where partial results accumulate: element e at acc[e - acc_shift] */
  size_t acc_shift;
  /* The last step writes elements [own_off, +own_len) to recvbuf[own_dst, +own_len) instead (a
   * reduce-scatter's own block, the last of its virtual rank's units; an all-reduce's chunk):
   * op own_op. */
  size_t own_off, own_len, own_dst;
  int own_op;
  int last_fold; /* the last fold that moved any elements (-1: none): it waits for all the others */
  int sent[HALVING_MAX_STEPS + 1]; /* sent[k]: the send of step k (-1: none) */
} halving_t;

/* Sets up h for rank `rank` of p; buf, acc and own_* are the caller's to fill in after. */
void halving_init(halving_t *h, schedule_t *s, int rank, int p, int per_rank, size_t count);
/* The elements [*off, *off + *len) of units [first(w0), first(w1)), virtual ranks w0 <= w1. */
void halving_range(const halving_t *h, int w0, int w1, size_t *off, size_t *len);
/* The log2 q halving steps (numbered from 1). Returns 0, or -1 when out of memory. */
int halving_run(halving_t *h);
/* Receives elements [off, +len) from peer and folds them into acc (step 0: a folded-in rank's
 * whole input); the op waits for the whole of h->op. */
int halving_fold(halving_t *h, int peer, size_t off, size_t len, int step);

/* A rank folded out of the power of two (virtual rank < 0): sends its `give` input elements to
 * rank + 1 and receives its `back` result elements into recvbuf at `step`; in place, the
 * result lands on what was sent, so the receive waits for the send (slice by slice where the
 * counts match, else whole). Returns 0, or -1 when out of memory. */
int halving_fold_out(schedule_t *s, int rank, size_t give, size_t back, int step);

/* What one store-and-forward step of m bytes costs on model `c` (the cost functions add them
 * up): it starts once the step before is complete and moves its slices through one port each
 * way, back to back. A reducing step of `ops` equal ops (ceil(m/ops/S) slices each) ends when
 * the port has carried them all and the last slice (r bytes) is reduced, or when the CPU, busy
 * from the first slice (s1) on, has reduced all m bytes, whichever is later:
 * max(ops ceil(m/ops/S) a + m b + r g, a + s1 b + m g); a copying step when the port is done,
 * ceil(m/S) a + m b. Zero for m = 0. */
double halving_reduce_step_cost(const cost_model_t *c, double m, int ops);
double halving_copy_step_cost(const cost_model_t *c, double m);

#endif /* WEFT_COLLECTIVES_HALVING_H_ */
