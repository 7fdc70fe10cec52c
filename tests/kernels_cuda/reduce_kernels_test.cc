// reduce_kernels_test.cc -- the CUDA kernels (kernels/cuda/reduce_kernels.h) against the host
// kernels (kernels/reduce.h), bit for bit: every dtype x op, counts around the vector width and
// past the point where the grid is bounded, misaligned buffers, both outputs of reduce_copy, in
// place, and buffers in mapped pinned host memory. Guard bytes around every output catch writes
// out of range.
//
// Needs a GPU: each device test skips with "no CUDA device: ..." where cudaGetDeviceCount finds
// none. The argument checks and the no-device error path run everywhere.
#include "kernels/cuda/reduce_kernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "kernels/reduce.h"

namespace {

// Why no device test can run here, or "" when a device is present.
std::string NoDeviceReason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    return std::string("no CUDA device: cudaGetDeviceCount failed with ") + cudaGetErrorName(err) +
           " (" + cudaGetErrorString(err) + ")";
  }
  if (n == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

#define SKIP_WITHOUT_DEVICE()                \
  do {                                       \
    std::string why_ = NoDeviceReason();     \
    if (!why_.empty()) GTEST_SKIP() << why_; \
  } while (0)

#define CUDA_OK(call)                                                                \
  do {                                                                               \
    cudaError_t cuda_ok_ = (call);                                                   \
    ASSERT_EQ(cuda_ok_, cudaSuccess) << #call << ": " << cudaGetErrorName(cuda_ok_); \
  } while (0)

size_t DtypeSize(weft_dtype_t d) {
  static const size_t sizes[WEFT_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  return sizes[d];
}

const char *DtypeName(weft_dtype_t d) {
  static const char *names[WEFT_NUM_DTYPES] = {"int8",    "uint8",   "int32",       "uint32",
                                               "int64",   "uint64",  "float16",     "bfloat16",
                                               "float32", "float64", "float8_e4m3", "float8_e5m2"};
  return names[d];
}

bool IsFloat(weft_dtype_t d) { return d >= WEFT_FLOAT16; }

// NaN test on an element's bits, per format.
bool IsNan(weft_dtype_t d, const char *e) {
  switch (d) {
    case WEFT_FLOAT16: {
      uint16_t h;
      memcpy(&h, e, 2);
      return (h & 0x7fff) > 0x7c00;
    }
    case WEFT_BFLOAT16: {
      uint16_t h;
      memcpy(&h, e, 2);
      return (h & 0x7fff) > 0x7f80;
    }
    case WEFT_FLOAT32: {
      uint32_t u;
      memcpy(&u, e, 4);
      return (u & 0x7fffffffu) > 0x7f800000u;
    }
    case WEFT_FLOAT64: {
      uint64_t u;
      memcpy(&u, e, 8);
      return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    }
    case WEFT_FLOAT8_E4M3:  // S.1111.111 only
      return (*(const uint8_t *)e & 0x7f) == 0x7f;
    case WEFT_FLOAT8_E5M2:
      return (*(const uint8_t *)e & 0x7f) > 0x7c;
    default:
      return false;
  }
}

// A float of `bits` bits with `exp_bits` exponent bits: mostly values within a few binades of 1
// (so sums and products round in interesting ways), plus NaNs (quiet and signalling, either sign),
// infinities, zeros, subnormals and arbitrary bit patterns. For fp8 e4m3, which has no infinity
// and one NaN per sign, the "NaN" and "infinity" draws are large finite values (or its NaN), and
// the arbitrary patterns include both.
uint64_t RandomFloatBits(int bits, int exp_bits, std::mt19937_64 &rng) {
  int mant_bits = bits - 1 - exp_bits;
  uint64_t r = rng();
  uint64_t sign = (r & 1) << (bits - 1);
  uint64_t mant = rng() & ((1ull << mant_bits) - 1);
  uint64_t emax = (1ull << exp_bits) - 1;
  uint64_t bias = emax >> 1;
  switch ((r >> 1) & 15) {
    case 0:
      return sign | (emax << mant_bits) | mant | 1;  // NaN
    case 1:
      return sign | (emax << mant_bits);  // infinity
    case 2:
      return sign | mant;  // subnormal (or zero)
    case 3:
      return sign;  // signed zero
    case 4:
    case 5:
      return bits == 64 ? rng() : rng() & ((1ull << bits) - 1);
    default:
      return sign | ((bias - 3 + (r >> 8) % 7) << mant_bits) | mant;
  }
}

void FillRandom(weft_dtype_t d, char *p, size_t n, std::mt19937_64 &rng) {
  size_t es = DtypeSize(d);
  if (!IsFloat(d)) {  // every integer bit pattern (sums and products wrap), 8 bytes per draw
    size_t bytes = n * es, i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t v = rng();
      memcpy(p + i, &v, 8);
    }
    for (; i < bytes; i++) p[i] = (char)rng();
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    switch (d) {
      case WEFT_FLOAT16:
        v = RandomFloatBits(16, 5, rng);
        break;
      case WEFT_BFLOAT16:
        v = RandomFloatBits(16, 8, rng);
        break;
      case WEFT_FLOAT32:
        v = RandomFloatBits(32, 8, rng);
        break;
      case WEFT_FLOAT8_E4M3:
        v = RandomFloatBits(8, 4, rng);
        break;
      case WEFT_FLOAT8_E5M2:
        v = RandomFloatBits(8, 5, rng);
        break;
      default:
        v = RandomFloatBits(64, 11, rng);
        break;
    }
    memcpy(p + i * es, &v, es);  // little-endian: the low bytes
  }
}

// One reduction as the tests name it: an op, and for WEFT_AVG the final division's nranks (0: an
// intermediate step, which reduces as a sum).
struct OpCase {
  weft_op_t op;
  int avg_nranks;
};

std::string OpName(OpCase c) {
  static const char *names[WEFT_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};
  std::string s = names[c.op];
  if (c.op == WEFT_AVG) s += c.avg_nranks ? "_final" + std::to_string(c.avg_nranks) : "_step";
  return s;
}

// The host's answer for n elements.
void HostReduce(weft_dtype_t d, OpCase c, char *dst, const char *a, const char *b, size_t n) {
  if (c.op == WEFT_AVG && c.avg_nranks > 0) {
    kern_reduce_avg_final(dst, a, b, n, d, c.avg_nranks);
  } else {
    kern_reduce_lookup(d, c.op)(dst, a, b, n);
  }
}

// Device and host results equal bit for bit, except that where the host's sum, product or average
// is a NaN the device's only has to be a NaN too (reduce_kernels.h: GPUs return the canonical NaN
// where x86 keeps an operand's payload). min/max select an operand, so they match even on NaNs.
::testing::AssertionResult SameResults(weft_dtype_t d, bool select_op, const char *want,
                                       const char *got, size_t n) {
  size_t es = DtypeSize(d);
  for (size_t i = 0; i < n; i++) {
    const char *w = want + i * es;
    const char *g = got + i * es;
    if (memcmp(w, g, es) == 0) continue;
    if (!select_op && IsFloat(d) && IsNan(d, w) && IsNan(d, g)) continue;
    uint64_t wv = 0, gv = 0;
    memcpy(&wv, w, es);
    memcpy(&gv, g, es);
    return ::testing::AssertionFailure() << "element " << i << " of " << n << ": host 0x"
                                         << std::hex << wv << ", device 0x" << gv;
  }
  return ::testing::AssertionSuccess();
}

// A buffer with kGuard bytes on each side of the largest range a test uses, in device memory or
// in mapped pinned host memory (reachable from the device through unified addressing).
constexpr size_t kGuard = 64;
constexpr unsigned char kPoison = 0xa5;

struct Buffer {
  char *base = nullptr;
  size_t bytes = 0;
  bool mapped = false;
  ~Buffer() {
    if (base == nullptr) return;
    if (mapped)
      cudaFreeHost(base);
    else
      cudaFree(base);
  }
  // Data for an element offset `off` of elements of size es.
  char *at(size_t off, size_t es) const { return base + kGuard + off * es; }
};

::testing::AssertionResult Alloc(Buffer *b, size_t bytes, bool mapped) {
  b->bytes = bytes + 2 * kGuard;
  b->mapped = mapped;
  void *p = nullptr;
  cudaError_t err =
      mapped ? cudaHostAlloc(&p, b->bytes, cudaHostAllocMapped) : cudaMalloc(&p, b->bytes);
  if (err != cudaSuccess) {
    return ::testing::AssertionFailure() << (mapped ? "cudaHostAlloc" : "cudaMalloc") << " of "
                                         << b->bytes << " bytes: " << cudaGetErrorName(err);
  }
  b->base = (char *)p;
  return ::testing::AssertionSuccess();
}

// The kGuard bytes before and after [p, p + bytes) still hold the poison.
::testing::AssertionResult GuardsIntact(const char *p, size_t bytes) {
  unsigned char g[2 * kGuard];
  if (cudaMemcpy(g, p - kGuard, kGuard, cudaMemcpyDefault) != cudaSuccess ||
      cudaMemcpy(g + kGuard, p + bytes, kGuard, cudaMemcpyDefault) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemcpy of the guard bytes failed";
  }
  for (size_t i = 0; i < 2 * kGuard; i++) {
    if (g[i] != kPoison) {
      return ::testing::AssertionFailure()
             << "guard byte " << (i < kGuard ? "before" : "after") << " the output, at distance "
             << (i < kGuard ? kGuard - i : i - kGuard + 1) << ", was written";
    }
  }
  return ::testing::AssertionSuccess();
}

// Counts around the 16-byte vector (2 to 16 elements) and one past a million.
const size_t kCounts[] = {0, 1, 3, 7, 15, 16, 17, 1000, (1u << 20) + 3};

// And one large enough that the bounded grid makes every thread run the unrolled body of the
// kernel several times: 40 MiB (a million elements leaves that loop untested on a 132-SM GPU,
// where the grid has 135168 threads). Run for fewer layouts, since each run moves 40 MiB a few
// times through pageable host memory.
size_t BigCount(weft_dtype_t d) { return (40u << 20) / DtypeSize(d) + 5; }

// Random inputs for the last dtype asked for: the tests of one dtype run one after another, so
// each dtype's 2 x 40 MiB is generated once instead of once per test.
const std::vector<char> &Inputs(weft_dtype_t d, int which) {
  static weft_dtype_t have = WEFT_NUM_DTYPES;
  static std::vector<char> in[2];
  if (have != d) {
    size_t n = BigCount(d) + 8;
    std::mt19937_64 rng(1000003u * d + 17);
    for (auto &v : in) {
      v.assign(n * DtypeSize(d), 0);
      FillRandom(d, v.data(), n, rng);
    }
    have = d;
  }
  return in[which];
}

// Element offsets of (dst, local, incoming, dst2) from 256-byte aligned memory: all aligned; all
// equally misaligned (scalar head, vector body); and alignments that differ modulo 16 (all scalar).
const size_t kOffsets[][4] = {{0, 0, 0, 0}, {1, 1, 1, 1}, {3, 3, 3, 3}, {0, 1, 2, 3}, {2, 0, 0, 1}};

class CudaReduce : public ::testing::TestWithParam<std::tuple<weft_dtype_t, OpCase>> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    dtype_ = std::get<0>(GetParam());
    op_ = std::get<1>(GetParam());
    es_ = DtypeSize(dtype_);
    max_n_ = BigCount(dtype_);
    // A stream of its own, to check that the kernels go where they are told.
    CUDA_OK(cudaStreamCreate(&stream_));
    a_ = Inputs(dtype_, 0).data();
    b_ = Inputs(dtype_, 1).data();
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  bool select_op() const { return op_.op == WEFT_MIN || op_.op == WEFT_MAX; }

  // Runs one reduction (reduce_copy when dst2 is given) of n elements whose inputs are the test's
  // random data starting at element `shift`, checks each output and its guards against the host.
  void RunAndCheck(const Buffer &dst, size_t dst_off, const Buffer *dst2, size_t dst2_off,
                   const Buffer &la, size_t la_off, const Buffer &lb, size_t lb_off, size_t n,
                   size_t shift, bool in_place) {
    SCOPED_TRACE(::testing::Message()
                 << DtypeName(dtype_) << " " << OpName(op_) << " n=" << n << " offsets dst "
                 << dst_off << " local " << la_off << " incoming " << lb_off
                 << (dst2 ? " dst2 " : "") << (dst2 ? std::to_string(dst2_off) : "")
                 << (in_place ? " in place" : ""));
    const char *ha = a_ + shift * es_;
    const char *hb = b_ + shift * es_;
    CUDA_OK(cudaMemset(dst.base, kPoison, dst.bytes));
    if (dst2) CUDA_OK(cudaMemset(dst2->base, kPoison, dst2->bytes));
    CUDA_OK(cudaMemcpy(la.at(la_off, es_), ha, n * es_, cudaMemcpyDefault));
    CUDA_OK(cudaMemcpy(lb.at(lb_off, es_), hb, n * es_, cudaMemcpyDefault));
    // cudaMemset, and cudaMemcpy from pageable memory, may return before the device is done.
    CUDA_OK(cudaDeviceSynchronize());
    weft_result_t res =
        dst2 ? kern_cuda_reduce_copy(dst.at(dst_off, es_), dst2->at(dst2_off, es_),
                                     la.at(la_off, es_), lb.at(lb_off, es_), n, dtype_, op_.op,
                                     op_.avg_nranks, stream_)
             : kern_cuda_reduce(dst.at(dst_off, es_), la.at(la_off, es_), lb.at(lb_off, es_), n,
                                dtype_, op_.op, op_.avg_nranks, stream_);
    ASSERT_EQ(res, WEFT_SUCCESS) << err_last();
    CUDA_OK(cudaStreamSynchronize(stream_));

    std::vector<char> want(n * es_ + 1), got(n * es_ + 1);
    HostReduce(dtype_, op_, want.data(), ha, hb, n);
    CUDA_OK(cudaMemcpy(got.data(), dst.at(dst_off, es_), n * es_, cudaMemcpyDefault));
    ASSERT_TRUE(SameResults(dtype_, select_op(), want.data(), got.data(), n)) << "dst";
    ASSERT_TRUE(GuardsIntact(dst.at(dst_off, es_), n * es_)) << "dst";
    if (dst2) {
      CUDA_OK(cudaMemcpy(got.data(), dst2->at(dst2_off, es_), n * es_, cudaMemcpyDefault));
      ASSERT_TRUE(SameResults(dtype_, select_op(), want.data(), got.data(), n)) << "dst2";
      ASSERT_TRUE(GuardsIntact(dst2->at(dst2_off, es_), n * es_)) << "dst2";
    }
  }

  ::testing::AssertionResult AllocAll(bool mapped_inputs, bool mapped_outputs) {
    size_t bytes = (max_n_ + 8) * es_;
    ::testing::AssertionResult r = Alloc(&dst_, bytes, mapped_outputs);
    if (r) r = Alloc(&dst2_, bytes, mapped_outputs);
    if (r) r = Alloc(&la_, bytes, mapped_inputs);
    if (r) r = Alloc(&lb_, bytes, mapped_inputs);
    return r;
  }

  weft_dtype_t dtype_ = WEFT_INT8;
  OpCase op_ = {WEFT_SUM, 0};
  size_t es_ = 1;
  size_t max_n_ = 0;
  cudaStream_t stream_ = nullptr;
  const char *a_ = nullptr, *b_ = nullptr;  // the dtype's random inputs (Inputs())
  Buffer dst_, dst2_, la_, lb_;
};

