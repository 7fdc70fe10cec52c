// reduce_test.cc -- every dtype x op loop in kernels/reduce.c against a reference computed here.
#include "kernels/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "tests/kernels/ref.h"

namespace {

// Sizes around the vector widths (16 bytes = 2..16 elements, plus gcc's 8-byte epilogue loops) so
// that every main loop and tail runs.
const size_t kSizes[] = {0, 1, 7, 33, 1000, 4097};

enum Placement { kOutOfPlace, kInPlaceA, kInPlaceB };

// The reference result of one element, computed the obvious way in a wider type.
template <typename T>
T IntRef(weft_op_t op, T x, T y) {
  // Exact in 128 bits (also uint64 * uint64), then truncated to T: that is what wrapping means.
  using Wide =
      typename std::conditional<std::is_signed<T>::value, __int128, unsigned __int128>::type;
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return (T)((Wide)x + (Wide)y);
    case WEFT_PROD:
      return (T)((Wide)x * (Wide)y);
    case WEFT_MIN:
      return std::min(x, y);
    case WEFT_MAX:
      return std::max(x, y);
    default:
      return 0;
  }
}

// float: double holds the exact sum or product of two floats, so one rounding to float gives the
// correctly rounded result that float hardware must produce.
template <typename T>
T FloatRef(weft_op_t op, T x, T y) {
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return (T)((double)x + (double)y);
    case WEFT_PROD:
      return (T)((double)x * (double)y);
    case WEFT_MIN:
      return std::min(x, y);
    case WEFT_MAX:
      return std::max(x, y);
    default:
      return 0;
  }
}

// fp16/bf16: decode to double, operate, round once. The kernel rounds to float first; that double
// rounding is harmless because float has more than 2p+2 bits for p = 11 (fp16) and 8 (bf16).
uint16_t SmallRef(ref::Format fmt, weft_op_t op, uint16_t x, uint16_t y) {
  double dx = ref::decode(fmt, x), dy = ref::decode(fmt, y);
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return ref::encode(fmt, dx + dy);
    case WEFT_PROD:
      return ref::encode(fmt, dx * dy);
    case WEFT_MIN:
      return dy < dx ? y : x;
    case WEFT_MAX:
      return dy > dx ? y : x;
    default:
      return 0;
  }
}

// Whether `got` is acceptable for `want`: bit-exact, except that any NaN matches any NaN and that
// min/max may pick either zero of +0/-0 (which one is not part of the contract).
bool SameFloat(weft_op_t op, double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  if (op == WEFT_MIN || op == WEFT_MAX) return got == want;
  return got == want && std::signbit(got) == std::signbit(want);
}

// Random inputs: raw bit patterns (every exponent, subnormals, infinities, wrapping integers)
// alternating with small ordinary values, never NaN (NaN results are covered by SameFloat).
template <typename T>
T RandomInt(std::mt19937_64 &rng, size_t i) {
  return (i % 2) ? (T)rng() : (T)((int64_t)(rng() % 201) - 100);
}

template <typename T>
T RandomFloat(std::mt19937_64 &rng, size_t i) {
  for (;;) {
    T v;
    if (i % 2) {
      uint64_t bits = rng();
      std::memcpy(&v, &bits, sizeof v);
    } else {
      v = (T)((double)((int64_t)(rng() % 20001) - 10000) / 64);
    }
    if (!std::isnan(v)) return v;
  }
}

// fp8: the same, on 8 bits. Both inputs exact in double, the double sum or product exact too
// (at most 4 + 33 bits), so one rounding gives the kernel's float-then-fp8 result (float has
// >= 2p+2 bits for p = 4). Encode saturates as the kernels do.
uint8_t Fp8Ref(ref::Fp8 fmt, weft_op_t op, uint8_t x, uint8_t y) {
  double dx = ref::decode(fmt, x), dy = ref::decode(fmt, y);
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return ref::encode(fmt, dx + dy);
    case WEFT_PROD:
      return ref::encode(fmt, dx * dy);
    case WEFT_MIN:
      return dy < dx ? y : x;
    case WEFT_MAX:
      return dy > dx ? y : x;
    default:
      return 0;
  }
}

