// agree_test.cc -- settings that must match on every rank, checked at init: a rank configured
// differently, a rank number taken twice or a world size that differs fails init on every rank
// within moments, naming the setting and who holds which value, instead of a crash or a stall
// until the connect timeout. Settings that may differ, and two names for one master, still work.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "include/weft.h"
}
#include "tests/harness/mp_harness.h"

namespace {

// Long enough that an error coming from a timeout cannot pass for a fast one.
const char *kTimeoutMs = "20000";
const double kFastS = 6.0;

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

void short_timeouts() {
  setenv("WEFT_CONNECT_TIMEOUT_MS", kTimeoutMs, 1);
  setenv("WEFT_TIMEOUT_MS", kTimeoutMs, 1);
}

// "OK" after init and a 3-element all_reduce that checks its sum; else "ERR <code>: <message>".
std::string init_and_reduce(int nranks, int rank, const char *host, int port) {
  weft_comm_t *comm;
  weft_result_t r = weft_comm_init(&comm, nranks, rank, host, port);
  if (r != WEFT_SUCCESS)
    return std::string(r == WEFT_ERR_MISMATCH ? "ERR MISMATCH: " : "ERR other: ") +
           weft_last_error();
  int64_t x[3] = {rank, 1, 2}, sum[3];
  r = weft_all_reduce(x, sum, 3, WEFT_INT64, WEFT_SUM, comm, nullptr);
  std::string out = r != WEFT_SUCCESS ? std::string("all_reduce: ") + weft_last_error() : "OK";
  int64_t want = (int64_t)nranks * (nranks - 1) / 2;
  if (r == WEFT_SUCCESS && (sum[0] != want || sum[1] != nranks || sum[2] != 2 * nranks))
    out = "wrong sum";
  weft_comm_destroy(comm);
  return out;
}

// Every rank must have failed with WEFT_ERR_MISMATCH, quickly, its message holding every part.
void expect_all_fail_fast(const std::vector<RankResult> &res, std::vector<std::string> parts) {
  for (size_t r = 0; r < res.size(); r++) {
    const std::string &m = res[r].message;
    EXPECT_TRUE(contains(m, "ERR MISMATCH: ")) << "rank " << r << ": " << m;
    for (auto &p : parts)
      EXPECT_TRUE(contains(m, p)) << "rank " << r << " lacks " << p << ": " << m;
    EXPECT_LT(res[r].seconds, kFastS) << "rank " << r << " took " << res[r].seconds << " s: " << m;
  }
}

TEST(Agree, TransportShmOnOneRankTcpOnTheOtherFailsOnBothNamingBoth) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        short_timeouts();
        setenv("WEFT_TRANSPORT", rank == 0 ? "shm" : "tcp", 1);
        return init_and_reduce(n, rank, "127.0.0.1", port);
      },
      60000);
  expect_all_fail_fast(res, {"WEFT_TRANSPORT differs between ranks: \"shm\" on rank 0, \"tcp\" "
                             "on rank 1 (every rank must use the same)"});
  EXPECT_TRUE(contains(res[0].message, "rank 0: WEFT_TRANSPORT")) << res[0].message;
  EXPECT_TRUE(contains(res[1].message, "rank 1: WEFT_TRANSPORT")) << res[1].message;
}

TEST(Agree, SliceSizeThatDiffersOnOneRankFailsOnEveryRank) {
  auto res = mp_run(
      3,
      [](int rank, int n, int port) -> std::string {
        short_timeouts();
        if (rank == 2) setenv("WEFT_SLICE_BYTES", "128K", 1);
        return init_and_reduce(n, rank, "127.0.0.1", port);
      },
      60000);
  expect_all_fail_fast(res, {"WEFT_SLICE_BYTES differs between ranks: 65536 on rank 0, 131072 "
                             "on rank 2"});
}

TEST(Agree, AlgorithmThatDiffersFailsOnEveryRank) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        short_timeouts();
        setenv("WEFT_ALGO", rank == 0 ? "ring" : "tree", 1);
        return init_and_reduce(n, rank, "127.0.0.1", port);
      },
      60000);
  expect_all_fail_fast(res, {"WEFT_ALGO differs between ranks: \"ring\" on rank 0, \"tree\" on "
                             "rank 1"});
}

