// p2p_test.cc -- send and recv between pairs of ranks: data, ordering, and the checks that catch
// a count mismatch between the two sides.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

// Ring shift without async: even ranks send first, odd ranks receive first.
TEST(P2P, RingShiftInOrder) {
  for (int n : {2, 3, 5}) {
    auto res = mp_run(
        n,
        [](int rank, int n, int port) -> std::string {
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          int right = (rank + 1) % n, left = (rank - 1 + n) % n;
          for (size_t count : {(size_t)1, (size_t)1000, (size_t)(1 << 20) + 7}) {
            for (int msg = 0; msg < 3; msg++) {  // several messages: they must not overtake
              std::vector<int32_t> out(count), in(count, -1);
              for (size_t i = 0; i < count; i++) out[i] = (int32_t)(rank * 1000 + msg * 7 + i);
              weft_result_t a, b;
              if (rank % 2 == 0) {
                a = weft_send(out.data(), count, WEFT_INT32, right, comm, nullptr);
                b = weft_recv(in.data(), count, WEFT_INT32, left, comm, nullptr);
              } else {
                b = weft_recv(in.data(), count, WEFT_INT32, left, comm, nullptr);
                a = weft_send(out.data(), count, WEFT_INT32, right, comm, nullptr);
              }
              if (a != WEFT_SUCCESS || b != WEFT_SUCCESS) return weft_last_error();
              for (size_t i = 0; i < count; i++)
                if (in[i] != (int32_t)(left * 1000 + msg * 7 + i))
                  return "rank " + std::to_string(rank) + ": element " + std::to_string(i) +
                         " of message " + std::to_string(msg) + " is " + std::to_string(in[i]);
            }
          }
          // Collectives still line up after point-to-point traffic on some ranks only.
          err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 100, false);
          weft_comm_destroy(comm);
          return err;
        },
        120000);
    EXPECT_EQ(mp_summary(res), "") << n << " ranks";
  }
}

TEST(P2P, OnlyTwoOfFourRanksTalkThenAllCollective) {
  auto res = mp_run(
      4,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        double v = 42.5;
        if (rank == 1 && weft_send(&v, 1, WEFT_FLOAT64, 3, comm, nullptr) != WEFT_SUCCESS)
          return weft_last_error();
        if (rank == 3) {
          double got = 0;
          if (weft_recv(&got, 1, WEFT_FLOAT64, 1, comm, nullptr) != WEFT_SUCCESS)
            return weft_last_error();
          if (got != 42.5) return "got " + std::to_string(got);
        }
        err = check_broadcast(comm, WEFT_INT64, 2, 1000, false);
        weft_comm_destroy(comm);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(P2P, CountMismatchIsReported) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        std::vector<float> buf(100, 1.0f);
        weft_result_t r = rank == 0 ? weft_send(buf.data(), 100, WEFT_FLOAT32, 1, comm, nullptr)
                                    : weft_recv(buf.data(), 99, WEFT_FLOAT32, 0, comm, nullptr);
        if (rank == 0) return "";  // the sender may finish before the receiver checks
        if (r == WEFT_SUCCESS) return "receive of a wrong count succeeded";
        std::string msg = weft_last_error();
        return msg.find("rank 0 sends 100 elements to rank 1") != std::string::npos &&
                       msg.find("expects 99") != std::string::npos
                   ? ""
                   : "unclear message: " + msg;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(P2P, SendToItselfOrOutOfRangeIsRefused) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int x = 0;
        if (weft_send(&x, 1, WEFT_INT32, rank, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT)
          return "send to self accepted";
        if (weft_recv(&x, 1, WEFT_INT32, 5, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
            std::string(weft_last_error()).find("peer 5") == std::string::npos)
          return std::string("bad peer: ") + weft_last_error();
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
