/* pattern.h -- private to weft-bench: input data whose reduction is exact in any order. */
#ifndef WEFT_TOOLS_BENCH_PATTERN_H_
#define WEFT_TOOLS_BENCH_PATTERN_H_

#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"
#include "tools/bench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Input element `index` of rank `rank` is an integer chosen so that every partial result of the
 * reduction, in any order and association, is exactly representable in the dtype (fp16/bf16/fp8
 * rounding at every step included). So the result has one right value, computed here in closed
 * form, and an element is either right or wrong: no tolerance.
 *
 * - sum (and avg on integers): x = a(i) + ((rank + i) mod P), |x| <= L / nranks, where L is the
 *   largest integer up to which the dtype is exact (127 for int8, 2048 for fp16, 256 for bf16,
 *   16 for fp8 e4m3, 8 for e5m2, 2^24 for float, ...). avg on integers is sum / nranks
 *   truncated toward zero, as weft.h says.
 * - avg on floats: x = a(i) +- k, the +k and -k of rank pairs cancelling, so sum = nranks * a(i)
 *   and the true division is exact; in an odd world the last three ranks add +k1, +k2 and
 *   -(k1 + k2) instead, so that the last rank's part is not always a(i) alone (with fp8's tiny
 *   exact range a(i) is often 0 and a missing last rank would not show).
 * - sum and avg with more ranks than L (fp8 e5m2, L = 8, with 13 ranks): only L ranks, rotating
 *   with the index, give a unit to each element, 1 for sum, +1 and -1 in turn for avg on floats
 *   (whose mean is then 0); the other ranks give 0.
 * - prod: x in {1, 2} (and -1, -2 for signed dtypes) with at most as many 2s as the result can
 *   hold as a power of two (2^6 for int8, 2^15 for fp16).
 * - min, max: x = lo + ((h(i) + ((rank + i) mod nranks)) mod span) over the dtype's exact range.
 * - broadcast, all_gather, sendrecv, gather, scatter (data that only moves): the same values as
 *   min/max, whatever the op; the result is the source rank's data.
 *
 * The index is global across ranks where weft.h's layout splits a buffer: reduce_scatter's
 * inputs are indexed 0 .. n*count-1 and rank r's output holds the results of r*count ...;
 * all_gather's gathered buffer is one sequence (rank 0's inputs at indices 0 .. n*count-1), of
 * which rank r contributes r*count ...; gather's root receives the same sequence. Scatter's root
 * sends its own inputs 0 .. n*count-1 and rank r must receive r*count .... A block at the wrong
 * place therefore shows.
 */
typedef struct {
  bench_coll_t coll;
  weft_dtype_t dtype;
  weft_op_t op;
  int nranks;
  int root;
  int mode;         /* which of the shapes above */
  int moves;        /* broadcast, all_gather, sendrecv, gather, scatter: the output is some
                     * rank's input */
  int is_signed;    /* negative values allowed */
  int64_t bound;    /* sum/avg: the largest |x| of one rank */
  int64_t period;   /* sum: P = min(nranks, bound + 1) */
  int64_t rank_sum; /* sum: what the (rank + index) mod P parts add up to */
  int64_t units;    /* sum/avg with bound 0: how many ranks give a unit to each element */
  int pow_max;      /* prod: the most factors of 2 */
  int64_t lo;       /* min/max/broadcast: the smallest value */
  uint64_t span;    /* min/max/broadcast: how many values from lo on */
} bench_pattern_t;

void bench_pattern_init(bench_pattern_t *p, bench_coll_t coll, weft_dtype_t dtype, weft_op_t op,
                        int nranks, int root);

/* ---- Element by element, over the global index (all_reduce-shaped: one buffer per rank). */

/* Rank `rank`'s input element `index`. */
int64_t bench_pattern_input(const bench_pattern_t *p, int rank, uint64_t index);

/* The right result for element `index`. */
int64_t bench_pattern_expected(const bench_pattern_t *p, uint64_t index);

/* Writes rank `rank`'s inputs 0..count-1 into buf. */
void bench_pattern_fill(const bench_pattern_t *p, int rank, void *buf, size_t count);

/* Writes values that differ from every expected result, so unwritten elements count as wrong. */
void bench_pattern_poison(const bench_pattern_t *p, void *buf, size_t count);

/* How many of the count elements in buf differ from the expected results. */
size_t bench_pattern_check(const bench_pattern_t *p, const void *buf, size_t count);

/* ---- One rank's buffers of one call, in weft.h's layout for p's collective. `count` is weft's
 * count argument (per rank: all_gather's and gather's sendcount, reduce_scatter's and scatter's
 * recvcount). */

/* Elements in rank's send buffer (n*count for reduce_scatter and scatter's root; 0 for barrier
 * and for scatter on a rank other than the root, whose send buffer weft does not read) and in
 * its receive buffer (n*count for all_gather and gather's root; 0 for barrier and for reduce and
 * gather on a rank other than the root: nothing to check there). */
size_t bench_pattern_send_count(const bench_pattern_t *p, int rank, size_t count);
size_t bench_pattern_recv_count(const bench_pattern_t *p, int rank, size_t count);

/* Writes rank's inputs into its send buffer. */
void bench_pattern_fill_send(const bench_pattern_t *p, int rank, void *buf, size_t count);

/* What rank's receive buffer element i must hold once the call is done. */
int64_t bench_pattern_expected_recv(const bench_pattern_t *p, int rank, size_t count, size_t i);

/* Makes every element of rank's receive buffer wrong; counts its wrong elements. */
void bench_pattern_poison_recv(const bench_pattern_t *p, int rank, void *buf, size_t count);
size_t bench_pattern_check_recv(const bench_pattern_t *p, int rank, const void *buf, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_PATTERN_H_ */
