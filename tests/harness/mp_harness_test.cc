// mp_harness_test.cc -- mp_run() itself: results, crashes, hangs, large messages, shared port.
#include "tests/harness/mp_harness.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>

namespace {

TEST(MpHarness, AllRanksSucceed) {
  auto results = mp_run(
      4, [](int, int, int) { return std::string(); }, 10000);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(mp_summary(results), "");
  for (const auto& r : results) {
    EXPECT_TRUE(r.exited);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.message, "");
  }
}

TEST(MpHarness, RanksAreSeparateProcessesWithTheirArguments) {
  pid_t test_pid = getpid();
  auto results = mp_run(
      3,
      [test_pid](int rank, int nranks, int port) {
        return std::to_string(rank) + " " + std::to_string(nranks) + " " + std::to_string(port) +
               " " + (getpid() == test_pid ? "same" : "forked");
      },
      10000);
  ASSERT_EQ(results.size(), 3u);
  int port = -1;
  for (int i = 0; i < 3; i++) {
    int rank, nranks, p;
    char how[16] = {0};
    ASSERT_EQ(sscanf(results[i].message.c_str(), "%d %d %d %15s", &rank, &nranks, &p, how), 4)
        << results[i].message;
    EXPECT_EQ(rank, i);
    EXPECT_EQ(nranks, 3);
    EXPECT_STREQ(how, "forked");
    if (i == 0) port = p;
    EXPECT_EQ(p, port) << "ranks got different ports";
  }
  EXPECT_GT(port, 0);
}

TEST(MpHarness, RankMessageIsReported) {
  auto results = mp_run(
      3, [](int rank, int, int) { return rank == 1 ? std::string("bad value at 3") : ""; }, 10000);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[1].message, "bad value at 3");
  EXPECT_TRUE(results[1].exited);
  std::string s = mp_summary(results);
  EXPECT_NE(s.find("1 of 3 ranks failed"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 1 ("), std::string::npos) << s;
  EXPECT_NE(s.find("bad value at 3"), std::string::npos) << s;
  EXPECT_EQ(s.find("rank 0"), std::string::npos) << s;
}

TEST(MpHarness, LargeMessagesArriveWhole) {
  auto make = [](int rank, size_t n) {
    std::string m;
    for (size_t i = 0; i < n; i++) m += static_cast<char>('a' + (i + rank) % 26);
    return m;
  };
  // Bigger than a pipe's buffer, from every rank at once.
  auto results = mp_run(
      4, [&](int rank, int, int) { return make(rank, 300000); }, 10000);
  ASSERT_EQ(results.size(), 4u);
  for (int i = 0; i < 4; i++) EXPECT_TRUE(results[i].message == make(i, 300000)) << "rank " << i;
}

TEST(MpHarness, CrashIsReportedAsSignal) {
  auto results = mp_run(
      3,
      [](int rank, int, int) {
        if (rank == 2) abort();
        return std::string();
      },
      10000);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[2].exited);
  EXPECT_EQ(results[2].term_signal, SIGABRT);
  EXPECT_FALSE(results[2].timed_out);
  EXPECT_EQ(results[0].message, "");
  std::string s = mp_summary(results);
  EXPECT_NE(s.find("rank 2 ("), std::string::npos) << s;
  EXPECT_NE(s.find("killed by signal 6"), std::string::npos) << s;
  EXPECT_EQ(s.find("rank 1"), std::string::npos) << s;
}

TEST(MpHarness, HangingRankIsKilledAtTimeout) {
  auto t0 = std::chrono::steady_clock::now();
  auto results = mp_run(
      3,
      [](int rank, int, int) {
        if (rank == 0) pause();
        return std::string();
      },
      500);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].timed_out);
  EXPECT_FALSE(results[0].exited);
  EXPECT_EQ(results[0].term_signal, SIGKILL);
  EXPECT_FALSE(results[1].timed_out);
  EXPECT_EQ(results[1].message, "");
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 5.0);
  std::string s = mp_summary(results);
  EXPECT_NE(s.find("rank 0 ("), std::string::npos) << s;
  EXPECT_NE(s.find("did not finish within 500 ms"), std::string::npos) << s;
}

TEST(MpHarness, EarlyExitAndExceptionsAreFailures) {
  auto results = mp_run(
      3,
      [](int rank, int, int) -> std::string {
        if (rank == 0) _exit(0);  // a success status, but fn never returned
        if (rank == 1) exit(7);
        throw std::runtime_error("boom");
      },
      10000);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].message, "exited with status 0 before fn returned");
  EXPECT_EQ(results[1].exit_code, 7);
  EXPECT_EQ(results[1].message, "exited with status 7 before fn returned");
  EXPECT_EQ(results[2].message, "uncaught exception: boom");
  std::string s = mp_summary(results);
  EXPECT_NE(s.find("3 of 3 ranks failed"), std::string::npos) << s;
}

TEST(MpHarness, GtestFailureInsideRankIsReported) {
  auto results = mp_run(
      2,
      [](int rank, int, int) {
        // Its text goes to this child's log; only the fact comes back.
        if (rank == 1) ADD_FAILURE() << "expected failure inside rank 1 (part of the test)";
        return std::string();
      },
      10000);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].message, "");
  EXPECT_NE(results[1].message.find("gtest assertion failed"), std::string::npos);
}

// The port is usable: rank 0 listens on it and rank 1 connects.
TEST(MpHarness, RanksCanTalkOverThePort) {
  auto results = mp_run(
      2,
      [](int rank, int, int port) -> std::string {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (rank == 0) {
          int one = 1;
          setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
          if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 1) != 0)
            return "rank 0: bind/listen failed";
          int c = accept(fd, nullptr, nullptr);
          char b = 0;
          if (c < 0 || read(c, &b, 1) != 1 || b != 'x') return "rank 0: did not get 'x'";
          return "";
        }
        for (int i = 0; i < 500; i++) {
          if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0)
            return write(fd, "x", 1) == 1 ? "" : "rank 1: write failed";
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return "rank 1: could not connect";
      },
      10000);
  EXPECT_EQ(mp_summary(results), "");
}

TEST(MpHarness, SummaryNeverPassesEmptyRuns) {
  EXPECT_EQ(mp_run(
                0, [](int, int, int) { return std::string(); }, 1000)
                .size(),
            0u);
  EXPECT_EQ(mp_summary({}), "no ranks ran");
}

TEST(MpHarness, FreePortIsBindable) {
  int port = mp_free_port();
  ASSERT_GT(port, 0);
  ASSERT_LT(port, 65536);
}

}  // namespace
