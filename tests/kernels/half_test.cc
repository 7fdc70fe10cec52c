// half_test.cc -- kernels/half.h against the reference in ref.h: exhaustive, ties, overflow, tiny.
#include "kernels/half.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/ref.h"

namespace {

using ref::bits_float;
using ref::float_bits;

// A conversion under test and its reference, so each test below runs for both formats.
struct Codec {
  const char *name;
  ref::Format fmt;
  float (*to_float)(uint16_t);
  uint16_t (*from_float)(float);
};

// Names the format in failure messages instead of dumping the struct's bytes.
void PrintTo(const Codec &c, std::ostream *os) { *os << c.name; }

const Codec kHalfCodec = {"fp16", ref::kHalf, kern_half_to_float, kern_float_to_half};
const Codec kBf16Codec = {"bf16", ref::kBf16, kern_bf16_to_float, kern_float_to_bf16};

class HalfTest : public ::testing::TestWithParam<Codec> {};

// Compares from_float(f) with the reference for every f, reporting only the first few misses.
void ExpectFromFloatMatches(const Codec &c, const std::vector<float> &inputs) {
  int bad = 0;
  for (float f : inputs) {
    uint16_t got = c.from_float(f);
    uint16_t want = ref::encode(c.fmt, f);
    bool ok = std::isnan(f) ? ref::is_nan(c.fmt, got) && (got >> 15) == (want >> 15) : got == want;
    if (!ok && bad++ < 10) {
      ADD_FAILURE() << c.name << " from float " << std::hexfloat << f << " (bits 0x" << std::hex
                    << float_bits(f) << "): got 0x" << got << ", want 0x" << want;
    }
  }
  EXPECT_EQ(bad, 0) << "mismatches out of " << inputs.size();
}

TEST_P(HalfTest, ToFloatMatchesReferenceForAllBitPatterns) {
  const Codec &c = GetParam();
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float got = c.to_float((uint16_t)h);
    double want = ref::decode(c.fmt, (uint16_t)h);
    bool ok = std::isnan(want) ? std::isnan(got) && std::signbit(got) == std::signbit(want)
                               : (double)got == want && std::signbit(got) == std::signbit(want);
    if (!ok && bad++ < 10) {
      ADD_FAILURE() << c.name << " 0x" << std::hex << h << ": got " << std::hexfloat << got
                    << ", want " << want;
    }
  }
  EXPECT_EQ(bad, 0);
}

// Every non-NaN pattern survives pattern -> float -> pattern exactly; NaNs stay NaN with their
// sign, and quiet NaNs keep their payload.
TEST_P(HalfTest, RoundTripsAllBitPatterns) {
  const Codec &c = GetParam();
  const uint16_t quiet_bit = (uint16_t)(1u << (c.fmt.mant_bits - 1));
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    uint16_t back = c.from_float(c.to_float((uint16_t)h));
    bool ok;
    if (!ref::is_nan(c.fmt, (uint16_t)h)) {
      ok = back == h;
    } else if (h & quiet_bit) {
      ok = back == h;
    } else {
      ok = ref::is_nan(c.fmt, back) && (back >> 15) == (h >> 15);
    }
    if (!ok && bad++ < 10) {
      ADD_FAILURE() << c.name << " 0x" << std::hex << h << " came back as 0x" << back;
    }
  }
  EXPECT_EQ(bad, 0);
}

// Each representable value, the exact midpoint to its successor (a tie), and one float ulp to
// either side of that midpoint, positive and negative. Covers ties in every binade, including
// the subnormal range and the last binade before overflow.
TEST_P(HalfTest, FromFloatRoundsMidpointsToNearestEven) {
  const Codec &c = GetParam();
  std::vector<float> inputs;
  for (uint32_t h = 0; h < 0x7fff; h++) {
    if (ref::is_nan(c.fmt, (uint16_t)h)) continue;
    double lo = ref::decode(c.fmt, (uint16_t)h);
    double hi = ref::decode(c.fmt, (uint16_t)(h + 1));
    if (std::isinf(lo) || std::isnan(hi)) continue;
    if (std::isinf(hi)) hi = 2 * lo - ref::decode(c.fmt, (uint16_t)(h - 1));  // one ulp past max
    float mid = (float)((lo + hi) / 2);
    ASSERT_EQ((double)mid, (lo + hi) / 2) << "midpoint not exact in float";
    for (float f : {(float)lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      inputs.push_back(f);
      inputs.push_back(-f);
    }
  }
  ExpectFromFloatMatches(c, inputs);
}

// A sweep over the whole float bit space plus random patterns (NaNs, infs, float subnormals).
TEST_P(HalfTest, FromFloatMatchesReferenceAcrossFloatBitPatterns) {
  const Codec &c = GetParam();
  std::vector<float> inputs;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) inputs.push_back(bits_float((uint32_t)u));
  std::mt19937 rng(12345);
  for (int i = 0; i < 1000000; i++) inputs.push_back(bits_float((uint32_t)rng()));
  ExpectFromFloatMatches(c, inputs);
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfTest, ::testing::Values(kHalfCodec, kBf16Codec),
                         [](const ::testing::TestParamInfo<Codec> &info) {
                           return std::string(info.param.name);
                         });

