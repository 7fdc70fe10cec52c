// flood_test.cc -- strangers cannot starve a job: 1,100 connections that never finish a hello sit
// on MASTER_PORT (idle, or dribbling a partial store header byte by byte) while rank 0 runs at a
// descriptor limit of 1024, and a 2-rank job still initializes and all-reduces within a few
// seconds, with and without a job token; rank 0 spends little CPU meanwhile. The same on a rank's
// TCP listener: 1,100 strangers on rank 4's port, and rank 1's first message to rank 4 (whose
// connection is made on first use) still arrives.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <string>

extern "C" {
#include "include/weft.h"
}
#include "tests/harness/flood.h"
#include "tests/harness/mp_harness.h"

namespace {

const int kStrangers = 1100;

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double cpu_s() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

std::string fmt(const char* what, double v) {
  char b[96];
  snprintf(b, sizeof b, "%s %.2f s", what, v);
  return b;
}

// Rank 0 starts the store with a limit of 1024 descriptors; rank 1 joins once the strangers hold
// their connections, and a second later still, so that they sit idle on the store for a while.
void RunJob(FloodKind kind, const char* token) {
  // A store header's first bytes (the magic), never completed.
  static const unsigned char partial[] = {0x57, 0x46, 0x53, 0x54, 0x03, 0x00};
  int port = mp_free_port();
  ASSERT_GT(port, 0);
  Flood flood = flood_start(port, kStrangers, kind, partial, sizeof partial);
  ASSERT_GT(flood.pid, 0);
  auto res = mp_run(
      2,
      [&](int rank, int, int) -> std::string {
        setenv("WEFT_CONNECT_TIMEOUT_MS", "8000", 1);
        if (token)
          setenv("WEFT_JOB_TOKEN", token, 1);
        else
          unsetenv("WEFT_JOB_TOKEN");
        if (rank == 0) {
          struct rlimit rl;
          getrlimit(RLIMIT_NOFILE, &rl);
          rl.rlim_cur = rl.rlim_max < 1024 ? rl.rlim_max : 1024;
          if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return "setrlimit failed";
        } else {
          int opened = flood_wait_ready(&flood, 10000);
          if (opened < 1000) return "the strangers opened only " + std::to_string(opened);
          usleep(1000 * 1000);
        }
        double t0 = now_s(), c0 = cpu_s();
        weft_comm_t* comm;
        if (weft_comm_init(&comm, 2, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return std::string("init: ") + weft_last_error();
        double init_s = now_s() - t0, init_cpu = cpu_s() - c0;
        int64_t x = rank + 1, sum = 0;
        weft_result_t r = weft_all_reduce(&x, &sum, 1, WEFT_INT64, WEFT_SUM, comm, nullptr);
        weft_comm_destroy(comm);
        if (r != WEFT_SUCCESS) return std::string("all_reduce: ") + weft_last_error();
        if (sum != 3) return "all_reduce gave " + std::to_string(sum);
        fprintf(stderr, "rank %d: %s, %s\n", rank, fmt("init took", init_s).c_str(),
                fmt("cpu", init_cpu).c_str());
        if (rank == 1 && init_s > 4.0) return fmt("rank 1's init took", init_s);
        // Rank 0 waited through the whole flood; accepting and dropping 1,100 connections costs
        // milliseconds, spinning on a listener it cannot accept from costs a core.
        if (rank == 0 && init_cpu > 1.0) return fmt("rank 0 burnt cpu", init_cpu);
        return "";
      },
      20000);
  flood_stop(&flood);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(MasterPortFlood, IdleStrangersDoNotStopTheJob) { RunJob(kFloodIdle, nullptr); }

TEST(MasterPortFlood, IdleStrangersDoNotStopATokenJob) { RunJob(kFloodIdle, "flood token"); }

TEST(MasterPortFlood, SlowStrangersDoNotStopTheJob) { RunJob(kFloodSlow, nullptr); }

TEST(MasterPortFlood, SlowStrangersDoNotStopATokenJob) { RunJob(kFloodSlow, "flood token"); }

// The port of this process's TCP listener: the only listening socket a rank other than 0 has.
int ListeningPort() {
  for (int fd = 3; fd < 1024; fd++) {
    int on = 0;
    socklen_t len = sizeof on;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0 || !on) continue;
    struct sockaddr_storage ss;
    len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  return -1;
}

// 8 ranks over TCP. Init connects each rank to its ring neighbours only; the barrier's
// dissemination rounds (distances 2 and 4) and rank 1's message to rank 4 connect on first use, so
// rank 4 accepts ranks 0, 2 and 1 while strangers flood its port (at 1024 descriptors).
void RunRankPort(FloodKind kind, const char* token) {
  static const unsigned char partial[] = {0x54, 0x46, 0x45, 0x57, 0x02, 0x00};
  auto res = mp_run(
      8,
      [&](int rank, int, int port) -> std::string {
        setenv("WEFT_CONNECT_TIMEOUT_MS", "8000", 1);
        setenv("WEFT_TIMEOUT_MS", "8000", 1);
        setenv("WEFT_TRANSPORT", "tcp", 1);
        if (token)
          setenv("WEFT_JOB_TOKEN", token, 1);
        else
          unsetenv("WEFT_JOB_TOKEN");
        if (rank == 4) {
          struct rlimit rl;
          getrlimit(RLIMIT_NOFILE, &rl);
          rl.rlim_cur = rl.rlim_max < 1024 ? rl.rlim_max : 1024;
          if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return "setrlimit failed";
        }
        weft_comm_t* comm;
        if (weft_comm_init(&comm, 8, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return std::string("init: ") + weft_last_error();
        Flood flood;
        std::string err;
        int opened = kStrangers;
        if (rank == 4) {
          int mine = ListeningPort();
          if (mine < 0) err = "rank 4 found no listening socket";
          flood = flood_start(mine, kStrangers, kind, partial, sizeof partial);
          opened = flood_wait_ready(&flood, 10000);
          if (kind == kFloodSlow) usleep(300 * 1000);  // a few bytes in on every connection
        }
        double t0 = now_s();
        int64_t x = 7 + rank;
        if (err.empty() && weft_barrier(comm, nullptr) != WEFT_SUCCESS)
          err = std::string("barrier: ") + weft_last_error();
        if (err.empty() && rank == 1 &&
            weft_send(&x, 1, WEFT_INT64, 4, comm, nullptr) != WEFT_SUCCESS)
          err = std::string("send to rank 4: ") + weft_last_error();
        if (err.empty() && rank == 4) {
          if (weft_recv(&x, 1, WEFT_INT64, 1, comm, nullptr) != WEFT_SUCCESS)
            err = std::string("recv from rank 1: ") + weft_last_error();
          else if (x != 8)
            err = "rank 4 received " + std::to_string(x);
        }
        double took = now_s() - t0;
        if (err.empty() && weft_barrier(comm, nullptr) != WEFT_SUCCESS)
          err = std::string("barrier: ") + weft_last_error();
        weft_comm_destroy(comm);
        flood_stop(&flood);
        if (err.empty() && took > 4.0) err = fmt("the first message took", took);
        // Checked last: with fewer strangers the ranks' exchange must still have gone through.
        if (err.empty() && opened < 1000)
          err = "the strangers opened only " + std::to_string(opened);
        if (rank == 4)
          fprintf(stderr, "rank 4: %s\n", fmt("first message from rank 1 in", took).c_str());
        return err;
      },
      20000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(RankPortFlood, IdleStrangersDoNotHoldUpAPeer) { RunRankPort(kFloodIdle, nullptr); }

TEST(RankPortFlood, IdleStrangersDoNotHoldUpAPeerWithAToken) {
  RunRankPort(kFloodIdle, "flood token");
}

TEST(RankPortFlood, SlowStrangersDoNotHoldUpAPeerWithAToken) {
  RunRankPort(kFloodSlow, "flood token");
}

}  // namespace