TEST_P(CudaReduce, MatchesHostForEveryCountAndAlignment) {
  ASSERT_TRUE(AllocAll(false, false));
  for (size_t n : kCounts) {
    for (const auto &o : kOffsets) {
      RunAndCheck(dst_, o[0], nullptr, 0, la_, o[1], lb_, o[2], n, o[3], false);
      if (HasFatalFailure()) return;
    }
  }
  for (int k : {0, 1}) {
    const size_t *o = kOffsets[k];
    RunAndCheck(dst_, o[0], nullptr, 0, la_, o[1], lb_, o[2], BigCount(dtype_), o[3], false);
    if (HasFatalFailure()) return;
  }
}

TEST_P(CudaReduce, ReduceCopyWritesBothOutputs) {
  ASSERT_TRUE(AllocAll(false, false));
  for (size_t n : kCounts) {
    for (const auto &o : kOffsets) {
      RunAndCheck(dst_, o[0], &dst2_, o[3], la_, o[1], lb_, o[2], n, o[0], false);
      if (HasFatalFailure()) return;
    }
  }
  for (int k : {0, 2}) {
    const size_t *o = kOffsets[k];
    RunAndCheck(dst_, o[0], &dst2_, o[3], la_, o[1], lb_, o[2], BigCount(dtype_), 1, false);
    if (HasFatalFailure()) return;
  }
}

