// pattern_test.cc -- the check data: for every dtype x op x world size, reducing the generated
// inputs in the dtype's own arithmetic, in several orders, gives exactly the expected values.
#include "tools/bench/pattern.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/half.h"
#include "tools/bench/elem.h"
#include "tools/bench/types.h"

namespace {

const int kWorlds[] = {1, 2, 3, 4, 5, 6, 7, 8, 13};
const size_t kCount = 2000;

// ---- A naive reference reduction, one element at a time, in the dtype's arithmetic: integers
// wrap, fp16/bf16 are computed in float and rounded back at every step (as weft.h says). Elements
// travel as their raw bits in a uint64_t.

uint64_t LoadBits(weft_dtype_t dt, const void *buf, size_t i) {
  size_t size = bench_dtype_size(dt);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char *>(buf) + i * size, size);
  return bits;
}

void StoreBits(weft_dtype_t dt, void *buf, size_t i, uint64_t bits) {
  size_t size = bench_dtype_size(dt);
  std::memcpy(static_cast<char *>(buf) + i * size, &bits, size);
}

template <typename T>
T FromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

template <typename T>
uint64_t ToBits(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  return bits;
}

template <typename T>
uint64_t IntOp(weft_op_t op, uint64_t a_bits, uint64_t b_bits) {
  using U = std::make_unsigned_t<T>;
  T a = FromBits<T>(a_bits), b = FromBits<T>(b_bits);
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return ToBits<T>(static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))));
    case WEFT_PROD:
      return ToBits<T>(static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                                     static_cast<uint64_t>(static_cast<U>(b)))));
    case WEFT_MIN:
      return ToBits<T>(a < b ? a : b);
    default:
      return ToBits<T>(a > b ? a : b);
  }
}

template <typename F>
F FloatOp(weft_op_t op, F a, F b) {
  switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
      return a + b;
    case WEFT_PROD:
      return a * b;
    case WEFT_MIN:
      return a < b ? a : b;
    default:
      return a > b ? a : b;
  }
}

uint64_t Combine(weft_dtype_t dt, weft_op_t op, uint64_t a, uint64_t b) {
  switch (dt) {
    case WEFT_INT8:
      return IntOp<int8_t>(op, a, b);
    case WEFT_UINT8:
      return IntOp<uint8_t>(op, a, b);
    case WEFT_INT32:
      return IntOp<int32_t>(op, a, b);
    case WEFT_UINT32:
      return IntOp<uint32_t>(op, a, b);
    case WEFT_INT64:
      return IntOp<int64_t>(op, a, b);
    case WEFT_UINT64:
      return IntOp<uint64_t>(op, a, b);
    case WEFT_FLOAT16:
      return kern_float_to_half(
          FloatOp(op, kern_half_to_float((uint16_t)a), kern_half_to_float((uint16_t)b)));
    case WEFT_BFLOAT16:
      return kern_float_to_bf16(
          FloatOp(op, kern_bf16_to_float((uint16_t)a), kern_bf16_to_float((uint16_t)b)));
    case WEFT_FLOAT32:
      return ToBits(FloatOp(op, FromBits<float>(a), FromBits<float>(b)));
    case WEFT_FLOAT8_E4M3:
      return kern_float_to_e4m3(
          FloatOp(op, kern_e4m3_to_float((uint8_t)a), kern_e4m3_to_float((uint8_t)b)));
    case WEFT_FLOAT8_E5M2:
      return kern_float_to_e5m2(
          FloatOp(op, kern_e5m2_to_float((uint8_t)a), kern_e5m2_to_float((uint8_t)b)));
    default:
      return ToBits(FloatOp(op, FromBits<double>(a), FromBits<double>(b)));
  }
}

// avg's final step: integers divide with C's truncation, floats truly divide (fp16/bf16/fp8 in
// float).
uint64_t DivideBy(weft_dtype_t dt, uint64_t a, int n) {
  switch (dt) {
    case WEFT_INT8:
      return ToBits<int8_t>(static_cast<int8_t>(FromBits<int8_t>(a) / n));
    case WEFT_UINT8:
      return ToBits<uint8_t>(static_cast<uint8_t>(FromBits<uint8_t>(a) / n));
    case WEFT_INT32:
      return ToBits<int32_t>(FromBits<int32_t>(a) / n);
    case WEFT_UINT32:
      return ToBits<uint32_t>(FromBits<uint32_t>(a) / static_cast<uint32_t>(n));
    case WEFT_INT64:
      return ToBits<int64_t>(FromBits<int64_t>(a) / n);
    case WEFT_UINT64:
      return ToBits<uint64_t>(FromBits<uint64_t>(a) / static_cast<uint64_t>(n));
    case WEFT_FLOAT16:
      return kern_float_to_half(kern_half_to_float((uint16_t)a) / n);
    case WEFT_BFLOAT16:
      return kern_float_to_bf16(kern_bf16_to_float((uint16_t)a) / n);
    case WEFT_FLOAT32:
      return ToBits<float>(FromBits<float>(a) / static_cast<float>(n));
    case WEFT_FLOAT8_E4M3:
      return kern_float_to_e4m3(kern_e4m3_to_float((uint8_t)a) / n);
    case WEFT_FLOAT8_E5M2:
      return kern_float_to_e5m2(kern_e5m2_to_float((uint8_t)a) / n);
    default:
      return ToBits<double>(FromBits<double>(a) / n);
  }
}

