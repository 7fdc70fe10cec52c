/* sizes.h -- private to weft-bench: the sequence of message sizes from -b, -e, -f and -i. */
#ifndef WEFT_TOOLS_BENCH_SIZES_H_
#define WEFT_TOOLS_BENCH_SIZES_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Walks the sizes as nccl-tests does: start at minbytes, multiply by stepfactor when it is > 1,
 * else add stepbytes, stop past maxbytes. Each size is rounded down to a multiple of eltsize
 * (count = size / eltsize). A size that rounds to 0 is skipped unless it is exactly 0 (-b 0), and
 * a size that rounds to the same value as the previous row is skipped. From 0, -f steps to 1. */
typedef struct {
  size_t next; /* next raw size to consider */
  size_t maxbytes;
  size_t stepfactor; /* > 1: multiply; else add stepbytes */
  size_t stepbytes;
  size_t eltsize;
  size_t last_row; /* rounded size of the previous row */
  int have_row;    /* whether a row was returned yet */
  int done;
} bench_sizes_t;

void bench_sizes_begin(bench_sizes_t *it, size_t minbytes, size_t maxbytes, size_t stepfactor,
                       size_t stepbytes, size_t eltsize);

/* Sets *bytes to the next row's size (a multiple of eltsize) and returns 1, or returns 0 at the
 * end. Never loops forever: a step that would not grow the size, or would overflow, ends it. */
int bench_sizes_next(bench_sizes_t *it, size_t *bytes);

/* The largest size bench_sizes_next can return: maxbytes rounded down to eltsize. */
size_t bench_sizes_max(size_t maxbytes, size_t eltsize);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_SIZES_H_ */
