// shrink_test.cc -- weft_comm_shrink and weft_comm_get_failed_ranks across real processes: a
// rank killed mid-run (the master's rank among them, so the store is gone too), a rank stopped
// past the timeout, a rank excluded from a healthy communicator, over each transport; the
// survivors agree on who is gone and finish checked collectives on the shrunk communicator.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

std::string fail(int rank, const std::string& what, weft_result_t r) {
  return "rank " + std::to_string(rank) + ": " + what + ": " + weft_result_string(r) + ": " +
         weft_last_error();
}

// The shrunk communicator: its shape and checked collectives on it.
std::string check_shrunk(weft_comm_t* comm, int rank, int want_rank, int want_size) {
  int r = -1, n = -1;
  weft_comm_rank(comm, &r);
  weft_comm_size(comm, &n);
  if (r != want_rank || n != want_size)
    return "rank " + std::to_string(rank) + ": shrunk rank/size " + std::to_string(r) + "/" +
           std::to_string(n) + ", want " + std::to_string(want_rank) + "/" +
           std::to_string(want_size);
  std::string err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 1 << 20, false);
  if (err.empty()) err = check_all_reduce(comm, WEFT_INT64, WEFT_MAX, 1001, true);
  for (int root = 0; root < n && err.empty(); root++)
    err = check_broadcast(comm, WEFT_INT32, root, 5000, false);
  return err.empty() ? "" : "rank " + std::to_string(rank) + " on the shrunk communicator: " + err;
}

// "" if the agreed failed ranks are exactly `want`.
std::string check_failed(weft_comm_t* comm, int rank, const std::vector<int>& want) {
  int got[8], n = -1;
  weft_result_t r = weft_comm_get_failed_ranks(comm, got, 8, &n);
  if (r != WEFT_SUCCESS) return fail(rank, "get_failed_ranks", r);
  std::vector<int> have(got, got + (n < 8 ? n : 8));
  if (have != want) {
    std::string s = "rank " + std::to_string(rank) + ": failed ranks:";
    for (int q : have) s += " " + std::to_string(q);
    return s + " (" + std::to_string(n) + " of them), want " + std::to_string(want.size());
  }
  return "";
}

struct Case {
  const char* transport;
};

class ShrinkAfterKill : public ::testing::TestWithParam<Case> {};

// Rank 0, which also serves the store, is killed after a first all-reduce. The survivors see
// the next all-reduce fail, shrink without naming anyone (the agreement finds rank 0 gone),
// finish collectives on 3 ranks and agree that rank 0 failed.
TEST_P(ShrinkAfterKill, SurvivorsOfFourFinishOnThree) {
  const char* transport = GetParam().transport;
  auto res = mp_run(
      4,
      [transport](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", transport, 1);
        setenv("WEFT_TIMEOUT_MS", "4000", 1);
        weft_comm_t* world;
        std::string err = join(rank, n, port, &world);
        if (!err.empty()) return err;
        err = check_all_reduce(world, WEFT_INT32, WEFT_SUM, 100000, false);
        if (!err.empty()) return err;
        if (rank == 0) kill(getpid(), SIGKILL);
        auto t0 = std::chrono::steady_clock::now();
        if (check_all_reduce(world, WEFT_FLOAT32, WEFT_SUM, 1 << 20, false).empty())
          return "rank " + std::to_string(rank) + ": all_reduce without rank 0 succeeded";
        weft_comm_t* shrunk;
        weft_result_t r = weft_comm_shrink(world, nullptr, 0, &shrunk);
        if (r != WEFT_SUCCESS) return fail(rank, "shrink", r);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 20) return "rank " + std::to_string(rank) + ": failing and shrinking took " +
                           std::to_string(s) + " s";
        err = check_shrunk(shrunk, rank, rank - 1, 3);
        if (err.empty()) err = check_failed(world, rank, {0});
        weft_comm_destroy(shrunk);
        weft_comm_abort(world);
        return err;
      },
      90000);
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[0].term_signal, SIGKILL) << mp_summary(res);
  for (int r = 1; r < 4; r++) EXPECT_EQ(res[r].message, "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Transports, ShrinkAfterKill,
                         ::testing::Values(Case{"auto"}, Case{"tcp"}, Case{"shm"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.transport);
                         });

