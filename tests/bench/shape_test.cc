// shape_test.cc -- sizes, counts and in-place offsets per collective, as nccl-tests prints them.
#include "tools/bench/shape.h"

#include <gtest/gtest.h>

#include <vector>

#include "tools/bench/sizes.h"

namespace {

// all_reduce, broadcast, reduce, sendrecv: the size is one rank's buffer, count = size / eltsize.
TEST(Shape, WholeBufferCollectives) {
  for (bench_coll_t c : {BENCH_ALL_REDUCE, BENCH_BROADCAST, BENCH_REDUCE, BENCH_SENDRECV}) {
    bench_shape_t s = bench_shape(c, 4, 4, 4096);
    EXPECT_EQ(s.bytes, 4096u) << c;
    EXPECT_EQ(s.count, 1024u) << c;
    EXPECT_EQ(s.send_count, 1024u) << c;
    EXPECT_EQ(s.recv_count, 1024u) << c;
    EXPECT_EQ(s.send_offset, 0u) << c;
    EXPECT_EQ(s.recv_offset, 0u) << c;
    EXPECT_EQ(s.has_in_place, c != BENCH_SENDRECV) << c;
    EXPECT_EQ(bench_shape_granule(c, 4, 4), 4u) << c;
  }
  EXPECT_EQ(bench_shape(BENCH_ALL_REDUCE, 4, 8, 4100).bytes, 4096u);  // whole elements only
}

// all_gather: nccl-tests' size is the gathered buffer, its count the per-rank sendcount, rounded
// down to a multiple of 4 elements: 4096 B of float on 4 ranks = 256 per rank; on 3 ranks
// 1024 / 12 * 4 = 340 per rank, printed as 4080 B.
TEST(Shape, AllGatherFollowsNcclTests) {
  bench_shape_t s = bench_shape(BENCH_ALL_GATHER, 4, 4, 4096);
  EXPECT_EQ(s.bytes, 4096u);
  EXPECT_EQ(s.count, 256u);
  EXPECT_EQ(s.send_count, 256u);
  EXPECT_EQ(s.recv_count, 1024u);
  EXPECT_EQ(s.send_offset, 256u);  // in place: sendbuf = recvbuf + rank * count
  EXPECT_EQ(s.recv_offset, 0u);
  EXPECT_TRUE(s.has_in_place);
  s = bench_shape(BENCH_ALL_GATHER, 3, 4, 4096);
  EXPECT_EQ(s.bytes, 4080u);
  EXPECT_EQ(s.count, 340u);
  EXPECT_EQ(s.recv_count, 1020u);
  s = bench_shape(BENCH_ALL_GATHER, 8, 2, 62);  // 31 elements < 4 per rank x 8: nothing
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.count, 0u);
}

TEST(Shape, ReduceScatterFollowsNcclTests) {
  bench_shape_t s = bench_shape(BENCH_REDUCE_SCATTER, 4, 4, 1u << 20);
  EXPECT_EQ(s.bytes, 1u << 20);
  EXPECT_EQ(s.count, 65536u);  // recvcount
  EXPECT_EQ(s.send_count, 262144u);
  EXPECT_EQ(s.recv_count, 65536u);
  EXPECT_EQ(s.send_offset, 0u);
  EXPECT_EQ(s.recv_offset, 65536u);                   // in place: recvbuf = sendbuf + rank * count
  s = bench_shape(BENCH_REDUCE_SCATTER, 5, 8, 1000);  // 125 elements -> 6 * 4 per rank
  EXPECT_EQ(s.count, 24u);
  EXPECT_EQ(s.bytes, 24u * 5 * 8);
}

// gather_perf and scatter_perf: the size is the root's whole buffer, the count per rank as
// all_gather's and reduce_scatter's, and so are the in-place layouts (at the root).
// alltoall_perf: the size is one rank's send buffer, c per peer (4-aligned like the split
// collectives), both buffers n c, and no in-place row (weft has no in-place all-to-all).
TEST(Shape, AllToAllSplitsPerPeer) {
  bench_shape_t s = bench_shape(BENCH_ALL_TO_ALL, 4, 4, 1000);
  EXPECT_EQ(s.count, 60u);  // 250 elements / 4 peers = 62, down to a multiple of 4
  EXPECT_EQ(s.send_count, 240u);
  EXPECT_EQ(s.recv_count, 240u);
  EXPECT_EQ(s.bytes, 960u);
  EXPECT_EQ(s.has_in_place, 0);
  EXPECT_EQ(bench_shape_granule(BENCH_ALL_TO_ALL, 3, 8), 96u);
}

