// matrix_test.cc -- every collective x every algorithm the build has, over real processes on
// loopback, world sizes including non-powers of two, counts around every edge, in place and out.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

const weft_coll_t kColls[] = {WEFT_COLL_ALL_REDUCE,     WEFT_COLL_BROADCAST, WEFT_COLL_REDUCE,
                              WEFT_COLL_ALL_GATHER,     WEFT_COLL_GATHER,    WEFT_COLL_SCATTER,
                              WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_ALL_TO_ALL, WEFT_COLL_BARRIER};

bool reduces(weft_coll_t c) {
  return c == WEFT_COLL_ALL_REDUCE || c == WEFT_COLL_REDUCE || c == WEFT_COLL_REDUCE_SCATTER;
}

// The small matrix on one world size, over `transport` (WEFT_TRANSPORT).
std::string small_matrix(int rank, int n, int port, const char* transport) {
  setenv("WEFT_TRANSPORT", transport, 1);
  weft_comm_t* comm;
  std::string err = join(rank, n, port, &comm);
  if (!err.empty()) return err;
  for (weft_coll_t coll : kColls)
    for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
      weft_algo_t algo = (weft_algo_t)a;
      if (!weft_algo_supported(coll, algo)) continue;
      // The foundation's matrix for each row: every dtype, every op where the collective
      // reduces, counts 0, 1, 3 (below most world sizes) and 1000, in place and not.
      for (size_t count : {0, 1, 3, 1000})
        for (int d = 0; d < WEFT_NUM_DTYPES; d++)
          for (int op = 0; op < (reduces(coll) ? WEFT_NUM_OPS : 1); op++)
            for (bool in_place : {false, true}) {
              if (in_place && coll == WEFT_COLL_ALL_TO_ALL) continue;  // it has no such form
              int root = (int)((count + (size_t)d + (size_t)op) % (size_t)n);
              err = check_call(comm, coll, algo, (weft_dtype_t)d, (weft_op_t)op, count, in_place,
                               root);
              if (!err.empty()) return err;
              if (coll == WEFT_COLL_BARRIER) break;
            }
    }
  weft_comm_destroy(comm);
  return "";
}

class Matrix : public ::testing::TestWithParam<int> {};

TEST_P(Matrix, EveryCollectiveAndAlgorithm) {
  auto results = mp_run(
      GetParam(), [](int rank, int n, int port) { return small_matrix(rank, n, port, "auto"); },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Matrix, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 13));

// The same over TCP: two passes (reduce into the output, send from there), TCP's default; and at
// 3 ranks with WEFT_FUSED_STEPS=2, reducing steps fused into TCP's send staging slots.
class MatrixTcp : public ::testing::TestWithParam<int> {};

TEST_P(MatrixTcp, EveryCollectiveAndAlgorithm) {
  auto results = mp_run(
      GetParam(), [](int rank, int n, int port) { return small_matrix(rank, n, port, "tcp"); },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MatrixTcp, ::testing::Values(2, 3, 5));

TEST(MatrixTcpFused, EveryCollectiveAndAlgorithm) {
  auto results = mp_run(
      3,
      [](int rank, int n, int port) {
        setenv("WEFT_FUSED_STEPS", "2", 1);
        return small_matrix(rank, n, port, "tcp");
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

// The same over shm with every slot that a plain receive takes read straight from the sender's
// buffer (process_vm_readv, transport/shm.c) and slices of 4 KiB, so that counts of 1000 run
// through several described slots.
class MatrixShmSingleCopy : public ::testing::TestWithParam<int> {};

TEST_P(MatrixShmSingleCopy, EveryCollectiveAndAlgorithm) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) {
        setenv("WEFT_SHM_SINGLE_COPY_BYTES", "1", 1);
        setenv("WEFT_SLICE_BYTES", "4096", 1);
        return small_matrix(rank, n, port, "shm");
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MatrixShmSingleCopy, ::testing::Values(2, 3, 4));

// The same over shm with every slot written with non-temporal stores (transport/shm_stream.h,
// kernels/stream.h): the fused steps' streaming fills of every kind (reduce, reduce and keep,
// copy; WEFT_AVG's last step) and the two-pass sends, at every length the matrix makes.
class MatrixShmStream : public ::testing::TestWithParam<int> {};

TEST_P(MatrixShmStream, EveryCollectiveAndAlgorithm) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) {
        setenv("WEFT_SHM_STREAM", "1", 1);
        return small_matrix(rank, n, port, "shm");
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MatrixShmStream, ::testing::Values(2, 3));

// Larger counts: many slices per op, pipelining across tree levels and ring steps.
// Over shm and TCP: more than one round of the rings (1 Mi elements on 3 ranks is two).
class MatrixLarge : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(MatrixLarge, EveryCollectiveAndAlgorithmAtOneMebi) {
  const char* transport = GetParam().first;
  auto results = mp_run(
      GetParam().second,
      [transport](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", transport, 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (weft_coll_t coll : kColls)
          for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
            if (!weft_algo_supported(coll, (weft_algo_t)a) || coll == WEFT_COLL_BARRIER) continue;
            bool per_rank = coll == WEFT_COLL_ALL_GATHER || coll == WEFT_COLL_REDUCE_SCATTER ||
                            coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER ||
                            coll == WEFT_COLL_ALL_TO_ALL;
            size_t count = per_rank ? (1 << 18) + 3 : (1 << 20) + 7;
            err = check_call(comm, coll, (weft_algo_t)a, WEFT_FLOAT32, WEFT_SUM, count,
                             rank % 2 == 0, n - 1);
            if (!err.empty()) return err;
          }
        weft_comm_destroy(comm);
        return "";
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MatrixLarge,
                         ::testing::Values(std::make_pair("auto", 3), std::make_pair("auto", 4),
                                           std::make_pair("auto", 6), std::make_pair("tcp", 3),
                                           std::make_pair("tcp", 4)));

// 64 Mi float32 elements (256 MiB) through the bandwidth algorithms other than ring (which
// all_reduce_test covers at this size).
TEST(MatrixHuge, SixtyFourMebiAllReduce) {
  auto results = mp_run(
      4,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (weft_algo_t algo : {WEFT_ALGO_DOUBLE_TREE, WEFT_ALGO_RABENSEIFNER}) {
          err = check_call(comm, WEFT_COLL_ALL_REDUCE, algo, WEFT_FLOAT32, WEFT_SUM,
                           (size_t)64 << 20, rank % 2 == 1, 0);
          if (!err.empty()) return err;
        }
        weft_comm_destroy(comm);
        return "";
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