// dst == local (a ring step reducing into its own chunk) and dst == incoming.
TEST_P(CudaReduce, InPlace) {
  ASSERT_TRUE(AllocAll(false, false));
  RunAndCheck(la_, 0, nullptr, 0, la_, 0, lb_, 0, BigCount(dtype_), 0, true);
  if (HasFatalFailure()) return;
  for (size_t n : kCounts) {
    for (size_t off : {0, 1}) {
      RunAndCheck(la_, off, nullptr, 0, la_, off, lb_, off, n, 0, true);
      if (HasFatalFailure()) return;
      RunAndCheck(lb_, off, nullptr, 0, la_, off, lb_, off, n, 1, true);
      if (HasFatalFailure()) return;
      RunAndCheck(la_, off, &dst2_, off + 1, la_, off, lb_, off, n, 2, true);
      if (HasFatalFailure()) return;
    }
  }
}

// Inputs in mapped pinned host memory (what a host-staged peer buffer is), outputs on the device;
// then everything in mapped host memory.
TEST_P(CudaReduce, MappedPinnedHostMemory) {
  ASSERT_TRUE(AllocAll(true, false));
  for (size_t n : {(size_t)0, (size_t)1, (size_t)17, (size_t)1000, (size_t)(1u << 20) + 3}) {
    RunAndCheck(dst_, 0, nullptr, 0, la_, 0, lb_, 0, n, 0, false);
    if (HasFatalFailure()) return;
    RunAndCheck(dst_, 1, &dst2_, 1, la_, 1, lb_, 1, n, 1, false);
    if (HasFatalFailure()) return;
    RunAndCheck(dst_, 0, nullptr, 0, la_, 1, lb_, 2, n, 2, false);
    if (HasFatalFailure()) return;
  }
  Buffer hd, hd2, ha, hb;
  size_t bytes = ((1u << 20) + 16) * es_;
  ASSERT_TRUE(Alloc(&hd, bytes, true));
  ASSERT_TRUE(Alloc(&hd2, bytes, true));
  ASSERT_TRUE(Alloc(&ha, bytes, true));
  ASSERT_TRUE(Alloc(&hb, bytes, true));
  for (size_t n : {(size_t)17, (size_t)(1u << 20) + 3}) {
    RunAndCheck(hd, 1, &hd2, 1, ha, 1, hb, 1, n, 3, false);
    if (HasFatalFailure()) return;
  }
}