enum class Order { kForward, kBackward, kTree, kInterleaved };

// Reduces values[ranks[lo..hi)] in the given shape.
uint64_t Fold(weft_dtype_t dt, weft_op_t op, const std::vector<uint64_t> &v, Order order) {
  size_t n = v.size();
  switch (order) {
    case Order::kForward: {
      uint64_t acc = v[0];
      for (size_t r = 1; r < n; r++) acc = Combine(dt, op, acc, v[r]);
      return acc;
    }
    case Order::kBackward: {
      uint64_t acc = v[n - 1];
      for (size_t r = n - 1; r-- > 0;) acc = Combine(dt, op, v[r], acc);
      return acc;
    }
    case Order::kTree: {
      std::function<uint64_t(size_t, size_t)> tree = [&](size_t lo, size_t hi) -> uint64_t {
        if (hi - lo == 1) return v[lo];
        size_t mid = lo + (hi - lo) / 2;
        return Combine(dt, op, tree(lo, mid), tree(mid, hi));
      };
      return tree(0, n);
    }
    case Order::kInterleaved: {  // odd ranks first, then even ones: a ring starting elsewhere
      std::vector<uint64_t> w;
      for (size_t r = 1; r < n; r += 2) w.push_back(v[r]);
      for (size_t r = 0; r < n; r += 2) w.push_back(v[r]);
      return Fold(dt, op, w, Order::kForward);
    }
  }
  return 0;
}

struct Inputs {
  bench_pattern_t p;
  std::vector<std::vector<char>> bufs;  // one per rank, filled by bench_pattern_fill
};

Inputs Generate(bench_coll_t coll, weft_dtype_t dt, weft_op_t op, int n, int root, size_t count) {
  Inputs in;
  bench_pattern_init(&in.p, coll, dt, op, n, root);
  for (int r = 0; r < n; r++) {
    in.bufs.emplace_back(count * bench_dtype_size(dt));
    bench_pattern_fill(&in.p, r, in.bufs.back().data(), count);
  }
  return in;
}

// The all-reduce result of `in` in the given order, leaving out rank `skip` (-1: none).
std::vector<char> Reduce(const Inputs &in, size_t count, Order order, int skip = -1) {
  weft_dtype_t dt = in.p.dtype;
  std::vector<char> out(count * bench_dtype_size(dt));
  for (size_t i = 0; i < count; i++) {
    std::vector<uint64_t> v;
    for (int r = 0; r < in.p.nranks; r++) {
      if (r != skip) v.push_back(LoadBits(dt, in.bufs[r].data(), i));
    }
    uint64_t res = Fold(dt, in.p.op, v, order);
    if (in.p.op == WEFT_AVG) res = DivideBy(dt, res, in.p.nranks);
    StoreBits(dt, out.data(), i, res);
  }
  return out;
}

std::string Name(weft_dtype_t dt, const char *op, int n) {
  return std::string(bench_dtype_name(dt)) + " " + op + " nranks " + std::to_string(n);
}

class PatternTest : public ::testing::TestWithParam<int> {};

// Every input is representable exactly, and the closed-form expected value equals the exact
// (integer) reduction of the inputs.
TEST_P(PatternTest, ExpectedIsTheExactReductionOfTheInputs) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int op = 0; op < WEFT_NUM_OPS; op++) {
    for (int n : kWorlds) {
      bench_pattern_t p;
      bench_pattern_init(&p, BENCH_ALL_REDUCE, dt, static_cast<weft_op_t>(op), n, 0);
      std::string name = Name(dt, bench_op_name(static_cast<weft_op_t>(op)), n);
      for (uint64_t i : {0ull, 1ull, 2ull, 17ull, 1000ull, 123456789ull, (1ull << 40) + 3}) {
        __int128 acc = bench_pattern_input(&p, 0, i);
        for (int r = 1; r < n; r++) {
          int64_t x = bench_pattern_input(&p, r, i);
          switch (op) {
            case WEFT_SUM:
            case WEFT_AVG:
              acc += x;
              break;
            case WEFT_PROD:
              acc *= x;
              break;
            case WEFT_MIN:
              acc = x < acc ? x : acc;
              break;
            default:
              acc = x > acc ? x : acc;
              break;
          }
        }
        if (op == WEFT_AVG) acc /= n;  // exact: for floats the sum is a multiple of n
        ASSERT_EQ(static_cast<int64_t>(acc), bench_pattern_expected(&p, i)) << name << " i " << i;
        for (int r = 0; r < n; r++) {
          char elem[8];
          int64_t x = bench_pattern_input(&p, r, i);
          bench_elem_store(dt, elem, 0, x);
          ASSERT_TRUE(bench_elem_equals(dt, elem, 0, x)) << name << " rank " << r << " i " << i;
        }
      }
    }
  }
}

