// fp8_test.cc -- kernels/fp8.h against the reference in ref.h (the format definitions, ldexp and a
// nearest-value search): every bit pattern, every rounding tie, saturation, NaN, subnormals and
// e5m2 infinities.
#include "kernels/fp8.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/ref.h"

namespace {

using ref::bits_float;

// A conversion under test and the format it implements.
struct Codec {
  const char *name;
  ref::Fp8 fmt;
  float (*to_float)(uint8_t);
  uint8_t (*from_float)(float);
};

void PrintTo(const Codec &c, std::ostream *os) { *os << c.name; }

const Codec kE4m3 = {"e4m3", ref::kE4m3, kern_e4m3_to_float, kern_float_to_e4m3};
const Codec kE5m2 = {"e5m2", ref::kE5m2, kern_e5m2_to_float, kern_float_to_e5m2};

bool ref_is_nan(const Codec &c, uint8_t b) { return ref::is_nan(c.fmt, b); }
double ref_decode(const Codec &c, uint8_t b) { return ref::decode(c.fmt, b); }
uint8_t ref_encode(const Codec &c, double d) { return ref::encode(c.fmt, d); }

class Fp8Test : public ::testing::TestWithParam<Codec> {};

TEST_P(Fp8Test, DecodesAllBitPatterns) {
  const Codec &c = GetParam();
  for (int b = 0; b < 256; b++) {
    float got = c.to_float((uint8_t)b);
    double want = ref_decode(c, (uint8_t)b);
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << c.name << " 0x" << std::hex << b;
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c.name << " 0x" << std::hex << b;
    } else {
      EXPECT_EQ((double)got, want) << c.name << " 0x" << std::hex << b;
    }
  }
}

// Every pattern but a NaN comes back bit for bit; every NaN comes back as 0x7f.
TEST_P(Fp8Test, EncodeRoundTripsEveryDecodedValue) {
  const Codec &c = GetParam();
  for (int b = 0; b < 256; b++) {
    uint8_t back = c.from_float(c.to_float((uint8_t)b));
    EXPECT_EQ(back, ref_is_nan(c, (uint8_t)b) ? 0x7f : b) << c.name << " 0x" << std::hex << b;
  }
}

