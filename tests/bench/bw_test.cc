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

TEST(Bw, ZeroTimeOrSizeGivesZero) {
  bench_bw_t bw = bench_bw(BENCH_ALL_REDUCE, 4, 4096, 0.0);
  EXPECT_EQ(bw.algbw, 0.0);
  EXPECT_EQ(bw.busbw, 0.0);
  bw = bench_bw(BENCH_ALL_REDUCE, 4, 0, 10.0);
  EXPECT_EQ(bw.algbw, 0.0);
}

}  // namespace
