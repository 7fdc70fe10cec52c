// bw_test.cc -- algbw and busbw as nccl-tests' PERFORMANCE.md defines them.
#include "tools/bench/bw.h"

#include <gtest/gtest.h>

namespace {

TEST(Bw, AlgBwIsBytesOverTime) {
  // 1e9 bytes in 1 s = 1 GB/s; 4 MiB in 100 us = 41.94304 GB/s.
  EXPECT_DOUBLE_EQ(bench_bw(BENCH_BROADCAST, 2, 1000000000, 1e6).algbw, 1.0);
  EXPECT_DOUBLE_EQ(bench_bw(BENCH_ALL_REDUCE, 4, 4u << 20, 100.0).algbw, 41.94304);
}

TEST(Bw, AllReduceBusFactor) {
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_REDUCE, 1), 0.0);
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_REDUCE, 2), 1.0);
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_REDUCE, 4), 1.5);
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_REDUCE, 8), 1.75);
  bench_bw_t bw = bench_bw(BENCH_ALL_REDUCE, 4, 1u << 30, 2000.0);
  EXPECT_DOUBLE_EQ(bw.busbw, 1.5 * bw.algbw);
  bw = bench_bw(BENCH_ALL_REDUCE, 13, 1000, 1.0);
  EXPECT_DOUBLE_EQ(bw.busbw, bw.algbw * 24.0 / 13.0);
}

TEST(Bw, BroadcastBusBwIsAlgBw) {
  for (int n : {1, 2, 4, 13}) {
    bench_bw_t bw = bench_bw(BENCH_BROADCAST, n, 12345678, 321.0);
    EXPECT_DOUBLE_EQ(bw.busbw, bw.algbw) << n;
  }
}

// PERFORMANCE.md's factors: all_gather and reduce_scatter (n-1)/n of algbw, which nccl-tests
// computes from the whole gathered (scattered) buffer, and so gather_perf and scatter_perf from
// the root's; broadcast, reduce, sendrecv 1; barrier moves no data.
TEST(Bw, FactorPerCollective) {
  for (int n : {1, 2, 3, 4, 8, 13}) {
    double d = n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_REDUCE, n), 2 * (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_GATHER, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_REDUCE_SCATTER, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_BROADCAST, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_REDUCE, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_SENDRECV, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_BARRIER, n), 0.0) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_GATHER, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_SCATTER, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_TO_ALL, n), (d - 1) / d) << n;
  }
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_GATHER, 1), 0.0);  // one rank: nothing crosses
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_ALL_GATHER, 0), 0.0);
  EXPECT_DOUBLE_EQ(bench_bw_bus_factor(BENCH_NUM_COLLS, 4), 0.0);
}

// An all_gather of 1 GiB total on 4 ranks in 1 s: algbw 1.073741824 GB/s, busbw 3/4 of it.
TEST(Bw, AllGatherUsesTheTotalSize) {
  bench_bw_t bw = bench_bw(BENCH_ALL_GATHER, 4, 1u << 30, 1e6);
  EXPECT_DOUBLE_EQ(bw.algbw, 1.073741824);
  EXPECT_DOUBLE_EQ(bw.busbw, 1.073741824 * 0.75);
  // gather_perf: the root's whole buffer over the time, 7/8 of it on 8 ranks.
  bw = bench_bw(BENCH_GATHER, 8, 1u << 30, 1e6);
  EXPECT_DOUBLE_EQ(bw.algbw, 1.073741824);
  EXPECT_DOUBLE_EQ(bw.busbw, 1.073741824 * 0.875);
  bw = bench_bw(BENCH_SCATTER, 2, 1u << 30, 2e6);
  EXPECT_DOUBLE_EQ(bw.algbw, 1.073741824 / 2);
  EXPECT_DOUBLE_EQ(bw.busbw, 1.073741824 / 4);
  bw = bench_bw(BENCH_BARRIER, 4, 0, 12.5);
  EXPECT_EQ(bw.algbw, 0.0);
  EXPECT_EQ(bw.busbw, 0.0);
}

TEST(Bw, ZeroTimeOrSizeGivesZero) {
  bench_bw_t bw = bench_bw(BENCH_ALL_REDUCE, 4, 4096, 0.0);
  EXPECT_EQ(bw.algbw, 0.0);
  EXPECT_EQ(bw.busbw, 0.0);
  bw = bench_bw(BENCH_ALL_REDUCE, 4, 0, 10.0);
  EXPECT_EQ(bw.algbw, 0.0);
}

}  // namespace
