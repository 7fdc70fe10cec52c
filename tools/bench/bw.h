/* bw.h -- private to weft-bench: algorithm and bus bandwidth, as nccl-tests reports them. */
#ifndef WEFT_TOOLS_BENCH_BW_H_
#define WEFT_TOOLS_BENCH_BW_H_

#include <stddef.h>

#include "tools/bench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  double algbw; /* GB/s (10^9 bytes per second) */
  double busbw; /* GB/s */
} bench_bw_t;

/* Bandwidths of moving `bytes` (the size column: shape.h) in `time_us` microseconds on `nranks`
 * ranks. A time <= 0 gives 0, never infinity. */
bench_bw_t bench_bw(bench_coll_t coll, int nranks, size_t bytes, double time_us);

/* The factor busbw / algbw. */
double bench_bw_bus_factor(bench_coll_t coll, int nranks);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_BW_H_ */
