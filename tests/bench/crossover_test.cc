// crossover_test.cc -- --tune's crossover rows: the fastest algorithm, the model's agreement, and
// the summary of how much its misses cost.
#include "tools/bench/crossover.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(Crossover, FastestSkipsUnmeasuredAndKeepsTheFirstOnTies) {
  bench_algo_time_t t[] = {
      {"ring", 50.0}, {"tree", -1.0}, {"recursive_doubling", 20.0}, {"rabenseifner", 20.0}};
  EXPECT_EQ(bench_fastest(t, 4), 2);
  EXPECT_EQ(bench_fastest(t, 2), 0);
  bench_algo_time_t none[] = {{"ring", -1.0}};
  EXPECT_EQ(bench_fastest(none, 1), -1);
  EXPECT_EQ(bench_fastest(t, 0), -1);
}

TEST(Crossover, RowAndStats) {
  bench_algo_time_t t[] = {{"ring", 400.0}, {"tree", 100.0}};
  bench_crossover_stats_t stats = {0, 0, 0.0};
  char buf[512];
  bench_crossover_row(buf, sizeof buf, "all_reduce", 4, 4096, "ring", t, 2, &stats);
  EXPECT_EQ(std::string(buf),
            "      all_reduce       4          4096                tree                ring     no "
            " ring 400.0 tree 100.0\n");
  EXPECT_EQ(stats.rows, 1);
  EXPECT_EQ(stats.agree, 0);
  EXPECT_DOUBLE_EQ(stats.excess, 3.0);  // the pick took 4x the fastest
  bench_crossover_row(buf, sizeof buf, "all_reduce", 4, 1u << 26, "tree", t, 2, &stats);
  EXPECT_NE(std::string(buf).find("  yes "), std::string::npos);
  EXPECT_EQ(stats.rows, 2);
  EXPECT_EQ(stats.agree, 1);
  bench_crossover_summary(buf, sizeof buf, &stats);
  EXPECT_STREQ(buf,
               "# The cost model picked the fastest algorithm in 1 of 2 rows; in the other 1 its "
               "pick took 300% longer on average.\n");
}

TEST(Crossover, AllAgreeAndNoPick) {
  bench_algo_time_t t[] = {{"ring", 10.0}};
  bench_crossover_stats_t stats = {0, 0, 0.0};
  char buf[512];
  bench_crossover_row(buf, sizeof buf, "barrier", 2, 0, "ring", t, 1, &stats);
  bench_crossover_row(buf, sizeof buf, "reduce", 2, 64, nullptr, t, 1, &stats);
  EXPECT_NE(std::string(buf).find("                   -     no "), std::string::npos) << buf;
  EXPECT_EQ(stats.rows, 1);  // a row without a pick does not count
  bench_crossover_summary(buf, sizeof buf, &stats);
  EXPECT_STREQ(buf, "# The cost model picked the fastest algorithm in all 1 rows.\n");
}

TEST(Crossover, HeaderLinesUpWithRows) {
  char header[512], row[512];
  bench_crossover_header(header, sizeof header);
  bench_algo_time_t t[] = {{"ring", 10.0}};
  bench_crossover_row(row, sizeof row, "reduce_scatter", 16, 123456789, "ring", t, 1, nullptr);
  std::string h(header), r(row);
  // The columns up to "agree" end at the same place.
  EXPECT_EQ(h.find("agree") + 5, r.find("yes") + 3) << h << r;
}

}  // namespace
