// reduce_copy_test.cc -- the two-destination kernels (kern_reduce_copy_lookup,
// kern_reduce_copy_avg_final, kern_copy2) against the one-destination loops they must match bit for
// bit, disjoint and in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/half.h"
#include "kernels/reduce.h"
#include "tests/kernels/ref.h"

namespace {

const size_t kSizes[] = {0, 1, 3, 17, 1000, 4099};
const size_t kElemSize[WEFT_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
const char *const kDtypeNames[WEFT_NUM_DTYPES] = {
    "int8",    "uint8",    "int32",   "uint32",  "int64",       "uint64",
    "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"};
const char *const kOpNames[WEFT_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};

bool IsFloat(weft_dtype_t dtype) { return dtype >= WEFT_FLOAT16; }

// Where dst2 points: its own buffer, or exactly the a or b the kernel reads (the output is the
// caller's input).
enum Placement { kDisjoint, kDst2IsA, kDst2IsB };
const char *const kPlacementNames[] = {"disjoint", "dst2_is_a", "dst2_is_b"};

// n random elements of `dtype` as raw bytes: arbitrary bit patterns (every exponent, subnormals,
// infinities, NaNs with payloads, wrapping integers), with every fourth element small (ordinary
// sums and products) and, for float dtypes, every seventh a quiet NaN of either sign.
std::vector<uint8_t> RandomElems(weft_dtype_t dtype, size_t n, std::mt19937_64 &rng) {
  const size_t es = kElemSize[dtype];
  std::vector<uint8_t> v(n * es);
  for (size_t i = 0; i < n; i++) {
    uint64_t bits = rng();
    if (i % 4 == 1) {
      int small = (int)(rng() % 41) - 20;
      switch (dtype) {
        case WEFT_FLOAT16:  // small * 0.25 is exact in fp16 and bf16
          bits = kern_float_to_half((float)small * 0.25f);
          break;
        case WEFT_BFLOAT16:
          bits = kern_float_to_bf16((float)small * 0.25f);
          break;
        case WEFT_FLOAT8_E4M3:  // rounded where fp8 has too few mantissa bits
          bits = kern_float_to_e4m3((float)small * 0.25f);
          break;
        case WEFT_FLOAT8_E5M2:
          bits = kern_float_to_e5m2((float)small * 0.25f);
          break;
        case WEFT_FLOAT32: {
          float f = (float)small * 0.25f;
          std::memcpy(&bits, &f, sizeof f);
          break;
        }
        case WEFT_FLOAT64: {
          double d = (double)small * 0.25;
          std::memcpy(&bits, &d, sizeof d);
          break;
        }
        default:
          bits = (uint64_t)(int64_t)small;
      }
    } else if (i % 7 == 3 && IsFloat(dtype)) {
      const uint64_t sign = rng() & 1;
      switch (dtype) {
        case WEFT_FLOAT16:
          bits = sign << 15 | 0x7e00 | (rng() & 0x1ff);
          break;
        case WEFT_BFLOAT16:
          bits = sign << 15 | 0x7fc0 | (rng() & 0x3f);
          break;
        case WEFT_FLOAT32:
          bits = sign << 31 | 0x7fc00000 | (rng() & 0x3fffff);
          break;
        case WEFT_FLOAT8_E4M3:  // e4m3's only NaN
          bits = sign << 7 | 0x7f;
          break;
        case WEFT_FLOAT8_E5M2:
          bits = sign << 7 | 0x7e | (rng() & 1);
          break;
        default:
          bits = sign << 63 | 0x7ff8000000000000ull | (rng() & 0x7ffffffffffffull);
      }
    }
    std::memcpy(&v[i * es], &bits, es);  // little-endian: the low bytes hold the value
  }
  return v;
}

// A buffer of n elements with a guard element of known bytes on each side, so that a write
// outside [0, n) shows.
struct Guarded {
  Guarded(std::vector<uint8_t> data, size_t es) : es(es), bytes(data.size() + 2 * es, 0xa5) {
    if (!data.empty()) std::memcpy(bytes.data() + es, data.data(), data.size());  // NULL if n == 0
  }
  uint8_t *data() { return bytes.data() + es; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < es; i++) {
      if (bytes[i] != 0xa5 || bytes[bytes.size() - 1 - i] != 0xa5) return false;
    }
    return true;
  }
  size_t es;
  std::vector<uint8_t> bytes;
};

// The index of the first element where got and want differ bytewise, or n.
size_t FirstDiff(const uint8_t *got, const uint8_t *want, size_t n, size_t es) {
  for (size_t i = 0; i < n; i++) {
    if (std::memcmp(got + i * es, want + i * es, es) != 0) return i;
  }
  return n;
}

// As FirstDiff, except where both inputs are NaNs and so are both results: which input's payload
// an addition or product of two NaNs carries is the compiler's choice (the operands of a
// commutative instruction may be swapped, and a vector body and its scalar tail may differ), so
// only NaN-ness is promised there (kernels/reduce.h).
size_t FirstDiffResult(weft_dtype_t dtype, const uint8_t *got, const uint8_t *want,
                       const uint8_t *a, const uint8_t *b, size_t n) {
  const size_t es = kElemSize[dtype];
  for (size_t i = 0; i < n; i++) {
    const size_t at = i * es;
    if (std::memcmp(got + at, want + at, es) == 0) continue;
    if (ref::is_nan_elem(dtype, a + at) && ref::is_nan_elem(dtype, b + at) &&
        ref::is_nan_elem(dtype, got + at) && ref::is_nan_elem(dtype, want + at))
      continue;
    return i;
  }
  return n;
}

std::string Hex(const uint8_t *elem, size_t es) {
  static const char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = es; i-- > 0;) {
    s += digits[elem[i] >> 4];
    s += digits[elem[i] & 15];
  }
  return s;
}

