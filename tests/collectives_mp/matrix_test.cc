// matrix_test.cc -- every collective x every algorithm the build has, over real processes on
// loopback, world sizes including non-powers of two, counts around every edge, in place and out.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

const weft_coll_t kColls[] = {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BROADCAST, WEFT_COLL_REDUCE,
                              WEFT_COLL_ALL_GATHER, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BARRIER};

// A spread of dtype x op pairs: every dtype and every op appears; all_reduce_test covers the full
// cross product for the default algorithm.
const std::pair<weft_dtype_t, weft_op_t> kCases[] = {
    {WEFT_FLOAT32, WEFT_SUM}, {WEFT_INT32, WEFT_MAX},   {WEFT_BFLOAT16, WEFT_AVG},
    {WEFT_UINT8, WEFT_PROD},  {WEFT_FLOAT16, WEFT_MIN}, {WEFT_INT64, WEFT_SUM},
    {WEFT_FLOAT64, WEFT_AVG}, {WEFT_INT8, WEFT_MIN},    {WEFT_UINT32, WEFT_AVG},
    {WEFT_UINT64, WEFT_MAX}};

class Matrix : public ::testing::TestWithParam<int> {};

TEST_P(Matrix, EveryCollectiveAndAlgorithm) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (weft_coll_t coll : kColls)
          for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
            weft_algo_t algo = (weft_algo_t)a;
            if (!weft_algo_supported(coll, algo)) continue;
            for (size_t count : {0, 1, 3, 1000})
              for (auto [d, op] : kCases)
                for (bool in_place : {false, true}) {
                  int root = (int)((count + (size_t)d) % (size_t)n);
                  err = check_call(comm, coll, algo, d, op, count, in_place, root);
                  if (!err.empty()) return err;
                  if (coll == WEFT_COLL_BARRIER) break;
                }
          }
        weft_comm_destroy(comm);
        return "";
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Matrix, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 13));

// Larger counts: many slices per op, pipelining across tree levels and ring steps.
class MatrixLarge : public ::testing::TestWithParam<int> {};

TEST_P(MatrixLarge, EveryCollectiveAndAlgorithmAtOneMebi) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (weft_coll_t coll : kColls)
          for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
            if (!weft_algo_supported(coll, (weft_algo_t)a) || coll == WEFT_COLL_BARRIER) continue;
            size_t count = coll == WEFT_COLL_ALL_GATHER || coll == WEFT_COLL_REDUCE_SCATTER
                               ? (1 << 18) + 3
                               : (1 << 20) + 7;
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

INSTANTIATE_TEST_SUITE_P(WorldSizes, MatrixLarge, ::testing::Values(3, 4, 6));

}  // namespace