uint8_t RandomFp8(ref::Fp8 fmt, std::mt19937_64 &rng, size_t i) {
  for (;;) {
    uint8_t v = (i % 2) ? (uint8_t)rng() : ref::encode(fmt, (double)(rng() % 201) / 8 - 12.5);
    if (!ref::is_nan(fmt, v)) return v;
  }
}

uint16_t RandomSmall(ref::Format fmt, std::mt19937_64 &rng, size_t i) {
  for (;;) {
    uint16_t v = (i % 2) ? (uint16_t)rng() : ref::encode(fmt, (double)(rng() % 2001) / 16 - 62.5);
    if (!ref::is_nan(fmt, v)) return v;
  }
}

// The instruction set's loop is checked on its own (skipped where this CPU has not got it).
using Param = std::tuple<weft_dtype_t, weft_op_t, size_t, Placement, kern_isa_t>;

class ReduceTest : public ::testing::TestWithParam<Param> {
 protected:
  // Runs the kernel on a, b as the parameters ask and checks every element with `same`, plus a
  // guard element past the end that must stay untouched.
  template <typename T, typename Gen, typename Ref, typename Same>
  void Check(Gen gen, Ref reference, Same same) {
    weft_dtype_t dtype = std::get<0>(GetParam());
    weft_op_t op = std::get<1>(GetParam());
    size_t n = std::get<2>(GetParam());
    Placement placement = std::get<3>(GetParam());
    kern_isa_t isa = std::get<4>(GetParam());
    kern_reduce_fn fn = kern_reduce_lookup_isa(isa, dtype, op);
    if (!fn && isa != KERN_ISA_BASE) GTEST_SKIP() << "this CPU has no " << kern_isa_name(isa);
    ASSERT_NE(fn, nullptr);
    std::mt19937_64 rng(n * 131 + (size_t)dtype * 7 + (size_t)op);

    std::vector<T> a(n + 1), b(n + 1), want(n);
    for (size_t i = 0; i <= n; i++) a[i] = gen(rng, i);
    for (size_t i = 0; i <= n; i++) b[i] = gen(rng, i + 1);
    for (size_t i = 0; i < n; i++) want[i] = reference(op, a[i], b[i]);

    // In place, dst is the very buffer the kernel reads as a (or b); a and b keep the originals.
    std::vector<T> out(n + 1);
    if (placement == kInPlaceA) {
      out = a;
    } else if (placement == kInPlaceB) {
      out = b;
    } else {
      for (size_t i = 0; i <= n; i++) out[i] = gen(rng, i);
    }
    const T guard = out[n];
    T *dst = out.data();
    const T *pa = placement == kInPlaceA ? dst : a.data();
    const T *pb = placement == kInPlaceB ? dst : b.data();

    fn(dst, pa, pb, n);

    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      if (!same(op, out[i], want[i]) && bad++ < 5) {
        ADD_FAILURE() << "element " << i << ": " << +a[i] << " op " << +b[i] << " gave " << +out[i]
                      << ", want " << +want[i];
      }
    }
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(std::memcmp(&out[n], &guard, sizeof guard) == 0) << "wrote past element n-1";
  }

  template <typename T>
  void CheckInt() {
    Check<T>(RandomInt<T>, IntRef<T>, [](weft_op_t, T got, T want) { return got == want; });
  }

  template <typename T>
  void CheckFloat() {
    Check<T>(RandomFloat<T>, FloatRef<T>,
             [](weft_op_t op, T got, T want) { return SameFloat(op, got, want); });
  }

  void CheckSmall(ref::Format fmt) {
    Check<uint16_t>([fmt](std::mt19937_64 &rng, size_t i) { return RandomSmall(fmt, rng, i); },
                    [fmt](weft_op_t op, uint16_t x, uint16_t y) { return SmallRef(fmt, op, x, y); },
                    [fmt](weft_op_t op, uint16_t got, uint16_t want) {
                      return SameFloat(op, ref::decode(fmt, got), ref::decode(fmt, want));
                    });
  }

  void CheckFp8(ref::Fp8 fmt) {
    Check<uint8_t>([fmt](std::mt19937_64 &rng, size_t i) { return RandomFp8(fmt, rng, i); },
                   [fmt](weft_op_t op, uint8_t x, uint8_t y) { return Fp8Ref(fmt, op, x, y); },
                   [fmt](weft_op_t op, uint8_t got, uint8_t want) {
                     return SameFloat(op, ref::decode(fmt, got), ref::decode(fmt, want));
                   });
  }
};

