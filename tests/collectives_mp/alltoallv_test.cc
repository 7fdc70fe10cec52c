// alltoallv_test.cc -- weft_all_to_allv over real processes: uneven parts (zeros, odd sizes,
// pairs that differ each way) at displacements with gaps, every dtype, world sizes 1-8 and 13;
// and the pair check: counts that two ranks disagree on fail both, naming both.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/collectives_mp/typed.h"
#include "tests/harness/mp_harness.h"

namespace {

// Rank i sends rank j this many elements: 0, n/2, n or 3n/2 by pair.
size_t part(size_t n, int i, int j) { return n * (size_t)((i + 2 * j + (int)n) % 4) / 2; }

// Element k of the part rank i sends rank j: small enough for every dtype, and different per
// pair, so that a part from the wrong rank or for the wrong rank shows.
int64_t value(int i, int j, size_t k) { return (int64_t)((i * 37 + j * 11 + k) % 100); }

// One call with rank order in sendbuf, reverse rank order in recvbuf, a one-element gap after
// every part (which must stay as it was), checked exactly.
std::string check_alltoallv(weft_comm_t* comm, weft_dtype_t d, size_t n, bool through_call) {
  int rank, p;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &p);
  size_t es = weft_dtype_size(d);
  std::vector<size_t> sc(p), sd(p), rc(p), rd(p);
  size_t send_n = 0, recv_n = 0;
  for (int j = 0; j < p; j++) {
    sc[j] = part(n, rank, j);
    sd[j] = send_n;
    send_n += sc[j] + 1;
  }
  for (int j = p - 1; j >= 0; j--) {
    rc[j] = part(n, j, rank);
    rd[j] = recv_n;
    recv_n += rc[j] + 1;
  }
  std::vector<char> send(send_n * es + 1, 0x11), recv(recv_n * es + 1, 0x5a), want = recv;
  for (int j = 0; j < p; j++)
    for (size_t k = 0; k < sc[j]; k++) typed_store(d, send.data(), sd[j] + k, value(rank, j, k));
  for (int j = 0; j < p; j++)
    for (size_t k = 0; k < rc[j]; k++) typed_store(d, want.data(), rd[j] + k, value(j, rank, k));
  weft_result_t r;
  if (through_call) {
    weft_call_t k = {
        WEFT_COLL_ALL_TO_ALLV, send.data(), recv.data(), 0,         d,        WEFT_SUM, -1,
        WEFT_ALGO_PAIRWISE,    sc.data(),   sd.data(),   rc.data(), rd.data()};
    r = weft_call(&k, comm, nullptr);
  } else {
    r = weft_all_to_allv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), d,
                         comm, nullptr);
  }
  std::string what = "rank " + std::to_string(rank) + ": all_to_allv " + weft_dtype_name(d) +
                     " n " + std::to_string(n) + (through_call ? " (weft_call)" : "");
  if (r != WEFT_SUCCESS) return what + ": " + weft_last_error();
  // The whole buffer, gaps included: a part written at the wrong displacement shows.
  if (recv != want) {
    std::string diff = typed_compare(d, recv.data(), want.data(), recv_n);
    return what + ": " + (diff.empty() ? "a gap between parts was written" : diff);
  }
  return "";
}

class AllToAllv : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllv, UnevenPartsEveryDtype) {
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (size_t count : {0, 1, 3, 1000})
          for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
            err = check_alltoallv(comm, (weft_dtype_t)d, count, (count + (size_t)d) % 2 == 1);
            if (!err.empty()) return err;
          }
        weft_comm_destroy(comm);
        return "";
      },
      600000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllToAllv, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 13));

// Many slices per part, over shm and TCP.
TEST(AllToAllvLarge, QuarterMebiPartsOverShmAndTcp) {
  for (const char* transport : {"auto", "tcp"}) {
    auto results = mp_run(
        3,
        [transport](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          err = check_alltoallv(comm, WEFT_FLOAT32, (1 << 18) + 3, false);
          weft_comm_destroy(comm);
          return err;
        },
        600000);
    EXPECT_EQ(mp_summary(results), "") << transport;
  }
}

// Rank 0 sends rank 1 five elements, rank 1 expects four: both fail with a message that names
// both ranks and both counts; rank 2, which agrees with both, is released by their abort. Rank 2
// may still be in init when they abort (their init does not wait for it: the ring's shm segments
// are created by whichever side comes first), and its init then fails naming a peer that left.
TEST(AllToAllvMismatch, BothRanksOfThePairFail) {
  auto results = mp_run(
      3,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "5000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty() && rank == 2 &&
            (err.find("with rank 0") != std::string::npos ||
             err.find("with rank 1") != std::string::npos))
          return "";
        if (!err.empty()) return err;
        std::vector<size_t> sc(n, 2), rc(n, 2), sd(n), rd(n);
        for (int j = 0; j < n; j++) sd[j] = rd[j] = 8 * (size_t)j;
        if (rank == 0) sc[1] = 5;
        if (rank == 1) rc[0] = 4;
        std::vector<int32_t> send(8 * n, 1), recv(8 * n, 0);
        weft_result_t r = weft_all_to_allv(send.data(), sc.data(), sd.data(), recv.data(),
                                           rc.data(), rd.data(), WEFT_INT32, comm, nullptr);
        std::string msg = weft_last_error();
        if (rank == 2) {  // agrees with both; may or may not finish before they give up
          weft_comm_abort(comm);
          return "";
        }
        weft_comm_abort(comm);
        if (r != WEFT_ERR_MISMATCH)
          return "rank " + std::to_string(rank) + ": got " + weft_result_string(r) + ": " + msg;
        if (msg.find("rank 0 sends 5 elements to rank 1") == std::string::npos ||
            msg.find("expects 4") == std::string::npos)
          return "rank " + std::to_string(rank) + ": unclear message: " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// A rank's own part must have one count both ways; arrays must be given.
TEST(AllToAllvMismatch, OwnPartAndMissingArraysAreRefused) {
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        std::vector<size_t> sc(n, 1), rc(n, 1), d0 = {0, 1};
        sc[rank] = 2;
        int32_t send[4] = {0}, recv[4] = {0};
        if (weft_all_to_allv(send, sc.data(), d0.data(), recv, rc.data(), d0.data(), WEFT_INT32,
                             comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
            std::string(weft_last_error()).find("sends itself 2 elements") == std::string::npos)
          return std::string("own part: ") + weft_last_error();
        if (weft_all_to_allv(send, nullptr, d0.data(), recv, rc.data(), d0.data(), WEFT_INT32, comm,
                             nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
            std::string(weft_last_error()).find("send_counts is NULL") == std::string::npos)
          return std::string("NULL counts: ") + weft_last_error();
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
