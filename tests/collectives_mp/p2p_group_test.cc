// p2p_group_test.cc -- weft_p2p_group and tags over real processes: sends and receives issued
// together complete together whatever their order and size (no even/odd turn-taking), ops between
// two ranks pair up by tag whatever order each side lists them in, and a tag or count the two
// sides disagree on fails the receiver naming both.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

int32_t value(int from, int tag, size_t i) { return (int32_t)(from * 100000 + tag * 1000 + i); }

// Every rank sends to both neighbours first and then receives from both, in one group, at sizes
// from 0 to past any socket buffer: the ring's two directions at once.
std::string ring_both_ways(int rank, int n, int port, const char* transport) {
  setenv("WEFT_TRANSPORT", transport, 1);
  weft_comm_t* comm;
  std::string err = join(rank, n, port, &comm);
  if (!err.empty()) return err;
  int right = (rank + 1) % n, left = (rank + n - 1) % n;
  for (size_t count : {(size_t)0, (size_t)1, (size_t)1000, (size_t)(1 << 20) + 7}) {
    std::vector<int32_t> to_r(count), to_l(count), from_l(count, -1), from_r(count, -1);
    for (size_t i = 0; i < count; i++) {
      to_r[i] = value(rank, 1, i);
      to_l[i] = value(rank, 2, i);
    }
    // With two ranks, left and right are the same peer: tags tell the two messages apart.
    weft_p2p_op_t ops[4] = {{WEFT_COLL_SEND, to_r.data(), count, WEFT_INT32, right, 1},
                            {WEFT_COLL_SEND, to_l.data(), count, WEFT_INT32, left, 2},
                            {WEFT_COLL_RECV, from_l.data(), count, WEFT_INT32, left, 1},
                            {WEFT_COLL_RECV, from_r.data(), count, WEFT_INT32, right, 2}};
    if (weft_p2p_group(ops, 4, comm, nullptr) != WEFT_SUCCESS)
      return "rank " + std::to_string(rank) + ": " + weft_last_error();
    for (size_t i = 0; i < count; i++)
      if (from_l[i] != value(left, 1, i) || from_r[i] != value(right, 2, i))
        return "rank " + std::to_string(rank) + ": count " + std::to_string(count) + ": element " +
               std::to_string(i) + " is " + std::to_string(from_l[i]) + " / " +
               std::to_string(from_r[i]);
  }
  // Collectives still line up afterwards.
  err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 100, false);
  weft_comm_destroy(comm);
  return err;
}

class P2PGroup : public ::testing::TestWithParam<int> {};

