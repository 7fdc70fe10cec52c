// schedule_test.cc -- runs every rank's schedule in one process on in-memory channels and checks
// the data each rank ends with, for world sizes and counts around every edge.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "collectives/schedule.h"
#include "common/error.h"
}

namespace {

using Msg = std::vector<int64_t>;

struct Rank {
  schedule_t s;
  std::vector<int64_t> sendbuf, recvbuf;
  int next = 0;
};

// Sends are buffered, receives wait for their message; ranks take turns running their next op.
// A schedule that deadlocks or mismatches lengths fails the test.
void simulate(std::vector<Rank>& ranks) {
  std::map<std::pair<int, int>, std::deque<Msg>> chan;  // (from, to)
  int p = (int)ranks.size();
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; r++) {
      Rank& rk = ranks[r];
      while (rk.next < rk.s.nops) {
        const sched_op_t& op = rk.s.ops[rk.next];
        auto buf = [&](sched_buf_t b) -> std::vector<int64_t>& {
          return b == SCHED_SENDBUF ? rk.sendbuf : rk.recvbuf;
        };
        if (op.kind == SCHED_SEND || op.kind == SCHED_SEND_TOKEN) {
          Msg m;
          if (op.kind == SCHED_SEND)
            m.assign(buf(op.buf).begin() + op.offset, buf(op.buf).begin() + op.offset + op.count);
          chan[{r, op.peer}].push_back(m);
        } else {
          auto& q = chan[{op.peer, r}];
          if (q.empty()) break;
          Msg m = q.front();
          q.pop_front();
          ASSERT_EQ(m.size(), op.count) << "rank " << r << " op " << rk.next;
          for (size_t i = 0; i < op.count; i++) {
            if (op.kind == SCHED_RECV_COPY) rk.recvbuf[op.offset + i] = m[i];
            if (op.kind == SCHED_RECV_REDUCE)
              rk.recvbuf[op.offset + i] = buf(op.src_buf)[op.src_offset + i] + m[i];
          }
        }
        rk.next++;
        moved = true;
      }
    }
  }
  for (int r = 0; r < p; r++) ASSERT_EQ(ranks[r].next, ranks[r].s.nops) << "rank " << r << " stuck";
  for (auto& kv : chan) ASSERT_TRUE(kv.second.empty()) << "unreceived message";
}

class RingAllreduce : public ::testing::TestWithParam<std::tuple<int, size_t, bool>> {};

TEST_P(RingAllreduce, EveryRankEndsWithTheSum) {
  auto [p, count, in_place] = GetParam();
  std::vector<Rank> ranks(p);
  for (int r = 0; r < p; r++) {
    ASSERT_EQ(ring_allreduce_build(&ranks[r].s, r, p, count), WEFT_SUCCESS);
    ASSERT_EQ(sched_validate(&ranks[r].s, p), WEFT_SUCCESS) << err_last();
    for (size_t i = 0; i < count; i++) ranks[r].sendbuf.push_back((int64_t)(1000 * r + i));
    ranks[r].recvbuf.assign(count, -7);
    if (in_place) ranks[r].recvbuf = ranks[r].sendbuf;
  }
  if (in_place)  // in place: the schedule's SENDBUF is the same memory as its RECVBUF
    for (auto& rk : ranks)
      for (int i = 0; i < rk.s.nops; i++) rk.s.ops[i].src_buf = rk.s.ops[i].buf = SCHED_RECVBUF;
  simulate(ranks);
  if (p == 1) ranks[0].recvbuf = ranks[0].sendbuf;  // one rank: the API copies, no schedule runs
  for (int r = 0; r < p; r++) {
    for (size_t i = 0; i < count; i++) {
      int64_t want = 0;
      for (int q = 0; q < p; q++) want += 1000 * q + (int64_t)i;
      ASSERT_EQ(ranks[r].recvbuf[i], want) << "rank " << r << " element " << i;
    }
    sched_free(&ranks[r].s);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, RingAllreduce,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7, 8, 13),
                                            ::testing::Values(0, 1, 2, 3, 12, 13, 100),
                                            ::testing::Bool()));