// Hand-written expectations, so that a bug shared by kernels/half.h and ref.h still shows up.
TEST(HalfFixedTest, Fp16TiesGoToEven) {
  EXPECT_EQ(kern_float_to_half(1.0f + 0x1p-11f), 0x3c00);             // 1 + half ulp -> 1 (even)
  EXPECT_EQ(kern_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);         // 1.5 ulp -> 2 ulp (even)
  EXPECT_EQ(kern_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // just above the tie
  EXPECT_EQ(kern_float_to_half(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  EXPECT_EQ(kern_float_to_half(2049.0f), 0x6800);  // 2048 (even) rather than 2050
  EXPECT_EQ(kern_float_to_half(2051.0f), 0x6802);  // 2052 (even) rather than 2050
}

TEST(HalfFixedTest, Fp16OverflowsToInf) {
  EXPECT_EQ(kern_float_to_half(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(kern_float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(kern_float_to_half(65520.0f), 0x7c00);  // the tie goes to even, which is inf
  EXPECT_EQ(kern_float_to_half(65536.0f), 0x7c00);
  EXPECT_EQ(kern_float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(kern_float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(kern_float_to_half(FLT_MAX), 0x7c00);
  EXPECT_EQ(kern_float_to_half(INFINITY), 0x7c00);
  EXPECT_EQ(kern_float_to_half(-INFINITY), 0xfc00);
  EXPECT_EQ(kern_half_to_float(0x7c00), INFINITY);
  EXPECT_EQ(kern_half_to_float(0x7bff), 65504.0f);
}

TEST(HalfFixedTest, Fp16Subnormals) {
  EXPECT_EQ(kern_half_to_float(0x0001), 0x1p-24f);         // smallest subnormal
  EXPECT_EQ(kern_half_to_float(0x03ff), 1023 * 0x1p-24f);  // largest subnormal
  EXPECT_EQ(kern_half_to_float(0x0400), 0x1p-14f);         // smallest normal
  EXPECT_EQ(kern_half_to_float(0x8001), -0x1p-24f);
  EXPECT_EQ(kern_float_to_half(0x1p-24f), 0x0001);
  EXPECT_EQ(kern_float_to_half(1023 * 0x1p-24f), 0x03ff);
  EXPECT_EQ(kern_float_to_half(1023.5f * 0x1p-24f), 0x0400);  // tie: rounds up into the normals
  EXPECT_EQ(kern_float_to_half(0x1p-25f), 0x0000);            // tie between 0 and 1: 0 is even
  EXPECT_EQ(kern_float_to_half(0x1.000002p-25f), 0x0001);     // just above
  EXPECT_EQ(kern_float_to_half(3 * 0x1p-25f), 0x0002);        // tie between 1 and 2
  EXPECT_EQ(kern_float_to_half(1e-10f), 0x0000);
  EXPECT_EQ(kern_float_to_half(-1e-10f), 0x8000);    // signed zero
  EXPECT_EQ(kern_float_to_half(0x1p-149f), 0x0000);  // float subnormal
}

TEST(HalfFixedTest, Fp16NanStaysNan) {
  EXPECT_TRUE(ref::is_nan(ref::kHalf, kern_float_to_half(NAN)));
  EXPECT_TRUE(ref::is_nan(ref::kHalf, kern_float_to_half(-NAN)));
  // A float NaN whose payload is all below binary16's mantissa must not become inf.
  EXPECT_TRUE(ref::is_nan(ref::kHalf, kern_float_to_half(bits_float(0x7f800001))));
  EXPECT_TRUE(std::isnan(kern_half_to_float(0x7c01)));
  EXPECT_TRUE(std::isnan(kern_half_to_float(0xfe00)));
}

TEST(HalfFixedTest, Bf16TiesGoToEven) {
  EXPECT_EQ(kern_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(kern_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(kern_float_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);
  EXPECT_EQ(kern_float_to_bf16(-(1.0f + 0x1p-8f)), 0xbf80);
}

TEST(HalfFixedTest, Bf16OverflowsToInf) {
  EXPECT_EQ(kern_float_to_bf16(0x1.fep127f), 0x7f7f);  // largest finite bf16
  EXPECT_EQ(kern_float_to_bf16(FLT_MAX), 0x7f80);      // above the last tie
  EXPECT_EQ(kern_float_to_bf16(-FLT_MAX), 0xff80);
  EXPECT_EQ(kern_float_to_bf16(INFINITY), 0x7f80);
}

TEST(HalfFixedTest, Bf16Subnormals) {
  EXPECT_EQ(kern_bf16_to_float(0x0001), 0x1p-133f);
  EXPECT_EQ(kern_float_to_bf16(0x1p-133f), 0x0001);
  EXPECT_EQ(kern_float_to_bf16(0x1p-134f), 0x0000);         // tie to even
  EXPECT_EQ(kern_float_to_bf16(3 * 0x1p-134f), 0x0002);     // tie to even
  EXPECT_EQ(kern_float_to_bf16(0x1.fffffcp-127f), 0x0080);  // rounds up to the smallest normal
}

TEST(HalfFixedTest, Bf16NanStaysQuietNan) {
  EXPECT_EQ(kern_float_to_bf16(bits_float(0x7f800001)), 0x7fc0);  // truncation would give inf
  EXPECT_EQ(kern_float_to_bf16(bits_float(0xff800001)), 0xffc0);
  EXPECT_EQ(kern_float_to_bf16(bits_float(0x7fffffff)), 0x7fff);  // no carry into the sign
  EXPECT_TRUE(std::isnan(kern_bf16_to_float(0x7f81)));
}

}  // namespace
