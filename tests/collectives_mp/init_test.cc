// init_test.cc -- joining a job over IPv4, IPv6 and host names, through a tcp:// URL, and on the
// interface WEFT_SOCKET_IFNAME picks; then a checked all-reduce proves the ranks really connected.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

// Every rank joins with `init` and runs a small checked all-reduce.
std::string join_and_reduce(int rank, int n, const std::function<weft_result_t(weft_comm_t**)>& init) {
  weft_comm_t* comm;
  if (init(&comm) != WEFT_SUCCESS)
    return "rank " + std::to_string(rank) + ": init: " + weft_last_error();
  std::string err = check_all_reduce(comm, WEFT_INT32, WEFT_SUM, 1000, false);
  int size = 0;
  weft_comm_size(comm, &size);
  weft_comm_destroy(comm);
  if (err.empty() && size != n) err = "size " + std::to_string(size);
  return err;
}

class InitAddress : public ::testing::TestWithParam<const char*> {};

TEST_P(InitAddress, JoinsAndReduces) {
  std::string host = GetParam();
  auto res = mp_run(
      3,
      [&](int rank, int n, int port) {
        return join_and_reduce(rank, n, [&](weft_comm_t** c) {
          return weft_comm_init(c, n, rank, host.c_str(), port);
        });
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

INSTANTIATE_TEST_SUITE_P(Hosts, InitAddress, ::testing::Values("127.0.0.1", "::1", "localhost"));

TEST(InitUrl, Ipv4AndBracketedIpv6) {
  for (const char* fmt : {"tcp://127.0.0.1:%d", "tcp://[::1]:%d"}) {
    auto res = mp_run(
        2,
        [&](int rank, int n, int port) {
          char url[64];
          snprintf(url, sizeof url, fmt, port);
          return join_and_reduce(rank, n,
                                 [&](weft_comm_t** c) { return weft_comm_init_url(c, url, n, rank); });
        },
        60000);
    EXPECT_EQ(mp_summary(res), "") << fmt;
  }
}

TEST(InitIfname, LoopbackByNameWorksAndAnUnknownNameIsReported) {
  auto res = mp_run(
      2,
      [&](int rank, int n, int port) {
        setenv("WEFT_SOCKET_IFNAME", "lo", 1);
        return join_and_reduce(rank, n, [&](weft_comm_t** c) {
          return weft_comm_init(c, n, rank, "127.0.0.1", port);
        });
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
  res = mp_run(
      1,
      [&](int, int, int port) -> std::string {
        setenv("WEFT_SOCKET_IFNAME", "=nosuchif9", 1);
        weft_comm_t* comm;
        if (weft_comm_init(&comm, 1, 0, "127.0.0.1", port) == WEFT_SUCCESS) return "joined";
        std::string msg = weft_last_error();
        return msg.find("nosuchif9") != std::string::npos ? "" : "message lacks the name: " + msg;
      },
      30000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace

namespace {

TEST(Debug, LevelTwoPrintsSetupAndEveryCollective) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_DEBUG", "2", 1);
        char path[] = "/tmp/weft-debug-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0 || !freopen(path, "w", stderr)) return "cannot redirect stderr";
        std::string err = join_and_reduce(rank, n, [&](weft_comm_t** c) {
          return weft_comm_init(c, n, rank, "127.0.0.1", port);
        });
        fflush(stderr);
        FILE* f = fopen(path, "r");
        std::string text;  // all of it: the init lines alone can pass 4 KiB
        char chunk[4096];
        for (size_t got; f && (got = fread(chunk, 1, sizeof chunk, f)) > 0;)
          text.append(chunk, got);
        if (f) fclose(f);
        unlink(path);
        if (!err.empty()) return err;
        std::string setup = "weft rank " + std::to_string(rank) + "/2: local rank";
        if (text.find(setup) == std::string::npos || text.find("count 1000 int32 sum root -1 algo") ==
                                                         std::string::npos)
          return "stderr lacks the debug lines: " + text;
        // The setup line names the reduction loops' instruction set.
        if (text.find("host reductions baseline;") == std::string::npos &&
            text.find("host reductions avx2;") == std::string::npos)
          return "the setup line lacks the host reductions: " + text;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