// A stopped rank holds its sockets open: only the timeout tells it from a slow one. The two
// others count it failed after WEFT_TIMEOUT_MS and carry on; then one of them kills it.
TEST(Shrink, StoppedRankCountsAsFailed) {
  std::string pidfile = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                        "/shrink_stopped_" + std::to_string(getpid());
  auto res = mp_run(
      3,
      [&pidfile](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "2000", 1);
        weft_comm_t* world;
        std::string err = join(rank, n, port, &world);
        if (!err.empty()) return err;
        err = check_all_reduce(world, WEFT_INT32, WEFT_SUM, 1000, false);
        if (!err.empty()) return err;
        if (rank == 1) {
          std::ofstream(pidfile) << getpid() << "\n";
          raise(SIGSTOP);
          return "rank 1 went on after being stopped";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let it stop
        weft_comm_t* shrunk;
        weft_result_t r = weft_comm_shrink(world, nullptr, 0, &shrunk);
        if (r != WEFT_SUCCESS) return fail(rank, "shrink", r);
        err = check_shrunk(shrunk, rank, rank == 0 ? 0 : 1, 2);
        weft_comm_destroy(shrunk);
        weft_comm_abort(world);
        if (rank == 0) {
          int pid = 0;
          std::ifstream(pidfile) >> pid;
          if (pid > 0) kill(pid, SIGKILL);
        }
        return err;
      },
      60000);
  unlink(pidfile.c_str());
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].message, "");
  EXPECT_EQ(res[2].message, "");
  EXPECT_EQ(res[1].term_signal, SIGKILL) << mp_summary(res);
}

// Shrinking a healthy communicator: rank 2 is named and does not call; the others need no
// timeout to find that out.
TEST(Shrink, ExcludedRankOfAHealthyCommunicator) {
  auto res = mp_run(
      4,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* world;
        std::string err = join(rank, n, port, &world);
        if (!err.empty()) return err;
        if (rank == 2) {
          std::this_thread::sleep_for(std::chrono::seconds(2));
          weft_comm_abort(world);
          return "";
        }
        auto t0 = std::chrono::steady_clock::now();
        const int exclude[] = {2};
        weft_comm_t* shrunk;
        weft_result_t r = weft_comm_shrink(world, exclude, 1, &shrunk);
        if (r != WEFT_SUCCESS) return fail(rank, "shrink", r);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 1.5) return "rank " + std::to_string(rank) + ": shrink took " + std::to_string(s) +
                            " s: it waited for the excluded rank";
        err = check_shrunk(shrunk, rank, rank < 2 ? rank : rank - 1, 3);
        weft_comm_destroy(shrunk);
        weft_comm_abort(world);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(Shrink, ArgumentErrors) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* world;
        std::string err = join(rank, n, port, &world);
        if (!err.empty()) return err;
        weft_comm_t* out = reinterpret_cast<weft_comm_t*>(1);
        const int self[] = {rank}, far[] = {7}, neg[] = {-1};
        struct {
          const int* ex;
          int n;
          const char* what;
        } bad[] = {{self, 1, "this rank is in exclude_ranks"},
                   {far, 1, "is not a rank of this communicator"},
                   {neg, 1, "is not a rank of this communicator"},
                   {nullptr, 1, "an array"},
                   {self, -1, "an array"}};
        for (auto& b : bad) {
          weft_result_t r = weft_comm_shrink(world, b.ex, b.n, &out);
          if (r != WEFT_ERR_INVALID_ARGUMENT || out != nullptr ||
              std::string(weft_last_error()).find(b.what) == std::string::npos)
            return "rank " + std::to_string(rank) + ": want an error saying '" + b.what +
                   "', got " + weft_result_string(r) + ": " + weft_last_error();
          out = reinterpret_cast<weft_comm_t*>(1);
        }
        if (weft_comm_shrink(world, nullptr, 0, nullptr) != WEFT_ERR_INVALID_ARGUMENT)
          return "NULL newcomm accepted";
        int nf = -1;
        if (weft_comm_get_failed_ranks(world, nullptr, 1, &nf) != WEFT_ERR_INVALID_ARGUMENT)
          return "NULL ranks with room for 1 accepted";
        // Nobody failed: an agreement on nothing, and a shrink that keeps everyone.
        err = check_failed(world, rank, {});
        weft_comm_t* same;
        weft_result_t r = weft_comm_shrink(world, nullptr, 0, &same);
        if (r != WEFT_SUCCESS) return fail(rank, "shrink of a healthy communicator", r);
        if (err.empty()) err = check_shrunk(same, rank, rank, 2);
        if (err.empty()) err = check_all_reduce(world, WEFT_INT32, WEFT_SUM, 1000, false);
        weft_comm_destroy(same);
        weft_comm_destroy(world);
        return err.empty() ? "" : err + " (parent after a shrink)";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
