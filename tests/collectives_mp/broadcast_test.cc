// broadcast_test.cc -- broadcast and barrier across real processes on loopback: every root,
// every dtype, in place and out of place; the barrier really holds every rank back.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

class Broadcast : public ::testing::TestWithParam<int> {};

TEST_P(Broadcast, EveryRootDtypeAndCount) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (int root = 0; root < n; root++)
          for (size_t count : {0, 1, 3, 1000})
            for (int d = 0; d < WEFT_NUM_DTYPES; d++)
              for (bool in_place : {false, true}) {
                err = check_broadcast(comm, (weft_dtype_t)d, root, count, in_place);
                if (!err.empty()) return err;
              }
        // Large enough for many pipelined slices, from a root in the middle of the chain.
        for (bool in_place : {false, true}) {
          err = check_broadcast(comm, WEFT_FLOAT32, n / 2, (1 << 20) + 7, in_place);
          if (!err.empty()) return err;
        }
        weft_comm_destroy(comm);
        return "";
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Broadcast, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 13));

static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

class Barrier : public ::testing::TestWithParam<int> {};

TEST_P(Barrier, NoRankLeavesBeforeTheLastArrives) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (int round = 0; round < 3; round++) {
          // The late rank changes every round; the clock is shared by all processes.
          int late = (round * 5 + 1) % n;
          if (rank == late) usleep(150 * 1000);
          double entered = now_s();
          if (weft_barrier(comm, nullptr) != WEFT_SUCCESS) return weft_last_error();
          double left = now_s();
          double last_entry = entered;
          if (weft_all_reduce(&entered, &last_entry, 1, WEFT_FLOAT64, WEFT_MAX, comm, nullptr) !=
              WEFT_SUCCESS)
            return weft_last_error();
          if (left < last_entry)
            return "rank " + std::to_string(rank) + " left barrier round " +
                   std::to_string(round) + " before rank " + std::to_string(late) + " entered";
        }
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Barrier, ::testing::Values(1, 2, 3, 5, 8, 13));

}  // namespace
