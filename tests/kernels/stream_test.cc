// stream_test.cc -- kern_copy_stream writes what memcpy writes, at every length and alignment of
// either side (the non-temporal part needs 16-byte alignment of dst: the edges are plain), and
// nothing outside dst.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

extern "C" {
#include "kernels/stream.h"
}

namespace {

void check(size_t len, size_t src_off, size_t dst_off) {
  const size_t guard = 64;
  std::vector<unsigned char> src(len + src_off + 16), dst(len + dst_off + 2 * guard);
  for (size_t i = 0; i < src.size(); i++) src[i] = (unsigned char)(i * 131 + 7);
  std::memset(dst.data(), 0xA5, dst.size());
  kern_copy_stream(dst.data() + guard + dst_off, src.data() + src_off, len);
  for (size_t i = 0; i < dst.size(); i++) {
    bool inside = i >= guard + dst_off && i < guard + dst_off + len;
    unsigned char want = inside ? src[src_off + (i - guard - dst_off)] : 0xA5;
    ASSERT_EQ(dst[i], want) << "byte " << i << " of a copy of " << len << " bytes, src offset "
                            << src_off << ", dst offset " << dst_off;
  }
}

TEST(CopyStream, EveryLengthAndAlignmentUpTo300Bytes) {
  for (size_t len = 0; len <= 300; len++)
    for (size_t s = 0; s < 17; s += 3)
      for (size_t d = 0; d < 17; d++) check(len, s, d);
}

TEST(CopyStream, ASliceAndAnOddLargeLength) {
  check(65536, 0, 0);
  check(65536, 4, 0);
  check((1 << 20) + 13, 1, 7);
}

}  // namespace