const weft_dtype_t kDtypes[] = {WEFT_INT8,    WEFT_UINT8,   WEFT_INT32,       WEFT_UINT32,
                                WEFT_INT64,   WEFT_UINT64,  WEFT_FLOAT16,     WEFT_BFLOAT16,
                                WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2};
// nranks 200 for the final average: beyond int8's range, where the division's conversions matter.
const OpCase kOps[] = {{WEFT_SUM, 0}, {WEFT_PROD, 0}, {WEFT_MIN, 0},  {WEFT_MAX, 0},
                       {WEFT_AVG, 0}, {WEFT_AVG, 3},  {WEFT_AVG, 200}};

std::string ParamName(const ::testing::TestParamInfo<std::tuple<weft_dtype_t, OpCase>> &info) {
  return std::string(DtypeName(std::get<0>(info.param))) + "_" + OpName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndOps, CudaReduce,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kOps)),
                         ParamName);

// ---- scale_avg ----

class CudaScaleAvg : public ::testing::TestWithParam<weft_dtype_t> {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }
};

TEST_P(CudaScaleAvg, MatchesHost) {
  weft_dtype_t d = GetParam();
  size_t es = DtypeSize(d);
  std::vector<size_t> counts(std::begin(kCounts), std::end(kCounts));
  counts.push_back(BigCount(d));
  size_t max_n = counts.back();
  const char *src = Inputs(d, 0).data();
  std::vector<char> want((max_n + 4) * es), got((max_n + 4) * es);
  Buffer in, out;
  ASSERT_TRUE(Alloc(&in, (max_n + 4) * es, false));
  ASSERT_TRUE(Alloc(&out, (max_n + 4) * es, false));
  for (int nranks : {1, 3, 200}) {
    for (size_t n : counts) {
      for (size_t off : {0, 1}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(::testing::Message() << DtypeName(d) << " nranks " << nranks << " n " << n
                                            << " offset " << off << (in_place ? " in place" : ""));
          CUDA_OK(cudaMemset(in.base, kPoison, in.bytes));
          CUDA_OK(cudaMemset(out.base, kPoison, out.bytes));
          CUDA_OK(cudaMemcpy(in.at(off, es), src, n * es, cudaMemcpyHostToDevice));
          const Buffer &o = in_place ? in : out;
          size_t o_off = in_place ? off : off + 1;  // out of place: different alignments too
          ASSERT_EQ(kern_cuda_scale_avg(o.at(o_off, es), in.at(off, es), n, d, nranks, nullptr),
                    WEFT_SUCCESS)
              << err_last();
          CUDA_OK(cudaDeviceSynchronize());
          kern_scale_avg(want.data(), src, n, d, nranks);
          CUDA_OK(cudaMemcpy(got.data(), o.at(o_off, es), n * es, cudaMemcpyDeviceToHost));
          ASSERT_TRUE(SameResults(d, false, want.data(), got.data(), n));
          ASSERT_TRUE(GuardsIntact(o.at(o_off, es), n * es));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CudaScaleAvg, ::testing::ValuesIn(kDtypes),
                         [](const ::testing::TestParamInfo<weft_dtype_t> &info) {
                           return std::string(DtypeName(info.param));
                         });

// ---- copy ----

class CudaCopy : public ::testing::Test {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }
};

// Every pair of byte offsets within 16 (so every word width the copy picks), small and large
// counts, device to device and from mapped host memory.
TEST_F(CudaCopy, EveryAlignmentAndCount) {
  const size_t kMax = (40u << 20) + 37;
  std::vector<char> src(kMax + 16), got(kMax + 16);
  std::mt19937_64 rng(5);
  FillRandom(WEFT_UINT8, src.data(), src.size(), rng);
  Buffer in, out, host_in;
  ASSERT_TRUE(Alloc(&in, kMax + 16, false));
  ASSERT_TRUE(Alloc(&out, kMax + 16, false));
  ASSERT_TRUE(Alloc(&host_in, (1u << 20) + 64, true));
  CUDA_OK(cudaMemcpy(in.at(0, 1), src.data(), kMax + 16, cudaMemcpyHostToDevice));
  memcpy(host_in.at(0, 1), src.data(), (1u << 20) + 32);
  auto check = [&](const Buffer &from, size_t so, size_t dofs, size_t n) {
    SCOPED_TRACE(::testing::Message()
                 << "copy " << n << " bytes, src offset " << so << ", dst offset " << dofs
                 << (from.mapped ? " from mapped host memory" : ""));
    CUDA_OK(cudaMemset(out.base, kPoison, out.bytes));
    ASSERT_EQ(kern_cuda_copy(out.at(dofs, 1), from.at(so, 1), n, nullptr), WEFT_SUCCESS)
        << err_last();
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got.data(), out.at(dofs, 1), n, cudaMemcpyDeviceToHost));
    ASSERT_EQ(memcmp(got.data(), src.data() + so, n), 0);
    ASSERT_TRUE(GuardsIntact(out.at(dofs, 1), n));
  };
  for (size_t so = 0; so < 16; so++) {
    for (size_t dofs = 0; dofs < 16; dofs++) {
      for (size_t n : {0, 1, 2, 3, 15, 16, 17, 31, 33, 1000, (1 << 20) + 3}) {
        check(in, so, dofs, n);
        if (HasFatalFailure()) return;
      }
    }
  }
  for (size_t so : {0, 1, 2, 4, 8}) {
    check(in, so, 0, kMax);
    if (HasFatalFailure()) return;
    check(host_in, so, 3, (1u << 20) + 3);
    if (HasFatalFailure()) return;
  }
}