TEST_P(ReduceTest, MatchesReference) {
  switch (std::get<0>(GetParam())) {
    case WEFT_INT8:
      return CheckInt<int8_t>();
    case WEFT_UINT8:
      return CheckInt<uint8_t>();
    case WEFT_INT32:
      return CheckInt<int32_t>();
    case WEFT_UINT32:
      return CheckInt<uint32_t>();
    case WEFT_INT64:
      return CheckInt<int64_t>();
    case WEFT_UINT64:
      return CheckInt<uint64_t>();
    case WEFT_FLOAT16:
      return CheckSmall(ref::kHalf);
    case WEFT_BFLOAT16:
      return CheckSmall(ref::kBf16);
    case WEFT_FLOAT32:
      return CheckFloat<float>();
    case WEFT_FLOAT64:
      return CheckFloat<double>();
    case WEFT_FLOAT8_E4M3:
      return CheckFp8(ref::kE4m3);
    case WEFT_FLOAT8_E5M2:
      return CheckFp8(ref::kE5m2);
    default:
      FAIL() << "dtype without a test";
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param> &info) {
  static const char *const dtypes[] = {"int8",    "uint8",   "int32",       "uint32",
                                       "int64",   "uint64",  "float16",     "bfloat16",
                                       "float32", "float64", "float8_e4m3", "float8_e5m2"};
  static const char *const ops[] = {"sum", "prod", "min", "max", "avg"};
  static const char *const places[] = {"out", "inplace_a", "inplace_b"};
  return std::string(dtypes[std::get<0>(info.param)]) + "_" + ops[std::get<1>(info.param)] + "_n" +
         std::to_string(std::get<2>(info.param)) + "_" + places[std::get<3>(info.param)] + "_" +
         kern_isa_name(std::get<4>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypesOps, ReduceTest,
    ::testing::Combine(::testing::Values(WEFT_INT8, WEFT_UINT8, WEFT_INT32, WEFT_UINT32, WEFT_INT64,
                                         WEFT_UINT64, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
                                         WEFT_FLOAT64, WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2),
                       ::testing::Values(WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG),
                       ::testing::ValuesIn(kSizes),
                       ::testing::Values(kOutOfPlace, kInPlaceA, kInPlaceB),
                       ::testing::Values(KERN_ISA_BASE, KERN_ISA_AVX2)),
    ParamName);

// A few results written out by hand, so that a reference that shares a mistake with the kernels
// (say, both saturating) still fails.
TEST(ReduceFixedTest, IntegersWrap) {
  int8_t a8[] = {127, -128, 100, -3}, b8[] = {1, -1, 100, 5}, d8[4];
  ASSERT_EQ(kern_reduce(d8, a8, b8, 4, WEFT_INT8, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(d8[0], -128);
  EXPECT_EQ(d8[1], 127);
  EXPECT_EQ(d8[2], -56);
  EXPECT_EQ(d8[3], 2);
  ASSERT_EQ(kern_reduce(d8, a8, b8, 4, WEFT_INT8, WEFT_PROD), WEFT_SUCCESS);
  EXPECT_EQ(d8[0], 127);
  EXPECT_EQ(d8[1], -128);  // -128 * -1 = 128 wraps
  EXPECT_EQ(d8[2], 16);    // 10000 = 39 * 256 + 16
  EXPECT_EQ(d8[3], -15);

  int64_t a64[] = {INT64_MAX, INT64_MIN, 1LL << 32}, b64[] = {1, -1, 1LL << 32}, d64[3];
  ASSERT_EQ(kern_reduce(d64, a64, b64, 3, WEFT_INT64, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(d64[0], INT64_MIN);
  EXPECT_EQ(d64[1], INT64_MAX);
  ASSERT_EQ(kern_reduce(d64, a64, b64, 3, WEFT_INT64, WEFT_PROD), WEFT_SUCCESS);
  EXPECT_EQ(d64[2], 0);  // 2^64 wraps to 0

  uint32_t au[] = {0xffffffffu, 7}, bu[] = {2, 0xfffffff0u}, du[2];
  ASSERT_EQ(kern_reduce(du, au, bu, 2, WEFT_UINT32, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(du[0], 1u);
  EXPECT_EQ(du[1], 0xfffffff7u);
  ASSERT_EQ(kern_reduce(du, au, bu, 2, WEFT_UINT32, WEFT_MIN), WEFT_SUCCESS);
  EXPECT_EQ(du[0], 2u);  // an unsigned compare: 0xffffffff is the largest, not -1
  EXPECT_EQ(du[1], 7u);
}

TEST(ReduceFixedTest, HalfSumRoundsEachCall) {
  // fp16: 2048 + 1 = 2049 is a tie between 2048 and 2050; even is 2048 (0x6800).
  uint16_t a[] = {0x6800, 0x3c00}, b[] = {0x3c00, 0x3c00}, d[2];
  ASSERT_EQ(kern_reduce(d, a, b, 2, WEFT_FLOAT16, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(d[0], 0x6800);
  EXPECT_EQ(d[1], 0x4000);  // 1 + 1 = 2
  // bf16: 256 + 1 = 257 is a tie between 256 and 258; even is 256 (0x4380).
  uint16_t c[] = {0x4380}, one[] = {0x3f80};
  ASSERT_EQ(kern_reduce(d, c, one, 1, WEFT_BFLOAT16, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(d[0], 0x4380);
}

TEST(ReduceFixedTest, Fp8RoundsAndSaturatesEachCall) {
  // e4m3: 16 + 1 = 17 is a tie between 16 and 18; even is 16 (0x58). 448 + 64 saturates to 448,
  // -448 * 2 to -448. 0.5 * 2^-9 = 2^-10 is a tie between 0 and the smallest subnormal: +0.
  uint8_t a[] = {0x58, 0x7e, 0xfe, 0x30}, b[] = {0x38, 0x68, 0x40, 0x01}, d[4];
  ASSERT_EQ(kern_reduce(d, a, b, 3, WEFT_FLOAT8_E4M3, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(d[0], 0x58);
  EXPECT_EQ(d[1], 0x7e);
  ASSERT_EQ(kern_reduce(d, a, b, 4, WEFT_FLOAT8_E4M3, WEFT_PROD), WEFT_SUCCESS);
  EXPECT_EQ(d[2], 0xfe);
  EXPECT_EQ(d[3], 0x00);
  // e5m2: 57344 + 57344 saturates; inf + 1 stays inf; inf + -inf is NaN; min keeps -inf.
  uint8_t e[] = {0x7b, 0x7c, 0x7c, 0xfc}, f[] = {0x7b, 0x3c, 0xfc, 0x3c}, g[4];
  ASSERT_EQ(kern_reduce(g, e, f, 4, WEFT_FLOAT8_E5M2, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(g[0], 0x7b);
  EXPECT_EQ(g[1], 0x7c);
  EXPECT_TRUE(ref::is_nan(ref::kE5m2, g[2]));
  ASSERT_EQ(kern_reduce(g, e, f, 4, WEFT_FLOAT8_E5M2, WEFT_MIN), WEFT_SUCCESS);
  EXPECT_EQ(g[3], 0xfc);
}

TEST(ReduceFixedTest, NanPropagatesThroughSum) {
  uint16_t hn[] = {0x7e00}, h1[] = {0x3c00}, hd[1];
  ASSERT_EQ(kern_reduce(hd, h1, hn, 1, WEFT_FLOAT16, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_TRUE(ref::is_nan(ref::kHalf, hd[0]));
  uint16_t bn[] = {0x7fc0}, b1[] = {0x3f80};
  ASSERT_EQ(kern_reduce(hd, bn, b1, 1, WEFT_BFLOAT16, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_TRUE(ref::is_nan(ref::kBf16, hd[0]));
  uint8_t en[] = {0xff}, e1[] = {0x38}, ed[1];
  ASSERT_EQ(kern_reduce(ed, e1, en, 1, WEFT_FLOAT8_E4M3, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(ed[0], 0x7f);  // fp8's one NaN result, whichever NaN went in
  float fn[] = {NAN}, f1[] = {1}, fd[1];
  ASSERT_EQ(kern_reduce(fd, fn, f1, 1, WEFT_FLOAT32, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_TRUE(std::isnan(fd[0]));
}

TEST(ReduceLookupTest, CoversEveryDtypeAndOp) {
  for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
    for (int o = 0; o < WEFT_NUM_OPS; o++) {
      EXPECT_NE(kern_reduce_lookup((weft_dtype_t)d, (weft_op_t)o), nullptr) << d << " " << o;
    }
    // Avg accumulates as a sum; the division is kern_reduce_avg_final's job.
    EXPECT_EQ(kern_reduce_lookup((weft_dtype_t)d, WEFT_AVG),
              kern_reduce_lookup((weft_dtype_t)d, WEFT_SUM));
    EXPECT_NE(kern_reduce_lookup((weft_dtype_t)d, WEFT_MIN),
              kern_reduce_lookup((weft_dtype_t)d, WEFT_MAX));
  }
}

// The lookups take the widest instruction set the CPU has, and a narrower one is still there.
TEST(ReduceLookupTest, TakesTheWidestIsaThisCpuHas) {
#if defined(__x86_64__)
  EXPECT_EQ(kern_isa_best(), __builtin_cpu_supports("avx2") ? KERN_ISA_AVX2 : KERN_ISA_BASE);
#endif
  for (int d = 0; d < WEFT_NUM_DTYPES; d++)
    for (int o = 0; o < WEFT_NUM_OPS; o++) {
      weft_dtype_t dt = (weft_dtype_t)d;
      weft_op_t op = (weft_op_t)o;
      EXPECT_EQ(kern_reduce_lookup(dt, op), kern_reduce_lookup_isa(kern_isa_best(), dt, op));
      EXPECT_EQ(kern_reduce_copy_lookup(dt, op),
                kern_reduce_copy_lookup_isa(kern_isa_best(), dt, op));
      EXPECT_NE(kern_reduce_lookup_isa(KERN_ISA_BASE, dt, op), nullptr);
      if (kern_isa_best() > KERN_ISA_BASE)
        EXPECT_NE(kern_reduce_lookup_isa(KERN_ISA_BASE, dt, op), kern_reduce_lookup(dt, op));
    }
  EXPECT_EQ(kern_reduce_lookup_isa(KERN_NUM_ISAS, WEFT_FLOAT32, WEFT_SUM), nullptr);
  EXPECT_STREQ(kern_isa_name(KERN_ISA_BASE), "baseline");
  EXPECT_STREQ(kern_isa_name(KERN_ISA_AVX2), "avx2");
}

// Every instruction set writes the baseline's bits: random bit patterns of every dtype (NaNs with
// payloads, infinities, subnormals, negative zeros included), lengths around each vector width,
// misaligned by one element, in place and not.
TEST(ReduceIsaTest, EveryIsaWritesTheBaselinesBits) {
  std::mt19937_64 rng(20261129);
  for (int isa = KERN_ISA_BASE + 1; isa < KERN_NUM_ISAS; isa++)
    for (int d = 0; d < WEFT_NUM_DTYPES; d++)
      for (int o = 0; o < WEFT_NUM_OPS; o++) {
        weft_dtype_t dt = (weft_dtype_t)d;
        weft_op_t op = (weft_op_t)o;
        kern_reduce_fn wide = kern_reduce_lookup_isa((kern_isa_t)isa, dt, op);
        kern_reduce_copy_fn wide_copy = kern_reduce_copy_lookup_isa((kern_isa_t)isa, dt, op);
        if (!wide) GTEST_SKIP() << "this CPU has no " << kern_isa_name((kern_isa_t)isa);
        kern_reduce_fn base = kern_reduce_lookup_isa(KERN_ISA_BASE, dt, op);
        kern_reduce_copy_fn base_copy = kern_reduce_copy_lookup_isa(KERN_ISA_BASE, dt, op);
        // Element sizes in weft_dtype_t's order (the kernels link without the library).
        static const size_t kSize[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
        static_assert(sizeof kSize / sizeof kSize[0] == WEFT_NUM_DTYPES, "a size per dtype");
        size_t es = kSize[d];
        for (size_t n : {1, 15, 16, 17, 31, 33, 63, 65, 257, 1023}) {
          std::vector<unsigned char> a((n + 1) * es), b((n + 1) * es);
          for (auto &x : a) x = (unsigned char)rng();
          for (auto &x : b) x = (unsigned char)rng();
          // Which payload a sum or product of two NaNs carries is the compiler's choice
          // (kernels/reduce.h): where both inputs are NaNs, b's becomes a zero.
          for (size_t i = 0; i <= n; i++)
            if (ref::is_nan_elem(dt, &a[i * es]) && ref::is_nan_elem(dt, &b[i * es]))
              std::memset(&b[i * es], 0, es);
          const unsigned char *pa = a.data() + es;  // one element off the allocation's alignment
          const unsigned char *pb = b.data() + es;
          std::vector<unsigned char> want(n * es), got(n * es), got2(n * es), want2(n * es);
          base(want.data(), pa, pb, n);
          wide(got.data(), pa, pb, n);
          EXPECT_EQ(got, want) << kern_isa_name((kern_isa_t)isa) << " dtype " << d << " op " << o
                               << " n " << n;
          std::vector<unsigned char> inplace(pa, pa + n * es);
          wide(inplace.data(), inplace.data(), pb, n);
          EXPECT_EQ(inplace, want) << "in place, dtype " << d << " op " << o << " n " << n;
          base_copy(want.data(), want2.data(), pa, pb, n);
          wide_copy(got.data(), got2.data(), pa, pb, n);
          EXPECT_EQ(got, want) << "reduce-copy, dtype " << d << " op " << o << " n " << n;
          EXPECT_EQ(got2, want2) << "reduce-copy's second, dtype " << d << " op " << o;
        }
      }
}

TEST(ReduceLookupTest, OutOfRangeIsNull) {
  EXPECT_EQ(kern_reduce_lookup(WEFT_NUM_DTYPES, WEFT_SUM), nullptr);
  EXPECT_EQ(kern_reduce_lookup((weft_dtype_t)-1, WEFT_SUM), nullptr);
  EXPECT_EQ(kern_reduce_lookup(WEFT_FLOAT32, WEFT_NUM_OPS), nullptr);
  EXPECT_EQ(kern_reduce_lookup(WEFT_FLOAT32, (weft_op_t)-1), nullptr);
}

TEST(ReduceErrorTest, BadDtypeIsNamed) {
  float a[1] = {1}, b[1] = {2}, d[1] = {0};
  err_clear();
  EXPECT_EQ(kern_reduce(d, a, b, 1, (weft_dtype_t)42, WEFT_SUM), WEFT_ERR_INVALID_ARGUMENT);
  std::string msg = err_last();
  EXPECT_NE(msg.find("dtype 42"), std::string::npos) << msg;
  EXPECT_EQ(d[0], 0) << "must not touch dst on error";

  err_clear();
  EXPECT_EQ(kern_reduce(d, a, b, 1, (weft_dtype_t)-3, WEFT_SUM), WEFT_ERR_INVALID_ARGUMENT);
  msg = err_last();
  EXPECT_NE(msg.find("dtype -3"), std::string::npos) << msg;
}

TEST(ReduceErrorTest, BadOpIsNamed) {
  float a[1] = {1}, b[1] = {2}, d[1] = {0};
  err_clear();
  EXPECT_EQ(kern_reduce(d, a, b, 1, WEFT_FLOAT32, (weft_op_t)77), WEFT_ERR_INVALID_ARGUMENT);
  std::string msg = err_last();
  EXPECT_NE(msg.find("op 77"), std::string::npos) << msg;
  EXPECT_EQ(d[0], 0);
}

TEST(ReduceErrorTest, NullBufferIsRejectedUnlessEmpty) {
  float a[1] = {1}, d[1] = {0};
  err_clear();
  EXPECT_EQ(kern_reduce(d, a, nullptr, 1, WEFT_FLOAT32, WEFT_SUM), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("NULL"), std::string::npos) << err_last();
  EXPECT_EQ(kern_reduce(nullptr, nullptr, nullptr, 0, WEFT_FLOAT32, WEFT_SUM), WEFT_SUCCESS);
}

TEST(ReduceErrorTest, ValidCallSucceeds) {
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
  ASSERT_EQ(kern_reduce(a, a, b, 3, WEFT_FLOAT32, WEFT_SUM), WEFT_SUCCESS);
  EXPECT_EQ(a[0], 11);
  EXPECT_EQ(a[1], 22);
  EXPECT_EQ(a[2], 33);
}

}  // namespace