// The real test of "exact in any order": reduce the filled buffers in the dtype's arithmetic in
// four orders; the checker must find nothing wrong.
TEST_P(PatternTest, AnyReductionOrderChecksOut) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int op = 0; op < WEFT_NUM_OPS; op++) {
    for (int n : kWorlds) {
      Inputs in = Generate(BENCH_ALL_REDUCE, dt, static_cast<weft_op_t>(op), n, 0, kCount);
      std::string name = Name(dt, bench_op_name(static_cast<weft_op_t>(op)), n);
      for (Order order : {Order::kForward, Order::kBackward, Order::kTree, Order::kInterleaved}) {
        std::vector<char> out = Reduce(in, kCount, order);
        ASSERT_EQ(bench_pattern_check(&in.p, out.data(), kCount), 0u)
            << name << " order " << static_cast<int>(order);
      }
    }
  }
}

// The check can fail: a result missing one rank's contribution, or left unwritten, is caught.
TEST_P(PatternTest, MistakesAreCounted) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int op = 0; op < WEFT_NUM_OPS; op++) {
    for (int n : kWorlds) {
      Inputs in = Generate(BENCH_ALL_REDUCE, dt, static_cast<weft_op_t>(op), n, 0, kCount);
      std::string name = Name(dt, bench_op_name(static_cast<weft_op_t>(op)), n);
      std::vector<char> out(kCount * bench_dtype_size(dt));
      bench_pattern_poison(&in.p, out.data(), kCount);
      EXPECT_EQ(bench_pattern_check(&in.p, out.data(), kCount), kCount) << name;
      if (n == 1) continue;
      for (int skip : {0, n - 1}) {
        out = Reduce(in, kCount, Order::kForward, skip);
        EXPECT_GT(bench_pattern_check(&in.p, out.data(), kCount), kCount / 20)
            << name << " without rank " << skip;
      }
      // One wrong element is exactly one wrong element.
      out = Reduce(in, kCount, Order::kForward);
      bench_elem_poison(dt, out.data(), 7, bench_pattern_expected(&in.p, 7));
      EXPECT_EQ(bench_pattern_check(&in.p, out.data(), kCount), 1u) << name;
    }
  }
}

TEST_P(PatternTest, BroadcastDeliversTheRootsData) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int n : kWorlds) {
    for (int root : {0, n / 2, n - 1}) {
      Inputs in = Generate(BENCH_BROADCAST, dt, WEFT_SUM, n, root, kCount);
      std::string name = Name(dt, "broadcast", n) + " root " + std::to_string(root);
      EXPECT_EQ(bench_pattern_check(&in.p, in.bufs[root].data(), kCount), 0u) << name;
      if (n > 1) {
        int other = (root + 1) % n;
        EXPECT_GT(bench_pattern_check(&in.p, in.bufs[other].data(), kCount), kCount / 2) << name;
      }
    }
  }
}

// The fill loop steps its rotations instead of dividing: it must agree with the per-element
// definition everywhere, past several wraps of every rotation.
TEST_P(PatternTest, FillMatchesInput) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int op = 0; op < WEFT_NUM_OPS; op++) {
    for (int n : kWorlds) {
      for (int r = 0; r < n; r++) {
        Inputs in = Generate(BENCH_ALL_REDUCE, dt, static_cast<weft_op_t>(op), n, 0, 64);
        for (size_t i = 0; i < 64; i++) {
          ASSERT_TRUE(bench_elem_equals(dt, in.bufs[r].data(), i, bench_pattern_input(&in.p, r, i)))
              << Name(dt, bench_op_name(static_cast<weft_op_t>(op)), n) << " rank " << r << " i "
              << i;
        }
      }
    }
  }
}

// The ranks' inputs differ, so a result built from the wrong rank or element shows.
TEST_P(PatternTest, InputsVaryWithRankAndIndex) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int op = 0; op < WEFT_NUM_OPS; op++) {
    bench_pattern_t p;
    bench_pattern_init(&p, BENCH_ALL_REDUCE, dt, static_cast<weft_op_t>(op), 4, 0);
    int rank_diffs = 0, index_diffs = 0;
    for (uint64_t i = 0; i < 100; i++) {
      rank_diffs += bench_pattern_input(&p, 0, i) != bench_pattern_input(&p, 1, i);
      index_diffs += bench_pattern_input(&p, 0, i) != bench_pattern_input(&p, 0, i + 1);
    }
    EXPECT_GT(rank_diffs, 20) << Name(dt, bench_op_name(static_cast<weft_op_t>(op)), 4);
    EXPECT_GT(index_diffs, 20) << Name(dt, bench_op_name(static_cast<weft_op_t>(op)), 4);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, PatternTest,
                         ::testing::Range(0, static_cast<int>(WEFT_NUM_DTYPES)),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(
                               bench_dtype_name(static_cast<weft_dtype_t>(info.param)));
                         });

}  // namespace