// A tune file on one rank only: that rank would choose algorithms by another model than the
// others, and wait for messages they never send. The same model from two paths is fine.
TEST(Agree, TuneFileOnOneRankOnlyFailsOnEveryRank) {
  const char *dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string a = std::string(dir) + "/agree_tune_a", b = std::string(dir) + "/agree_tune_b";
  for (auto &path : {a, b}) {
    FILE *f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fprintf(f, "alpha 2e-05\nbeta 1e-09\ngamma 2.5e-10\n");
    fclose(f);
  }
  auto res = mp_run(
      2,
      [&](int rank, int n, int port) -> std::string {
        short_timeouts();
        if (rank == 0) setenv("WEFT_TUNE_FILE", a.c_str(), 1);
        return init_and_reduce(n, rank, "127.0.0.1", port);
      },
      60000);
  expect_all_fail_fast(res, {"the cost model from WEFT_TUNE_FILE differs between ranks: \"alpha "
                             "2.0000000000000002e-05 s, beta",
                             "on rank 0, \"none (the committed constants)\" on rank 1"});
  res = mp_run(
      2,
      [&](int rank, int n, int port) -> std::string {
        short_timeouts();
        setenv("WEFT_TUNE_FILE", (rank == 0 ? a : b).c_str(), 1);
        std::string m = init_and_reduce(n, rank, "127.0.0.1", port);
        return m == "OK" ? "" : m;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// Two processes both started as rank 1 of 3 (and no rank 2): both of them and rank 0 hear of it
// at once, with the pid and host of each claimer.
TEST(Agree, DuplicateRankIsNamedOnEveryRankWithBothPids) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  auto res = mp_run(
      3,
      [](int proc, int, int port) -> std::string {
        short_timeouts();
        int rank = proc == 2 ? 1 : proc;
        // A moment apart, so that the first claimer is already waiting for its peers.
        if (proc == 2) usleep(300 * 1000);
        return "pid " + std::to_string(getpid()) + "|" +
               init_and_reduce(3, rank, "127.0.0.1", port);
      },
      60000);
  std::string pid1 = res[1].message.substr(0, res[1].message.find('|'));
  std::string pid2 = res[2].message.substr(0, res[2].message.find('|'));
  std::string on = std::string(" on host ") + host;
  expect_all_fail_fast(res,
                       {"rank 1 is claimed by two processes: " + pid1 + on + " and " + pid2 + on});
}

// Rank 2 says the world has 4 ranks: the master refuses it, and ranks 0 and 1 learn why at once
// instead of waiting out the connect timeout for a rank 2 that never joins.
TEST(Agree, WorldSizeThatDiffersFailsRankZeroFastNamingBothSizes) {
  auto res = mp_run(
      3,
      [](int rank, int, int port) -> std::string {
        short_timeouts();
        if (rank == 2) usleep(300 * 1000);
        return init_and_reduce(rank == 2 ? 4 : 3, rank, "127.0.0.1", port);
      },
      60000);
  std::vector<RankResult> joined(res.begin(), res.begin() + 2);
  expect_all_fail_fast(joined, {"rank 2 joined with a world size of 4, but rank 0 (the master) "
                                "has 3"});
  expect_all_fail_fast({res[2]}, {"expects world size 3, this rank says 4"});
}

bool have_ipv6_loopback() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a = {};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, (sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

// One master, named two ways (three where there is IPv6 loopback, which the master's dual-stack
// store also answers on): the ranks still form one communicator.
TEST(Agree, MasterNamedLocalhostOnOneRankAndNumericallyOnAnotherStillJoins) {
  bool v6 = have_ipv6_loopback();
  auto res = mp_run(
      3,
      [v6](int rank, int n, int port) -> std::string {
        short_timeouts();
        const char *names[] = {"127.0.0.1", "localhost", v6 ? "::1" : "127.0.0.1"};
        std::string m = init_and_reduce(n, rank, names[rank], port);
        return m == "OK" ? "" : m;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
  for (auto &r : res) EXPECT_LT(r.seconds, kFastS);
}

// Knobs that only change what one rank does locally may differ between ranks. A call larger than
// a slice, so that the window and fusion are used.
TEST(Agree, SettingsThatMayDifferStillJoinAndReduce) {
  auto res = mp_run(
      3,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_CONNECT_TIMEOUT_MS", rank == 1 ? "30000" : "20000", 1);
        setenv("WEFT_TIMEOUT_MS", rank == 2 ? "25000" : "20000", 1);
        setenv("WEFT_SPIN_US", rank == 0 ? "0" : "1000", 1);
        setenv("WEFT_SLICES_IN_FLIGHT", rank == 1 ? "2" : "8", 1);
        setenv("WEFT_FUSED_STEPS", rank == 2 ? "0" : "1", 1);
        setenv("WEFT_SOCKET_BUFFER", rank == 0 ? "0" : "1048576", 1);
        weft_comm_t *comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return std::string("init: ") + weft_last_error();
        std::vector<float> buf((size_t)1 << 18, (float)(rank + 1));
        std::string out;
        for (int i = 0; i < 2 && out.empty(); i++)
          if (weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm,
                              nullptr) != WEFT_SUCCESS)
            out = std::string("all_reduce: ") + weft_last_error();
        // 1+2+3 = 6, then 6 * 3 = 18 after the second call.
        for (float v : buf)
          if (out.empty() && v != 18.0f) out = "wrong value " + std::to_string(v);
        weft_comm_destroy(comm);
        return out;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
