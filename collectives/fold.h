/* fold.h -- internal: folding p ranks onto the largest power of two p' <= p, for the recursive
 * doubling and halving algorithms (the scheme of MPICH and of Thakur, Rabenseifner & Gropp 2005).
 *
 * With rem = p - p', the first 2 rem ranks pair up: even rank 2i hands its data to 2i+1 before
 * the power-of-two part and gets the result back after it, sitting out in between; 2i+1 plays
 * virtual rank i. Every rank r >= 2 rem plays virtual rank r - rem. Two extra steps, no extra
 * ranks waiting on each other inside the power-of-two part. */
#ifndef WEFT_COLLECTIVES_FOLD_H_
#define WEFT_COLLECTIVES_FOLD_H_

static inline int fold_pow2(int p) {
  int q = 1;
  while (q <= p / 2) q *= 2;
  return q;
}

static inline int fold_log2(int pow2) {
  int l = 0;
  while ((1 << l) < pow2) l++;
  return l;
}

/* The virtual rank of `rank`, or -1 for a rank that sits out (then its partner is rank + 1). */
static inline int fold_vrank(int rank, int rem) {
  if (rank < 2 * rem) return rank % 2 ? rank / 2 : -1;
  return rank - rem;
}

/* The real rank that plays virtual rank v. */
static inline int fold_real(int v, int rem) { return v < rem ? 2 * v + 1 : v + rem; }

/* The first of the real ranks behind virtual rank v (v = p' gives p): virtual rank v stands for
 * real ranks [fold_first(v), fold_first(v + 1)), one or two of them. */
static inline int fold_first(int v, int rem) { return v < rem ? 2 * v : v + rem; }

#endif /* WEFT_COLLECTIVES_FOLD_H_ */
