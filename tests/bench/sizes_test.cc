// sizes_test.cc -- the size sequence for -f (multiply) and -i (add), rounded to the element size.
#include "tools/bench/sizes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

std::vector<size_t> Sizes(size_t min, size_t max, size_t factor, size_t step, size_t elt) {
  bench_sizes_t it;
  bench_sizes_begin(&it, min, max, factor, step, elt);
  std::vector<size_t> out;
  size_t bytes;
  while (bench_sizes_next(&it, &bytes)) {
    out.push_back(bytes);
    if (out.size() > 10000) break;  // a runaway sequence fails below instead of hanging
  }
  return out;
}

using V = std::vector<size_t>;

TEST(Sizes, Factor) {
  EXPECT_EQ(Sizes(4096, 65536, 2, 0, 4), (V{4096, 8192, 16384, 32768, 65536}));
  EXPECT_EQ(Sizes(8, 1000, 4, 0, 1), (V{8, 32, 128, 512}));
  EXPECT_EQ(Sizes(1024, 1024, 2, 0, 4), (V{1024}));
}

TEST(Sizes, FactorWinsOverStepBytes) { EXPECT_EQ(Sizes(1, 8, 2, 3, 1), (V{1, 2, 4, 8})); }

TEST(Sizes, StepBytes) {
  EXPECT_EQ(Sizes(1024, 4096, 0, 1024, 4), (V{1024, 2048, 3072, 4096}));
  EXPECT_EQ(Sizes(0, 10, 0, 4, 1), (V{0, 4, 8}));
  EXPECT_EQ(Sizes(1 << 20, 1 << 20, 0, 0, 4), (V{1 << 20}));  // -i 0 is fine when -b == -e
}

TEST(Sizes, RoundedDownToElementSize) {
  EXPECT_EQ(Sizes(10, 100, 2, 0, 4), (V{8, 20, 40, 80}));
  EXPECT_EQ(Sizes(1000, 1000, 0, 1, 8), (V{1000}));
  EXPECT_EQ(Sizes(1001, 1001, 0, 1, 8), (V{1000}));
}

TEST(Sizes, ZeroCountSkippedUnlessMinIsZero) {
  EXPECT_EQ(Sizes(1, 16, 2, 0, 8), (V{8, 16}));     // 1, 2, 4 bytes hold no double
  EXPECT_EQ(Sizes(0, 16, 2, 0, 8), (V{0, 8, 16}));  // -b 0: one zero row, then 1, 2, 4, 8, 16
  EXPECT_EQ(Sizes(0, 0, 2, 0, 4), (V{0}));
  EXPECT_EQ(Sizes(3, 3, 2, 0, 4), (V{}));
}

TEST(Sizes, DuplicatesAfterRoundingSkipped) {
  EXPECT_EQ(Sizes(4, 16, 0, 1, 4), (V{4, 8, 12, 16}));
  EXPECT_EQ(Sizes(8, 24, 0, 3, 8), (V{8, 16}));  // 8 11 14 17 20 23 -> 8 8 8 16 16 16
}

TEST(Sizes, StopsOnOverflowAndEmptyRanges) {
  size_t top = SIZE_MAX;
  std::vector<size_t> v = Sizes(top / 2 + 1, top, 2, 0, 1);
  EXPECT_EQ(v, (V{top / 2 + 1}));
  v = Sizes(top - 1, top, 0, 5, 1);
  EXPECT_EQ(v, (V{top - 1}));
  EXPECT_EQ(Sizes(16, 8, 2, 0, 1), (V{}));
  EXPECT_EQ(Sizes(0, 8, 0, 0, 1), (V{0}));  // no progress possible: one row, not a hang
}

TEST(Sizes, Max) {
  EXPECT_EQ(bench_sizes_max(100, 8), 96u);
  EXPECT_EQ(bench_sizes_max(256u << 20, 2), 256u << 20);
  EXPECT_EQ(bench_sizes_max(3, 4), 0u);
}

}  // namespace
