// desc_slot_test.cc -- the call description in a whole shm slot with the stream's first message
// inside it (collectives/executor.c, DESC_SLOT_DATA): a small 2-rank all-reduce sends one message
// per call instead of two; every collective whose first message rides with the description (data,
// tokens, values to agree on; reduced in the slot, copied out, forwarded by a fused step) gives
// exact results; and ranks that disagree are told so from the description, naming both calls,
// whether the first messages fit in the slot or not.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "comm/comm.h"
}

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Messages this rank sent per call of a 2-element all-reduce (recursive doubling), or the error.
std::string messages_per_call(const char* transport, int rank, int nranks, int port) {
  setenv("WEFT_TRANSPORT", transport, 1);
  setenv("WEFT_ALGO", "recursive_doubling", 1);
  weft_comm_t* comm = nullptr;
  std::string err = join(rank, nranks, port, &comm);
  if (!err.empty()) return err;
  const int calls = 20;
  uint64_t before = 0;
  for (int i = -1; i < calls && err.empty(); i++) {
    if (i == 0) before = comm->exec.stats.messages;  // after the first call connected everything
    float x[2] = {(float)rank, (float)(i + rank)};
    if (weft_all_reduce(x, x, 2, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) != WEFT_SUCCESS)
      err = std::string("all_reduce: ") + weft_last_error();
    else if (x[0] != 1.0f || x[1] != (float)(2 * i + 1))
      err = "wrong sum " + std::to_string(x[0]) + ", " + std::to_string(x[1]);
  }
  uint64_t sent = comm->exec.stats.messages - before;
  weft_comm_destroy(comm);
  if (!err.empty()) return err;
  if (sent % calls != 0)
    return "sent " + std::to_string(sent) + " messages in " + std::to_string(calls) + " calls";
  return std::to_string(sent / calls);
}

TEST(DescSlot, SmallAllReduceOverShmIsOneMessagePerCall) {
  auto res = mp_run(
      2, [](int rank, int n, int port) { return messages_per_call("shm", rank, n, port); }, 60000);
  for (int r = 0; r < 2; r++) EXPECT_EQ(res[r].message, "1") << "rank " << r;
}

// TCP sends the description as its own message (in the same sendmsg as the first slice).
TEST(DescSlot, TcpStillSendsTheDescriptionApart) {
  auto res = mp_run(
      2, [](int rank, int n, int port) { return messages_per_call("tcp", rank, n, port); }, 60000);
  for (int r = 0; r < 2; r++) EXPECT_EQ(res[r].message, "2") << "rank " << r;
}

TEST(DescSlot, EveryCollectiveIsExactWhenItsFirstMessageRidesWithTheDescription) {
  struct Case {
    weft_coll_t coll;
    weft_algo_t algo;
  };
  const Case cases[] = {
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING},  // fused steps fed by the carried slice
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING},
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE},
      {WEFT_COLL_BROADCAST, WEFT_ALGO_RING},  // copied out of the slot, or forwarded from it
      {WEFT_COLL_REDUCE, WEFT_ALGO_RING},
      {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING},
      {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING},
      {WEFT_COLL_BARRIER, WEFT_ALGO_AUTO},  // tokens
  };
  for (int nranks : {2, 3}) {
    auto res = mp_run(
        nranks,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", "shm", 1);
          weft_comm_t* comm = nullptr;
          std::string err = join(rank, n, port, &comm);
          for (const Case& c : cases)
            for (size_t count :
                 {1, 7, 1000, 40000})  // the last does not fit beside the description
              for (bool in_place : {false, true})
                if (err.empty())
                  err = check_call(comm, c.coll, c.algo, WEFT_FLOAT32, WEFT_SUM, count, in_place,
                                   n - 1);
          if (comm) weft_comm_destroy(comm);
          return err;
        },
        120000);
    for (int r = 0; r < nranks; r++)
      EXPECT_EQ(res[r].message, "") << nranks << " ranks, rank " << r;
  }
}

// rank 1 calls with count `other`, rank 0 with 2: both fail with both calls in the message.
void expect_count_mismatch(size_t other) {
  auto res = mp_run(
      2,
      [other](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        setenv("WEFT_TIMEOUT_MS", "20000", 1);
        weft_comm_t* comm = nullptr;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        std::vector<float> x(other > 2 ? other : 2, 1.0f);
        weft_result_t r = weft_all_reduce(x.data(), x.data(), rank == 1 ? other : 2, WEFT_FLOAT32,
                                          WEFT_SUM, comm, nullptr);
        std::string out = r == WEFT_ERR_MISMATCH ? std::string("MISMATCH: ") + weft_last_error()
                          : r == WEFT_SUCCESS    ? "succeeded"
                                                 : std::string("other error: ") + weft_last_error();
        weft_comm_abort(comm);
        return out;
      },
      60000);
  for (int r = 0; r < 2; r++) {
    const std::string& m = res[r].message;
    EXPECT_TRUE(contains(m, "MISMATCH: ")) << "rank " << r << ": " << m;
    EXPECT_TRUE(contains(m, "count 2,")) << "rank " << r << ": " << m;
    EXPECT_TRUE(contains(m, "count " + std::to_string(other) + ",")) << "rank " << r << ": " << m;
    EXPECT_TRUE(contains(m, "rank " + std::to_string(1 - r) + " called"))
        << "rank " << r << ": " << m;
    EXPECT_LT(res[r].seconds, 10.0) << m;
  }
}

TEST(DescSlot, CountMismatchIsReportedFromTheDescriptionBothMessagesCarried) {
  expect_count_mismatch(3);
}

TEST(DescSlot, CountMismatchIsReportedFromTheDescriptionOneTooLargeToCarry) {
  expect_count_mismatch(1 << 20);
}

}  // namespace
