/* opts.h -- internal: kernel_bw's command line and the arithmetic of its table (plain C, tested in
 * tests/kernels/kernel_bw_opts_test.cc without a GPU). */
#ifndef WEFT_TOOLS_KERNEL_BW_OPTS_H_
#define WEFT_TOOLS_KERNEL_BW_OPTS_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  size_t minbytes;   /* -b: first buffer size (one input), bytes */
  size_t maxbytes;   /* -e: last */
  size_t stepfactor; /* -f: each size is the previous times this */
  weft_dtype_t dtype;
  weft_op_t op;
  int iters;      /* -n: timed launches per kernel and size; the median is reported */
  int warmup;     /* -w: untimed launches before them */
  int avg_nranks; /* -r: WEFT_AVG is timed as the final step, dividing by this */
} kbw_opts_t;

/* Fills *o from argv (defaults: -b 1M -e 1G -f 2 -d float -o sum -n 20 -w 5 -r 8). Returns 0, 1
 * for -h (usage printed to stdout), or -1 with a message in err. */
int kbw_parse(int argc, char **argv, kbw_opts_t *o, char *err, size_t errlen);

/* Sizes, dtypes and ops are parsed and named as weft-bench does (tools/bench: args.h, types.h). */

/* The median of v[0..n), n >= 1 (v is sorted in place): the mean of the two middle values for even
 * n. Medians, not means, so one launch delayed by the host does not move the result. */
double kbw_median(double *v, int n);

/* Bytes a kernel moves for buffers of `bytes` bytes, as the table counts them: each input read and
 * each output written once. memcpy and copy: 2 x bytes; reduce: 3 x; reduce_copy: 4 x. */
typedef enum { KBW_MEMCPY, KBW_REDUCE, KBW_REDUCE_COPY, KBW_COPY, KBW_NUM_KERNELS } kbw_kernel_t;
size_t kbw_bytes_moved(kbw_kernel_t kernel, size_t bytes);

/* GB/s (10^9 bytes per second) for `moved` bytes in `us` microseconds. */
double kbw_gbps(size_t moved, double us);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_KERNEL_BW_OPTS_H_ */