// Runs one two-destination kernel (`copy(dst, dst2, a, b)`) with dst2 placed as asked and checks
// both destinations against `want`, the guards, and that the inputs it must not write are intact.
template <typename Copy>
void CheckCopy(weft_dtype_t dtype, size_t n, Placement placement, const std::vector<uint8_t> &a0,
               const std::vector<uint8_t> &b0, const std::vector<uint8_t> &want, Copy copy) {
  const size_t es = kElemSize[dtype];
  std::mt19937_64 rng(n + 17);
  Guarded a(a0, es), b(b0, es), dst(RandomElems(dtype, n, rng), es),
      own2(RandomElems(dtype, n, rng), es);
  Guarded *dst2 = placement == kDst2IsA ? &a : placement == kDst2IsB ? &b : &own2;
  copy(dst.data(), dst2->data(), a.data(), b.data());

  size_t i = FirstDiffResult(dtype, dst.data(), want.data(), a0.data(), b0.data(), n);
  EXPECT_EQ(i, n) << "dst element " << i << " is " << Hex(dst.data() + i * es, es) << ", want "
                  << Hex(want.data() + i * es, es) << " (a " << Hex(a0.data() + i * es, es)
                  << ", b " << Hex(b0.data() + i * es, es) << ")";
  i = FirstDiffResult(dtype, dst2->data(), want.data(), a0.data(), b0.data(), n);
  EXPECT_EQ(i, n) << "dst2 element " << i << " is " << Hex(dst2->data() + i * es, es) << ", want "
                  << Hex(want.data() + i * es, es) << " (a " << Hex(a0.data() + i * es, es)
                  << ", b " << Hex(b0.data() + i * es, es) << ")";
  EXPECT_TRUE(dst.GuardsIntact()) << "dst written outside [0, n)";
  EXPECT_TRUE(dst2->GuardsIntact()) << "dst2 written outside [0, n)";
  if (placement != kDst2IsA) {
    EXPECT_EQ(FirstDiff(a.data(), a0.data(), n, es), n) << "a changed";
  }
  if (placement != kDst2IsB) {
    EXPECT_EQ(FirstDiff(b.data(), b0.data(), n, es), n) << "b changed";
  }
}

using Param = std::tuple<weft_dtype_t, weft_op_t, size_t, Placement>;

std::string ParamName(const ::testing::TestParamInfo<Param> &info) {
  return std::string(kDtypeNames[std::get<0>(info.param)]) + "_" +
         kOpNames[std::get<1>(info.param)] + "_n" + std::to_string(std::get<2>(info.param)) + "_" +
         kPlacementNames[std::get<3>(info.param)];
}

class ReduceCopyTest : public ::testing::TestWithParam<Param> {};

// Both destinations hold exactly what kern_reduce_lookup's loop writes into a disjoint dst.
TEST_P(ReduceCopyTest, MatchesReduce) {
  const weft_dtype_t dtype = std::get<0>(GetParam());
  const weft_op_t op = std::get<1>(GetParam());
  const size_t n = std::get<2>(GetParam());
  std::mt19937_64 rng(n * 131 + (size_t)dtype * 7 + (size_t)op);
  std::vector<uint8_t> a = RandomElems(dtype, n, rng), b = RandomElems(dtype, n, rng);
  std::vector<uint8_t> want(a.size());

  kern_reduce_fn reduce = kern_reduce_lookup(dtype, op);
  kern_reduce_copy_fn reduce_copy = kern_reduce_copy_lookup(dtype, op);
  ASSERT_NE(reduce, nullptr);
  ASSERT_NE(reduce_copy, nullptr);
  reduce(want.data(), a.data(), b.data(), n);
  CheckCopy(dtype, n, std::get<3>(GetParam()), a, b, want,
            [&](void *dst, void *dst2, const void *pa, const void *pb) {
              reduce_copy(dst, dst2, pa, pb, n);
            });
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypesOps, ReduceCopyTest,
    ::testing::Combine(::testing::Values(WEFT_INT8, WEFT_UINT8, WEFT_INT32, WEFT_UINT32, WEFT_INT64,
                                         WEFT_UINT64, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
                                         WEFT_FLOAT64, WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2),
                       ::testing::Values(WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG),
                       ::testing::ValuesIn(kSizes),
                       ::testing::Values(kDisjoint, kDst2IsA, kDst2IsB)),
    ParamName);