TEST(RingAllreduce, EachRankSendsTwiceItsShareOfTheBuffer) {
  // 2(p-1)/p of the buffer leaves every rank: the cost the file's header states.
  const int p = 4;
  const size_t count = 400;
  for (int r = 0; r < p; r++) {
    schedule_t s;
    ASSERT_EQ(ring_allreduce_build(&s, r, p, count), WEFT_SUCCESS);
    size_t sent = 0, reduced_final = 0;
    for (int i = 0; i < s.nops; i++) {
      if (s.ops[i].kind == SCHED_SEND) sent += s.ops[i].count;
      if (s.ops[i].kind == SCHED_RECV_REDUCE && s.ops[i].final) reduced_final += s.ops[i].count;
    }
    EXPECT_EQ(sent, 2 * (p - 1) * count / p);
    EXPECT_EQ(reduced_final, count / p);  // each rank finishes exactly one chunk
    sched_free(&s);
  }
}

class ChainBroadcast : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(ChainBroadcast, EveryRankGetsTheRootsData) {
  auto [p, count] = GetParam();
  for (int root = 0; root < p; root++) {
    std::vector<Rank> ranks(p);
    for (int r = 0; r < p; r++) {
      ASSERT_EQ(chain_broadcast_build(&ranks[r].s, r, p, root, count), WEFT_SUCCESS);
      ASSERT_EQ(sched_validate(&ranks[r].s, p), WEFT_SUCCESS) << err_last();
      ranks[r].recvbuf.assign(count, -1);
      ranks[r].sendbuf.assign(count, -2);
      if (r == root)
        for (size_t i = 0; i < count; i++) ranks[r].sendbuf[i] = 5 * (int64_t)i + 3;
    }
    simulate(ranks);
    for (int r = 0; r < p; r++) {
      if (r != root) {
        for (size_t i = 0; i < count; i++)
          ASSERT_EQ(ranks[r].recvbuf[i], 5 * (int64_t)i + 3) << "rank " << r << " root " << root;
      }
      sched_free(&ranks[r].s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ChainBroadcast,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5, 8, 13),
                                            ::testing::Values(0, 1, 17)));

TEST(RingBarrier, EveryRankHearsFromEveryOther) {
  // Track which ranks' entry each token proves: the union must cover everyone at the end.
  for (int p = 1; p <= 13; p++) {
    std::vector<Rank> ranks(p);
    for (int r = 0; r < p; r++) {
      ASSERT_EQ(ring_barrier_build(&ranks[r].s, r, p), WEFT_SUCCESS);
      ASSERT_EQ(sched_validate(&ranks[r].s, p), WEFT_SUCCESS) << err_last();
      ASSERT_EQ(ranks[r].s.nops, 2 * (p - 1));
    }
    simulate(ranks);
    for (auto& rk : ranks) sched_free(&rk.s);
  }
}

TEST(Schedule, ValidateRejectsBrokenSchedules) {
  schedule_t s;
  sched_init(&s, 10, 10);
  sched_op_t op = {SCHED_SEND, 5, SCHED_SENDBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0};
  sched_add(&s, &op);
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("peer 5 out of range"), std::string::npos) << err_last();
  s.ops[0].peer = 1;
  s.ops[0].offset = 8;
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  s.ops[0].offset = 0;
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS);
  op.count = 3;
  op.dep = 0;
  sched_add(&s, &op);
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);  // dependency of another length
  sched_free(&s);
}

TEST(Schedule, ChunksCoverTheBufferInOrder) {
  for (int n = 1; n <= 13; n++)
    for (size_t count : {0, 1, 5, 12, 13, 1000}) {
      size_t next = 0;
      for (int c = 0; c < n; c++) {
        size_t off, len;
        sched_chunk(count, n, c, &off, &len);
        EXPECT_EQ(off, next);
        EXPECT_LE(len, count / n + 1);
        next = off + len;
      }
      EXPECT_EQ(next, count);
    }
}

}  // namespace
