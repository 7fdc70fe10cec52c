/* bw.c -- the bandwidth formulas of nccl-tests' doc/PERFORMANCE.md. */
#include "tools/bench/bw.h"

/* algbw = size / time: what the caller sees. busbw scales it so that it can be compared with the
 * hardware's link bandwidth, whatever the number of ranks (PERFORMANCE.md):
 *
 * - all_reduce: every rank must send and receive the whole buffer's worth of data 2(n-1)/n times
 *   (a ring does n-1 reduce-scatter steps and n-1 all-gather steps of size/n each, and no
 *   algorithm can do with less), so busbw = algbw * 2(n-1)/n.
 * - broadcast: every byte must cross into each non-root rank once, and in a pipelined chain each
 *   link carries the whole buffer once, so busbw = algbw. */
double bench_bw_bus_factor(bench_coll_t coll, int nranks) {
  switch (coll) {
    case BENCH_ALL_REDUCE:
      return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
    case BENCH_BROADCAST:
      return 1.0;
  }
  return 0.0;
}

bench_bw_t bench_bw(bench_coll_t coll, int nranks, size_t bytes, double time_us) {
  bench_bw_t bw = {0.0, 0.0};
  if (time_us <= 0.0) return bw;
  bw.algbw = (double)bytes / 1.0e9 / (time_us * 1.0e-6);
  bw.busbw = bw.algbw * bench_bw_bus_factor(coll, nranks);
  return bw;
}
