/* halving.h -- internal: recursive halving over the units of a buffer, the reduce-scatter that
 * the Rabenseifner algorithms share.
 *
 * The buffer is cut into units. With the world folded onto a power of two q (fold.h), virtual
 * rank w owns units [first(w), first(w + 1)): one unit per virtual rank (all-reduce), or one per
 * real rank, the block of each of the one or two real ranks behind w (reduce-scatter). In step k
 * rank v keeps the half of its current range that holds its own units, sends the other half to
 * v xor q/2^(k+1), and folds the partner's copy of the kept half in; after log2 q steps the
 * units of v are fully reduced (finalized in the last step).
 *
 * Every unit travels as its own op: forwarding a unit waits, slice by slice, for exactly the fold
 * that produced it (the executor's dependencies pair ops of equal length). A step's ops to one
 * peer go out back to back. A fold writes a unit that nothing sends any more (the half a rank
 * sends away it never touches again), so no receive waits for a send. */
#ifndef WEFT_COLLECTIVES_HALVING_H_
#define WEFT_COLLECTIVES_HALVING_H_

#include "collectives/schedule.h"

typedef struct {
  size_t off, len; /* the unit is sendbuf[off, +len) */
  sched_buf_t acc; /* where its partial results accumulate */
  size_t acc_off;
  sched_buf_t buf; /* where its value is now ... */
  size_t buf_off;
  int op;   /* ... and the op that put it there (-1: there from the start) */
  int sent; /* the send that took it to the halving partner (-1: none) */
} unit_t;

typedef struct {
  schedule_t *s;
  int q, rem, v; /* fold.h: power of two, folded pairs, this rank's virtual rank */
  int per_rank;  /* units are the real ranks' blocks, not one per virtual rank */
  unit_t *u;
} halving_t;

/* The first unit of virtual rank w (w = q: the number of units). */
int halving_first(const halving_t *h, int w);
/* Sends units [first, end) to peer, each once the op that made it is done; `record` keeps each
 * send in unit.sent. Returns 0, or -1 when out of memory. */
int halving_send(halving_t *h, int peer, int first, int end, int record, int step);
/* Receives units [first, end) from peer and folds them into their accumulators. */
int halving_fold(halving_t *h, int peer, int first, int end, int final, int step);
/* The log2 q halving steps (numbered from 1). */
int halving_run(halving_t *h);

#endif /* WEFT_COLLECTIVES_HALVING_H_ */
