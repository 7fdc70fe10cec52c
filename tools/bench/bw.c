/* bw.c -- the bandwidth formulas of nccl-tests' doc/PERFORMANCE.md. */
#include "tools/bench/bw.h"

/* algbw = size / time, with nccl-tests' size column (the gathered buffer of all_gather and
 * gather, the input of reduce_scatter and scatter: shape.h): what the caller sees. busbw scales it
 * so that it can be compared with the hardware's link bandwidth, whatever the number of ranks
 * (PERFORMANCE.md):
 *
 * - all_reduce: every rank must send and receive the whole buffer's worth of data 2(n-1)/n times
 *   (a ring does n-1 reduce-scatter steps and n-1 all-gather steps of size/n each, and no
 *   algorithm can do with less), so busbw = algbw * 2(n-1)/n.
 * - all_gather, reduce_scatter: each rank must receive (or send) the n-1 parts of size/n that are
 *   not its own: busbw = algbw * (n-1)/n.
 * - gather, scatter (nccl-tests' gather_perf, scatter_perf): the root must receive (send) the n-1
 *   parts of size/n that are not its own, over its one link: busbw = algbw * (n-1)/n.
 * - alltoall (nccl-tests' alltoall_perf, size = one rank's send buffer): each rank must send
 *   the n-1 parts of size/n that are for others and receive as many: busbw = algbw * (n-1)/n.
 * - broadcast, reduce: every byte must cross into (out of) each non-root rank once, and in a
 *   pipelined chain each link carries the whole buffer once, so busbw = algbw.
 * - sendrecv: each rank sends size bytes and receives size bytes: busbw = algbw.
 * - barrier: moves no data; only its time means something (factor 0). */
double bench_bw_bus_factor(bench_coll_t coll, int nranks) {
  if (nranks <= 0) return 0.0;
  switch (coll) {
    case BENCH_ALL_REDUCE:
      return 2.0 * (nranks - 1) / nranks;
    case BENCH_ALL_GATHER:
    case BENCH_REDUCE_SCATTER:
    case BENCH_GATHER:
    case BENCH_SCATTER:
    case BENCH_ALL_TO_ALL:
      return (double)(nranks - 1) / nranks;
    case BENCH_BROADCAST:
    case BENCH_REDUCE:
    case BENCH_SENDRECV:
      return 1.0;
    case BENCH_BARRIER:
    case BENCH_NUM_COLLS:
      break;
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
