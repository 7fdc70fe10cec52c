// half_test.cc -- fp16/bf16 conversions: exhaustive round trips and round-to-nearest-even ties.
#include "tools/bench/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

bool HalfIsNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool Bf16IsNan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

TEST(Half, KnownValues) {
  EXPECT_EQ(bench_half_from_float(0.0f), 0x0000);
  EXPECT_EQ(bench_half_from_float(-0.0f), 0x8000);
  EXPECT_EQ(bench_half_from_float(1.0f), 0x3c00);
  EXPECT_EQ(bench_half_from_float(-2.0f), 0xc000);
  EXPECT_EQ(bench_half_from_float(65504.0f), 0x7bff);
  EXPECT_EQ(bench_half_from_float(65519.0f), 0x7bff);
  EXPECT_EQ(bench_half_from_float(65520.0f), 0x7c00);  // tie at the top rounds to even: inf
  EXPECT_EQ(bench_half_from_float(1e9f), 0x7c00);
  EXPECT_EQ(bench_half_from_float(-INFINITY), 0xfc00);
  EXPECT_EQ(bench_half_from_float(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(bench_half_from_float(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(bench_half_from_float(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(bench_half_from_float(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to even 2
  EXPECT_EQ(bench_half_from_float(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(bench_half_from_float(2049.0f), 0x6800);  // 2048, tie to even
  EXPECT_EQ(bench_half_from_float(2051.0f), 0x6802);  // 2052, tie to even
  EXPECT_TRUE(HalfIsNan(bench_half_from_float(NAN)));
  EXPECT_EQ(bench_half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(bench_half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(bench_half_to_float(0x7c00), INFINITY);
  EXPECT_TRUE(std::isnan(bench_half_to_float(0x7e00)));
}

TEST(Half, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; h++) {
    if (HalfIsNan((uint16_t)h)) {
      EXPECT_TRUE(std::isnan(bench_half_to_float((uint16_t)h))) << h;
      EXPECT_TRUE(HalfIsNan(bench_half_from_float(bench_half_to_float((uint16_t)h)))) << h;
      continue;
    }
    ASSERT_EQ(bench_half_from_float(bench_half_to_float((uint16_t)h)), h) << std::hex << h;
  }
}

// Between two neighbouring finite halves: the midpoint goes to the even one, anything off it to
// the nearer one. Midpoints need 12 significant bits, so they are exact floats.
TEST(Half, MidpointsRoundToEven) {
  for (uint32_t h = 0; h < 0x7bff; h++) {
    for (uint32_t sign : {0u, 0x8000u}) {
      float a = bench_half_to_float((uint16_t)(h | sign));
      float b = bench_half_to_float((uint16_t)((h + 1) | sign));
      float mid = (float)(((double)a + b) / 2);  // exact: one more bit than fp16
      ASSERT_EQ(bench_half_from_float(mid), ((h & 1) ? h + 1 : h) | sign) << std::hex << h;
      ASSERT_EQ(bench_half_from_float(std::nextafter(mid, a)), h | sign) << std::hex << h;
      ASSERT_EQ(bench_half_from_float(std::nextafter(mid, b)), (h + 1) | sign) << std::hex << h;
    }
  }
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(bench_bf16_from_float(1.0f), 0x3f80);
  EXPECT_EQ(bench_bf16_from_float(-1.0f), 0xbf80);
  EXPECT_EQ(bench_bf16_from_float(257.0f), 0x4380);   // 256, tie to even
  EXPECT_EQ(bench_bf16_from_float(259.0f), 0x4382);   // 260, tie to even
  EXPECT_EQ(bench_bf16_from_float(3.4e38f), 0x7f80);  // rounds past the largest finite: inf
  EXPECT_EQ(bench_bf16_from_float(INFINITY), 0x7f80);
  EXPECT_TRUE(Bf16IsNan(bench_bf16_from_float(NAN)));
  // A NaN whose payload sits only in the low 16 bits must not turn into infinity.
  float low_nan;
  uint32_t bits = 0x7f800001;
  std::memcpy(&low_nan, &bits, sizeof low_nan);
  EXPECT_TRUE(Bf16IsNan(bench_bf16_from_float(low_nan)));
  EXPECT_EQ(Bits(bench_bf16_to_float(0x3f80)), 0x3f800000u);
}

TEST(Bf16, EveryValueRoundTripsAndMidpointsRoundToEven) {
  for (uint32_t b = 0; b <= 0xffff; b++) {
    if (Bf16IsNan((uint16_t)b)) continue;
    ASSERT_EQ(bench_bf16_from_float(bench_bf16_to_float((uint16_t)b)), b) << std::hex << b;
  }
  for (uint32_t b = 0; b < 0x7f7f; b++) {
    for (uint32_t sign : {0u, 0x8000u}) {
      float a = bench_bf16_to_float((uint16_t)(b | sign));
      float c = bench_bf16_to_float((uint16_t)((b + 1) | sign));
      float mid = (float)(((double)a + c) / 2);  // exact, and no overflow at the top
      ASSERT_EQ(bench_bf16_from_float(mid), ((b & 1) ? b + 1 : b) | sign) << std::hex << b;
      ASSERT_EQ(bench_bf16_from_float(std::nextafter(mid, a)), b | sign) << std::hex << b;
      ASSERT_EQ(bench_bf16_from_float(std::nextafter(mid, c)), (b + 1) | sign) << std::hex << b;
    }
  }
}

}  // namespace
