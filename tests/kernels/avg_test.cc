// avg_test.cc -- kern_reduce_avg_final and kern_scale_avg: truncation, wrapping, rounding once;
// and kern_premul, the other scaling step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/reduce.h"
#include "tests/kernels/ref.h"

namespace {

const int kRanks[] = {1, 2, 3, 5, 7, 8, 16, 100, 1000};

TEST(AvgTest, IntegerAvgTruncatesTowardZero) {
  int32_t a[] = {-7, 7, -1, -5, 5, INT32_MIN, -6};
  int32_t b[] = {0, 0, 0, -2, 2, 0, 0};
  int32_t d[7];
  kern_reduce_avg_final(d, a, b, 7, WEFT_INT32, 2);
  EXPECT_EQ(d[0], -3);  // floor would give -4
  EXPECT_EQ(d[1], 3);
  EXPECT_EQ(d[2], 0);  // not -1
  EXPECT_EQ(d[3], -3);
  EXPECT_EQ(d[4], 3);
  EXPECT_EQ(d[5], -1073741824);
  EXPECT_EQ(d[6], -3);
  kern_reduce_avg_final(d, a, b, 7, WEFT_INT32, 3);
  EXPECT_EQ(d[0], -2);  // floor would give -3
  EXPECT_EQ(d[6], -2);

  int64_t a64[] = {-9, 9}, b64[] = {0, 0}, d64[2];
  kern_reduce_avg_final(d64, a64, b64, 2, WEFT_INT64, 4);
  EXPECT_EQ(d64[0], -2);
  EXPECT_EQ(d64[1], 2);

  int8_t s8[] = {-7, -128}, o8[2];
  kern_scale_avg(o8, s8, 2, WEFT_INT8, 2);
  EXPECT_EQ(o8[0], -3);
  EXPECT_EQ(o8[1], -64);
}

// The sum wraps in the dtype first (like WEFT_SUM), then is divided.
TEST(AvgTest, IntegerAvgDividesTheWrappedSum) {
  int8_t a8[] = {100, -100}, b8[] = {100, -100}, d8[2];
  kern_reduce_avg_final(d8, a8, b8, 2, WEFT_INT8, 2);
  EXPECT_EQ(d8[0], -28);  // 200 wraps to -56
  EXPECT_EQ(d8[1], 28);   // -200 wraps to 56

  uint8_t au[] = {200}, bu[] = {100}, du[1];
  kern_reduce_avg_final(du, au, bu, 1, WEFT_UINT8, 4);
  EXPECT_EQ(du[0], 11);  // 300 wraps to 44

  int64_t a64[] = {INT64_MAX}, b64[] = {1}, d64[1];
  kern_reduce_avg_final(d64, a64, b64, 1, WEFT_INT64, 2);
  EXPECT_EQ(d64[0], -(INT64_C(1) << 62));

  uint64_t a6u[] = {UINT64_MAX}, b6u[] = {3}, d6u[1];
  kern_reduce_avg_final(d6u, a6u, b6u, 1, WEFT_UINT64, 2);
  EXPECT_EQ(d6u[0], 1u);

  uint32_t a32[] = {0xfffffffeu}, b32[] = {0}, d32[1];
  kern_reduce_avg_final(d32, a32, b32, 1, WEFT_UINT32, 2);
  EXPECT_EQ(d32[0], 0x7fffffffu);  // an unsigned division, not -2 / 2
}

// nranks larger than the dtype's range must not be narrowed into the dtype (300 as int8 is 44).
TEST(AvgTest, IntegerAvgWithMoreRanksThanTheDtypeHolds) {
  int8_t a[] = {-100}, b[] = {-20}, d[1];
  kern_reduce_avg_final(d, a, b, 1, WEFT_INT8, 300);
  EXPECT_EQ(d[0], 0);
  uint8_t ua[] = {200}, ub[] = {50}, ud[1];
  kern_reduce_avg_final(ud, ua, ub, 1, WEFT_UINT8, 300);
  EXPECT_EQ(ud[0], 0);
  kern_reduce_avg_final(ud, ua, ub, 1, WEFT_UINT8, 125);
  EXPECT_EQ(ud[0], 2);
}

TEST(AvgTest, Fp16RoundsOnceAtTheEnd) {
  // (2048 + 3) / 3 = 683.67 -> 683.5. Rounding the sum to fp16 first (2052) would give 684.
  uint16_t a[] = {0x6800, 0x7bff, 0x3c00}, b[] = {0x4200, 0x7bff, 0x4000}, d[3];
  kern_reduce_avg_final(d, a, b, 1, WEFT_FLOAT16, 3);
  EXPECT_EQ(d[0], 0x6157);
  // 65504 + 65504 overflows fp16, but the average 65504 does not.
  kern_reduce_avg_final(d, a, b, 3, WEFT_FLOAT16, 2);
  EXPECT_EQ(d[1], 0x7bff);
  EXPECT_EQ(d[2], 0x3e00);  // (1 + 2) / 2 = 1.5
  kern_reduce_avg_final(d, a, b, 3, WEFT_FLOAT16, 4);
  EXPECT_EQ(d[2], 0x3a00);  // 0.75
}

TEST(AvgTest, Bf16RoundsOnceAtTheEnd) {
  // (256 + 5) / 3 = 87 exactly. Rounding the sum to bf16 first (260) would give 86.5 (0x42ad).
  uint16_t a[] = {0x4380}, b[] = {0x40a0}, d[1];
  kern_reduce_avg_final(d, a, b, 1, WEFT_BFLOAT16, 3);
  EXPECT_EQ(d[0], 0x42ae);
}

TEST(AvgTest, FloatAvgIsATrueDivision) {
  float fa[] = {1, 3}, fb[] = {2, 0}, fd[2];
  kern_reduce_avg_final(fd, fa, fb, 2, WEFT_FLOAT32, 4);
  EXPECT_EQ(fd[0], 0.75f);
  EXPECT_EQ(fd[1], 0.75f);
  double da[] = {1}, db[] = {0}, dd[1];
  kern_reduce_avg_final(dd, da, db, 1, WEFT_FLOAT64, 3);
  EXPECT_EQ(dd[0], 1.0 / 3);
  kern_scale_avg(fd, fa, 2, WEFT_FLOAT32, 2);
  EXPECT_EQ(fd[0], 0.5f);
  EXPECT_EQ(fd[1], 1.5f);
}

// fp16/bf16 against the reference: the float sum (what the kernel adds), divided and rounded once.
// Rounding the quotient to float before fp16/bf16 changes nothing (float has >= 2p+2 bits).
void CheckSmallAvg(ref::Format fmt, weft_dtype_t dtype) {
  std::mt19937_64 rng(99);
  const size_t n = 4097;
  std::vector<uint16_t> a(n), b(n), d(n), s(n);
  for (size_t i = 0; i < n; i++) {
    do a[i] = (uint16_t)rng();
    while (ref::is_nan(fmt, a[i]));
    do b[i] = (uint16_t)rng();
    while (ref::is_nan(fmt, b[i]));
  }
  int bad = 0;
  for (int nranks : kRanks) {
    kern_reduce_avg_final(d.data(), a.data(), b.data(), n, dtype, nranks);
    kern_scale_avg(s.data(), a.data(), n, dtype, nranks);
    for (size_t i = 0; i < n; i++) {
      double sum = (float)(ref::decode(fmt, a[i]) + ref::decode(fmt, b[i]));
      uint16_t want = ref::encode(fmt, sum / nranks);
      uint16_t want_s = ref::encode(fmt, ref::decode(fmt, a[i]) / nranks);
      bool ok = ref::is_nan(fmt, want) ? ref::is_nan(fmt, d[i]) : d[i] == want;
      bool ok_s = s[i] == want_s;
      if ((!ok || !ok_s) && bad++ < 10) {
        ADD_FAILURE() << std::hex << "0x" << a[i] << " + 0x" << b[i] << " over " << std::dec
                      << nranks << ": avg_final 0x" << std::hex << d[i] << " want 0x" << want
                      << ", scale 0x" << s[i] << " want 0x" << want_s;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(AvgTest, Fp16MatchesReference) { CheckSmallAvg(ref::kHalf, WEFT_FLOAT16); }
TEST(AvgTest, Bf16MatchesReference) { CheckSmallAvg(ref::kBf16, WEFT_BFLOAT16); }

// fp8: every pair of non-NaN patterns (65536 pairs), over each rank count. The sum is taken in
// float as the kernel does; dividing and rounding once from there, in double, gives the same fp8
// result as the kernel's float quotient (float has >= 2p+2 bits for p = 4).
void CheckFp8Avg(ref::Fp8 fmt, weft_dtype_t dtype) {
  std::vector<uint8_t> a, b;
  for (int x = 0; x < 256; x++) {
    for (int y = 0; y < 256; y++) {
      if (ref::is_nan(fmt, (uint8_t)x) || ref::is_nan(fmt, (uint8_t)y)) continue;
      a.push_back((uint8_t)x);
      b.push_back((uint8_t)y);
    }
  }
  const size_t n = a.size();
  std::vector<uint8_t> d(n), s(n);
  int bad = 0;
  for (int nranks : kRanks) {
    kern_reduce_avg_final(d.data(), a.data(), b.data(), n, dtype, nranks);
    kern_scale_avg(s.data(), a.data(), n, dtype, nranks);
    for (size_t i = 0; i < n; i++) {
      double sum = (float)(ref::decode(fmt, a[i]) + ref::decode(fmt, b[i]));
      uint8_t want = ref::encode(fmt, sum / nranks);
      uint8_t want_s = ref::encode(fmt, ref::decode(fmt, a[i]) / nranks);
      bool ok = ref::is_nan(fmt, want) ? ref::is_nan(fmt, d[i]) : d[i] == want;
      if ((!ok || s[i] != want_s) && bad++ < 10) {
        ADD_FAILURE() << std::hex << "0x" << +a[i] << " + 0x" << +b[i] << " over " << std::dec
                      << nranks << ": avg_final 0x" << std::hex << +d[i] << " want 0x" << +want
                      << ", scale 0x" << +s[i] << " want 0x" << +want_s;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(AvgTest, Fp8E4m3MatchesReference) { CheckFp8Avg(ref::kE4m3, WEFT_FLOAT8_E4M3); }
TEST(AvgTest, Fp8E5m2MatchesReference) { CheckFp8Avg(ref::kE5m2, WEFT_FLOAT8_E5M2); }

// Saturation happens on the quotient, not the sum: 448 + 448 over 2 is 448 in e4m3 although the
// sum is out of range, and the same for 57344 in e5m2.
TEST(AvgTest, Fp8SumBeyondRangeAveragesBack) {
  uint8_t a[] = {0x7e, 0xfe}, b[] = {0x7e, 0xfe}, d[2];
  kern_reduce_avg_final(d, a, b, 2, WEFT_FLOAT8_E4M3, 2);
  EXPECT_EQ(d[0], 0x7e);
  EXPECT_EQ(d[1], 0xfe);
  uint8_t c[] = {0x7b}, e[1];
  kern_reduce_avg_final(e, c, c, 1, WEFT_FLOAT8_E5M2, 2);
  EXPECT_EQ(e[0], 0x7b);
  kern_reduce_avg_final(e, c, c, 1, WEFT_FLOAT8_E5M2, 4);  // 28672 = 1.75 * 2^14
  EXPECT_EQ(e[0], 0x77);
}

TEST(AvgTest, Float32MatchesReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  const size_t n = 1000;
  std::vector<float> a(n), b(n), d(n);
  for (size_t i = 0; i < n; i++) a[i] = dist(rng), b[i] = dist(rng);
  for (int nranks : kRanks) {
    kern_reduce_avg_final(d.data(), a.data(), b.data(), n, WEFT_FLOAT32, nranks);
    for (size_t i = 0; i < n; i++) {
      float sum = (float)((double)a[i] + b[i]);
      ASSERT_EQ(d[i], (float)((double)sum / nranks)) << a[i] << " + " << b[i] << " / " << nranks;
    }
  }
}

// In place on a (the way the all-reduce uses it) over a length with a vector tail.
TEST(AvgTest, InPlace) {
  const size_t n = 33;
  std::vector<int32_t> a(n), b(n, 1);
  for (size_t i = 0; i < n; i++) a[i] = (int32_t)i - 16;
  kern_reduce_avg_final(a.data(), a.data(), b.data(), n, WEFT_INT32, 2);
  for (size_t i = 0; i < n; i++) EXPECT_EQ(a[i], ((int32_t)i - 15) / 2) << i;

  std::vector<uint16_t> h(n, 0x4200), one(n, 0x3c00);  // 3 and 1
  kern_reduce_avg_final(h.data(), h.data(), one.data(), n, WEFT_FLOAT16, 2);
  for (size_t i = 0; i < n; i++) EXPECT_EQ(h[i], 0x4000) << i;  // 2
  kern_scale_avg(h.data(), h.data(), n, WEFT_FLOAT16, 4);
  for (size_t i = 0; i < n; i++) EXPECT_EQ(h[i], 0x3800) << i;  // 0.5
}

// World size 1: scaling by 1 returns every (non-NaN) value bit for bit, in every dtype.
TEST(AvgTest, ScaleByOneIsIdentity) {
  const size_t kSize[WEFT_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  std::mt19937_64 rng(3);
  for (int dt = 0; dt < WEFT_NUM_DTYPES; dt++) {
    std::vector<uint64_t> src(65), dst(65);
    // Clear exponent top bits: no NaN in any float dtype (bytes 0x3f/0xbf have a 0 in fp8's too).
    for (auto &v : src) v = rng() & 0x3fbf3fbf3fbf3fbfull;
    kern_scale_avg(dst.data(), src.data(), 65 * 8 / kSize[dt], (weft_dtype_t)dt, 1);
    EXPECT_EQ(src, dst) << "dtype " << dt;
  }
}

TEST(AvgTest, UnknownDtypeIsANoOp) {
  int32_t a[] = {4}, b[] = {6}, d[] = {-1};
  kern_reduce_avg_final(d, a, b, 1, (weft_dtype_t)99, 2);
  kern_scale_avg(d, a, 1, (weft_dtype_t)99, 2);
  EXPECT_EQ(d[0], -1);
}

// kern_premul (WEFT_PREMUL_SUM's scaling): integers wrap like WEFT_PROD; fp16 and bf16 multiply
// in float and round once (checked against ref.h's independent encoder); in place works.
TEST(PremulTest, IntegersWrapAndFloatsRoundOnce) {
  uint8_t u8[] = {3, 255, 0}, f8 = 200, o8[3];
  kern_premul(o8, u8, 3, WEFT_UINT8, &f8);
  EXPECT_EQ(o8[0], (uint8_t)600);
  EXPECT_EQ(o8[1], (uint8_t)(255 * 200));
  EXPECT_EQ(o8[2], 0);
  int32_t i32[] = {-7, INT32_MAX}, f32i = -3;
  kern_premul(i32, i32, 2, WEFT_INT32, &f32i);  // in place
  EXPECT_EQ(i32[0], 21);
  EXPECT_EQ(i32[1], (int32_t)((uint32_t)INT32_MAX * (uint32_t)-3));
  int64_t i64[] = {1LL << 40}, f64i = (1LL << 30) + 1, o64[1];
  kern_premul(o64, i64, 1, WEFT_INT64, &f64i);
  EXPECT_EQ(o64[0], 1LL << 40);  // 2^70 + 2^40 wraps to 2^40

  double d[] = {0.1, -3}, fd = 0.3, od[2];
  kern_premul(od, d, 2, WEFT_FLOAT64, &fd);
  EXPECT_EQ(od[0], 0.1 * 0.3);
  EXPECT_EQ(od[1], -3 * 0.3);

  for (float x : {1.0f, 0.1f, 3.14159f, -65504.0f, 1e-5f})
    for (float f : {0.5f, 0.3f, 1.0f / 3, 7.0f}) {
      uint16_t hx = ref::encode(ref::kHalf, x), hf = ref::encode(ref::kHalf, f), ho;
      kern_premul(&ho, &hx, 1, WEFT_FLOAT16, &hf);
      double prod = (double)(float)ref::decode(ref::kHalf, hx) * (float)ref::decode(ref::kHalf, hf);
      EXPECT_EQ(ho, ref::encode(ref::kHalf, (float)prod)) << x << " * " << f;
      uint16_t bx = ref::encode(ref::kBf16, x), bf = ref::encode(ref::kBf16, f), bo;
      kern_premul(&bo, &bx, 1, WEFT_BFLOAT16, &bf);
      prod = (double)(float)ref::decode(ref::kBf16, bx) * (float)ref::decode(ref::kBf16, bf);
      EXPECT_EQ(bo, ref::encode(ref::kBf16, (float)prod)) << x << " * " << f;
    }
}

}  // namespace