using AvgParam = std::tuple<weft_dtype_t, size_t, int, Placement>;

std::string AvgParamName(const ::testing::TestParamInfo<AvgParam> &info) {
  return std::string(kDtypeNames[std::get<0>(info.param)]) + "_n" +
         std::to_string(std::get<1>(info.param)) + "_ranks" +
         std::to_string(std::get<2>(info.param)) + "_" + kPlacementNames[std::get<3>(info.param)];
}

class ReduceCopyAvgTest : public ::testing::TestWithParam<AvgParam> {};

// Both destinations hold exactly what kern_reduce_avg_final writes into a disjoint dst.
TEST_P(ReduceCopyAvgTest, MatchesAvgFinal) {
  const weft_dtype_t dtype = std::get<0>(GetParam());
  const size_t n = std::get<1>(GetParam());
  const int nranks = std::get<2>(GetParam());
  std::mt19937_64 rng(n * 31 + (size_t)dtype * 5 + (size_t)nranks);
  std::vector<uint8_t> a = RandomElems(dtype, n, rng), b = RandomElems(dtype, n, rng);
  std::vector<uint8_t> want(a.size());

  kern_reduce_avg_final(want.data(), a.data(), b.data(), n, dtype, nranks);
  CheckCopy(dtype, n, std::get<3>(GetParam()), a, b, want,
            [&](void *dst, void *dst2, const void *pa, const void *pb) {
              kern_reduce_copy_avg_final(dst, dst2, pa, pb, n, dtype, nranks);
            });
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, ReduceCopyAvgTest,
    ::testing::Combine(::testing::Values(WEFT_INT8, WEFT_UINT8, WEFT_INT32, WEFT_UINT32, WEFT_INT64,
                                         WEFT_UINT64, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
                                         WEFT_FLOAT64, WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2),
                       ::testing::ValuesIn(kSizes), ::testing::Values(1, 3, 7),
                       ::testing::Values(kDisjoint, kDst2IsA, kDst2IsB)),
    AvgParamName);

// A few results written out by hand, so that a mistake shared by both loop families still shows.
TEST(ReduceCopyFixedTest, HandWrittenResults) {
  int8_t a8[] = {127, -128, 100}, b8[] = {1, -1, 100}, d8[3], e8[3];
  kern_reduce_copy_lookup(WEFT_INT8, WEFT_SUM)(d8, e8, a8, b8, 3);
  for (const int8_t *r : {d8, e8}) {
    EXPECT_EQ(r[0], -128);
    EXPECT_EQ(r[1], 127);
    EXPECT_EQ(r[2], -56);
  }
  // fp16 2048 + 1 is a tie; even is 2048 (0x6800). In place on b.
  uint16_t ha[] = {0x6800, 0x3c00}, hb[] = {0x3c00, 0x7e00}, hd[2];
  kern_reduce_copy_lookup(WEFT_FLOAT16, WEFT_SUM)(hd, hb, ha, hb, 2);
  EXPECT_EQ(hd[0], 0x6800);
  EXPECT_EQ(hb[0], 0x6800);
  EXPECT_EQ(hd[1] & 0x7e00, 0x7e00) << "NaN in, NaN out";
  EXPECT_EQ(hb[1], hd[1]);
  // e4m3 448 + 448 saturates to 448 (0x7e), and 1 + 0.0625 is a tie that stays at 1 (0x38).
  uint8_t fa[] = {0x7e, 0x38}, fb[] = {0x7e, 0x18}, fd[2], fe[2];
  kern_reduce_copy_lookup(WEFT_FLOAT8_E4M3, WEFT_SUM)(fd, fe, fa, fb, 2);
  for (const uint8_t *r : {fd, fe}) {
    EXPECT_EQ(r[0], 0x7e);
    EXPECT_EQ(r[1], 0x38);
  }
  // Integer average truncates toward zero: (-7 + 0) / 2 = -3. In place on a.
  int32_t ia[] = {-7, 7}, ib[] = {0, 0}, id[2];
  kern_reduce_copy_avg_final(id, ia, ia, ib, 2, WEFT_INT32, 2);
  EXPECT_EQ(id[0], -3);
  EXPECT_EQ(ia[0], -3);
  EXPECT_EQ(id[1], 3);
  EXPECT_EQ(ia[1], 3);
}

