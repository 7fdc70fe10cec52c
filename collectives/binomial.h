/* binomial.h -- internal: the binomial tree that binomial_gather.c and binomial_scatter.c run,
 * numbered relative to the root (vrank v = rank - root mod p) so that any root and any world
 * size work.
 *
 * v's parent is v minus its lowest set bit; its children are v + 2^k for every 2^k below that
 * bit (all 2^k < p for the root) that stays below p. v's subtree is the vrank range
 * [v, v + lowbit(v)) clipped to p: contiguous, which is why a whole subtree's blocks can travel
 * as one message.
 *
 *   p = 6, vranks:   0 -> 1,  0 -> 2 -> 3,  0 -> 4 -> 5
 *   subtrees:        1: [1,2)  2: [2,4)  4: [4,6) */
#ifndef WEFT_COLLECTIVES_BINOMIAL_H_
#define WEFT_COLLECTIVES_BINOMIAL_H_

#include <math.h>

#include "collectives/algorithms.h"

/* The vrank span of v's subtree in a tree of p vranks. */
static inline int binomial_span(int v, int p) {
  int low = v == 0 ? p : (v & -v);
  return v + low < p ? low : p - v;
}

/* v's parent (-1 for the root). */
static inline int binomial_parent(int v) { return v == 0 ? -1 : v - (v & -v); }

/* The k-th child's offset from its parent, smallest first: 2^k while it is below both v's
 * lowest bit and p - v; 0 when v has no k-th child. */
static inline int binomial_child(int v, int p, int k) {
  int d = 1 << k;
  int low = v == 0 ? p : (v & -v);
  return d < low && v + d < p ? d : 0;
}

/* How many children v has. */
static inline int binomial_nchildren(int v, int p) {
  int k = 0;
  while (binomial_child(v, p, k)) k++;
  return k;
}

/* Seconds for one message of `bytes`: a message per slice, as the executor sends them. */
static inline double binomial_msg(const cost_model_t *m, double bytes) {
  return ceil(bytes / m->slice_bytes) * m->alpha + bytes * m->beta;
}

/* Seconds until a subtree of `span` vranks with blocks of `block` bytes is done, store and
 * forward, a rank's one port taking its children's subtrees one after the other: scatter sends
 * them largest first, each child forwarding once its own has arrived; gather is the same run
 * backwards (smallest first in, its send once all are in). A subtree of span m is shaped as a
 * whole tree of m vranks, so the time depends on m alone. */
static inline double binomial_time(const cost_model_t *m, int span, double block) {
  double worst = 0, sent = 0;
  for (int k = binomial_nchildren(0, span) - 1; k >= 0; k--) {
    int sub = binomial_span(binomial_child(0, span, k), span);
    sent += binomial_msg(m, sub * block);
    double done = sent + binomial_time(m, sub, block);
    if (done > worst) worst = done;
  }
  return worst;
}

#endif /* WEFT_COLLECTIVES_BINOMIAL_H_ */