TEST_P(P2PGroup, SendFirstBothWaysAnySize) {
  auto res = mp_run(
      GetParam(), [](int rank, int n, int port) { return ring_both_ways(rank, n, port, "auto"); },
      120000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST_P(P2PGroup, SendFirstBothWaysAnySizeOverTcp) {
  auto res = mp_run(
      GetParam(), [](int rank, int n, int port) { return ring_both_ways(rank, n, port, "tcp"); },
      120000);
  EXPECT_EQ(mp_summary(res), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, P2PGroup, ::testing::Values(2, 3, 5));

// Rank 0 lists its sends to rank 1 by tags 7, 3, 5, 3 (sizes differ by tag); rank 1 its receives
// by 3, 5, 3, 7, then a tagged pair and a plain pair: each lands by tag, and the two with tag 3
// in the order issued.
TEST(P2PTags, MatchByTagWhateverTheOrder) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        const int send_tags[4] = {7, 3, 5, 3}, recv_tags[4] = {3, 5, 3, 7};
        auto size = [](int tag, int k) { return (size_t)(tag * 100 + k); };
        std::vector<std::vector<int32_t>> bufs(4);
        weft_p2p_op_t ops[4];
        for (int k = 0; k < 4; k++) {
          // The k-th op of a tag (0 or 1 for tag 3) has its own size and values.
          int tag = rank == 0 ? send_tags[k] : recv_tags[k];
          int nth = 0;
          for (int j = 0; j < k; j++) nth += (rank == 0 ? send_tags[j] : recv_tags[j]) == tag;
          bufs[k].assign(size(tag, nth), -1);
          if (rank == 0)
            for (size_t i = 0; i < bufs[k].size(); i++) bufs[k][i] = value(nth, tag, i);
          ops[k] = {rank == 0 ? WEFT_COLL_SEND : WEFT_COLL_RECV,
                    bufs[k].data(),
                    bufs[k].size(),
                    WEFT_INT32,
                    1 - rank,
                    tag};
        }
        if (weft_p2p_group(ops, 4, comm, nullptr) != WEFT_SUCCESS)
          return "rank " + std::to_string(rank) + ": " + weft_last_error();
        if (rank == 1)
          for (int k = 0; k < 4; k++) {
            int tag = recv_tags[k], nth = 0;
            for (int j = 0; j < k; j++) nth += recv_tags[j] == tag;
            for (size_t i = 0; i < bufs[k].size(); i++)
              if (bufs[k][i] != value(nth, tag, i))
                return "tag " + std::to_string(tag) + " #" + std::to_string(nth) + " element " +
                       std::to_string(i) + " is " + std::to_string(bufs[k][i]);
          }
        // Tagged and plain calls: a group of one each.
        int64_t x = 42 + rank, y = 0;
        weft_result_t r = rank == 0 ? weft_send_tagged(&x, 1, WEFT_INT64, 1, 9, comm, nullptr)
                                    : weft_recv_tagged(&y, 1, WEFT_INT64, 0, 9, comm, nullptr);
        if (r == WEFT_SUCCESS)
          r = rank == 0 ? weft_send(&x, 1, WEFT_INT64, 1, comm, nullptr)
                        : weft_recv(&y, 1, WEFT_INT64, 0, comm, nullptr);
        if (r != WEFT_SUCCESS) return weft_last_error();
        if (rank == 1 && y != 42) return "tagged then plain: got " + std::to_string(y);
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// A send with tag 1 against a receive with tag 2 of the same size: an error naming both tags,
// not the data in the wrong place.
TEST(P2PTags, MismatchNamesBothTags) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        std::vector<float> buf(10, 1.0f);
        weft_result_t r = rank == 0
                              ? weft_send_tagged(buf.data(), 10, WEFT_FLOAT32, 1, 1, comm, nullptr)
                              : weft_recv_tagged(buf.data(), 10, WEFT_FLOAT32, 0, 2, comm, nullptr);
        if (rank == 0) return "";  // the sender may finish before the receiver checks
        if (r != WEFT_ERR_MISMATCH) return std::string("got ") + weft_result_string(r);
        std::string msg = weft_last_error();
        if (msg.find("tag 1") == std::string::npos || msg.find("tag 2") == std::string::npos ||
            msg.find("rank 0") == std::string::npos)
          return "unclear message: " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// Ops are checked before anything moves.
TEST(P2PGroupArgs, BadOpsAreRefused) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int x = 0;
        weft_p2p_op_t self = {WEFT_COLL_SEND, &x, 1, WEFT_INT32, rank, 0};
        weft_p2p_op_t kind = {WEFT_COLL_BARRIER, &x, 1, WEFT_INT32, 1 - rank, 0};
        weft_p2p_op_t null = {WEFT_COLL_RECV, nullptr, 1, WEFT_INT32, 1 - rank, 0};
        if (weft_p2p_group(&self, 1, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
            std::string(weft_last_error()).find("to itself") == std::string::npos)
          return std::string("self: ") + weft_last_error();
        if (weft_p2p_group(&kind, 1, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT)
          return std::string("kind: ") + weft_last_error();
        if (weft_p2p_group(&null, 1, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
            std::string(weft_last_error()).find("buf is NULL") == std::string::npos)
          return std::string("NULL buf: ") + weft_last_error();
        if (weft_p2p_group(nullptr, 0, comm, nullptr) != WEFT_SUCCESS) return weft_last_error();
        // And the async form.
        weft_request_t* req;
        int v = rank;
        weft_p2p_op_t ops[2] = {{WEFT_COLL_SEND, &v, 1, WEFT_INT32, 1 - rank, 0},
                                {WEFT_COLL_RECV, &x, 1, WEFT_INT32, 1 - rank, 0}};
        if (weft_p2p_group_async(ops, 2, comm, &req) != WEFT_SUCCESS ||
            weft_wait(req, -1) != WEFT_SUCCESS)
          return std::string("async: ") + weft_last_error();
        if (x != 1 - rank) return "async: got " + std::to_string(x);
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