TEST(Shape, GatherAndScatterFollowNcclTests) {
  bench_shape_t g = bench_shape(BENCH_GATHER, 4, 4, 4096);
  EXPECT_EQ(g.bytes, 4096u);
  EXPECT_EQ(g.count, 256u);  // sendcount
  EXPECT_EQ(g.send_count, 256u);
  EXPECT_EQ(g.recv_count, 1024u);
  EXPECT_EQ(g.send_offset, 256u);  // in place: sendbuf = recvbuf + root * count
  EXPECT_EQ(g.recv_offset, 0u);
  EXPECT_TRUE(g.has_in_place);
  bench_shape_t s = bench_shape(BENCH_SCATTER, 4, 4, 4096);
  EXPECT_EQ(s.bytes, 4096u);
  EXPECT_EQ(s.count, 256u);  // recvcount
  EXPECT_EQ(s.send_count, 1024u);
  EXPECT_EQ(s.recv_count, 256u);
  EXPECT_EQ(s.send_offset, 0u);
  EXPECT_EQ(s.recv_offset, 256u);  // in place: recvbuf = sendbuf + root * count
  EXPECT_TRUE(s.has_in_place);
  for (bench_coll_t c : {BENCH_GATHER, BENCH_SCATTER}) {
    bench_shape_t odd = bench_shape(c, 3, 4, 4096);  // 340 per rank, printed as 4080 B
    EXPECT_EQ(odd.count, 340u) << c;
    EXPECT_EQ(odd.bytes, 4080u) << c;
    EXPECT_EQ(bench_shape_granule(c, 3, 4), 48u) << c;
    EXPECT_EQ(bench_shape(c, 8, 2, 62).count, 0u) << c;
  }
}

TEST(Shape, BarrierMovesNothing) {
  bench_shape_t s = bench_shape(BENCH_BARRIER, 4, 4, 1u << 20);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.count, 0u);
  EXPECT_FALSE(s.has_in_place);
}

// The size column is max(send, recv) bytes: the buffers never need more than that.
TEST(Shape, SizeCoversBothBuffers) {
  for (int c = 0; c < BENCH_NUM_COLLS; c++) {
    for (int n : {1, 2, 3, 4, 7, 16}) {
      for (size_t e : {1u, 2u, 4u, 8u}) {
        for (size_t bytes : {0u, 1u, 100u, 4096u, 123457u}) {
          bench_shape_t s = bench_shape(static_cast<bench_coll_t>(c), n, e, bytes);
          EXPECT_LE(s.bytes, bytes);
          EXPECT_EQ(s.bytes, std::max(s.send_count, s.recv_count) * e) << c << " " << n;
          if (s.has_in_place) {
            // The in-place send or receive part lies inside the buffer of s.bytes.
            EXPECT_LE(((n - 1) * s.send_offset + s.send_count) * e, s.bytes);
            EXPECT_LE(((n - 1) * s.recv_offset + s.recv_count) * e, s.bytes);
          }
        }
      }
    }
  }
}

// With the granule, the size walk gives nccl-tests' rows: -b 4K -e 64K -f 2 on 3 ranks of float.
TEST(Shape, GranuleGivesNcclTestsRows) {
  size_t g = bench_shape_granule(BENCH_ALL_GATHER, 3, 4);
  EXPECT_EQ(g, 48u);
  bench_sizes_t it;
  bench_sizes_begin(&it, 4096, 65536, 2, 0, g);
  std::vector<size_t> sizes, counts;
  size_t bytes;
  while (bench_sizes_next(&it, &bytes)) {
    bench_shape_t s = bench_shape(BENCH_ALL_GATHER, 3, 4, bytes);
    EXPECT_EQ(s.bytes, bytes);
    sizes.push_back(s.bytes);
    counts.push_back(s.count);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4080, 8160, 16368, 32736, 65520}));
  EXPECT_EQ(counts, (std::vector<size_t>{340, 680, 1364, 2728, 5460}));
}

}  // namespace