// ---- Everywhere: argument checks, and the error a call returns without a device ----

TEST(CudaKernelArgs, RejectsBadArgumentsWithAMessage) {
  alignas(16) char buf[64] = {0};
  EXPECT_EQ(kern_cuda_reduce(buf, buf, buf, 4, (weft_dtype_t)WEFT_NUM_DTYPES, WEFT_SUM, 0, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("unknown dtype 12"), std::string::npos) << err_last();
  EXPECT_EQ(kern_cuda_reduce(buf, buf, buf, 4, WEFT_FLOAT32, (weft_op_t)-1, 0, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("unknown op -1"), std::string::npos) << err_last();
  EXPECT_EQ(kern_cuda_reduce(buf, nullptr, buf, 4, WEFT_FLOAT32, WEFT_SUM, 0, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("NULL buffer"), std::string::npos) << err_last();
  EXPECT_EQ(kern_cuda_reduce(buf + 2, buf, buf, 4, WEFT_FLOAT32, WEFT_SUM, 0, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("not aligned to 4 bytes"), std::string::npos)
      << err_last();
  EXPECT_EQ(kern_cuda_reduce_copy(buf, buf + 1, buf, buf, 4, WEFT_INT32, WEFT_SUM, 0, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("second output"), std::string::npos) << err_last();
  EXPECT_EQ(kern_cuda_reduce(buf, buf, buf, 4, WEFT_INT32, WEFT_AVG, -2, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kern_cuda_scale_avg(buf, buf, 4, WEFT_FLOAT32, 0, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("nranks 0"), std::string::npos) << err_last();
  EXPECT_EQ(kern_cuda_copy(nullptr, buf, 4, nullptr), WEFT_ERR_INVALID_ARGUMENT);
}

// Nothing to do is not an error and launches nothing, so it needs neither buffers nor a device.
TEST(CudaKernelArgs, ZeroCountNeedsNoBuffersAndNoDevice) {
  EXPECT_EQ(kern_cuda_reduce(nullptr, nullptr, nullptr, 0, WEFT_FLOAT32, WEFT_SUM, 0, nullptr),
            WEFT_SUCCESS);
  EXPECT_EQ(kern_cuda_reduce_copy(nullptr, nullptr, nullptr, nullptr, 0, WEFT_BFLOAT16, WEFT_AVG, 4,
                                  nullptr),
            WEFT_SUCCESS);
  EXPECT_EQ(kern_cuda_scale_avg(nullptr, nullptr, 0, WEFT_INT8, 2, nullptr), WEFT_SUCCESS);
  EXPECT_EQ(kern_cuda_copy(nullptr, nullptr, 0, nullptr), WEFT_SUCCESS);
}

// Without a device a call fails (it must not pretend the work was done) with the CUDA error's
// name in the message. With a device this case does not exist, so the test skips.
TEST(CudaKernelArgs, WithoutADeviceCallsFailNamingTheCudaError) {
  if (NoDeviceReason().empty()) GTEST_SKIP() << "a CUDA device is present";
  alignas(16) char buf[64] = {0};
  EXPECT_EQ(kern_cuda_reduce(buf, buf, buf, 4, WEFT_FLOAT32, WEFT_SUM, 0, nullptr),
            WEFT_ERR_SYSTEM);
  std::string msg = err_last();
  EXPECT_NE(msg.find("cuda reduce (float32 sum, 4 elements): cudaError"), std::string::npos) << msg;
  EXPECT_EQ(kern_cuda_copy(buf, buf + 16, 16, nullptr), WEFT_ERR_SYSTEM);
  EXPECT_NE(std::string(err_last()).find("cuda copy (16 bytes): cudaError"), std::string::npos)
      << err_last();
}

}  // namespace