// Each representable value, the midpoint to the next one (a tie), a float ulp either side of the
// midpoint, both signs; past the largest finite value, the midpoint one fp8 ulp further on.
TEST_P(Fp8Test, EncodeRoundsTiesToEvenInEveryBinade) {
  const Codec &c = GetParam();
  int bad = 0;
  for (int b = 0; b < 0x7f; b++) {
    double lo = ref_decode(c, (uint8_t)b);
    double hi = ref_decode(c, (uint8_t)(b + 1));
    if (std::isnan(lo) || std::isinf(lo)) continue;
    if (std::isnan(hi) || std::isinf(hi)) hi = 2 * lo - ref_decode(c, (uint8_t)(b - 1));
    float mid = (float)((lo + hi) / 2);
    ASSERT_EQ((double)mid, (lo + hi) / 2);
    for (float f : {(float)lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      for (float s : {f, -f}) {
        uint8_t got = c.from_float(s);
        uint8_t want = ref_encode(c, s);
        if (got != want && bad++ < 10) {
          ADD_FAILURE() << c.name << " " << std::hexfloat << s << ": got 0x" << std::hex << +got
                        << ", want 0x" << +want;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// A coarse sweep of the whole float bit space plus random patterns.
TEST_P(Fp8Test, EncodeMatchesReferenceAcrossFloatBitPatterns) {
  const Codec &c = GetParam();
  std::vector<uint32_t> inputs;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) inputs.push_back((uint32_t)u);
  std::mt19937 rng(8);
  for (int i = 0; i < 100000; i++) inputs.push_back((uint32_t)rng());
  int bad = 0;
  for (uint32_t u : inputs) {
    float f = bits_float(u);
    uint8_t got = c.from_float(f);
    bool ok = got == (std::isnan(f) ? 0x7f : ref_encode(c, f));
    if (!ok && bad++ < 10) {
      ADD_FAILURE() << c.name << " bits 0x" << std::hex << u << ": got 0x" << +got;
    }
  }
  EXPECT_EQ(bad, 0) << "out of " << inputs.size();
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::Values(kE4m3, kE5m2),
                         [](const ::testing::TestParamInfo<Codec> &info) {
                           return std::string(info.param.name);
                         });

// Hand-written expectations, so that a mistake shared by fp8.h and ref.h still shows up.
TEST(Fp8FixedTest, E4m3TiesGoToEven) {
  EXPECT_EQ(kern_float_to_e4m3(1.0625f), 0x38);  // 1 + half ulp -> 1 (mantissa 000)
  EXPECT_EQ(kern_float_to_e4m3(1.1875f), 0x3a);  // 1.125 + half ulp -> 1.25 (mantissa 010)
  EXPECT_EQ(kern_float_to_e4m3(1.07f), 0x39);    // just above the tie
  EXPECT_EQ(kern_float_to_e4m3(-1.1875f), 0xba);
  EXPECT_EQ(kern_float_to_e4m3(17.0f), 0x58);  // between 16 and 18: 16 (even)
  EXPECT_EQ(kern_float_to_e4m3(19.0f), 0x5a);  // between 18 and 20: 20 (even)
}

TEST(Fp8FixedTest, E4m3Saturates) {
  EXPECT_EQ(kern_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(kern_float_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(kern_float_to_e4m3(464.0f), 0x7e);  // tie between 448 and 480: 448 is even anyway
  EXPECT_EQ(kern_float_to_e4m3(470.0f), 0x7e);  // would round to 480, which is NaN's pattern
  EXPECT_EQ(kern_float_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(kern_float_to_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(kern_float_to_e4m3(FLT_MAX), 0x7e);
  EXPECT_EQ(kern_float_to_e4m3(INFINITY), 0x7e);  // no inf in e4m3: saturates too
  EXPECT_EQ(kern_float_to_e4m3(-INFINITY), 0xfe);
}

TEST(Fp8FixedTest, E4m3NanAndSubnormals) {
  EXPECT_EQ(kern_float_to_e4m3(NAN), 0x7f);
  EXPECT_EQ(kern_float_to_e4m3(-NAN), 0x7f);  // one NaN: no sign, so no dependence on the CPU
  EXPECT_EQ(kern_float_to_e4m3(bits_float(0x7f800001)), 0x7f);  // payload below e4m3's mantissa
  EXPECT_TRUE(std::isnan(kern_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(kern_e4m3_to_float(0xff)));
  EXPECT_EQ(kern_e4m3_to_float(0x01), 0x1p-9f);         // smallest subnormal
  EXPECT_EQ(kern_e4m3_to_float(0x07), 7 * 0x1p-9f);     // largest subnormal
  EXPECT_EQ(kern_e4m3_to_float(0x08), 0x1p-6f);         // smallest normal
  EXPECT_EQ(kern_float_to_e4m3(0x1p-10f), 0x00);        // tie between 0 and 1 step: 0
  EXPECT_EQ(kern_float_to_e4m3(3 * 0x1p-10f), 0x02);    // tie between 1 and 2 steps: 2
  EXPECT_EQ(kern_float_to_e4m3(7.5f * 0x1p-9f), 0x08);  // tie: up into the normals
  EXPECT_EQ(kern_float_to_e4m3(-1e-10f), 0x80);
  EXPECT_EQ(kern_float_to_e4m3(0x1p-149f), 0x00);
}

TEST(Fp8FixedTest, E5m2TiesSaturationInfNan) {
  EXPECT_EQ(kern_float_to_e5m2(1.125f), 0x3c);  // 1 + half ulp -> 1
  EXPECT_EQ(kern_float_to_e5m2(1.375f), 0x3e);  // 1.25 + half ulp -> 1.5
  EXPECT_EQ(kern_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(kern_float_to_e5m2(61440.0f), 0x7b);  // would round to inf: saturates
  EXPECT_EQ(kern_float_to_e5m2(1e6f), 0x7b);
  EXPECT_EQ(kern_float_to_e5m2(-1e6f), 0xfb);
  EXPECT_EQ(kern_float_to_e5m2(INFINITY), 0x7c);  // an infinity stays infinite
  EXPECT_EQ(kern_float_to_e5m2(-INFINITY), 0xfc);
  EXPECT_EQ(kern_e5m2_to_float(0x7c), INFINITY);
  EXPECT_EQ(kern_e5m2_to_float(0xfc), -INFINITY);
  EXPECT_EQ(kern_float_to_e5m2(NAN), 0x7f);
  EXPECT_EQ(kern_float_to_e5m2(-NAN), 0x7f);
  EXPECT_EQ(kern_float_to_e5m2(bits_float(0x7f800001)), 0x7f);  // quiet, not inf
  EXPECT_TRUE(std::isnan(kern_e5m2_to_float(0x7d)));
  EXPECT_EQ(kern_e5m2_to_float(0x01), 0x1p-16f);
  EXPECT_EQ(kern_float_to_e5m2(0x1p-17f), 0x00);
  EXPECT_EQ(kern_float_to_e5m2(3 * 0x1p-17f), 0x02);
}

}  // namespace