TEST(ReduceCopyLookupTest, CoversEveryDtypeAndOp) {
  for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
    for (int o = 0; o < WEFT_NUM_OPS; o++) {
      EXPECT_NE(kern_reduce_copy_lookup((weft_dtype_t)d, (weft_op_t)o), nullptr) << d << " " << o;
    }
    // Avg accumulates as a sum; the division is kern_reduce_copy_avg_final's job.
    EXPECT_EQ(kern_reduce_copy_lookup((weft_dtype_t)d, WEFT_AVG),
              kern_reduce_copy_lookup((weft_dtype_t)d, WEFT_SUM));
  }
}

TEST(ReduceCopyLookupTest, OutOfRangeIsNull) {
  EXPECT_EQ(kern_reduce_copy_lookup(WEFT_NUM_DTYPES, WEFT_SUM), nullptr);
  EXPECT_EQ(kern_reduce_copy_lookup((weft_dtype_t)-1, WEFT_SUM), nullptr);
  EXPECT_EQ(kern_reduce_copy_lookup(WEFT_FLOAT32, WEFT_NUM_OPS), nullptr);
  EXPECT_EQ(kern_reduce_copy_lookup(WEFT_FLOAT32, (weft_op_t)-1), nullptr);
  EXPECT_EQ(kern_reduce_copy_lookup((weft_dtype_t)1000, (weft_op_t)1000), nullptr);
}

TEST(ReduceCopyAvgFixedTest, UnknownDtypeIsANoOp) {
  int32_t a[] = {4}, b[] = {6}, d[] = {-1}, d2[] = {-2};
  kern_reduce_copy_avg_final(d, d2, a, b, 1, (weft_dtype_t)99, 2);
  EXPECT_EQ(d[0], -1);
  EXPECT_EQ(d2[0], -2);
}

// kern_copy2 over odd byte counts (including both sides of its 8 KiB chunk) and every mix of
// misalignment between src, dst and dst2, with guard bytes around both destinations.
TEST(Copy2Test, OddSizesAndUnalignedPointers) {
  const size_t kBytes[] = {0, 1, 3, 7, 17, 1000, 4099, 8191, 8192, 8193, 65536 + 13};
  const size_t kOffsets[] = {0, 1, 3, 8};
  std::mt19937_64 rng(5);
  for (size_t bytes : kBytes) {
    for (size_t os : kOffsets) {
      for (size_t od : kOffsets) {
        for (size_t od2 : kOffsets) {
          std::vector<uint8_t> src(bytes + 16), dst(bytes + 32, 0xa5), dst2(bytes + 32, 0x5a);
          for (auto &c : src) c = (uint8_t)rng();
          const std::vector<uint8_t> src0 = src;
          kern_copy2(dst.data() + 8 + od, dst2.data() + 8 + od2, src.data() + os, bytes);
          SCOPED_TRACE(std::to_string(bytes) + " bytes, offsets " + std::to_string(os) + "/" +
                       std::to_string(od) + "/" + std::to_string(od2));
          ASSERT_EQ(std::memcmp(dst.data() + 8 + od, src.data() + os, bytes), 0);
          ASSERT_EQ(std::memcmp(dst2.data() + 8 + od2, src.data() + os, bytes), 0);
          ASSERT_EQ(src, src0);
          for (size_t i = 0; i < dst.size(); i++) {
            if (i < 8 + od || i >= 8 + od + bytes) {
              ASSERT_EQ(dst[i], 0xa5) << "dst byte " << i;
            }
            if (i < 8 + od2 || i >= 8 + od2 + bytes) {
              ASSERT_EQ(dst2[i], 0x5a) << "dst2 byte " << i;
            }
          }
        }
      }
    }
  }
}

// dst2 == src (the output is the caller's input): src keeps its bytes and dst gets them.
TEST(Copy2Test, Dst2IsSrc) {
  for (size_t bytes : {(size_t)0, (size_t)1, (size_t)4099, (size_t)20001}) {
    std::vector<uint8_t> src(bytes + 1), dst(bytes + 1, 0xa5);
    for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 7 + 1);
    const std::vector<uint8_t> src0 = src;
    kern_copy2(dst.data(), src.data() + 1, src.data() + 1, bytes);
    EXPECT_EQ(src, src0) << bytes;
    EXPECT_EQ(std::memcmp(dst.data(), src.data() + 1, bytes), 0) << bytes;
    EXPECT_EQ(dst[bytes], 0xa5) << bytes;
  }
}

TEST(Copy2Test, ZeroBytesAcceptsNull) { kern_copy2(nullptr, nullptr, nullptr, 0); }

}  // namespace
