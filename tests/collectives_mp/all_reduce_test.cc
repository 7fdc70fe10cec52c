// all_reduce_test.cc -- all-reduce across real processes on loopback: world sizes 1..8 and 13,
// every dtype x op, in place and out of place, counts around every edge, compared exactly.
#include <gtest/gtest.h>

#include <stdlib.h>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

class AllReduce : public ::testing::TestWithParam<int> {};

TEST_P(AllReduce, EveryDtypeOpAndSmallCount) {
  int nranks = GetParam();
  auto results = mp_run(
      nranks,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        // 0, 1 and 3 cover counts below the world size; 1000 is not divisible by most sizes.
        for (size_t count : {0, 1, 3, 1000})
          for (int d = 0; d < WEFT_NUM_DTYPES; d++)
            for (int op = 0; op < WEFT_NUM_OPS; op++)
              for (bool in_place : {false, true}) {
                err = check_all_reduce(comm, (weft_dtype_t)d, (weft_op_t)op, count, in_place);
                if (!err.empty()) return err;
              }
        weft_comm_destroy(comm);
        return "";
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllReduce, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 13));

// 1 Mi + 7 elements: many slices per chunk, uneven chunks, a tail slice; a few dtype/op pairs.
class AllReduceLarge : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceLarge, OneMebiPlusSeven) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        const size_t count = (1 << 20) + 7;
        struct {
          weft_dtype_t d;
          weft_op_t op;
        } cases[] = {{WEFT_FLOAT32, WEFT_SUM}, {WEFT_BFLOAT16, WEFT_MAX}, {WEFT_INT64, WEFT_PROD},
                     {WEFT_FLOAT16, WEFT_AVG}, {WEFT_UINT8, WEFT_MIN}};
        for (auto c : cases)
          for (bool in_place : {false, true}) {
            err = check_all_reduce(comm, c.d, c.op, count, in_place);
            if (!err.empty()) return err;
          }
        weft_comm_destroy(comm);
        return "";
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllReduceLarge, ::testing::Values(2, 3, 5, 8, 13));

// 64 Mi float32 elements (256 MiB per rank): the size the benchmark's top row moves.
class AllReduceHuge : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceHuge, SixtyFourMebi) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, (size_t)64 << 20, rank % 2 == 0);
        weft_comm_destroy(comm);
        return err;
      },
      300000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllReduceHuge, ::testing::Values(2, 4));

}  // namespace

namespace {

// Several sockets per peer: large slices are cut into one part per socket, small ones rotate.
TEST(AllReduceStriped, ThreeSocketsPerPeer) {
  auto results = mp_run(
      3,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "tcp", 1);  // striping is TCP's; auto would pick shm here
        setenv("WEFT_NSOCKS", "3", 1);
        setenv("WEFT_SLICE_BYTES", "1M", 1);  // slices above the striping threshold
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (size_t count : {(size_t)1, (size_t)1000, (size_t)(1 << 20) + 7})
          for (bool in_place : {false, true}) {
            err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, count, in_place);
            if (err.empty()) err = check_broadcast(comm, WEFT_INT32, 1, count, in_place);
            if (!err.empty()) return err;
          }
        weft_comm_destroy(comm);
        return "";
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

// Socket buffers smaller than TCP's send staging (WEFT_SHM_SLOTS slices): two ranks sending to
// each other must not fill both pools and wait on each other until the timeout.
TEST(AllReduceStriped, SocketBuffersBelowTheSendStaging) {
  for (int n : {2, 3}) {
    auto results = mp_run(
        n,
        [](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", "tcp", 1);
          setenv("WEFT_SOCKET_BUFFER", "65536", 1);  // 32 slots of 64 KiB are 2 MiB
          setenv("WEFT_TIMEOUT_MS", "10000", 1);
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, (size_t)(4 << 20) + 5, true);
          weft_comm_destroy(comm);
          return err;
        },
        120000);
    EXPECT_EQ(mp_summary(results), "") << n << " ranks";
  }
}

TEST(AllReduceStriped, SocketCountThatDiffersAcrossRanksIsRefused) {
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "tcp", 1);  // TCP's handshake checks it; shm has no sockets
        setenv("WEFT_NSOCKS", rank == 0 ? "2" : "3", 1);
        setenv("WEFT_CONNECT_TIMEOUT_MS", "3000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        return err.empty() ? "init succeeded" : "ERR:" + err;
      },
      60000);
  EXPECT_NE(results[0].message.find("WEFT_NSOCKS differs"), std::string::npos)
      << mp_summary(results);
  EXPECT_NE(results[1].message.find("ERR:"), std::string::npos) << mp_summary(results);
}

}  // namespace
