// cuda_plan_test.cc -- the CUDA kernels' host-side planning (kernels/cuda/plan.c), on the CPU:
// head/body/tail splits exhaustively over pointer alignments and small counts, copy widths, and
// launch geometry. The kernels walk exactly these ranges, so an element missed or done twice here
// would be one missed or done twice on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/plan.h"

namespace {

const uintptr_t kBase = 0x7f0000001000;  // 4 KiB aligned, like a cudaMalloc'd block

// Every element of [0, n) is done exactly once by the head, the vectors and the tail; every vector
// starts on a vec_bytes boundary in every buffer; head and tail are as short as they can be.
// Returns what is wrong, or "" (called millions of times: no gtest machinery on the good path).
std::string CheckSplit(const uintptr_t *addrs, int naddrs, size_t es, size_t n, size_t vec_bytes) {
  kern_cuda_split_t s = kern_cuda_plan_split(addrs, naddrs, es, n, vec_bytes);
  auto fail = [&](const char *what) {
    std::ostringstream where;
    where << what << " (elem " << es << ", n " << n << ", vec " << vec_bytes << ", offsets";
    for (int k = 0; k < naddrs; k++) where << " " << addrs[k] % 64;
    where << "; split " << s.head << "+" << s.nvec << "x" << s.vec_elems << "+" << s.tail << ")";
    return where.str();
  };
  if (s.vec_elems != vec_bytes / es) return fail("wrong vector length");
  if (s.head > n || s.tail > n || s.nvec > n || s.head + s.nvec * s.vec_elems + s.tail != n)
    return fail("parts do not add up to n");

  int done[64] = {0};  // callers keep n small
  if (n > 64) return fail("test bug: n too large for CheckSplit");
  for (size_t i = 0; i < s.head; i++) done[i]++;
  for (size_t v = 0; v < s.nvec; v++) {
    size_t first = s.head + v * s.vec_elems;
    for (int k = 0; k < naddrs; k++)
      if ((addrs[k] + first * es) % vec_bytes != 0) return fail("unaligned vector");
    for (size_t e = 0; e < s.vec_elems; e++) done[first + e]++;
  }
  for (size_t i = 0; i < s.tail; i++) done[s.head + s.nvec * s.vec_elems + i]++;
  for (size_t i = 0; i < n; i++)
    if (done[i] != 1) return fail("an element not done exactly once");

  // Vectorized exactly when one index aligns every buffer and a whole vector fits after it.
  bool same = true;
  for (int k = 1; k < naddrs; k++) same = same && addrs[k] % vec_bytes == addrs[0] % vec_bytes;
  size_t rem = addrs[0] % vec_bytes;
  bool can = same && rem % es == 0;
  size_t head = can ? ((vec_bytes - rem) % vec_bytes) / es : n;
  if (can && head + s.vec_elems <= n) {
    if (s.head != head || s.nvec < 1 || s.tail >= s.vec_elems) return fail("not the longest body");
  } else if (s.nvec != 0) {
    return fail("vectors where none can be aligned");
  }
  if (kern_cuda_split_items(&s) != std::max(s.nvec, std::max(s.head, s.tail)))
    return fail("wrong item count");
  return "";
}

// Up to four buffers (reduce_copy: two outputs, two inputs), each at every element-aligned offset
// within 16 bytes (only the offset modulo 16 can matter) plus one 16 bytes further, for every
// count up to three vectors of bytes.
TEST(CudaPlan, SplitCoversEveryElementOnceForEveryAlignment) {
  const size_t kSizes[] = {1, 2, 4, 8};
  for (size_t es : kSizes) {
    for (int naddrs = 1; naddrs <= 4; naddrs++) {
      const size_t steps = 16 / es + 1;  // offsets 0, es, ..., 16
      size_t combos = 1;
      for (int k = 0; k < naddrs; k++) combos *= steps;
      for (size_t c = 0; c < combos; c++) {
        uintptr_t addrs[4];
        size_t rest = c;
        for (int k = 0; k < naddrs; k++) {
          addrs[k] = kBase + (uintptr_t)k * 0x100000 + (rest % steps) * es;
          rest /= steps;
        }
        for (size_t n = 0; n <= 48; n++) {
          std::string err = CheckSplit(addrs, naddrs, es, n, KERN_CUDA_VEC_BYTES);
          ASSERT_EQ(err, "");
        }
      }
    }
  }
}

// Buffers not aligned to their element size never reach a vector boundary together: the whole
// range goes element-wise (the API rejects such pointers, but the plan stays correct).
TEST(CudaPlan, ElementMisalignedBuffersAreAllScalar) {
  uintptr_t addrs[3] = {kBase + 1, kBase + 0x1001, kBase + 0x2001};
  for (size_t n = 0; n <= 40; n++) {
    kern_cuda_split_t s = kern_cuda_plan_split(addrs, 3, 4, n, 16);
    EXPECT_EQ(s.head, n);
    EXPECT_EQ(s.nvec, 0u);
    EXPECT_EQ(s.tail, 0u);
  }
}

TEST(CudaPlan, LargeCountsSplitWithoutOverflow) {
  uintptr_t addrs[3] = {kBase + 4, kBase + 0x10004, kBase + 0x20004};
  size_t n = ((size_t)1 << 40) + 7;
  kern_cuda_split_t s = kern_cuda_plan_split(addrs, 3, 4, n, 16);
  EXPECT_EQ(s.head, 3u);
  EXPECT_EQ(s.nvec, (n - 3) / 4);
  EXPECT_EQ(s.tail, (n - 3) % 4);
}

// The copy's word width: the widest power of two both addresses agree modulo, checked against the
// definition for every pair of offsets in 64 bytes; and each width's split, byte by byte.
TEST(CudaPlan, CopyUsesTheWidestCommonAlignment) {
  for (uintptr_t da = 0; da < 64; da++) {
    for (uintptr_t sa = 0; sa < 64; sa++) {
      uintptr_t addrs[2] = {kBase + da, kBase + 0x4000 + sa};
      size_t want = 16;
      while (want > 1 && addrs[0] % want != addrs[1] % want) want /= 2;
      size_t width = kern_cuda_common_alignment(addrs, 2, 16);
      ASSERT_EQ(width, want) << da << " " << sa;
      for (size_t n = 0; n <= 40; n++) ASSERT_EQ(CheckSplit(addrs, 2, 1, n, width), "");
    }
  }
  uintptr_t one = kBase + 3;
  EXPECT_EQ(kern_cuda_common_alignment(&one, 1, 16), 16u);  // a single buffer: no constraint
}

TEST(CudaPlan, NoLaunchForNoWork) {
  kern_cuda_dims_t d = kern_cuda_launch_dims(0, 132);
  EXPECT_EQ(d.blocks, 0u);
}

// One thread per item up to the bound, then the bound; every item reachable by the grid-stride
// loop (blocks > 0 whenever there is work).
TEST(CudaPlan, GridIsSizedFromTheCountAndBounded) {
  const int kSms[] = {-1, 0, 1, 2, 108, 132};
  const size_t kItems[] = {
      1, 2, 255, 256, 257, 1000, 4096, 1 << 20, (size_t)1 << 33, (size_t)1 << 62};
  for (int sms : kSms) {
    size_t cap = (size_t)(sms > 0 ? sms : 1) * KERN_CUDA_BLOCKS_PER_SM;
    for (size_t items : kItems) {
      kern_cuda_dims_t d = kern_cuda_launch_dims(items, sms);
      SCOPED_TRACE(::testing::Message() << "sms " << sms << " items " << items);
      EXPECT_EQ(d.threads, (unsigned)KERN_CUDA_THREADS);
      EXPECT_GE(d.blocks, 1u);
      EXPECT_LE(d.blocks, cap);
      size_t need = (items + KERN_CUDA_THREADS - 1) / KERN_CUDA_THREADS;
      EXPECT_EQ(d.blocks, std::min(need, cap));
    }
  }
  // An absurd multiprocessor count still gives a legal gridDim.x.
  EXPECT_LE(kern_cuda_launch_dims((size_t)1 << 62, 0x7fffffff).blocks, 0x7fffffffu);
}

// The grid-stride walk with the planned grid: every item by exactly one thread, for counts around
// the block size and the bound.
TEST(CudaPlan, GridStrideWalkCoversEveryItemOnce) {
  const size_t kItems[] = {1, 7, 255, 256, 257, 1023, 1024, 1025, 5000, 20000};
  for (int sms : {1, 3}) {
    for (size_t items : kItems) {
      kern_cuda_dims_t d = kern_cuda_launch_dims(items, sms);
      size_t stride = (size_t)d.blocks * d.threads;
      std::vector<int> done(items, 0);
      for (size_t tid = 0; tid < stride; tid++)
        for (size_t i = tid; i < items; i += stride) done[i]++;
      for (size_t i = 0; i < items; i++) ASSERT_EQ(done[i], 1) << items << " " << i;
    }
  }
}

}  // namespace
